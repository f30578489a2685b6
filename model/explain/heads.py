"""What kind of head is this? Previous-token, duplicate-token and induction scores.

Each score is the mean attention weight that a head puts on its pattern's keys, over the queries
that have such a key. For token ids t_0 .. t_{T-1}, query i and key j <= i:

- previous token: key j = i - 1;
- duplicate token: keys j < i with t_j = t_i (an earlier copy of the query's own token);
- induction: keys j = k + 1 <= i for every k < i with t_k = t_i (the token right after an
  earlier copy of the query's token: what an induction head copies, Olsson et al. 2022,
  "In-context learning and induction heads").

Position 0 never counts as a key: a head that parks its attention on the first token (an
attention sink) would otherwise score on every pattern whose key happens to be there (LLMVis's own
review labelled 132 of 144 GPT-2 heads so). The score of head h is then

    score_h = mean over queries i with a key in P_i of  sum_{j in P_i} a_ij      (in [0, 1]),

NaN when no query has one. The scores are read on a *probe*: R seeded random tokens, repeated
once (R = :data:`PROBE_REPEAT`, the model's BOS in front when its tokenizer puts one there), as
TransformerLens's ``head_detector`` and Olsson et al. do; the previous-token and duplicate-token
scores also on any text.

The probe also measures in-context learning: the loss on the second copy against the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from model.core.architectures import require_attention

#: How many random tokens the probe repeats (fewer when the context cannot hold two copies).
PROBE_REPEAT = 20
#: The seed of the probe's tokens.
PROBE_SEED = 0
#: The head types, in the order of :attr:`HeadTypeScores.by_type`.
HEAD_TYPES = ("previous_token", "duplicate_token", "induction")


def previous_token_pattern(T: int) -> np.ndarray:
    """bool (T, T), True at (i, i - 1) for i >= 2 (key 0 never counts)."""
    pattern = np.zeros((T, T), dtype=bool)
    i = np.arange(2, T)
    pattern[i, i - 1] = True
    return pattern


def duplicate_token_pattern(ids: Sequence[int]) -> np.ndarray:
    """bool (T, T), True at (i, j) for 1 <= j < i with t_j = t_i."""
    t = np.asarray(ids)
    pattern = (t[:, None] == t[None, :]) & np.tri(t.size, k=-1, dtype=bool)
    pattern[:, 0] = False
    return pattern


def induction_pattern(ids: Sequence[int]) -> np.ndarray:
    """bool (T, T), True at (i, k + 1) for every k < i with t_k = t_i (k + 1 >= 1 is never key 0)."""
    t = np.asarray(ids)
    T = t.size
    pattern = np.zeros((T, T), dtype=bool)
    earlier = (t[:, None] == t[None, :]) & np.tri(T, k=-1, dtype=bool)  # (i, k): t_k = t_i, k < i
    pattern[:, 1:] = earlier[:, :-1]  # key j = k + 1
    return pattern


def pattern_score(attn_weights: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """Mean over the queries with a pattern key of the attention weight on those keys.

    Parameters
    ----------
    attn_weights : (..., T, T)
        Rows (queries) sum to 1; any leading axes (layers, heads, snapshots).
    pattern : bool (T, T)
        True where key j belongs to query i's pattern.

    Returns
    -------
    (...) float64 in [0, 1]; NaN when no query has a pattern key.
    """
    a = np.asarray(attn_weights, dtype=np.float64)
    rows = pattern.any(-1)  # (T,): the queries that have a key
    if not rows.any():
        return np.full(a.shape[:-2], np.nan)
    on_pattern = (a * pattern).sum(-1)  # (..., T)
    return on_pattern[..., rows].mean(-1)


def probe_ids(vocab_size: int, tokenizer=None, repeat: int = PROBE_REPEAT, seed: int = PROBE_SEED,
              context_length: int | None = None) -> np.ndarray:
    """The probe: the tokenizer's BOS (its ``prefix_ids``), then R distinct random tokens twice.

    The tokens are drawn without replacement (numpy's ``default_rng(seed)``) from the ids below
    both the model's and the tokenizer's vocabulary size, less the tokenizer's special tokens
    (``<unk>``, ``<|endoftext|>``, ...). R is ``repeat``, or less when the context cannot hold
    the BOS and two copies.

    Returns
    -------
    (n_bos + 2 R,) int64

    Raises
    ------
    ValueError
        When fewer than 2 tokens can be drawn, or the context holds fewer than 2 of each copy.
    """
    bos = list(getattr(tokenizer, "prefix_ids", ()) or ())
    R = repeat if context_length is None else min(repeat, (context_length - len(bos)) // 2)
    n = vocab_size if tokenizer is None else min(vocab_size, tokenizer.vocab_size)
    special = set(tokenizer.hf.get_added_tokens_decoder()) if tokenizer is not None else set()
    candidates = np.array([i for i in range(n) if i not in special], dtype=np.int64)
    R = min(R, candidates.size)
    if R < 2:
        raise ValueError(f"a probe needs 2 or more tokens in each copy; this model can hold {R}")
    draw = np.random.default_rng(seed).choice(candidates, size=R, replace=False)
    return np.concatenate([np.array(bos, dtype=np.int64), draw, draw])


@dataclass(frozen=True)
class HeadTypeScores:
    """The three scores of every head on one sequence (the probe, or a text). L layers, H heads.

    Attributes
    ----------
    token_ids : (T,) int64        the sequence scored.
    n_bos : int                   leading special tokens of the probe (0 for a text).
    repeat : int                  R, the length of each copy (0 for a text).
    previous_token, duplicate_token, induction : (L, H) float64 in [0, 1], NaN without a query.
    first_half_loss, second_half_loss : float
        On the probe: mean next-token cross-entropy (nats) over the targets 2 .. R of the first copy
        and of the second (the first token of each copy cannot be predicted). NaN for a text.
    attn_weights : (L, H, T, T) float32 or None
        On the probe: every head's attention weights there (the pattern the scores read). None for a text.
    """

    token_ids: np.ndarray
    n_bos: int
    repeat: int
    previous_token: np.ndarray
    duplicate_token: np.ndarray
    induction: np.ndarray
    first_half_loss: float = float("nan")
    second_half_loss: float = float("nan")
    attn_weights: np.ndarray | None = field(default=None, repr=False)

    @property
    def by_type(self) -> dict[str, np.ndarray]:
        """The (L, H) maps by :data:`HEAD_TYPES` name."""
        return {"previous_token": self.previous_token, "duplicate_token": self.duplicate_token,
                "induction": self.induction}

    @property
    def in_context_gain(self) -> float:
        """first_half_loss - second_half_loss in nats: how much the first copy helps predict the second."""
        return self.first_half_loss - self.second_half_loss


def scores_of(attn_weights: np.ndarray, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The three scores of attention weights (..., T, T) on ids (T,): a dict by :data:`HEAD_TYPES`."""
    T = len(ids)
    return {"previous_token": pattern_score(attn_weights, previous_token_pattern(T)),
            "duplicate_token": pattern_score(attn_weights, duplicate_token_pattern(ids)),
            "induction": pattern_score(attn_weights, induction_pattern(ids))}


def half_losses(logits: np.ndarray, ids: np.ndarray, n_bos: int, repeat: int) -> tuple[float, float]:
    """Mean cross-entropy (nats) of the probe's first and second copy, targets 2 .. R of each.

    logits : (..., T, vocab_size); returns floats, or arrays (...) for leading axes.
    """
    z = np.asarray(logits, dtype=np.float64)
    peak = z.max(-1, keepdims=True)
    lse = np.log(np.exp(z - peak).sum(-1)) + peak[..., 0]  # (..., T)
    targets = np.broadcast_to(np.asarray(ids)[1:, None], (*z.shape[:-2], len(ids) - 1, 1))
    nll = lse[..., :-1] - np.take_along_axis(z[..., :-1, :], targets, -1)[..., 0]  # (..., T-1): predicts t_{i+1}
    first = nll[..., n_bos:n_bos + repeat - 1]  # targets n_bos + 1 .. n_bos + R - 1
    second = nll[..., n_bos + repeat:n_bos + 2 * repeat - 1]  # targets n_bos + R + 1 .. n_bos + 2R - 1
    return first.mean(-1), second.mean(-1)


def head_scores(model, tokenizer=None, *, repeat: int = PROBE_REPEAT, seed: int = PROBE_SEED,
                interventions=None) -> HeadTypeScores:
    """Every head's scores on the probe (:func:`probe_ids`) and the probe's two half losses.

    Parameters
    ----------
    model : GPT
    tokenizer : Tokenizer, optional
        Gives the BOS and the special tokens left out of the draw.
    repeat, seed : int
        The probe's R and seed.
    interventions : Interventions, optional
        Passed to :meth:`GPT.trace` (heads switched off).

    Returns
    -------
    HeadTypeScores

    Raises
    ------
    ValueError
        For a model without attention heads (the model before attention).
    """
    require_attention(model.config, "head types")
    ids = probe_ids(model.config.vocab_size, tokenizer, repeat, seed, model.config.context_length)
    n_bos = len(getattr(tokenizer, "prefix_ids", ()) or ())
    R = (ids.size - n_bos) // 2
    tr = model.trace(ids.tolist(), interventions=interventions)
    attn = np.stack([b.attn_weights for b in tr.blocks])  # (L, H, T, T)
    first, second = half_losses(tr.logits, ids, n_bos, R)
    return HeadTypeScores(ids, n_bos, R, **scores_of(attn, ids), first_half_loss=float(first),
                          second_half_loss=float(second), attn_weights=attn)


def text_head_scores(tr) -> HeadTypeScores:
    """Previous-token, duplicate-token and induction scores of a trace's own attention on its own tokens.

    Raises
    ------
    ValueError
        For the trace of a model without attention heads (the model before attention).
    """
    if not tr.blocks:
        raise ValueError("head types need attention heads: the model before attention (a fixed-window MLP) has none")
    attn = np.stack([b.attn_weights for b in tr.blocks])  # (L, H, T, T)
    return HeadTypeScores(np.asarray(tr.token_ids, dtype=np.int64), 0, 0, **scores_of(attn, tr.token_ids))
