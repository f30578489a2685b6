"""The Why panel's numbers and sentences: one job per update, and the views it draws (no Qt here).

:func:`why_job` runs :func:`model.explain.explain` on the session's trace (the logit lens, direct
logit attribution, leave-one-out, the score terms) and the attention formula's what-ifs, as one
session job. The rest turns an :class:`~model.explain.Explanation` into what the panel shows:
stage titles, the rows of attention against influence, and sentences whose every number comes
from the explanation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import torch

from model.explain import (
    Explanation,
    WhatIf,
    attention_entropy,
    explain,
    leave_one_out_sources,
    prediction,
    stop_if,
    what_if,
)
from model.explain.loo import forward_macs, leave_one_out_macs
from model.core.interventions import Interventions
from model.tracing.records import Trace

Name = Callable[[int], str]  # token id -> its display text

#: Names of the parts of the logit that are not a source token (Explanation.dla.components).
COMPONENT_NAMES = {"tok_emb": "token embedding e_i", "pos_emb": "positional p_i", "attn.b_V": "value bias",
                   "attn.b_O": "W_O's bias", "mlp": "MLP", "ln_f.bias": "final norm's shift β",
                   "ln_attn_out.bias": "attention norm's shift", "unembed.bias": "unembedding bias"}

#: Leave-one-out costs up to one forward of the text per source hidden, so the job hides at most
#: LOO_MAX_SOURCES sources (as many bars as a learner reads), and fewer where they would cost more
#: than LOO_BUDGET_MACS multiply-adds (:func:`model.explain.loo.leave_one_out_macs`: about 1 s on
#: one thread of the project's machine), but never fewer than LOO_MIN_SOURCES: the first token (the
#: "attention sink"), the one with the most attention and the one with the largest direct effect,
#: the comparison the panel is for. Every source is hidden while that fits: the default model's 31.
LOO_MAX_SOURCES = 64
LOO_MIN_SOURCES = 3
LOO_BUDGET_MACS = 3e10
#: The bars show every source up to this many (and the query); beyond, those that matter most.
SHOWN_SOURCES = 64


@dataclass(frozen=True)
class WhyRequest:
    """What the Why panel asks for: the session's trace, the position and target, the selection.

    ``target`` None is the top-1 at ``position``; ``head`` is the layer-0 head whose scores are
    split into terms; ``temperature`` the τ of the what-if knob; ``tokens`` the trace's token
    texts (for drawing the result); ``what_ifs`` False leaves the what-ifs out (three traces: only
    while their tab is shown); ``should_stop`` is asked between the job's steps (True: stop with
    :class:`~model.explain.loo.Interrupted`, as the session's worker does when newer work waits).
    """

    trace: Trace
    position: int
    target: int | None
    head: int
    temperature: float = 2.0
    top_k: int = 5
    tokens: tuple[str, ...] = ()
    what_ifs: bool = True
    should_stop: Callable[[], bool] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Plain:
    """The prediction of the model without the session's interventions (heads switched back on)."""

    logit: float
    prob: float
    top_id: int
    top_prob: float


@dataclass(frozen=True)
class WhyResult:
    """An explanation and the what-ifs: baseline (the trace itself), the 1/√d_head scale flipped,
    τ, and the causal mask flipped (empty when not asked for; the three re-runs without their
    traces: ``trace`` None); ``plain`` is set while heads are switched off."""

    explanation: Explanation
    what_ifs: tuple[WhatIf, ...]
    plain: Plain | None


def leave_one_out_cap(config, n_sources: int) -> int | None:
    """How many sources the Why job hides (``explain``'s ``max_leave_one_out``): None for all of
    them (S - 1 sources, while they fit in :data:`LOO_BUDGET_MACS` and number at most
    :data:`LOO_MAX_SOURCES`), else the most that fit, at least :data:`LOO_MIN_SOURCES`.

    Counted as if every source hidden ran all S positions (hiding a recent token costs less):
    the default model hides all 31 at T = 32; a d_model = 8 model of 2 × 2 heads about 20 at
    T = 1,024; GPT-2 small 3 at T = 512.
    """
    n = max(n_sources - 1, 0)
    if n <= LOO_MAX_SOURCES and leave_one_out_macs(config, n, n_sources) <= LOO_BUDGET_MACS:
        return None
    fits = [k for k in range(LOO_MIN_SOURCES, min(n, LOO_MAX_SOURCES) + 1)
            if leave_one_out_macs(config, k, n_sources) <= LOO_BUDGET_MACS]
    return max(fits, default=LOO_MIN_SOURCES)


def job_passes(config, n_sources: int, n_tokens: int, ablated: bool, what_ifs: bool = True) -> int:
    """About how many forward passes of T tokens :func:`why_job` costs: the lens, attribution and
    score terms about one; leave-one-out of the sources :func:`leave_one_out_cap` allows, at most
    what :func:`model.explain.loo.leave_one_out_macs` counts against a trace's work (batched: at
    T = 32 on the default model 31 copies cost 1.6 traces; at long contexts a copy costs up to a
    trace); three what-if traces at about 1.2 each; one more trace while heads are switched off."""
    cap = leave_one_out_cap(config, n_sources)
    hidden = max(n_sources - 1, 0) if cap is None else cap
    trace = forward_macs(config, n_tokens, n_tokens, 1, n_tokens)
    loo = leave_one_out_macs(config, hidden, n_sources) / trace
    return math.ceil(1 + loo + (3 * 1.2 if what_ifs else 0) + (1 if ablated else 0))


def baseline(tr: Trace, position: int, target: int, top_k: int) -> WhatIf:
    """The trace itself as the what-if table's first row (no model run)."""
    return WhatIf("baseline", tr, attention_entropy(tr), *prediction(tr.logits[position], target, top_k))


def why_job(checkpoint, request: WhyRequest) -> WhyResult:
    """The session job: :func:`explain` and the what-ifs of ``request`` with ``checkpoint``'s model.

    Raises :class:`~model.explain.loo.Interrupted` between two steps when ``request.should_stop()``
    says so (a step is at most one batch of leave-one-out or one what-if trace)."""
    model, tr, i = checkpoint.model, request.trace, request.position
    S = i + 1 if tr.causal else tr.n_tokens
    ex = explain(model, tr, i, request.target, head=request.head, top_k=request.top_k,
                 max_leave_one_out=leave_one_out_cap(model.config, S), should_stop=request.should_stop)
    t = ex.target_id
    forced = tr.interventions.scale_scores if tr.interventions is not None else None
    scaled = model.config.scale_scores if forced is None else forced
    runs = []
    if request.what_ifs:  # kept without their traces (GPT-2 small's at T = 1,024: 1.2 GB each)
        k = request.top_k
        runs = [baseline(tr, i, t, k)]
        for knobs in (dict(scale_scores=not scaled, knob="with 1/√d_head" if not scaled else "no 1/√d_head"),
                      dict(temperature=request.temperature), dict(causal=not tr.causal)):
            stop_if(request.should_stop)
            runs.append(replace(what_if(model, tr, i, t, top_k=k, **knobs), trace=None))
    plain = None
    if tr.interventions is not None and tr.interventions.ablate:
        free = replace(tr.interventions, ablate=())
        ids = torch.tensor(tr.token_ids, dtype=torch.long, device=model.tok_emb.weight.device)
        with torch.no_grad():  # position i's logits only: no trace of every tensor
            logits = model(ids, positional_encoding=tr.positional_encoding, causal=tr.causal, interventions=free,
                           positions=[i])[0].double().cpu().numpy()  # (vocab_size,)
        ((top, top_prob),), prob = prediction(logits, t, 1)
        plain = Plain(float(logits[t]), prob, top, top_prob)
    return WhyResult(ex, tuple(runs), plain)


def toggled_head(iv: Interventions, layer: int, head: int) -> Interventions:
    """``iv`` with head (layer, head) switched off, or back on when it was off."""
    pair = (int(layer), int(head))
    if pair in iv.ablate:
        return replace(iv, ablate=tuple(p for p in iv.ablate if p != pair))
    return iv.with_ablated([pair])


def stage_title(stage: str, positional: str, sequential: bool = True) -> str:
    """A logit-lens stage's column title: ``x`` is the embeddings (e_i + p_i with a learned table),
    ``blocks.L.resid_mid`` "+ attention L", ``blocks.L.resid_post`` "+ MLP L" ("+ attention & MLP L"
    for a parallel block, which adds both at once)."""
    if stage == "x":
        return "embeddings e + p" if positional == "learned" else "embeddings e"
    layer, part = stage.split(".")[1:3]
    if part == "resid_mid":
        return f"+ attention L{layer}"
    return f"+ MLP L{layer}" if sequential else f"+ attention & MLP L{layer}"


def heads_off(ex: Explanation) -> int:
    """How many heads the session's interventions switch off in the explained trace."""
    return 0 if ex.heads_on is None else int((~ex.heads_on).sum())


def attention_label(ex: Explanation) -> str:
    """What the attention column is: the one head's weight, or the mean over the layers and heads
    that are on (a head switched off reads nothing, so its weights are left out)."""
    n_layers, n_heads = ex.attention.shape[:2]
    off = heads_off(ex)
    if off == n_layers * n_heads:
        return "attention a_ij: none, every head is switched off"
    if n_layers * n_heads == 1:
        return "attention a_ij (layer 0, head 0)"
    whole = f"{n_layers} layer{'s' * (n_layers > 1)} × {n_heads} heads"
    if off:
        return f"attention a_ij, mean over the {n_layers * n_heads - off} heads that are on (of {whole})"
    return f"attention a_ij, mean over {whole}"


def mean_attention(ex: Explanation) -> np.ndarray:
    """(S,) the weight of query i on each source, averaged over the layers and heads that are on
    (rows sum to 1; zeros when every head is off: :meth:`Explanation.mean_attention`)."""
    return ex.mean_attention()


def all_heads_off(ex: Explanation) -> bool:
    """Whether every head is switched off: no token reaches the prediction through attention."""
    return heads_off(ex) == ex.attention.shape[0] * ex.attention.shape[1] > 0


def head_contributions(ex: Explanation) -> np.ndarray:
    """(n_layers, n_heads): each head's direct contribution to the target's logit (all sources)."""
    return ex.dla.per_head.sum(axis=-1)


def component_name(key: str) -> str:
    """A readable name for a key of ``dla.components`` (``blocks.0.mlp`` -> "MLP L0")."""
    if key.startswith("blocks."):
        _, layer, rest = key.split(".", 2)
        return f"{COMPONENT_NAMES.get(rest, rest)} L{layer}"
    return COMPONENT_NAMES.get(key, key)


def hidden_sources(ex: Explanation) -> list[int]:
    """The sources j != i whose leave-one-out was computed (empty without leave-one-out)."""
    if ex.leave_one_out_computed is None:
        return []
    return [int(j) for j in np.flatnonzero(ex.leave_one_out_computed) if j != ex.position]


def leave_one_out_scope(ex: Explanation) -> str:
    """One line when leave-one-out was computed for only some sources (long texts), else ""."""
    if not ex.leave_one_out_capped:
        return ""
    return (f"Leave-one-out for {ex.n_leave_one_out:,} of {ex.n_sources - 1:,} earlier tokens (those with most "
            "attention or direct effect, and the first): each hidden token costs a forward pass of the text.")


def shown_sources(ex: Explanation, limit: int = SHOWN_SOURCES) -> np.ndarray:
    """The sources the bars show, in text order: all S while S <= ``limit`` + 1, else the query, the
    first token, and those with the most attention or direct effect (:func:`leave_one_out_sources`
    with ``limit``), and every source whose leave-one-out was computed."""
    if ex.n_sources <= limit + 1:
        return np.arange(ex.n_sources)
    rows = set(leave_one_out_sources(mean_attention(ex), ex.dla.sources, ex.position, limit).tolist())
    rows |= {ex.position, *hidden_sources(ex)}
    return np.array(sorted(rows), dtype=np.int64)


def rows_note(ex: Explanation, rows: np.ndarray) -> str:
    """"" when the bars show every source, else which they show and what the others add up to."""
    if rows.size >= ex.n_sources:
        return ""
    rest = np.setdiff1d(np.arange(ex.n_sources), rows)
    return (f"The bars show {rows.size:,} of the {ex.n_sources:,} tokens: the query, the first token and those with "
            f"the most attention or direct effect. The other {rest.size:,} hold {mean_attention(ex)[rest].sum():.3f} "
            f"of the attention and add {round(float(ex.dla.sources[rest].sum()), 3) + 0.0:+.3f} to the logit directly.")


def summary(ex: Explanation, tokens: list[str], name: Name) -> str:
    """The prediction explained, and the earlier token with the most attention set against the one
    whose hiding changes the target's logit most (the README's worked example, from the numbers)."""
    i, target = ex.position, repr(name(ex.target_id))
    text = (f"After {tokens[i]!r} (position {i}) the model gives {target} p = {ex.prob:.3f} "
            f"(logit {ex.logit:.3f}).")
    others, hidden = [j for j in range(ex.n_sources) if j != i], hidden_sources(ex)
    if all_heads_off(ex):
        return text + (" Every head is switched off: no earlier token reaches the prediction through attention, "
                       "so none is ranked by it.")
    if not hidden or not others:
        return text
    a, e = mean_attention(ex), ex.leave_one_out
    j_att = others[int(np.argmax(a[others]))]
    j_eff = hidden[int(np.argmax(np.abs(e[hidden])))]
    among = f" (the most of the {len(hidden):,} hidden)" if ex.leave_one_out_capped else ""

    def change(j: int) -> str:
        return f"{'lowers' if e[j] > 0 else 'raises'} the logit by {abs(e[j]):.3f}"

    if math.isnan(e[j_att]):  # not hidden (only with a cap of one source)
        return text + (f" Of the other tokens, {tokens[j_att]!r} gets the most attention ({a[j_att]:.3f}); its "
                       f"leave-one-out was not computed. Hiding {tokens[j_eff]!r} {change(j_eff)}{among}.")
    if j_att == j_eff:
        return text + (f" Of the other tokens, {tokens[j_att]!r} gets the most attention ({a[j_att]:.3f}), "
                       f"and hiding it also changes the logit most{among}: it {change(j_att)}.")
    ratio = abs(e[j_eff]) / abs(e[j_att]) if e[j_att] != 0 else math.inf
    times = f", {ratio:.0f} times as much" if math.isfinite(ratio) and ratio >= 2 else ""
    return text + (f" Of the other tokens, {tokens[j_att]!r} gets the most attention ({a[j_att]:.3f}), yet hiding "
                   f"it {change(j_att)}. {tokens[j_eff]!r} gets {a[j_eff]:.3f} of the attention, and hiding it "
                   f"{change(j_eff)}{times}{among}.")


def sink_paragraph(ex: Explanation, tokens: list[str], name: Name) -> str:
    """The attention on the first token ("attention sink") and how much of it reaches the target's logit."""
    i = ex.position
    if i == 0 and ex.causal:
        return "Attention on the first token: the query is the first token, which can only attend to itself."
    if all_heads_off(ex):
        return "Attention on the first token: every head is switched off, so no attention reaches the prediction."
    a = mean_attention(ex)
    a0 = float(a[0])
    where = ("layer 0, head 0" if ex.attention.shape[0] * ex.attention.shape[1] == 1 else
             "averaged over the heads that are on" if heads_off(ex) else "averaged over layers and heads")
    mean = "" if math.isnan(ex.first_token_mean) else (
        f" (over every query after the first, {ex.first_token_mean:.3f} on average)")
    text = (f"Attention sink: query {i} puts {a0:.3f} of its attention ({where}) on the first token "
            f"{tokens[0]!r}{mean}. Through the heads, that adds {ex.dla.sources[0]:+.3f} to the logit of "
            f"{name(ex.target_id)!r} directly")
    hidden = hidden_sources(ex)
    if i == 0 or 0 not in hidden:
        return text + "."
    total = float(np.abs(ex.leave_one_out[hidden]).sum())
    share = abs(float(ex.leave_one_out[0])) / total if total > 0 else 0.0
    text += f", and hiding the first token changes the logit by {ex.leave_one_out[0]:+.3f}: {share:.0%} of "
    if ex.leave_one_out_capped:  # compared within the tokens hidden: the others' effects are not known
        weight = float(a[hidden].sum())
        reference = a0 / weight if weight > 0 else 0.0
        text += (f"the leave-one-out effects of the {len(hidden):,} tokens hidden, against {reference:.0%} of "
                 "their attention. ")
    else:
        reference = a0
        text += f"all the tokens' leave-one-out effects, against {a0:.0%} of the attention. "
    if a0 < 0.1:
        return text + "This query puts little weight there: no sink here."
    if share < reference / 2:
        return text + ("Much of that weight carries little to the prediction: a head with nothing useful to read "
                       "parks its weight on the first token, whose value changes little (an \"attention sink\", "
                       "Xiao et al. 2023).")
    return text + "Here the first token carries about as much as its weight or more: it is read, not parked."


def sum_check(ex: Explanation) -> str:
    """"sources + other parts = logit", with the numbers and the parts by name."""
    sources = float(ex.dla.sources.sum())
    total = sources + ex.dla.other
    parts = ", ".join(f"{component_name(k)} {v:+.4f}" for k, v in ex.dla.components.items())
    c = ex.dla.softcap
    model = (f"the model's logit before its soft cap is {ex.dla.logit:.4f} (difference {abs(total - ex.dla.logit):.1e}), "
             f"and {c:g}·tanh(z/{c:g}) makes it {ex.logit:.4f}" if c else
             f"the model's logit is {ex.logit:.4f} (difference {abs(total - ex.logit):.1e})")
    return (f"Sum check: the sources' direct contributions {sources:.4f} + the other parts {ex.dla.other:.4f} = "
            f"{total:.4f}; {model}. Other parts: {parts}.")


def disagreement_note(ex: Explanation, tokens: list[str]) -> str:
    """Which tokens are marked, and the rule that marked them (Explanation.disagreements)."""
    marked = ex.disagreements()
    if all_heads_off(ex):
        return "Every head is switched off: there is no attention to compare with the effect."
    if len(hidden_sources(ex)) < 2:
        return "Too few earlier tokens to compare attention with effect."
    rule = ("◆ marks a token whose share of the attention and share of the leave-one-out effect differ by "
            "0.25 or more")
    if ex.leave_one_out_capped:
        rule += f" (shares among the {ex.n_leave_one_out:,} tokens hidden)"
    if not marked:
        return rule + ": none here."
    return rule + ": " + ", ".join(f"{j} {tokens[j]!r}" for j in marked) + "."


def entropy_rows(w: WhatIf, layer: int, head: int) -> np.ndarray:
    """(T,) the attention-row entropies of one head under a what-if, in bits."""
    return w.attn_entropy[layer, head] if w.attn_entropy.size else np.zeros(0)


def plain_note(result: WhyResult, name: Name, describe: str) -> str:
    """While heads are switched off: the prediction with them back on, against the one now."""
    ex, plain = result.explanation, result.plain
    if plain is None:
        return ""
    return (f"With {describe}: {name(ex.target_id)!r} p = {ex.prob:.3f} (logit {ex.logit:.3f}). With every head "
            f"on: p = {plain.prob:.3f} (logit {plain.logit:.3f}), and the top token {name(plain.top_id)!r} "
            f"p = {plain.top_prob:.3f}.")
