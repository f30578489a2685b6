"""The formula panel's steps around attention's core, each recomputed in float64 and compared with the trace.

Besides scaled dot-product attention itself (:mod:`explorer.core.lessons.formula`), a layer of the loaded
model may do more, and each of these is recomputed here from the trace's arrays and the model's weights
(:class:`~explorer.core.lessons.formula.LayerFacts`), so that every number the panel writes is checked:

- the embedding scale before block 0 (Gemma: x_i = e_i · √d_model), :class:`EmbedStep`;
- h_i = LN1(x_i), LayerNorm or RMSNorm (with Gemma's (1 + w) gain), or no norm before attention
  (OLMo-2), :class:`NormStep`;
- QK-norm between the projection and RoPE, per head (Qwen3, Gemma 3) or over the whole projection
  (OLMo-2), :class:`QKNormStep`;
- RoPE's rotation, of the whole head or of its first r dimensions only (partial rotary: GPT-NeoX, Phi),
  :class:`RotationStep`;
- how the block adds attention and the MLP to the residual: in parallel from one input (GPT-NeoX, Phi),
  or through norms after each branch (Gemma, OLMo-2), :class:`BlockStep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.core.lessons.rope import rotate


def normalise(x: np.ndarray, kind: str, gain: np.ndarray, shift: np.ndarray | None, eps: float) -> tuple[np.ndarray, float]:
    """(norm(x), its divisor) over the last axis of x, in float64: LayerNorm (x − mean) / √(var + ε) ⊙ g + b,
    RMSNorm x / √(mean(x²) + ε) ⊙ g (g: the effective gain, 1 + w for Gemma). The divisor of the last row."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=-1, keepdims=True) if kind == "layernorm" else x
    divisor = np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
    out = centred / divisor * gain
    if shift is not None:
        out = out + shift
    return out, float(np.ravel(divisor)[-1])


@dataclass(frozen=True)
class EmbedStep:
    """x_i = e_i · scale (+ p_i) before block 0, for a model that scales its embeddings (Gemma: √d_model).

    Attributes
    ----------
    scale : float          the embedding scale.
    e, x : (d_model,)      the token's embedding row e_i and block 0's input x_i (the trace's).
    max_abs_diff : float   max |e_i · scale + p_i − x_i|.
    """

    scale: float
    e: np.ndarray
    x: np.ndarray
    max_abs_diff: float


def embed_step(trace, i: int, scale: float) -> EmbedStep:
    """Recompute x_i = e_i · scale + p_i from the trace's token and positional rows."""
    e = trace.tok[i].astype(np.float64)
    x = trace.x[i].astype(np.float64)
    return EmbedStep(scale, e, x, float(np.max(np.abs(e * scale + trace.pos[i] - x))))


@dataclass(frozen=True)
class NormStep:
    """h_i = LN1(x_i) recomputed in float64 from the block's input x_i (the trace's ``x`` for block
    0, the block before's ``resid_post`` after it).

    Attributes
    ----------
    kind : str              ``"layernorm"``: h = (x − mean) / √(var + ε) ⊙ g + b;
                            ``"rmsnorm"``: h = x / √(mean(x²) + ε) ⊙ g (Zhang & Sennrich 2019);
                            ``"none"``: no norm before attention, h = x (OLMo-2).
    eps : float
    x : (d_model,)          the block's input x_i.
    mean : float            mean of x_i (LayerNorm subtracts it; RMSNorm does not: 0).
    divisor : float         √(var(x_i) + ε) for LayerNorm, √(mean(x_i²) + ε) for RMSNorm (1 for none).
    h : (d_model,)          the recomputed h_i.
    trace_h : (d_model,)    the trace's ``ln1[i]`` (the attention's input).
    max_abs_diff : float    max |h − trace_h|.
    shift : bool            whether LayerNorm adds a learned shift b.
    unit_offset : bool      whether the gain is (1 + w) (Gemma).
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
    unit_offset: bool = False


def norm_step(trace, layer: int, i: int, facts) -> NormStep:
    """Recompute h_i = LN1(x_i) of block ``layer`` from its input, in float64."""
    x_in = trace.x if layer == 0 else trace.blocks[layer - 1].resid_post
    x = x_in[i].astype(np.float64)  # (d_model,)
    trace_h = np.asarray(trace.blocks[layer].ln1[i])
    if facts.norm_weight is None:  # no norm before attention: it reads x_i itself
        return NormStep("none", facts.norm_eps, x, 0.0, 1.0, x, trace_h, float(np.max(np.abs(x - trace_h))))
    h, divisor = normalise(x, facts.norm, facts.norm_weight, facts.norm_bias, facts.norm_eps)
    mean = float(x.mean()) if facts.norm == "layernorm" else 0.0
    return NormStep(facts.norm, facts.norm_eps, x, mean, divisor, h, trace_h, float(np.max(np.abs(h - trace_h))),
                    facts.norm_bias is not None, facts.norm_unit_offset)


@dataclass(frozen=True)
class QKNormStep:
    """QK-norm of q_i and of each seen k_j, between the projection and RoPE, recomputed in float64.

    Attributes
    ----------
    kind : str                    ``"head"``: each head's d_head values normalised (one gain shared by
                                  the heads; Qwen3, Gemma 3); ``"full"``: the whole projection,
                                  n_heads · d_head values for q (n_kv_heads · d_head for k), before the
                                  split into heads (OLMo-2).
    norm : str                    ``"rmsnorm"`` or ``"layernorm"``.
    q_before : (d_head,)          h_i W_Q (+ b_Q), the trace's ``q_pre_norm``.
    q_after : (d_head,)           the recomputed normalised q_i.
    q_divisor : float             q_i's divisor (its root mean square, over the head or the projection).
    k_before, k_after : (n_keys, d_head)
    max_abs_diff : float          max |recomputed − the trace's q and k after QK-norm| (``q_pre_rope``).
    """

    kind: str
    norm: str
    q_before: np.ndarray
    q_after: np.ndarray
    q_divisor: float
    k_before: np.ndarray
    k_after: np.ndarray
    max_abs_diff: float


def qk_norm_step(blk, head: int, kv: int, i: int, keys: np.ndarray, facts) -> QKNormStep:
    """Recompute the QK-norm of q_i (query head ``head``) and of k_j for ``keys`` (kv head ``kv``)."""
    d_head = blk.q.shape[-1]
    q_rows = slice(head * d_head, (head + 1) * d_head)
    k_rows = slice(kv * d_head, (kv + 1) * d_head)
    qn, kn = facts.q_norm, facts.k_norm  # (gain, shift) each
    if facts.qk_norm == "head":
        q_after, divisor = normalise(blk.q_pre_norm[head, i], facts.qk_norm_kind, *qn, facts.norm_eps)
        k_after, _ = normalise(blk.k_pre_norm[kv, keys], facts.qk_norm_kind, *kn, facts.norm_eps)
    else:  # the whole projection at each position: all heads side by side, as before the split
        q_all, divisor = normalise(blk.q_pre_norm[:, i].reshape(-1), facts.qk_norm_kind, *qn, facts.norm_eps)
        k_all, _ = normalise(blk.k_pre_norm[:, keys].transpose(1, 0, 2).reshape(len(keys), -1), facts.qk_norm_kind,
                             *kn, facts.norm_eps)
        q_after, k_after = q_all[q_rows], k_all[:, k_rows]
    diff = max(float(np.max(np.abs(q_after - blk.q_pre_rope[head, i]))),
               float(np.max(np.abs(k_after - blk.k_pre_rope[kv, keys]))))
    return QKNormStep(facts.qk_norm, facts.qk_norm_kind, blk.q_pre_norm[head, i].astype(np.float64), q_after,
                      divisor, blk.k_pre_norm[kv, keys].astype(np.float64), k_after, diff)


@dataclass(frozen=True)
class RotationStep:
    """RoPE's rotation of q_i and of each seen k_j, recomputed in float64 from the trace's q and k
    before rotation with the model's angles (Su et al. 2021, RoFormer, eq. 34).

    Attributes
    ----------
    pairs : str                       ``GPTConfig.rope_pairs``.
    theta : float                     the base θ: pair p turns by position · θ^(−2p/r).
    rotary_dims : int                 r, how many of the head's first dimensions turn (d_head unless
                                      partial rotary); the other d_head − r carry no position.
    q_pre : (d_head,)                 q_i before the rotation (after QK-norm, where the model has it).
    k_pre : (n_keys, d_head)          k_j before the rotation.
    q_angles : (r/2,)                 the angles q_i's pairs turn by, i·θ_p (radians).
    k_angles : (n_keys, r/2)          the angles of each k_j, j·θ_p.
    q, k : (d_head,), (n_keys, d_head)  the recomputed rotations.
    max_abs_diff : float              max |recomputed − the trace's q and k| over q_i and every k_j.
    """

    pairs: str
    theta: float
    rotary_dims: int
    q_pre: np.ndarray
    k_pre: np.ndarray
    q_angles: np.ndarray
    k_angles: np.ndarray
    q: np.ndarray
    k: np.ndarray
    max_abs_diff: float

    @property
    def partial(self) -> bool:
        """True when only the first ``rotary_dims`` of the head's dimensions turn."""
        return self.rotary_dims < self.q_pre.shape[-1]


def _turn(x: np.ndarray, angles: np.ndarray, r: int, layout: str) -> np.ndarray:
    """x with its first r dimensions rotated by ``angles`` and the others as they are."""
    out = np.array(x, dtype=np.float64)
    out[..., :r] = rotate(out[..., :r], angles, layout)
    return out


def rotation_step(blk, head: int, kv: int, i: int, keys: np.ndarray, facts) -> RotationStep:
    """Recompute RoPE's rotation of q_i (query head ``head``) and of k_j for ``keys`` (kv head ``kv``)."""
    angles = facts.rope_angles
    r = 2 * angles.shape[-1]
    q_pre = blk.q_pre_rope[head, i].astype(np.float64)
    k_pre = blk.k_pre_rope[kv, keys].astype(np.float64)
    q_ang, k_ang = angles[i].astype(np.float64), angles[keys].astype(np.float64)
    q, k = _turn(q_pre, q_ang, r, facts.rope_pairs), _turn(k_pre, k_ang, r, facts.rope_pairs)
    diff = max(float(np.max(np.abs(q - blk.q[head, i]))), float(np.max(np.abs(k - blk.k[kv, keys]))))
    return RotationStep(facts.rope_pairs, facts.rope_theta, r, q_pre, k_pre, q_ang, k_ang, q, k, diff)


@dataclass(frozen=True)
class BlockStep:
    """How the block adds its two parts to the residual at position i, from the trace's rows.

    Attributes
    ----------
    layout : str              ``GPTConfig.block_layout``: ``"parallel"`` (x + Attn(LN1(x)) + MLP(LN2(x))),
                              ``"parallel_one_norm"`` (both from LN1(x)), ``"sequential"``.
    placement : str           ``GPTConfig.norm_placement``: ``"sandwich"`` or ``"post"`` (a norm on
                              each part's output before it is added), ``"pre"``.
    x : (d_model,)            the block's input x_i.
    attn_add, mlp_add : (d_model,)   what the residual gets from attention and from the MLP (their
                              outputs, or those outputs' norms).
    mlp_input : str           the MLP's input: ``"x"`` (parallel: the block's input, through its own
                              norm or LN1's), or ``"x + attention"``.
    out : (d_model,)          the trace's resid_post[i].
    max_abs_diff : float      max |x + attn_add + mlp_add − out|.
    """

    layout: str
    placement: str
    x: np.ndarray
    attn_add: np.ndarray
    mlp_add: np.ndarray
    mlp_input: str
    out: np.ndarray
    max_abs_diff: float

    @staticmethod
    def size(v: np.ndarray) -> float:
        """‖v‖, the Euclidean length the panel writes."""
        return float(math.sqrt(float(np.dot(v, v))))


def block_step(trace, layer: int, i: int, facts) -> BlockStep | None:
    """The block's sum at position i, or None for the classic sequential pre-norm block."""
    if facts.block_layout == "sequential" and facts.norm_placement == "pre":
        return None
    lt = trace.blocks[layer]
    x = (trace.x if layer == 0 else trace.blocks[layer - 1].resid_post)[i].astype(np.float64)
    post = facts.norm_placement != "pre"
    attn_add = (lt.ln_attn_out if post else lt.attn_out)[i].astype(np.float64)
    mlp_add = (lt.ln_mlp_out if post else lt.mlp_out)[i].astype(np.float64)
    out = lt.resid_post[i].astype(np.float64)
    mlp_input = "x" if facts.block_layout != "sequential" else "x + attention"
    return BlockStep(facts.block_layout, facts.norm_placement, x, attn_add, mlp_add, mlp_input, out,
                     float(np.max(np.abs(x + attn_add + mlp_add - out))))
