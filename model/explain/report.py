"""An :class:`~model.explain.core.Explanation` as JSON or as a few readable lines (``python -m model.trace --explain``)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from model.explain.core import Explanation
from model.explain.scores import TERMS
from model.explain.whatif import WhatIf


def resolve_target(text: str, tokenizer, vocab_size: int, option: str = "--target") -> int:
    """The token id that ``--target`` (or ``option``, named in the messages) names.

    ``#N`` is the id N; otherwise a token as the tokenizer writes it (``cat``, GPT-2's ``Ġcat``),
    or a text that the tokenizer encodes to exactly one token (`` cat``).

    Raises
    ------
    ValueError
        With one line saying why, when the id is out of range or no single token matches.
    """
    if text.startswith("#") and text[1:].isascii() and text[1:].isdigit():
        tid = int(text[1:])
        if tid >= vocab_size:
            raise ValueError(f"{option} {text}: the vocabulary has ids 0..{vocab_size - 1}")
        return tid
    if tokenizer is None:
        raise ValueError(f"{option} {text!r}: this model has no tokenizer; give an id as #N")
    tid = tokenizer.token_to_id(text)
    if tid is None:
        ids = tokenizer.encode(text).ids[len(getattr(tokenizer, "prefix_ids", ())):] if text else []
        if len(ids) != 1 or ids[0] == getattr(tokenizer, "unk_id", None):  # "zebra" -> <unk> is no match
            raise ValueError(f"{option} {text!r} is not one token of this vocabulary "
                             "(give a token as the tokenizer writes it, or #ID)")
        tid = ids[0]
    if not 0 <= tid < vocab_size:
        raise ValueError(f"{option} {text!r} has id {tid}, outside the model's {vocab_size} ids")
    return int(tid)


def _list(a: np.ndarray) -> list:
    """A nested list with NaN and infinities as None (JSON null)."""
    a = np.asarray(a)
    return a.tolist() if np.isfinite(a).all() else np.where(np.isfinite(a), a, None).tolist()


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def explanation_json(ex: Explanation, what_ifs: list[WhatIf], name: Callable[[int], str]) -> dict:
    """The ``explain`` object of ``python -m model.trace --json``.

    ``leave_one_out`` lists j = 0..i-1 with the causal mask; without it every source 0..T-1 with
    null at i; null too for a source not computed (``max_leave_one_out``), and
    ``leave_one_out_computed`` lists the sources computed. Masked cells of the score terms are null. ``what_if``: one entry per knob with the
    mean attention-row entropy in bits and the top-k there. ``name`` turns a token id into text.
    """
    i = ex.position
    loo = computed = None
    if ex.leave_one_out is not None:
        loo = _list(ex.leave_one_out[:i] if ex.causal else ex.leave_one_out)
        computed = np.flatnonzero(ex.leave_one_out_computed).tolist()
    if ex.score_terms is not None:
        st = ex.score_terms
        score_terms = {"layer": 0, "head": st.head, **{k: _list(st.maps[k]) for k in TERMS}, "shares": st.shares}
    else:
        score_terms = None
    return {
        "position": i, "target_id": ex.target_id, "target": name(ex.target_id), "logit": ex.logit, "prob": ex.prob,
        "dla": {"sources": ex.dla.sources.tolist(), "per_head": ex.dla.per_head.tolist(),
                "other": ex.dla.other, "components": dict(ex.dla.components)},
        "leave_one_out": loo, "leave_one_out_computed": computed,
        "logit_lens": [{"stage": s.stage, "top_k": [[name(t), p] for t, p in s.top_k],
                        "kl_to_final": s.kl_to_final, "target_prob": s.target_prob} for s in ex.logit_lens],
        "score_terms": score_terms, "score_terms_note": ex.score_terms_note,
        "first_token_attention": ex.first_token_attention.tolist(),
        "first_token_mean": _num(ex.first_token_mean),
        "attention": ex.attention.tolist(),
        "disagreements": ex.disagreements(),
        "what_if": [{"knob": w.knob, "mean_attn_entropy_bits": w.mean_entropy, "target_prob": w.target_prob,
                     "top_k": [[name(t), p] for t, p in w.top_k]} for w in what_ifs],
    }


def format_explanation(ex: Explanation, what_ifs: list[WhatIf], tokens: list[str], name: Callable[[int], str]) -> str:
    """A readable summary: the logit lens, attention against influence per source, the parts of
    the logit, the attention sink, the score terms' shares and the what-if knobs."""
    i, lines = ex.position, []
    lines.append(f"why {name(ex.target_id)!r} (id {ex.target_id}) after position {i} ({tokens[i]!r}): "
                 f"logit {ex.logit:.4f}, probability {ex.prob:.4f}")
    lines.append("logit lens (the residual after each stage, through the final norm and the unembedding):")
    for s in ex.logit_lens:
        top = ", ".join(f"{name(t)!r} {p:.3f}" for t, p in s.top_k[:3])
        lines.append(f"  {s.stage:<22} KL to final {s.kl_to_final:7.4f} nats   target {s.target_prob:.3f}   {top}")
    marked = set(ex.disagreements())
    lines.append("attention against influence on the target's logit (* = attention and effect disagree):")
    if ex.leave_one_out_capped:
        lines.append(f"  leave-one-out for {ex.n_leave_one_out} of {ex.n_sources - 1} sources (the first, and those "
                     "with the most attention or direct effect); — = not computed")
    lines.append(f"  {'j':>3}  {'token':<14} {'attention':>9} {'direct':>9} {'leave-one-out':>13}")
    attention = ex.mean_attention()
    for j in range(ex.n_sources):
        loo = ex.leave_one_out[j] if ex.leave_one_out is not None else float("nan")
        loo_text = "(itself)" if j == i else "—" if math.isnan(loo) else f"{loo:.4f}"
        lines.append(f"{'*' if j in marked else ' '} {j:>3}  {tokens[j][:14]:<14} {attention[j]:9.4f} "
                     f"{ex.dla.sources[j]:9.4f} {loo_text:>13}")
    lines.append("  attention: mean over the layers and heads that are on; direct: direct logit attribution "
                 "through all heads")
    parts = ", ".join(f"{k} {v:.4f}" for k, v in ex.dla.components.items())
    lines.append(f"the logit's direct parts: sources {ex.dla.sources.sum():.4f} + other {ex.dla.other:.4f} = "
                 f"{ex.dla.sources.sum() + ex.dla.other:.4f} (model: {ex.dla.logit:.4f}"
                 f"{' before its soft cap' if ex.dla.softcap else ''}); other = {parts}")
    sink = ", ".join(f"L{li}H{h} {w:.3f}" for (li, h), w in np.ndenumerate(ex.first_token_attention))
    mean = "n/a" if math.isnan(ex.first_token_mean) else f"{ex.first_token_mean:.3f}"
    lines.append(f"attention on the first token: query {i}: {sink}; mean over queries 1..T-1: {mean}")
    if ex.score_terms is not None:
        shares = ", ".join(f"{k} {100 * v:.1f} %" for k, v in ex.score_terms.shares.items())
        lines.append(f"layer-0 scores of head {ex.score_terms.head} by term (share of |score|): {shares}")
    else:
        lines.append(f"score terms: {ex.score_terms_note}")
    lines.append("what if (mean entropy of the attention rows in bits; the prediction at the position):")
    for w in what_ifs:
        top = ", ".join(f"{name(t)!r} {p:.3f}" for t, p in w.top_k[:3])
        lines.append(f"  {w.knob:<16} {w.mean_entropy:6.3f} bits   target {w.target_prob:.3f}   {top}")
    return "\n".join(lines)
