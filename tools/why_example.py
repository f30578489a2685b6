"""Find the README's worked example for the Why panel: a text where attention and effect disagree.

    python tools/why_example.py [CHECKPOINT]

Runs :func:`model.explain.explain` at the last position of each candidate text (short sentences
written for this search, in the default model's word vocabulary) and prints the texts where one
earlier token has the most attention but little effect on the predicted token's logit (leave-one-out),
while another with little attention has a large one; the best first, with its numbers.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
import torch

import transformer_explorer_assets as shipped
from model import load_checkpoint
from model.explain import explain

SUBJECTS = ("the little girl", "tom", "lily", "sue", "lily and her mom", "the big dog", "the boy", "the old man")
ACTIONS = ("went to the park", "saw a big cat", "played with the ball", "looked at the tree", "found a box",
           "wanted to play in the sun", "ate a cake", "ran to the house", "saw a bird in the sky")
ENDINGS = ("and", "but", "so", ". then")


def candidates() -> list[str]:
    """Short story sentences: subject, action and a word that continues the story."""
    return [f"one day {s} {a} {e}" for s, a, e in itertools.product(SUBJECTS, ACTIONS, ENDINGS)]


def contrast(ex) -> tuple[float, int, int]:
    """(score, j_att, j_eff): j_att is the earlier token with the most attention (mean over layers
    and heads), j_eff the one with the largest leave-one-out effect; score = (attention of j_att −
    attention of j_eff) × (|effect| of j_eff − |effect| of j_att), 0 when they are the same token."""
    i = ex.position
    att = ex.attention.mean(axis=(0, 1))[:i]
    eff = np.abs(ex.leave_one_out[:i])
    j_att, j_eff = int(np.argmax(att)), int(np.argmax(eff))
    if j_att == j_eff:
        return 0.0, j_att, j_eff
    return float((att[j_att] - att[j_eff]) * (eff[j_eff] - eff[j_att])), j_att, j_eff


def main(argv: list[str]) -> int:
    path = argv[0] if argv else shipped.path("tinystories-1L1H.safetensors")
    torch.set_num_threads(1)  # tiny forwards: a second thread only waits on a busy machine
    ckpt = load_checkpoint(path)
    tok, model = ckpt.tokenizer, ckpt.model
    found = []
    for text in candidates():
        enc = tok.encode(text)
        if tok.unk_id in enc.ids:
            continue
        ex = explain(model, model.trace(enc.ids))
        score, j_att, j_eff = contrast(ex)
        found.append((score, text, enc.tokens, ex, j_att, j_eff))
    found.sort(key=lambda row: -row[0])
    for score, text, tokens, ex, j_att, j_eff in found[:5]:
        att = ex.attention.mean(axis=(0, 1))
        print(f"{score:.3f}  {text!r} -> {tok.id_to_token(ex.target_id)!r} (p = {ex.prob:.3f})")
        for j in (j_att, j_eff):
            print(f"    {tokens[j]!r} (position {j}): attention {att[j]:.3f}, leave-one-out {ex.leave_one_out[j]:+.3f}, "
                  f"direct {ex.dla.sources[j]:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
