"""The screen check's reading: each sentence a panel composed from the trace, set against the claim
recomputed here from the trace itself (not from the panel's own helpers).

Each check takes the main window and returns findings; :data:`SENTENCE_CHECKS` maps a panel's name
to its checks.
"""

from __future__ import annotations

import math
import re

import numpy as np

from explorer.qt.screens.findings import Finding
from model.tokens.names import token_name


def _trace(window):
    s = window.session
    return s.trace if s.trace is not None and s.trace.n_tokens else None


def check_next_token(window) -> list[Finding]:
    """The first bar is the most likely token over the whole vocabulary, and the entropy line is the
    trace's (temperature 1)."""
    panel, trace = window.panels["next-token"], _trace(window)
    if trace is None or panel.top is None or panel.temperature_box.value() != 1.0:
        return []
    pos = window.session.selected_position()
    probs = np.asarray(trace.probs[pos], dtype=np.float64)  # (vocab_size,)
    out = []
    best = int(np.argmax(probs))
    if int(panel.top.ids[0]) != best and not math.isclose(probs[int(panel.top.ids[0])], probs[best], rel_tol=1e-6):
        out.append(Finding("sentence", "next-token bars", f"the first bar is id {int(panel.top.ids[0])}, the most "
                           f"likely over the vocabulary is id {best} (p {probs[best]:.3f})"))
    found = re.search(r"entropy ([0-9.]+) bits", panel.info.text())
    p = probs[probs > 0]
    entropy = float(-(p * np.log2(p)).sum())
    if found and abs(float(found.group(1)) - entropy) > 0.0015:
        out.append(Finding("sentence", "next-token info", f"says entropy {found.group(1)} bits, the trace's "
                           f"probabilities give {entropy:.3f}"))
    return out


def check_why(window) -> list[Finding]:
    """The summary's "p = ..." is the trace's probability of the target; "'X' gets the most attention (a)"
    names the earlier token with the largest attention averaged over every layer and head."""
    panel, trace = window.panels["why"], _trace(window)
    if trace is None or getattr(panel, "result", None) is None or bool(window.session.interventions.describe()):
        return []
    ex, tokens, text = panel.result.explanation, list(panel.request.tokens), panel.summary.text()
    i, out = ex.position, []
    if panel.request.trace is not trace:
        return [Finding("sentence", "why summary", "explains an older trace than the one shown")]
    prob = float(trace.probs[i, ex.target_id])
    said = re.search(r"p = ([0-9.]+)", text)
    if said and abs(float(said.group(1)) - prob) > 0.0015:
        out.append(Finding("sentence", "why summary", f"says p = {said.group(1)}, the trace gives {prob:.3f}"))
    if ex.target_id != int(np.argmax(trace.probs[i])) and panel.target.target is None:
        out.append(Finding("sentence", "why target", f"explains id {ex.target_id} as the most likely; the trace's "
                           f"most likely is id {int(np.argmax(trace.probs[i]))}"))
    claim = re.search(r"Of the other tokens, (.+?) gets the most attention \(([0-9.]+)\)", text)
    if claim and trace.blocks:
        a = np.mean([np.asarray(b.attn_weights[:, i, :i + 1], dtype=np.float64) for b in trace.blocks],
                    axis=(0, 1))  # (i + 1,): over layers and heads
        others = [j for j in range(i + 1) if j != i]
        j = others[int(np.argmax(a[others]))]
        named_ok = claim.group(1) == repr(tokens[j]) or math.isclose(a[[k for k in others if repr(tokens[k]) ==
                                                                          claim.group(1)] or [j]].max(), a[j])
        if not named_ok or abs(float(claim.group(2)) - a[j]) > 0.0015:
            out.append(Finding("sentence", "why summary", f"says {claim.group(1)} gets the most attention "
                               f"({claim.group(2)}); recomputed: {tokens[j]!r} at position {j} ({a[j]:.3f})"))
    return out


def check_attention_sink(window) -> list[Finding]:
    """"mean weight on the first token 'x': m (queries 1–n; an even spread would give e)" against the
    selected head's weights in the trace."""
    panel, trace, s = window.panels["attention"], _trace(window), window.session
    if trace is None or trace.n_tokens < 2 or not trace.blocks:
        return []
    text = panel.sink.text()
    said = re.search(r"first token .*?: ([0-9.]+)", text)
    if not said:
        return []
    w = np.asarray(trace.blocks[s.layer].attn_weights[s.head], dtype=np.float64)[1:, 0]  # queries 1..T-1
    digits = len(said.group(1).split(".")[-1])
    if abs(float(said.group(1)) - w.mean()) > 0.51 * 10 ** -digits:
        return [Finding("sentence", "attention sink line", f"says {said.group(1)}, the trace's layer {s.layer} head "
                        f"{s.head} gives {w.mean():.{digits + 1}f}")]
    return []


def check_training_diff(window) -> list[Finding]:
    """"After the last token, 'x' gained most (+d)": the largest gain at the last position over the
    whole vocabulary, from the difference of the two snapshots."""
    diff_view = window.panels["training"].difference
    d = diff_view.diff
    said = re.search(r"After the last token, (.+?) gained most \(([-+0-9.]+)\)", diff_view.note.text())
    if d is None or not said or not d.probs.size:
        return []
    last = np.where(np.isfinite(d.probs[-1]), d.probs[-1], -np.inf)  # (vocab_size,)
    best = int(np.argmax(last))
    if abs(float(said.group(2)) - last[best]) > 0.0015:
        name = token_name(window.session.tokenizer, best)
        return [Finding("sentence", "training difference note", f"says {said.group(1)} gained most "
                        f"({said.group(2)}); over the vocabulary {name!r} (id {best}) gained most ({last[best]:+.3f})")]
    return []


#: panel name -> its sentence checks
SENTENCE_CHECKS = {
    "next-token": [check_next_token],
    "why": [check_why],
    "attention": [check_attention_sink],
    "training": [check_training_diff],
}
