"""The formula panel's written formula, in the loaded model's own terms (no Qt here).

Each line is plain text (the panel escapes it) written from a :class:`FormulaSteps` and the
model's :class:`LayerFacts`: the embedding scale (Gemma), LayerNorm or RMSNorm with the live mean
and divisor (or no norm before attention), q_i = h_i W_Q with or without a bias, QK-norm between
the projection and RoPE, RoPE's rotation with the angles of this query (which dimensions turn under
partial rotary, and that a NoPE layer turns none), the key/value head a query head shares, the
scaling the model uses (1/√d_head, another factor, or none for GPT-Neo), the soft cap of the scores
before and after, and how the block adds attention and the MLP (in parallel, or through norms).
"""

from __future__ import annotations

import math

import numpy as np

from explorer.core.architecture import ranges_text, theta_text
from explorer.core.lessons.formula import FormulaSteps, LayerFacts

MAX_ANGLES = 4  # pairs whose angle is written out (the first ones and the last)


def _num(x: float) -> str:
    return f"{x:.4g}"


def _size(v: np.ndarray) -> str:
    return _num(float(np.linalg.norm(v)))


def embedding_line(st: FormulaSteps) -> str:
    """x_i = e_i × scale in block 0 of a model that scales its embeddings (Gemma), else ""."""
    e = st.embedding
    if e is None:
        return ""
    root = "√d_model" if abs(e.scale - math.sqrt(len(e.e))) <= 1e-4 * e.scale else "the model's embedding scale"
    return (f"x_i = e_i × {_num(e.scale)} ({root}, before block 0): ‖e_i‖ = {_size(e.e)} → ‖x_i‖ = {_size(e.x)}; "
            f"recomputed, max |Δ| = {e.max_abs_diff:.1e}")


def norm_line(st: FormulaSteps) -> str:
    """h_i = LN1(x_i) with this token's numbers, or "" without the model's facts."""
    n = st.input_norm
    if n is None:
        return ""
    source = "the embeddings" if st.layer == 0 else f"block {st.layer - 1}'s output"
    check = f"recomputed, max |Δ| from the model's ln1 = {n.max_abs_diff:.1e}"
    if n.kind == "none":
        return (f"h_i = x_i, {source}: no norm before attention (this model normalises attention's and the MLP's "
                f"outputs instead); ‖x_i‖ = {_size(n.x)}")
    gain = "(1 + w)" if n.unit_offset else "g"
    if n.kind == "rmsnorm":
        return (f"h_i = RMSNorm(x_i) = x_i / √(mean(x_i²) + ε) ⊙ {gain}, x_i {source}: "
                f"√(mean(x_i²) + ε) = {_num(n.divisor)} (ε = {n.eps:g}; no mean subtracted, no shift); {check}")
    shift = " + b" if n.shift else ""
    return (f"h_i = LayerNorm(x_i) = (x_i − mean) / √(var + ε) ⊙ g{shift}, x_i {source}: "
            f"mean = {_num(n.mean)}, √(var + ε) = {_num(n.divisor)} (ε = {n.eps:g}); {check}")


def projection_line(st: FormulaSteps, facts: LayerFacts | None) -> str:
    """q_i = h_i W_Q (+ b_Q), ..., and which key/value head this query head reads."""
    bias = facts is not None and facts.qkv_bias
    b = (" + b_Q", " + b_K", " + b_V") if bias else ("", "", "")
    pre = "before QK-norm: " if st.qk_norm is not None else "before RoPE: " if st.rope and st.positional_encoding else ""
    if len(st.kv_group) > 1:
        return (f"{pre}q_i = h_i W_Q{b[0]} (head {st.head}); k_j = h_j W_K{b[1]}, v_j = h_j W_V{b[2]} of "
                f"key/value head {st.kv_head}, shared by query heads {ranges_text(list(st.kv_group))} "
                "(grouped-query attention)")
    return f"{pre}q_i = h_i W_Q{b[0]}, k_j = h_j W_K{b[1]}, v_j = h_j W_V{b[2]} (head {st.head})"


def _angles_text(angles: np.ndarray) -> str:
    n = len(angles)
    shown = list(range(min(n, MAX_ANGLES - 1))) + ([n - 1] if n >= MAX_ANGLES else [])
    parts = []
    for k, p in enumerate(shown):
        if k and p != shown[k - 1] + 1:
            parts.append("…")
        parts.append(f"pair {p} by {angles[p]:.4g} rad")
    return ", ".join(parts)


def qk_norm_lines(st: FormulaSteps) -> list[str]:
    """QK-norm between the projection and RoPE, with this query's numbers ([] without it)."""
    n = st.qk_norm
    if n is None:
        return []
    kind = "RMSNorm" if n.norm == "rmsnorm" else "LayerNorm"
    gain = " ⊙ (1 + w)" if st.facts is not None and st.facts.norm_unit_offset else ""
    if n.kind == "head":
        over = f"each head's {st.d_head} values (one gain shared by every head)"
    else:
        over = "the whole projection, every head of position i together, before it is split into heads"
    where = "before RoPE" if st.rope else "before the scores"
    return [f"QK-norm ({where}): q_i ← {kind}(q_i){gain}, k_j ← {kind}(k_j){gain} over {over}: "
            f"‖q_i‖ = {_size(n.q_before)} → {_size(n.q_after)} (divisor {_num(n.q_divisor)}); "
            f"recomputed, max |Δ| = {n.max_abs_diff:.1e}"]


def rope_lines(st: FormulaSteps) -> list[str]:
    """RoPE's rotation of q_i and k_j with this query's angles ([] for a model without RoPE)."""
    if st.facts is not None and st.facts.nope:
        return [f"no RoPE in this layer (a NoPE layer): q_i and k_j are not turned, so attention in layer "
                f"{st.layer} sees no position itself (only the causal mask, and what earlier layers wrote)"]
    if not st.rope:
        return []
    if st.rotation is None:
        return ["RoPE's rotation is switched off: q_i and k_j are not turned, so they carry no position"]
    r = st.rotation
    d = "r" if r.partial else "d_head"
    pairs = f"(p, p + {d}/2)" if r.pairs == "halves" else "(2p, 2p + 1)"
    norms = f"‖q_i‖ = {_size(r.q_pre)} before and {_size(r.q)} after"
    lines = [f"RoPE: q_i = R(i) q_i, k_j = R(j) k_j: pair p = dimensions {pairs} turns by position · θ^(−2p/{d}), "
             f"θ = {theta_text(r.theta)}, so q_i·k_j depends only on i − j"]
    if r.partial:
        rest = r.q_pre[r.rotary_dims:]
        lines.append(f"partial rotary: only dimensions 0–{r.rotary_dims - 1} of {st.d_head} turn (r = {r.rotary_dims}, "
                     f"{100 * r.rotary_dims / st.d_head:g} %); dimensions {r.rotary_dims}–{st.d_head - 1} pass through "
                     f"unchanged and carry no position (that part of q_i, ‖·‖ = {_size(rest)} here, is turned by no angle)")
    lines.append(f"query {st.position}: {_angles_text(r.q_angles)}; {norms}; "
                 f"recomputed from q and k before rotation, max |Δ| = {r.max_abs_diff:.1e}")
    return lines


def scaling_line(st: FormulaSteps) -> str:
    """s_ij with the model's own scale."""
    if st.scaled_by_sqrt_d_head:
        return f"s_ij = q_i·k_j / √d_head,  √d_head = √{st.d_head} = {st.sqrt_d_head:.4f}"
    if st.scale == 1.0:
        return "s_ij = q_i·k_j  (this model does not divide by √d_head)"
    return (f"s_ij = q_i·k_j × {st.scale:.4g} = q_i·k_j / √{1 / st.scale ** 2:.4g}  (this model's own factor, "
            f"not 1/√d_head = {1 / st.sqrt_d_head:.4g})")


def softcap_line(st: FormulaSteps) -> str:
    """The soft cap of the scores, before and after, or ""."""
    if not st.softcap:
        return ""
    c, raw = st.softcap, st.raw_scores
    j = int(np.argmax(np.abs(raw)))
    return (f"soft cap before the mask: s_ij ← {c:g}·tanh(s_ij / {c:g}), every score within ±{c:g}: the largest "
            f"|s_ij| here, key {int(st.keys[j])}, goes from {_num(float(raw[j]))} to {_num(float(st.scores[j]))}")


def block_line(st: FormulaSteps) -> str:
    """How the block adds attention and the MLP to the residual, with this position's numbers, or ""."""
    b = st.block
    if b is None:
        return ""
    check = f"‖x_i‖ = {_num(b.size(b.x))}, ‖attention's part‖ = {_num(b.size(b.attn_add))}, ‖the MLP's‖ = " \
            f"{_num(b.size(b.mlp_add))}; the sum is the trace's resid_post within {b.max_abs_diff:.1e}"
    if b.layout == "parallel":
        return ("parallel block: the residual gets attention and the MLP of the same input, resid_post_i = x_i + "
                f"Attn(LN1(x))_i + MLP(LN2(x_i)) (the MLP does not see attention's output); {check}")
    if b.layout == "parallel_one_norm":
        return ("parallel block from one norm: resid_post_i = x_i + Attn(h)_i + MLP(h_i), h = LN1(x), the same h "
                f"for both (the MLP does not see attention's output); {check}")
    if b.placement == "post":
        return ("norms after each part, none before: resid_mid_i = x_i + LN(attn_out_i), resid_post_i = resid_mid_i "
                f"+ LN(MLP(resid_mid)_i); {check}")
    return ("norms before and after each part: resid_mid_i = x_i + LN(attn_out_i), resid_post_i = resid_mid_i + "
            f"LN(MLP(LN2(resid_mid))_i); {check}")


def window_text(st: FormulaSteps, n_tokens: int) -> str:
    """Which keys the query sees, as the trace's mask says: all, j ≤ i, or a window."""
    keys, i = st.keys, st.position
    if st.causal and len(keys) == i + 1:
        return f"keys j ≤ {i} (causal mask)"
    if not st.causal and len(keys) == n_tokens:
        return f"all {len(keys)} keys (mask off)"
    mask = "causal mask and " if st.causal else ""
    size = f"a local window of {st.window}" if st.window else f"a local window of {len(keys)}"
    return f"keys {keys[0]}..{keys[-1]} ({mask}{size})"


def hidden_keys(st: FormulaSteps, n_tokens: int) -> list[int]:
    """Keys the causal mask alone would let the query see (all keys without it) that the window hides."""
    last = st.position if st.causal else n_tokens - 1
    seen = {int(j) for j in st.keys}
    return [j for j in range(last + 1) if j not in seen]


def formula_lines(st: FormulaSteps, facts: LayerFacts | None) -> list[str]:
    """Every line of the written formula, top to bottom, for this model and query."""
    lines = [embedding_line(st), norm_line(st), projection_line(st, facts), *qk_norm_lines(st), *rope_lines(st),
             scaling_line(st), softcap_line(st),
             "a_ij = exp(s_ij − max_j s_ij) / Σ_j exp(s_ij − max_j s_ij)",
             "out_i = Σ_j a_ij v_j   (scaled dot-product attention, Vaswani et al. 2017, eq. 1)", block_line(st)]
    return [line for line in lines if line]

