"""The four attention variants of the book chapter, on the current input and the loaded model.

Raschka, *Build a Large Language Model (From Scratch)*, chapter 3:
  1. simplified self-attention without trainable weights (3.3): s_ij = x_i · x_j, a = softmax(s),
     z_i = Σ_j a_ij x_j, no scaling, no mask;
  2. self-attention with trainable weights (3.4): q = h W_Q, k = h W_K, v = h W_V,
     s = q kᵀ / √d_head, no mask;
  3. causal attention (3.5): the same with keys after the query masked out: the model's own;
  4. multi-head attention (3.6): every head at once, the heads' outputs concatenated and mixed by W_O.

Each is recomputed here in float64 from the trace's inputs and the model's weights, and compared
with what the model itself computed (the trace), so every "equals" is a measured fact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.core.positional_sentence import fmt

#: Below this max |Δ| two computations count as the same (float32 error of the trace).
SAME_TOL = 1e-5
KEYS = ("simplified", "self", "causal", "multihead")
TITLES = {
    "simplified": "1. Simplified self-attention (no trainable weights)",
    "self": "2. Self-attention with W_Q, W_K, W_V (no mask)",
    "causal": "3. Causal attention (the model's own)",
    "multihead": "4. Multi-head attention (heads concatenated, then W_O)",
}


@dataclass(frozen=True)
class Variant:
    """One variant's computation on the current tokens.

    Attributes
    ----------
    key, title : str
    formula : str              the variant's formula in one line.
    scores : (n, T, T)         before softmax; -inf where masked. n = n_heads for "multihead", else 1.
    weights : (n, T, T)        softmax over keys, rows sum to 1, in [0, 1].
    outputs : (n, T, d_out)    context vectors (d_out = d_model for "simplified", else d_head).
    combined : (T, d_model) or None   multi-head only: the concatenated heads ...
    mixed : (T, d_model) or None      ... and their product with W_O (plus bias): the attention output.
    position : int             the selected query token i.
    output_row : (d,)          the output for token i (z_i, out_i, or the W_O-mixed row).
    weights_delta : float      max |a - a_model| over the selected head's (T, T) weights.
    output_delta : float or None   max |Δ| between this output and the model's, where comparable.
    difference : str           one computed line: how this differs from the model's own computation.
    """

    key: str
    title: str
    formula: str
    scores: np.ndarray
    weights: np.ndarray
    outputs: np.ndarray
    combined: np.ndarray | None
    mixed: np.ndarray | None
    position: int
    output_row: np.ndarray
    weights_delta: float
    output_delta: float | None
    difference: str


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64; -inf entries get weight exactly 0."""
    s = np.asarray(scores, np.float64)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _masked(scores: np.ndarray, causal: bool) -> np.ndarray:
    if not causal:
        return scores
    T = scores.shape[-1]
    return np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)  # causal_mask: True = may attend


def _qkv(model, trace, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v (n_heads, T, d_head) in float64 from the trace's LN1 output and the model's weights.

    Head h uses rows h*d_head:(h+1)*d_head of each nn.Linear weight (out, in), as in the model.
    """
    attn = model.blocks[layer].attn
    n_heads, d_head = attn.n_heads, attn.d_head
    h = trace.blocks[layer].ln1.astype(np.float64)  # (T, d_model)
    out = []
    for name in ("W_Q", "W_K", "W_V"):
        lin = getattr(attn, name)
        m = h @ lin.weight.detach().double().numpy().T  # (T, d_model)
        if lin.bias is not None:
            m = m + lin.bias.detach().double().numpy()
        out.append(m.reshape(len(h), n_heads, d_head).transpose(1, 0, 2))  # (n_heads, T, d_head)
    return out[0], out[1], out[2]


def _heads(qkv, causal: bool):
    q, k, v = qkv
    scores = _masked(q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1]), causal)  # (n_heads, T, T)
    weights = softmax_rows(scores)
    return scores, weights, weights @ v  # outputs (n_heads, T, d_head)


def _same(delta: float) -> str:
    return "equal to" if delta < SAME_TOL else "different from"


def _simplified(trace, ref_w, i) -> Variant:
    x = trace.x.astype(np.float64)  # (T, d_model)
    scores = x @ x.T  # (T, T)
    weights = softmax_rows(scores)
    z = weights @ x  # (T, d_model)
    self_top = int(np.sum(np.argmax(weights, axis=1) == np.arange(len(x))))
    dw = float(np.max(np.abs(weights - ref_w)))
    line = (f"No trainable weights and no scaling: scores compare the raw inputs x_i·x_j (up to "
            f"{fmt(np.max(np.abs(scores)))}), so {self_top} of {len(x)} tokens attend most to "
            f"themselves; the weights differ from the model's by up to {fmt(dw)}, and z_i lives in "
            f"the input space (width {x.shape[1]}), not a head's.")
    return Variant("simplified", TITLES["simplified"], "s_ij = x_i·x_j,  a_ij = softmax_j(s_ij),  z_i = Σ_j a_ij x_j",
                   scores[None], weights[None], z[None], None, None, i, z[i], dw, None, line)


def _single(key, qkv, trace, head, i, causal, ref_w, ref_out) -> Variant:
    scores, weights, outs = _heads(qkv, causal)
    w, o = weights[head], outs[head]
    dw = float(np.max(np.abs(w - ref_w)))
    do = float(np.max(np.abs(o[i] - ref_out[i])))
    mode = "with the causal mask" if trace.causal else "without the mask"
    if key == "self":
        future = float(w[i, i + 1:].sum())
        line = (f"The model's W_Q, W_K, W_V without the mask: token {i} gives {fmt(future)} of its weight "
                f"to later tokens; the weights are {_same(dw)} the trace's ({mode}), max |Δ| = {fmt(dw)}, "
                f"|Δ out_i| = {fmt(do)}.")
        formula = "q = h W_Q, k = h W_K, v = h W_V,  a = softmax(q kᵀ / √d_head),  out_i = Σ_j a_ij v_j"
    else:
        line = (f"Keys after the query masked out (zero weight above the diagonal): {_same(max(dw, do))} "
                f"the trace ({mode}), max |Δ weights| = {fmt(dw)}, |Δ out_i| = {fmt(do)}.")
        formula = "s_ij = q_i·k_j / √d_head for j ≤ i (−∞ otherwise),  a = softmax(s),  out_i = Σ_j a_ij v_j"
    return Variant(key, TITLES[key], formula, scores[head][None], w[None], o[None], None, None,
                   i, o[i], dw, do, line)


def _multihead(model, qkv, trace, layer, head, i, ref_w) -> Variant:
    scores, weights, outs = _heads(qkv, trace.causal)
    H, T, d_head = outs.shape
    concat = outs.transpose(1, 0, 2).reshape(T, H * d_head)  # (T, d_model)
    w_o = model.blocks[layer].attn.W_O
    mixed = concat @ w_o.weight.detach().double().numpy().T  # (T, d_model)
    if w_o.bias is not None:
        mixed = mixed + w_o.bias.detach().double().numpy()
    dw = float(np.max(np.abs(weights[head] - ref_w)))
    do = float(np.max(np.abs(mixed - trace.blocks[layer].attn_out)))
    heads = "one head" if H == 1 else f"{H} heads"
    line = (f"{heads} of width {d_head}, concatenated to width {H * d_head} and mixed by W_O: "
            f"{_same(do)} the trace's attention output, max |Δ| = {fmt(do)}.")
    return Variant("multihead", TITLES["multihead"],
                   "head_h = softmax(q_h k_hᵀ / √d_head) v_h,  out = concat(head_1 … head_H) W_O",
                   scores, weights, outs, concat, mixed, i, mixed[i], dw, do, line)


def all_variants(model, trace, layer: int, head: int, position: int) -> tuple[Variant, ...]:
    """The four variants for the selected layer, head and query token.

    Parameters
    ----------
    model : model.GPT
        The model that made ``trace`` (its weights are used for variants 2 to 4).
    trace : model.Trace
        With T >= 1 tokens.
    layer, head : int
    position : int
        Query token i in [0, T); negative counts from the end.

    Returns
    -------
    tuple of Variant
        In the order of :data:`KEYS`.

    Raises
    ------
    ValueError
        When the trace is empty or an index is out of range.
    """
    T = trace.n_tokens
    if T == 0:
        raise ValueError("there are no tokens to attend over")
    cfg = model.config
    if not 0 <= layer < cfg.n_layers or not 0 <= head < cfg.n_heads:
        raise ValueError(f"layer {layer} / head {head} outside {cfg.n_layers} layers x {cfg.n_heads} heads")
    i = position + T if position < 0 else position
    if not 0 <= i < T:
        raise ValueError(f"position {position} is outside the {T} tokens")
    blk = trace.blocks[layer]
    ref_w = blk.attn_weights[head].astype(np.float64)
    ref_out = blk.head_out[head].astype(np.float64)
    qkv = _qkv(model, trace, layer)
    return (
        _simplified(trace, ref_w, i),
        _single("self", qkv, trace, head, i, False, ref_w, ref_out),
        _single("causal", qkv, trace, head, i, True, ref_w, ref_out),
        _multihead(model, qkv, trace, layer, head, i, ref_w),
    )
