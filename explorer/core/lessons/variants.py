"""The four attention variants of the book chapter, on the current input and the loaded model.

Raschka, *Build a Large Language Model (From Scratch)*, chapter 3:
  1. simplified self-attention without trainable weights (3.3): s_ij = x_i · x_j, a = softmax(s),
     z_i = Σ_j a_ij x_j, no scaling, no mask;
  2. self-attention with trainable weights (3.4): q = h W_Q, k = h W_K, v = h W_V,
     s = q kᵀ / √d_head, no mask;
  3. causal attention (3.5): the same with keys after the query masked out: the model's own;
  4. multi-head attention (3.6): every head at once, the heads' outputs concatenated and mixed by W_O.

Each is recomputed here in float64 from the trace's inputs and the model's per-head weights
(``Attention.head_weights``), and compared with what the model itself computed (the trace), so
every "equals" is a measured fact. Which keys a query may see, the scale, the key/value head of
each query head and the rotation of q and k come from the model's attention module, never
re-derived here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from explorer.core.lessons.positional_sentence import fmt
from explorer.core.softmax import softmax

#: Below this max |Δ| two computations count as the same (float32 error of the trace).
SAME_TOL = 1e-5
KEYS = ("simplified", "self", "causal", "multihead")
TITLES = {
    "simplified": "1. Simplified self-attention (no trainable weights)",
    "self": "2. Self-attention with W_Q, W_K, W_V (no mask)",
    "causal": "3. Causal attention (the model's own)",
    "multihead": "4. Multi-head attention (heads concatenated, then W_O)",
}


def output_space(key: str, n_heads: int) -> str:
    """What the columns of a variant's output map are, in config names.

    "simplified" mixes the input vectors x_j themselves (z_i = Σ_j a_ij x_j): they live in the
    input space, ``d_model``. "self" and "causal" mix one head's values: ``d_head``. "multihead"
    shows the heads' outputs side by side: ``n_heads·d_head`` (``d_head`` when there is one head).

    Raises
    ------
    ValueError
        For a key not in :data:`KEYS`.
    """
    if key not in KEYS:
        raise ValueError(f"no attention variant {key!r} (one of {', '.join(KEYS)})")
    if key == "simplified":
        return "d_model"
    return f"{n_heads}·d_head" if key == "multihead" and n_heads > 1 else "d_head"


def heads_phrase(n_heads: int) -> str:
    """"the 1 head" or "all 4 heads": the heads a multi-head variant runs."""
    return "the 1 head" if n_heads == 1 else f"all {n_heads} heads"


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


def _qkv(attn, weights: dict, trace, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q (n_heads, T, d_head), k and v (n_kv_heads, T, d_head) in float64 from the trace's LN1
    output and the model's per-head weights (``Attention.head_weights``): q_i = h_i W_Q + b_Q, ...

    A model with QK-norm then normalises q and k with its own norms (``Attention.normed``, in
    float32, the norms' precision); a RoPE layer's q and k are turned by the model's own rotation
    when the trace used it.
    """
    h = trace.blocks[layer].ln1.astype(np.float64)  # (T, d_model): the attention's input
    out = []
    for name in ("Q", "K", "V"):
        w = weights[f"W_{name}"].astype(np.float64)  # (n, d_model, d_head)
        b = weights[f"b_{name}"].astype(np.float64)  # (n, d_head)
        out.append(np.einsum("td,nde->nte", h, w) + b[:, None, :])  # (n, T, d_head)
    q, k, v = out
    if attn.q_norm is not None:
        with torch.no_grad():
            qn, kn = attn.normed(torch.from_numpy(q).float()[None], torch.from_numpy(k).float()[None])
        q, k = qn[0].double().numpy(), kn[0].double().numpy()
    if attn.rope is not None and trace.positional_encoding:
        q, k = (attn.rope(torch.from_numpy(a)[None]).numpy()[0] for a in (q, k))
    return q, k, v


def _heads(attn, qkv, allowed: np.ndarray):
    """Every query head's scores, weights and outputs; ``allowed`` (T, T) bool, True = may attend."""
    q, k, v = qkv
    kv = [attn.kv_head(h) for h in range(q.shape[0])]  # the key/value head of each query head
    scores = np.einsum("hid,hjd->hij", q, k[kv]) * attn.scale  # (n_heads, T, T)
    if attn.softcap:  # c·tanh(s/c) before the mask (Gemma 2)
        scores = attn.softcap * np.tanh(scores / attn.softcap)
    scores = np.where(allowed, scores, -np.inf)
    weights = softmax(scores)
    return scores, weights, weights @ v[kv]  # outputs (n_heads, T, d_head)


def _scaled(attn) -> str:
    """How the formula writes the scaling: " / √d_head", " × 0.204" for another factor, nothing for a model
    that does not scale; and the soft cap where the layer caps its scores."""
    scale = " / √d_head" if math.isclose(attn.scale, 1 / math.sqrt(attn.d_head), rel_tol=1e-6) else \
        "" if attn.scale == 1 else f" × {attn.scale:.4g}"
    return scale + (f", capped to {attn.softcap:g}·tanh(s/{attn.softcap:g})" if attn.softcap else "")


def _projections(attn, trace) -> str:
    """q = h W_Q, k = h W_K, v = h W_V, with QK-norm N and RoPE's rotation R(i), R(j) where the layer has them."""
    if attn.q_norm is not None:
        if attn.rope is not None and trace.positional_encoding:
            return "q_i = R(i) N(h_i W_Q), k_j = R(j) N(h_j W_K) (QK-norm N, then RoPE), v_j = h_j W_V"
        return "q = N(h W_Q), k = N(h W_K) (QK-norm N), v = h W_V"
    if attn.rope is not None and trace.positional_encoding:
        return "q_i = R(i) h_i W_Q, k_j = R(j) h_j W_K (RoPE), v_j = h_j W_V"
    return "q = h W_Q, k = h W_K, v = h W_V"


def _sharing(attn) -> str:
    """", sharing 2 key/value heads (heads 0–1 read kv 0; 2–3 read kv 1)" under grouped-query attention."""
    if attn.n_kv_heads == attn.n_heads:
        return ""
    group = attn.n_heads // attn.n_kv_heads
    pairs = "; ".join(f"{g * group}–{(g + 1) * group - 1} read kv {g}" if group > 1 else f"{g} reads kv {g}"
                      for g in range(attn.n_kv_heads))
    kv = f"{attn.n_kv_heads} key/value head{'s' if attn.n_kv_heads > 1 else ''}"
    return f" sharing {kv} (heads {pairs})"


def _same(delta: float) -> str:
    return "equal to" if delta < SAME_TOL else "different from"


def _simplified(trace, ref_w, i, rope: bool = False) -> Variant:
    x = trace.x.astype(np.float64)  # (T, d_model)
    scores = x @ x.T  # (T, T)
    weights = softmax(scores)
    z = weights @ x  # (T, d_model)
    self_top = int(np.sum(np.argmax(weights, axis=1) == np.arange(len(x))))
    dw = float(np.max(np.abs(weights - ref_w)))
    line = (f"No trainable weights and no scaling: scores compare the raw inputs x_i·x_j (up to "
            f"{fmt(np.max(np.abs(scores)))}), so {self_top} of {len(x)} tokens attend most to "
            f"themselves; the weights differ from the model's by up to {fmt(dw)}, and z_i lives in "
            f"the input space (width {x.shape[1]}), not a head's."
            + (" This model's x_i = e_i carries no position: RoPE adds it inside attention." if rope else ""))
    return Variant("simplified", TITLES["simplified"], "s_ij = x_i·x_j,  a_ij = softmax_j(s_ij),  z_i = Σ_j a_ij x_j",
                   scores[None], weights[None], z[None], None, None, i, z[i], dw, None, line)


@dataclass(frozen=True)
class _Context:
    """What variants 2 to 4 share: the layer's attention module (mask, scale, kv heads, rotation),
    its per-head weights, the recomputed q, k, v and the model's own weights and outputs."""

    attn: object
    weights: dict
    trace: object
    layer: int
    head: int
    i: int
    qkv: tuple
    ref_w: np.ndarray
    ref_out: np.ndarray


def _window_note(attn) -> str:
    return f" and keys {attn.window} or more places back (a local window)" if attn.window else ""


def _single(key: str, c: _Context) -> Variant:
    T, i, attn = c.trace.n_tokens, c.i, c.attn
    allowed = attn.allowed_keys(T, causal=key == "causal").numpy()  # (T, T), True = may attend
    scores, weights, outs = _heads(attn, c.qkv, allowed)
    w, o = weights[c.head], outs[c.head]
    dw = float(np.max(np.abs(w - c.ref_w)))
    do = float(np.max(np.abs(o[i] - c.ref_out[i])))
    mode = "with the causal mask" if c.trace.causal else "without the mask"
    scaled = _scaled(attn)
    if key == "self":
        future = float(w[i, i + 1:].sum())
        line = (f"The model's W_Q, W_K, W_V without the causal mask: token {i} gives {fmt(future)} of its "
                f"weight to later tokens; the weights are {_same(dw)} the trace's ({mode}), max |Δ| = {fmt(dw)}, "
                f"|Δ out_i| = {fmt(do)}.")
        formula = f"{_projections(attn, c.trace)},  a = softmax(q kᵀ{scaled}),  out_i = Σ_j a_ij v_j"
    else:
        line = (f"Keys after the query masked out{_window_note(attn)} (zero weight): {_same(max(dw, do))} "
                f"the trace ({mode}), max |Δ weights| = {fmt(dw)}, |Δ out_i| = {fmt(do)}.")
        formula = (f"s_ij = q_i·k_j{scaled} for the keys j it may see (−∞ otherwise),  a = softmax(s),  "
                   "out_i = Σ_j a_ij v_j")
    return Variant(key, TITLES[key], formula, scores[c.head][None], w[None], o[None], None, None,
                   i, o[i], dw, do, line)


def _multihead_formula(attn) -> str:
    """The multi-head formula; with grouped-query attention each head reads its group's k and v."""
    if attn.n_kv_heads == attn.n_heads:
        return f"head_h = softmax(q_h k_hᵀ{_scaled(attn)}) v_h,  out = concat(head_1 … head_H) W_O"
    group = attn.n_heads // attn.n_kv_heads
    return (f"head_h = softmax(q_h k_g(h)ᵀ{_scaled(attn)}) v_g(h) with g(h) = h // {group} (shared key/value "
            "heads),  out = concat(head_1 … head_H) W_O")


def _multihead(c: _Context) -> Variant:
    blk = c.trace.blocks[c.layer]
    scores, weights, outs = _heads(c.attn, c.qkv, blk.attn_mask)  # the mask the trace ran with
    H, T, d_head = outs.shape
    concat = outs.transpose(1, 0, 2).reshape(T, H * d_head)  # (T, n_heads * d_head)
    w_o = c.weights["W_O"].astype(np.float64)  # (n_heads, d_head, d_model)
    mixed = np.einsum("htd,hde->te", outs, w_o) + c.weights["b_O"].astype(np.float64)  # (T, d_model)
    dw = float(np.max(np.abs(weights[c.head] - c.ref_w)))
    do = float(np.max(np.abs(mixed - blk.attn_out)))
    heads = "one head" if H == 1 else f"{H} heads"
    line = (f"{heads} of width {d_head}{_sharing(c.attn)}, concatenated to width {H * d_head} and mixed by W_O: "
            f"{_same(do)} the trace's attention output, max |Δ| = {fmt(do)}.")
    return Variant("multihead", TITLES["multihead"],
                   _multihead_formula(c.attn),
                   scores, weights, outs, concat, mixed, c.i, mixed[c.i], dw, do, line)


def all_variants(model, trace, layer: int, head: int, position: int,
                 weights: dict[str, np.ndarray] | None = None) -> tuple[Variant, ...]:
    """The four variants for the selected layer, head and query token.

    Parameters
    ----------
    model : model.GPT
        The model that made ``trace``: its attention module of ``layer`` says which keys a query
        may see (``allowed_keys``), the scale, each query head's key/value head and the rotation.
    trace : model.Trace
        With T >= 1 tokens.
    layer, head : int
    position : int
        Query token i in [0, T); negative counts from the end.
    weights : dict, optional
        That layer's ``Attention.head_weights()`` (W_Q ... b_O), when the caller has them cached;
        otherwise they are taken from the model.

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
    attn = model.blocks[layer].attn
    weights = attn.head_weights() if weights is None else weights
    blk = trace.blocks[layer]
    c = _Context(attn, weights, trace, layer, head, i, _qkv(attn, weights, trace, layer),
                 blk.attn_weights[head].astype(np.float64), blk.head_out[head].astype(np.float64))
    rope = attn.rope is not None
    return (_simplified(trace, c.ref_w, i, rope), _single("self", c), _single("causal", c), _multihead(c))


@dataclass(frozen=True)
class VariantsRequest:
    """The inputs of :func:`variants_job`: the trace, the selection, that layer's
    ``Attention.head_weights()`` and the token texts (for the panel's labels)."""

    trace: object
    layer: int
    head: int
    position: int
    weights: dict
    tokens: tuple[str, ...] = ()


def variants_job(checkpoint, request: VariantsRequest) -> tuple[Variant, ...]:
    """:func:`all_variants` as a session job: ``fn(checkpoint, inputs)``."""
    return all_variants(checkpoint.model, request.trace, request.layer, request.head, request.position,
                        weights=request.weights)
