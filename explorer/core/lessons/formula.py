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

What the trace does not hold comes from the model, as plain arrays (:class:`LayerFacts`, from
:func:`layer_facts`): the first norm's kind, ε and weights, so that h_i = LN1(x_i) is recomputed
from the block's input and compared with the trace's ``ln1``; and for RoPE the model's angles and
pair layout, so that the rotation of q_i and of each k_j is recomputed from the trace's
``q_pre_rope`` / ``k_pre_rope`` and compared with the q and k that entered the scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.core.lessons.rope import rotate


@dataclass(frozen=True)
class LayerFacts:
    """What the formula reads from the model for one layer, as numpy copies (no torch needed later).

    Attributes
    ----------
    norm : str                      ``"layernorm"`` or ``"rmsnorm"`` (``GPTConfig.norm``).
    norm_eps : float
    norm_weight : (d_model,)        LN1's gain g (float64).
    norm_bias : (d_model,) or None  LN1's shift b (None without one).
    window : int                    the layer's attention window (0 = global).
    rope_angles : (context_length, d_head/2) or None   RoPE's angles in radians (``GPT.rope_angles``).
    rope_pairs : str                ``GPTConfig.rope_pairs`` (which dimensions turn together).
    rope_theta : float
    qkv_bias : bool                 whether W_Q, W_K, W_V add a bias (q_i = h_i W_Q + b_Q).
    """

    norm: str
    norm_eps: float
    norm_weight: np.ndarray
    norm_bias: np.ndarray | None
    window: int = 0
    rope_angles: np.ndarray | None = None
    rope_pairs: str = "halves"
    rope_theta: float = 10000.0
    qkv_bias: bool = False


def layer_facts(model, layer: int, angles: np.ndarray | None = None) -> LayerFacts:
    """:class:`LayerFacts` of ``model``'s block ``layer``; ``angles`` (the model's
    ``rope_angles(context_length)``) may be passed when the caller has them already."""
    cfg, block = model.config, model.blocks[layer]
    gain, shift = block.ln1.affine()  # the norm's own γ and β (float64 copies)
    if angles is None and cfg.positional == "rope":
        angles = model.rope_angles(cfg.context_length)
    return LayerFacts(cfg.norm, float(cfg.norm_eps), gain, shift, block.attn.window,
                      angles, cfg.rope_pairs, float(cfg.rope_theta), cfg.qkv_bias)


@dataclass(frozen=True)
class NormStep:
    """h_i = LN1(x_i) recomputed in float64 from the block's input x_i (the trace's ``x`` for block
    0, the block before's ``resid_post`` after it).

    Attributes
    ----------
    kind : str              ``"layernorm"``: h = (x − mean) / √(var + ε) ⊙ g + b;
                            ``"rmsnorm"``: h = x / √(mean(x²) + ε) ⊙ g (Zhang & Sennrich 2019).
    eps : float
    x : (d_model,)          the block's input x_i.
    mean : float            mean of x_i (LayerNorm subtracts it; RMSNorm does not: 0).
    divisor : float         √(var(x_i) + ε) for LayerNorm, √(mean(x_i²) + ε) for RMSNorm.
    h : (d_model,)          the recomputed h_i.
    trace_h : (d_model,)    the trace's ``ln1[i]``.
    max_abs_diff : float    max |h − trace_h|.
    shift : bool            whether LayerNorm adds a learned shift b.
    """

    kind: str
    eps: float
    x: np.ndarray
    mean: float
    divisor: float
    h: np.ndarray
    trace_h: np.ndarray
    max_abs_diff: float
    shift: bool = False


@dataclass(frozen=True)
class RotationStep:
    """RoPE's rotation of q_i and of each seen k_j, recomputed in float64 from the trace's q and k
    before rotation with the model's angles (Su et al. 2021, RoFormer, eq. 34).

    Attributes
    ----------
    pairs : str                       ``GPTConfig.rope_pairs``.
    theta : float                     the base θ: pair p turns by position · θ^(−2p/d_head).
    q_pre : (d_head,)                 h_i W_Q before the rotation.
    k_pre : (n_keys, d_head)          h_j W_K before the rotation.
    q_angles : (d_head/2,)            the angles q_i's pairs turn by, i·θ_p (radians).
    k_angles : (n_keys, d_head/2)     the angles of each k_j, j·θ_p.
    q, k : (d_head,), (n_keys, d_head)  the recomputed rotations.
    max_abs_diff : float              max |recomputed − the trace's q and k| over q_i and every k_j.
    """

    pairs: str
    theta: float
    q_pre: np.ndarray
    k_pre: np.ndarray
    q_angles: np.ndarray
    k_angles: np.ndarray
    q: np.ndarray
    k: np.ndarray
    max_abs_diff: float


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
    positional_encoding : bool    whether the trace used the model's position signal (for RoPE:
                                  whether q and k were rotated).
    kv_group : tuple of int       the query heads that read the same key/value head (this one alone
                                  without grouped-query attention).
    window : int                  the layer's attention window (0 = global), when the model was given.
    input_norm : NormStep or None      LN1 recomputed, when the model's facts were given.
    rotation : RotationStep or None    the rotation recomputed, for a RoPE model whose trace rotated.
    rope : bool                   True when the model has RoPE (known from its facts).
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

    @property
    def sqrt_d_head(self) -> float:
        """√d_head (the divisor of the dot products when the model scales them)."""
        return math.sqrt(self.d_head)

    @property
    def scaled_by_sqrt_d_head(self) -> bool:
        """True when the scale is 1/√d_head (Vaswani et al.), False for another factor (e.g. 1)."""
        return math.isclose(self.scale, 1.0 / self.sqrt_d_head, rel_tol=1e-6)


def norm_step(trace, layer: int, i: int, facts: LayerFacts) -> NormStep:
    """Recompute h_i = LN1(x_i) of block ``layer`` from its input, in float64."""
    x_in = trace.x if layer == 0 else trace.blocks[layer - 1].resid_post
    x = x_in[i].astype(np.float64)  # (d_model,)
    g = facts.norm_weight.astype(np.float64)
    if facts.norm == "rmsnorm":
        mean, divisor = 0.0, math.sqrt(float(np.mean(x * x)) + facts.norm_eps)
        h = x / divisor * g
    else:
        mean = float(x.mean())
        divisor = math.sqrt(float(np.mean((x - mean) ** 2)) + facts.norm_eps)
        h = (x - mean) / divisor * g
        if facts.norm_bias is not None:
            h = h + facts.norm_bias
    trace_h = np.asarray(trace.blocks[layer].ln1[i])
    return NormStep(facts.norm, facts.norm_eps, x, mean, divisor, h, trace_h, float(np.max(np.abs(h - trace_h))),
                    facts.norm_bias is not None)


def rotation_step(blk, head: int, kv: int, i: int, keys: np.ndarray, facts: LayerFacts) -> RotationStep:
    """Recompute RoPE's rotation of q_i (query head ``head``) and of k_j for ``keys`` (kv head ``kv``)."""
    angles = facts.rope_angles
    q_pre = blk.q_pre_rope[head, i].astype(np.float64)
    k_pre = blk.k_pre_rope[kv, keys].astype(np.float64)
    q_ang, k_ang = angles[i].astype(np.float64), angles[keys].astype(np.float64)
    q, k = rotate(q_pre, q_ang, facts.rope_pairs), rotate(k_pre, k_ang, facts.rope_pairs)
    diff = max(float(np.max(np.abs(q - blk.q[head, i]))), float(np.max(np.abs(k - blk.k[kv, keys]))))
    return RotationStep(facts.rope_pairs, facts.rope_theta, q_pre, k_pre, q_ang, k_ang, q, k, diff)


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
        The model's facts for this layer (:func:`layer_facts`): with them, LN1 and (for RoPE)
        the rotation of q and k are recomputed too.

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
    group = n_heads // blk.k.shape[0]
    rope = facts is not None and facts.rope_angles is not None
    rotated = rope and bool(trace.positional_encoding)
    return FormulaSteps(
        layer, head, i, bool(trace.causal), keys, d_head, float(blk.attn_scale), kv, q, k, v, dots, scores,
        max_score, exps, norm, weights, weighted_v, out, trace_out, diff, bool(trace.positional_encoding),
        tuple(range(kv * group, (kv + 1) * group)), facts.window if facts is not None else 0,
        norm_step(trace, layer, i, facts) if facts is not None else None,
        rotation_step(blk, head, kv, i, keys, facts) if rotated else None, rope,
    )
