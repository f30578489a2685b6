"""Scaled dot-product attention for one query token, step by step, with the live numbers.

The steps of the course for query position i of one layer and head (Vaswani et al. 2017, eq. 1):

    s_ij = q_i · k_j / √d_head                       for every key j the query may see
    a_ij = exp(s_ij - max_j s_ij) / Σ_j exp(s_ij - max_j s_ij)    (softmax over j)
    out_i = Σ_j a_ij v_j

Everything is recomputed here in float64 from the trace's q, k and v, never copied from its
attention weights, so the agreement with the trace's ``head_out[h, i]`` is a real check. What the
model decided, the recomputation reads from the trace rather than assuming it: which keys the query
may see (``attn_mask``: the causal mask and any local window), the factor the dot products are
multiplied by (``attn_scale``: 1/√d_head, or 1 for a model that does not scale) and which key/value
head the query head reads (``kv_head``: grouped-query attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FormulaSteps:
    """One query token's attention, every intermediate in float64.

    Attributes
    ----------
    layer, head, position : int   the block, the head and the query position i.
    causal : bool                 whether keys after i were masked out.
    keys : (n_keys,) int          the key positions j the query sees (the trace's attn_mask row i:
                                  0..i with the causal mask, 0..T-1 without; fewer in a local window).
    d_head : int
    scale : float                 what q_i · k_j is multiplied by (1/√d_head, or 1 without scaling).
    kv_head : int                 the key/value head this query head reads (its own without grouping).
    q : (d_head,)                 q_i.
    k, v : (n_keys, d_head)       k_j and v_j for each seen key.
    dots : (n_keys,)              q_i · k_j.
    scores : (n_keys,)            scale · q_i · k_j (the trace's attn_scores row, unmasked part).
    max_score : float             max_j s_ij, subtracted before exp for stability.
    exps : (n_keys,)              exp(s_ij - max_score).
    norm : float                  Σ_j exp(s_ij - max_score), the softmax's normalising sum.
    weights : (n_keys,)           a_ij = exps / norm, in [0, 1], summing to 1.
    weighted_v : (n_keys, d_head) a_ij v_j.
    out : (d_head,)               out_i = Σ_j a_ij v_j.
    trace_out : (d_head,)         the trace's head_out[head, i] (float32 as computed by the model).
    max_abs_diff : float          max |out - trace_out|.
    """

    layer: int
    head: int
    position: int
    causal: bool
    keys: np.ndarray
    d_head: int
    scale: float
    kv_head: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    dots: np.ndarray
    scores: np.ndarray
    max_score: float
    exps: np.ndarray
    norm: float
    weights: np.ndarray
    weighted_v: np.ndarray
    out: np.ndarray
    trace_out: np.ndarray
    max_abs_diff: float

    @property
    def sqrt_d_head(self) -> float:
        """√d_head (the divisor of the dot products when the model scales them)."""
        return math.sqrt(self.d_head)

    @property
    def scaled_by_sqrt_d_head(self) -> bool:
        """True when the scale is 1/√d_head (Vaswani et al.), False for another factor (e.g. 1)."""
        return math.isclose(self.scale, 1.0 / self.sqrt_d_head, rel_tol=1e-6)


def attention_steps(trace, layer: int, head: int, position: int) -> FormulaSteps:
    """Recompute one query token's attention from the trace's q, k, v.

    Parameters
    ----------
    trace : model.Trace
        With T >= 1 tokens.
    layer, head : int
        0-based block and head.
    position : int
        The query position i, in [0, T); negative values count from the end.

    Returns
    -------
    FormulaSteps

    Raises
    ------
    ValueError
        When the trace is empty or layer, head or position is out of range.
    """
    T = trace.n_tokens
    if T == 0:
        raise ValueError("there are no tokens, so there is no query to show")
    if not 0 <= layer < len(trace.blocks):
        raise ValueError(f"layer {layer} is outside 0..{len(trace.blocks) - 1}")
    blk = trace.blocks[layer]
    n_heads, _, d_head = blk.q.shape
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} is outside 0..{n_heads - 1}")
    i = position + T if position < 0 else position
    if not 0 <= i < T:
        raise ValueError(f"position {position} is outside the {T} tokens")
    keys = np.flatnonzero(blk.attn_mask[i])  # attn_mask: True = may attend
    kv = blk.kv_head(head)
    q = blk.q[head, i].astype(np.float64)  # (d_head,)
    k = blk.k[kv, keys].astype(np.float64)  # (n_keys, d_head)
    v = blk.v[kv, keys].astype(np.float64)  # (n_keys, d_head)
    dots = k @ q  # (n_keys,)
    scores = dots * blk.attn_scale
    max_score = float(scores.max())
    exps = np.exp(scores - max_score)
    norm = float(exps.sum())
    weights = exps / norm
    weighted_v = weights[:, None] * v  # (n_keys, d_head)
    out = weighted_v.sum(axis=0)  # (d_head,)
    trace_out = np.array(blk.head_out[head, i])  # a copy: a view would keep the trace's buffers alive
    diff = float(np.max(np.abs(out - trace_out)))
    return FormulaSteps(
        layer, head, i, bool(trace.causal), keys, d_head, float(blk.attn_scale), kv, q, k, v, dots, scores,
        max_score, exps, norm, weights, weighted_v, out, trace_out, diff,
    )
