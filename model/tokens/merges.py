"""BPE merges of a SentencePiece-style vocabulary that has scores but no merge list.

SentencePiece's BPE (and llama.cpp's and llama2.c's encoders after it) encode a text by merging,
again and again, the adjacent pair of symbols whose concatenation is a piece with the highest
score (the leftmost on a tie), until no adjacent pair is a piece. A ``tokenizers`` BPE model does
the same given merges ranked by that score: every split (a, b) of every piece a + b whose halves
are pieces, the merged piece's score deciding the rank. Its heap applies the lowest rank first,
the leftmost on a tie, which is the same choice wherever the best score belongs to one piece (in
a trained SentencePiece vocabulary every merged piece has its own score).
"""

from __future__ import annotations

import math
from typing import Sequence


def merges_by_score(texts: Sequence[str | None], scores: Sequence[float],
                    floor: float = -math.inf) -> list[tuple[int, int, int]]:
    """Every (piece, left half, right half) with all three pieces, the best-scoring piece first.

    Parameters
    ----------
    texts : sequence of str or None
        Each id's piece; None for an id that takes part in no merge (a control or byte token).
    scores : sequence of float
        Each id's score (higher merges first).
    floor : float
        Pieces scoring at or below it (and NaN) are never made by a merge.

    Returns
    -------
    list of (int, int, int)
        ``(merged id, left id, right id)``, ranked by score (highest first), ties by merged id,
        then by where the piece is split.
    """
    ids = {t: i for i, t in enumerate(texts) if t is not None}
    ranked = []
    for target, i in ids.items():
        score = scores[i]
        if math.isnan(score) or score <= floor:
            continue
        for k in range(1, len(target)):
            a, b = ids.get(target[:k]), ids.get(target[k:])
            if a is not None and b is not None:
                ranked.append((-score, i, k, a, b))
    ranked.sort()
    return [(i, a, b) for _, i, _, a, b in ranked]
