"""The formula panel's written formula, in the loaded model's own terms (no Qt here).

Each line is plain text (the panel escapes it) written from a :class:`FormulaSteps` and the
model's :class:`LayerFacts`: LayerNorm or RMSNorm with the live mean and divisor, q_i = h_i W_Q
with or without a bias, RoPE's rotation with the angles of this query, the key/value head a
query head shares, and the scaling the model uses (1/√d_head, or none for GPT-Neo).
"""

from __future__ import annotations

import numpy as np

from explorer.core.architecture import ranges_text
from explorer.core.lessons.formula import FormulaSteps, LayerFacts

MAX_ANGLES = 4  # pairs whose angle is written out (the first ones and the last)


def _num(x: float) -> str:
    return f"{x:.4g}"


def norm_line(st: FormulaSteps) -> str:
    """h_i = LN1(x_i) with this token's numbers, or "" without the model's facts."""
    n = st.input_norm
    if n is None:
        return ""
    source = "the embeddings" if st.layer == 0 else f"block {st.layer - 1}'s output"
    check = f"recomputed, max |Δ| from the model's ln1 = {n.max_abs_diff:.1e}"
    if n.kind == "rmsnorm":
        return (f"h_i = RMSNorm(x_i) = x_i / √(mean(x_i²) + ε) ⊙ g, x_i {source}: "
                f"√(mean(x_i²) + ε) = {_num(n.divisor)} (ε = {n.eps:g}; no mean subtracted, no shift); {check}")
    shift = " + b" if n.shift else ""
    return (f"h_i = LayerNorm(x_i) = (x_i − mean) / √(var + ε) ⊙ g{shift}, x_i {source}: "
            f"mean = {_num(n.mean)}, √(var + ε) = {_num(n.divisor)} (ε = {n.eps:g}); {check}")


def projection_line(st: FormulaSteps, facts: LayerFacts | None) -> str:
    """q_i = h_i W_Q (+ b_Q), ..., and which key/value head this query head reads."""
    bias = facts is not None and facts.qkv_bias
    b = (" + b_Q", " + b_K", " + b_V") if bias else ("", "", "")
    pre = "before RoPE: " if st.rope and st.positional_encoding else ""
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


def rope_lines(st: FormulaSteps) -> list[str]:
    """RoPE's rotation of q_i and k_j with this query's angles ([] for a model without RoPE)."""
    if not st.rope:
        return []
    if st.rotation is None:
        return ["RoPE's rotation is switched off: q_i and k_j are not turned, so they carry no position"]
    r = st.rotation
    pairs = "(p, p + d_head/2)" if r.pairs == "halves" else "(2p, 2p + 1)"
    norms = f"‖q_i‖ = {_num(float(np.linalg.norm(r.q_pre)))} before and {_num(float(np.linalg.norm(r.q)))} after"
    return [
        f"RoPE: q_i = R(i) q_i, k_j = R(j) k_j: pair p = dimensions {pairs} turns by position · θ^(−2p/d_head), "
        f"θ = {r.theta:,g}, so q_i·k_j depends only on i − j",
        f"query {st.position}: {_angles_text(r.q_angles)}; {norms}; "
        f"recomputed from q and k before rotation, max |Δ| = {r.max_abs_diff:.1e}",
    ]


def scaling_line(st: FormulaSteps) -> str:
    """s_ij with the model's own scale."""
    if st.scaled_by_sqrt_d_head:
        return f"s_ij = q_i·k_j / √d_head,  √d_head = √{st.d_head} = {st.sqrt_d_head:.4f}"
    if st.scale == 1.0:
        return "s_ij = q_i·k_j  (this model does not divide by √d_head)"
    return f"s_ij = q_i·k_j × {st.scale:g}  (this model does not divide by √d_head)"


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
    lines = [norm_line(st), projection_line(st, facts), *rope_lines(st), scaling_line(st),
             "a_ij = exp(s_ij − max_j s_ij) / Σ_j exp(s_ij − max_j s_ij)",
             "out_i = Σ_j a_ij v_j   (scaled dot-product attention, Vaswani et al. 2017, eq. 1)"]
    return [line for line in lines if line]

