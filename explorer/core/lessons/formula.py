"""Scaled dot-product attention for one query token, step by step, with the live numbers.

The steps of the course for query position i of one layer and head (Vaswani et al. 2017, eq. 1):

    s_ij = q_i · k_j / √d_head                       for every key j the query may see
    a_ij = exp(s_ij - max_j s_ij) / Σ_j exp(s_ij - max_j s_ij)    (softmax over j)
    out_i = Σ_j a_ij v_j

Everything is recomputed here in float64 from the trace's q, k and v, never copied from its
attention weights, so the agreement with the trace's ``head_out[h, i]`` is a real check. What the
model decided, the recomputation reads from the trace rather than assuming it: which keys the query
may see (``attn_mask``: the causal mask and any local window), the factor the dot products are
multiplied by (``attn_scale``: 1/√d_head, another factor such as Gemma's, or 1 for a model that does
not scale), the soft cap c·tanh(s/c) of the scores (``attn_softcap``, Gemma 2) and which key/value
head the query head reads (``kv_head``: grouped-query attention).

What the trace does not hold comes from the model, as plain arrays (:class:`LayerFacts`, from
:func:`layer_facts`): the first norm's kind, ε and weights, so that h_i = LN1(x_i) is recomputed
from the block's input and compared with the trace's ``ln1``; the QK-norms' gains, so that q_i and
k_j are normalised again from ``q_pre_norm`` / ``k_pre_norm``; for RoPE this layer's angles and
pair layout (and how many dimensions turn), so that the rotation of q_i and of each k_j is
recomputed from the trace's ``q_pre_rope`` / ``k_pre_rope`` and compared with the q and k that
entered the scores; and how the block adds attention and the MLP. Those steps are
:mod:`explorer.core.lessons.formula_parts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.core.lessons.formula_parts import (
    BlockStep, EmbedStep, NormStep, QKNormStep, RotationStep, block_step, embed_step, norm_step, qk_norm_step,
    rotation_step,
)


@dataclass(frozen=True)
class LayerFacts:
    """What the formula reads from the model for one layer, as numpy copies (no torch needed later).

    Attributes
    ----------
    norm : str                      ``"layernorm"`` or ``"rmsnorm"`` (``GPTConfig.norm``).
    norm_eps : float
    norm_weight : (d_model,) or None   LN1's gain g (float64; 1 + w for Gemma); None without a norm
                                    before attention (OLMo-2).
    norm_bias : (d_model,) or None  LN1's shift b (None without one).
    window : int                    the layer's attention window (0 = global).
    rope_angles : (context_length, r/2) or None   this layer's RoPE angles in radians
                                    (``GPT.rope_angles(T, layer)``); None without RoPE in this layer.
    rope_pairs : str                ``GPTConfig.rope_pairs`` (which dimensions turn together).
    rope_theta : float              this layer's base θ.
    qkv_bias : bool                 whether W_Q, W_K, W_V add a bias (q_i = h_i W_Q + b_Q).
    norm_unit_offset : bool         whether the norms' gain is 1 + w (Gemma).
    qk_norm : str                   ``GPTConfig.qk_norm``: ``"none"``, ``"head"`` or ``"full"``.
    qk_norm_kind : str              the QK-norms' kind (the config's ``norm``).
    q_norm, k_norm : (gain, shift) or None   the QK-norms' effective gains and shifts (float64).
    nope : bool                     True in a layer without RoPE of a model with RoPE (SmolLM3).
    embed_scale : float             what the token embedding is multiplied by before block 0.
    block_layout, norm_placement : str   ``GPTConfig``'s: how the block adds attention and the MLP.
    """

    norm: str
    norm_eps: float
    norm_weight: np.ndarray | None
    norm_bias: np.ndarray | None
    window: int = 0
    rope_angles: np.ndarray | None = None
    rope_pairs: str = "halves"
    rope_theta: float = 10000.0
    qkv_bias: bool = False
    norm_unit_offset: bool = False
    qk_norm: str = "none"
    qk_norm_kind: str = "rmsnorm"
    q_norm: tuple | None = None
    k_norm: tuple | None = None
    nope: bool = False
    embed_scale: float = 1.0
    block_layout: str = "sequential"
    norm_placement: str = "pre"


def layer_facts(model, layer: int, angles: np.ndarray | None = None) -> LayerFacts:
    """:class:`LayerFacts` of ``model``'s block ``layer``; ``angles`` (the model's
    ``rope_angles(context_length, layer)``) may be passed when the caller has them already."""
    cfg, block = model.config, model.blocks[layer]
    gain, shift = block.ln1.affine() if block.ln1 is not None else (None, None)  # γ and β (float64 copies)
    rope = block.attn.rope
    if angles is None and rope is not None:
        angles = model.rope_angles(cfg.context_length, layer)
    q_norm, k_norm = block.attn.q_norm, block.attn.k_norm
    return LayerFacts(cfg.norm, float(cfg.norm_eps), gain, shift, block.attn.window,
                      angles if rope is not None else None, cfg.rope_pairs,
                      float(rope.theta if rope is not None else cfg.rope_theta), cfg.qkv_bias,
                      cfg.norm_unit_offset, cfg.qk_norm, cfg.norm,
                      q_norm.affine() if q_norm is not None else None, k_norm.affine() if k_norm is not None else None,
                      cfg.positional == "rope" and rope is None, float(cfg.embed_scale), cfg.block_layout,
                      cfg.norm_placement)


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
    raw_scores : (n_keys,)        scale · q_i · k_j, before any soft cap.
    scores : (n_keys,)            what the softmax receives: raw_scores, soft-capped to c·tanh(s/c) when
                                  the model caps them (the trace's attn_scores row, unmasked part).
    max_score : float             max_j s_ij, subtracted before exp for stability.
    exps : (n_keys,)              exp(s_ij - max_score).
    norm : float                  Σ_j exp(s_ij - max_score), the softmax's normalising sum.
    weights : (n_keys,)           a_ij = exps / norm, in [0, 1], summing to 1.
    weighted_v : (n_keys, d_head) a_ij v_j.
    out : (d_head,)               out_i = Σ_j a_ij v_j.
    trace_out : (d_head,)         the trace's head_out[head, i] (float32 as computed by the model).
    max_abs_diff : float          max |out - trace_out|.
    positional_encoding : bool    whether the trace used the model's position signal (for RoPE:
                                  whether q and k were rotated).
    kv_group : tuple of int       the query heads that read the same key/value head (this one alone
                                  without grouped-query attention).
    window : int                  the layer's attention window (0 = global), when the model was given.
    input_norm : NormStep or None      LN1 recomputed, when the model's facts were given.
    rotation : RotationStep or None    the rotation recomputed, for a RoPE layer whose trace rotated.
    rope : bool                   True when this layer has RoPE (known from its facts).
    softcap : float               c when the scores are soft-capped (Gemma 2), else 0 (from the trace).
    qk_norm : QKNormStep or None  QK-norm recomputed, for a model with it (given its facts).
    embedding : EmbedStep or None x_i = e_i · scale recomputed, in block 0 of a model that scales it.
    block : BlockStep or None     how the block adds attention and the MLP, when not the classic way.
    facts : LayerFacts or None    the facts these steps were computed with.
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
    positional_encoding: bool = True
    kv_group: tuple[int, ...] = ()
    window: int = 0
    input_norm: NormStep | None = None
    rotation: RotationStep | None = None
    rope: bool = False
    raw_scores: np.ndarray | None = None
    softcap: float = 0.0
    qk_norm: QKNormStep | None = None
    embedding: EmbedStep | None = None
    block: BlockStep | None = None
    facts: LayerFacts | None = None

    @property
    def sqrt_d_head(self) -> float:
        """√d_head (the divisor of the dot products when the model scales them)."""
        return math.sqrt(self.d_head)

    @property
    def scaled_by_sqrt_d_head(self) -> bool:
        """True when the scale is 1/√d_head (Vaswani et al.), False for another factor (e.g. 1)."""
        return math.isclose(self.scale, 1.0 / self.sqrt_d_head, rel_tol=1e-6)


def attention_steps(trace, layer: int, head: int, position: int, facts: LayerFacts | None = None) -> FormulaSteps:
    """Recompute one query token's attention from the trace's q, k, v.

    Parameters
    ----------
    trace : model.Trace
        With T >= 1 tokens.
    layer, head : int
        0-based block and head.
    position : int
        The query position i, in [0, T); negative values count from the end.
    facts : LayerFacts, optional
        The model's facts for this layer (:func:`layer_facts`): with them, the embedding scale, LN1,
        QK-norm, (for RoPE) the rotation of q and k and the block's sum are recomputed too
        (:mod:`explorer.core.lessons.formula_parts`).

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
    raw = dots * blk.attn_scale
    cap = blk.attn_softcap
    scores = cap * np.tanh(raw / cap) if cap else raw  # the soft cap c·tanh(s/c), before the mask (Gemma 2)
    max_score = float(scores.max())
    exps = np.exp(scores - max_score)
    norm = float(exps.sum())
    weights = exps / norm
    weighted_v = weights[:, None] * v  # (n_keys, d_head)
    out = weighted_v.sum(axis=0)  # (d_head,)
    trace_out = np.array(blk.head_out[head, i])  # a copy: a view would keep the trace's buffers alive
    diff = float(np.max(np.abs(out - trace_out)))
    group = n_heads // blk.k.shape[0]
    rope = facts is not None and facts.rope_angles is not None
    rotated = rope and bool(trace.positional_encoding)
    qk = facts is not None and facts.qk_norm != "none"
    return FormulaSteps(
        layer, head, i, bool(trace.causal), keys, d_head, float(blk.attn_scale), kv, q, k, v, dots, scores,
        max_score, exps, norm, weights, weighted_v, out, trace_out, diff, bool(trace.positional_encoding),
        tuple(range(kv * group, (kv + 1) * group)), facts.window if facts is not None else 0,
        norm_step(trace, layer, i, facts) if facts is not None else None,
        rotation_step(blk, head, kv, i, keys, facts) if rotated else None, rope, raw, float(cap),
        qk_norm_step(blk, head, kv, i, keys, facts) if qk else None,
        embed_step(trace, i, facts.embed_scale) if facts is not None and layer == 0 and facts.embed_scale != 1 else None,
        block_step(trace, layer, i, facts) if facts is not None else None, facts,
    )
