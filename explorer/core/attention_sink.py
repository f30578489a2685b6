"""How much one head attends to the first token (the "attention sink"), and a paragraph that says
what it means, from the numbers of one trace (no Qt here).

The mean is taken over queries 1..T-1 (query 0 can only see itself), as
``model.explain.first_token_mean`` and ``model.training.over_training`` take it. Softmax weights of a row
sum to 1, so a head with nothing relevant to look at must still put its weight somewhere; trained
models often park it on the first token, which every query sees (Xiao et al. 2023, "Efficient
Streaming Language Models with Attention Sinks"). Whether it matters is a question of the values:
a weight on a token whose value vector is small adds little to the head's output, which is
measured here as the norm share ‖a_i0 v_0‖ / Σ_j ‖a_ij v_j‖ (Kobayashi et al. 2020, "Attention is
Not Only a Weight").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core.score_text import score_formula
from model import Trace

SINK_FACTOR = 2.0  # a mean weight on the first token this many times an even spread's is called a sink


@dataclass(frozen=True)
class SinkFacts:
    """One head's attention to the first token, over queries 1..T-1.

    Attributes
    ----------
    layer, head : int
    n_queries : int              queries averaged over (T - 1).
    mean_weight : float          mean a_i0, in [0, 1].
    even_weight : float          what an even spread over the keys each query sees would give.
    over_half : int              queries with a_i0 > 0.5.
    score_gap : float            mean of s_i0 minus the mean of the other keys' scores of row i (nats);
                                 NaN when no query sees another key.
    v_norm_first : float         ‖v_0‖.
    v_norm_others : float        mean ‖v_j‖ over j >= 1.
    output_share : float         mean over queries of ‖a_i0 v_0‖ / Σ_j ‖a_ij v_j‖, in [0, 1].
    score : str                  how the score s_i0 was computed: "q_i·k_0/√d_head", or "q_i·k_0" for a
                                 model that does not scale (GPT-Neo), from the trace's attn_scale.
    """

    layer: int
    head: int
    n_queries: int
    mean_weight: float
    even_weight: float
    over_half: int
    score_gap: float
    v_norm_first: float
    v_norm_others: float
    output_share: float
    score: str = "s_i0"

    @property
    def is_sink(self) -> bool:
        """True when the first token gets clearly more than an even spread would give it."""
        return self.mean_weight > SINK_FACTOR * self.even_weight


def sink_facts(trace: Trace, layer: int, head: int, scores: np.ndarray | None = None) -> SinkFacts | None:
    """The first-token facts of one head; None when T < 2 or the weights are not all numbers.

    ``scores``: the head's (T, T) attn_scores when the caller has them already (else they are
    computed for this head alone, :meth:`model.tracing.records.LayerTrace.head_attn_scores`).
    """
    if trace.n_tokens < 2:
        return None
    lt = trace.blocks[layer]
    # Each (T, T) array is read in place, in its own dtype: at T = 1,024 the float64 copies of the
    # weights, scores and masks made the attention panel's one turn a 120 to 160 ms stall of the GUI.
    w = lt.attn_weights[head][1:]  # (T-1, T): queries 1..T-1
    if not np.isfinite(w).all():
        return None
    allowed = np.asarray(lt.attn_mask, dtype=bool)[1:]  # True = may attend
    seen = np.maximum(allowed.sum(axis=1), 1)
    first_seen = allowed[:, 0]
    n_others = seen - first_seen  # (keys a query sees but the first)
    rows = first_seen & (n_others > 0)  # queries that see the first token and another key
    scores = (lt.head_attn_scores(head) if scores is None else scores)[1:]
    seen_sum = scores.sum(axis=1, dtype=np.float64, where=allowed)  # (no masked copy of the scores)
    s0 = scores[:, 0].astype(np.float64)
    others_mean = (seen_sum - np.where(first_seen, s0, 0.0)) / np.maximum(n_others, 1)
    gaps = (s0 - others_mean)[rows]
    v = np.asarray(lt.v[lt.kv_head(head)], dtype=np.float64)  # (T, d_head)
    norms = np.linalg.norm(v, axis=1)  # (T,)
    w0 = w[:, 0].astype(np.float64)
    total = (w @ norms.astype(w.dtype)).astype(np.float64)  # Σ_j ‖a_ij v_j‖ (the weights are >= 0)
    share = np.divide(w0 * norms[0], total, out=np.zeros_like(total), where=total > 0)
    return SinkFacts(
        layer=layer, head=head, n_queries=len(w), mean_weight=float(w0.mean()),
        even_weight=float(np.mean(first_seen / seen)), over_half=int((w0 > 0.5).sum()),
        score_gap=float(gaps.mean()) if gaps.size else float("nan"), v_norm_first=float(norms[0]),
        v_norm_others=float(norms[1:].mean()), output_share=float(share.mean()),
        score=score_formula(lt.attn_scale, v.shape[1], "i", "0"))


def sink_line(facts: SinkFacts | None, first_token: str) -> str:
    """One line under an attention map: "mean weight on the first token 'once': 0.41 (queries 1–31)"."""
    if facts is None:
        return "mean weight on the first token: needs two tokens or more"
    return (f"mean weight on the first token {first_token!r}: {facts.mean_weight:.2f} "
            f"(queries 1–{facts.n_queries}; an even spread would give {facts.even_weight:.2f})")


def sink_paragraph(facts: SinkFacts | None, first_token: str) -> str:
    """A paragraph that explains the head's weight on the first token from its numbers."""
    if facts is None:
        return "With fewer than two tokens every query sees only itself: there is nothing to compare."
    f = facts
    where = f"Layer {f.layer}, head {f.head}: queries 1–{f.n_queries}"
    text = (f"{where} put on average {f.mean_weight:.2f} of their weight on the first token {first_token!r}; "
            f"an even spread over the keys each query sees would give {f.even_weight:.2f}. ")
    if not f.is_sink:
        return text + ("That is no more than an even spread would give: this head does not use the first token "
                       "as a resting place on this text.")
    text += (f"{f.over_half} of {f.n_queries} queries give it more than half. " if f.over_half else "")
    if np.isfinite(f.score_gap):
        text += f"Its score {f.score} is on average {f.score_gap:+.2f} above the other keys' of the same row. "
    text += ("A row of softmax weights must sum to 1, so a head with nothing relevant to look at still puts its "
             "weight somewhere, and trained models often park it on the first token, which every query can see: "
             "an \"attention sink\" (Xiao et al. 2023). ")
    carries = "little of it reaches" if f.output_share < 0.5 * f.mean_weight else "much of it reaches"
    text += (f"How much reaches the head's output depends on the value vector: ‖v_0‖ = {f.v_norm_first:.2f} against "
             f"{f.v_norm_others:.2f} on average for the other tokens, and the first token makes "
             f"{f.output_share:.2f} of the output's parts on average (‖a_i0 v_0‖ / Σ_j ‖a_ij v_j‖, before W_O): "
             f"{carries} the output.")
    return text
