"""Keystroke to painted window with the default model, split into tokenize / model / views / paint.

An edit is a real key press sent to the text editor (QTest.keyClick): alternately a letter added to
the last word and a Backspace, so that the token count stays at T. The time of one edit runs from
before the key press until the events it caused, paints included, have all been processed.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import frames
from benchmarks.common import settle, stats

WORDS = ("once upon a time there was a little girl named lily . she liked to play in the park "
         "with her big red ball . one day a small dog came to").split()


def text_of(n_tokens: int) -> str:
    """A text of exactly ``n_tokens`` word tokens (for the word-level default tokenizer)."""
    words = (WORDS * (n_tokens // len(WORDS) + 1))[:n_tokens]
    return " ".join(words)


def _type_at_end(app, window, text: str, edits: int, warmup: int = 4) -> dict[str, list[float]]:
    """Put ``text`` in the editor, then time ``edits`` key presses at its end (ms, by part) after
    ``warmup`` uncounted ones; ``"paints"`` per key press; the widgets that painted most in
    ``"strokes"`` (a :class:`~benchmarks.frames.Keystrokes`)."""
    from PySide6.QtGui import QTextCursor

    session = window.session
    editor = window.panels["tokens"].editor
    editor.setPlainText(text)
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    frames.until_quiet(window)
    frames.press_keys(window, frames.alternate(warmup))
    parts = {"tokenize": [], "model": [], "views": []}

    def note() -> None:
        parts["model"].append(session.last_model_ms)
        parts["views"].append(session.last_draw_ms)
        parts["tokenize"].append(session.last_tokenize_ms)

    strokes = frames.press_keys(window, frames.alternate(edits), note)
    parts.update(total=strokes.total_ms, paints=strokes.paints, turn=strokes.longest_turn_ms,
                 paint=[t - v - m - k for t, v, m, k in zip(strokes.total_ms, parts["views"], parts["model"],
                                                             parts["tokenize"])])
    parts["strokes"] = strokes
    return parts


def after_paste(app, window, n_words: int = 200_000, edits: int = 20) -> dict[str, float]:
    """Median ms of a key press at the end of a pasted text of ``n_words`` words (about 1 MB, in
    lines of 50 words, like pasted stories), and the median tokenize part of it."""
    words = text_of(n_words).split(" ")
    text = "\n".join(" ".join(words[i:i + 50]) for i in range(0, len(words), 50))
    parts = _type_at_end(app, window, text, edits)
    window.panels["tokens"].editor.setPlainText("")  # later sections start from a short text
    settle(app)
    return {"keystroke_ms_median_after_1mb_paste": stats(parts["total"])[0],
            "keystroke_tokenize_ms_median_after_1mb_paste": stats(parts["tokenize"])[0]}


def measure(app, window, n_tokens: int, edits: int) -> dict[str, float]:
    """Median and p95 ms of ``edits`` key presses at T = ``n_tokens``, with the parts' medians."""
    parts = _type_at_end(app, window, text_of(n_tokens), edits)
    session = window.session
    assert session.trace is not None and session.trace.n_tokens == n_tokens, "the edits changed T"
    out = {}
    median, p95 = stats(parts["total"])
    out[f"keystroke_ms_median_t{n_tokens}"] = median
    out[f"keystroke_ms_p95_t{n_tokens}"] = p95
    for part in ("tokenize", "model", "views", "paint"):
        out[f"keystroke_{part}_ms_median_t{n_tokens}"] = stats(parts[part])[0]
    out[f"keystroke_paints_t{n_tokens}"] = float(np.mean(parts["paints"]))
    out[f"keystroke_max_turn_ms_t{n_tokens}"] = float(np.max(parts["turn"]))
    out[f"keystroke_traced_off_gui_thread_t{n_tokens}"] = float(session.traces_off_gui_thread)
    frames.note_top(f"default layout, T = {n_tokens}", parts["strokes"])
    return out


def with_why_panel(app, window, n_tokens: int = 32, edits: int = 200) -> dict[str, float]:
    """Key presses at T = ``n_tokens`` with the Why panel in front (its explanation follows every
    edit as a session job, on the worker thread for the default model).

    Returns, as medians over the edits (ms): ``keystroke_ms_median_tN_why``, the key press and the
    turns of the event loop before the Why panel's result arrived (the trace, the other panels and
    their paint: the keystroke's own frame), and its 95th percentile; ``why_drawn_ms_median_tN``,
    from the key press until the Why panel has drawn the new explanation and everything after it
    has been processed; ``why_turn_ms_median_tN`` and its p95, the longest turn from the one that
    brought the result on (the Why panel's drawing and paint; NaN for an edit whose result came in
    the key press's first turn, whose drawing then counts in the keystroke); ``why_job_ms_median_tN``,
    the job's own time (on the worker thread); ``why_draw_ms_median_tN``, the drawing alone.
    """
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    session, panel = window.session, window.panels["why"]
    window.docks["why"].raise_()
    editor = window.panels["tokens"].editor
    editor.setPlainText(text_of(n_tokens))
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    _turns_until_drawn(app, session, panel, None)
    parts = {"keystroke": [], "drawn": [], "turn": [], "job": [], "draw": []}
    for i in range(edits):
        before = session.trace
        t0 = time.perf_counter()
        QTest.keyClick(editor, Qt.Key.Key_S if i % 2 == 0 else Qt.Key.Key_Backspace)
        click = (time.perf_counter() - t0) * 1e3
        turns, k = _turns_until_drawn(app, session, panel, before)
        parts["drawn"].append((time.perf_counter() - t0) * 1e3)
        parts["keystroke"].append(click + sum(turns[:max(k, 1)]))  # the rounds before the result arrived
        parts["turn"].append(max(turns[k:]) if k >= 1 else float("nan"))
        parts["job"].append(panel.last_job_ms)
        parts["draw"].append(panel.last_draw_ms)
    assert session.trace.n_tokens == n_tokens, "the edits changed T"
    window.docks["embeddings"].raise_()  # the default layout again for the sections after this one
    settle(app)
    # An edit whose result came in its first turn has no turn of its own (its drawing is in the keystroke).
    parts["turn"] = [t for t in parts["turn"] if t == t] or parts["keystroke"]
    out = {}
    for part, name in (("keystroke", "keystroke_ms_{}_t{}_why"), ("drawn", "why_drawn_ms_{}_t{}"),
                       ("turn", "why_turn_ms_{}_t{}"), ("job", "why_job_ms_{}_t{}"), ("draw", "why_draw_ms_{}_t{}")):
        median, p95 = stats(parts[part])
        out[name.format("median", n_tokens)] = median
        if part in ("keystroke", "turn"):
            out[name.format("p95", n_tokens)] = p95
    return out


def _turns_until_drawn(app, session, panel, before, timeout_s: float = 10.0) -> tuple[list[float], int]:
    """Run the event loop until the session has a trace other than ``before`` (a slow trace comes
    from the worker thread), the Why panel has drawn its explanation, and three rounds have found
    nothing to do. Returns the ms of each ``processEvents``
    round that did work (waiting for the worker thread between rounds is left out) and the index
    of the round in which the explanation was drawn."""
    turns, end, drawn_at = [], time.perf_counter() + timeout_s, -1
    idle = 0
    while idle < 3:
        if time.perf_counter() > end:
            raise TimeoutError("the Why panel did not draw the newest trace")
        t = time.perf_counter()
        app.processEvents()
        ms = (time.perf_counter() - t) * 1e3
        drawn = session.trace is not before and panel.drawn_trace is session.trace and not session.busy
        if drawn and drawn_at < 0:
            drawn_at = len(turns)
        if ms > 0.2 or not turns or drawn_at == len(turns):
            turns.append(ms)
            idle = 0
        elif drawn:
            idle += 1
        if not drawn:
            time.sleep(0.0002)  # the worker computes: waiting is not a turn of the GUI thread
    return turns, drawn_at
