"""The GPT-2-small-sized model as a person meets it: the first keystroke after opening it on a long
text, and typing steadily into it (a key every 100 ms) while each trace takes longer than that.

Both run the real window (traces on the worker thread, panels paced) with a heartbeat timer whose
longest gap is the GUI's longest stall.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import frames
from benchmarks.keystroke import text_of

TYPED = "once upon a time there was a little girl named lily . she liked to play in the park with her big red ball"


class Heartbeat:
    """A timer that ticks every ``ms`` on the GUI thread; :meth:`longest_gap_ms` is the longest
    time between two ticks (a stall of the event loop)."""

    def __init__(self, ms: int = 5) -> None:
        from PySide6.QtCore import QTimer

        self.beats: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(ms)
        self.timer.timeout.connect(lambda: self.beats.append(time.perf_counter()))
        self.timer.start()

    def stop(self) -> float:
        """Stop; the longest gap in ms (NaN with fewer than two ticks)."""
        self.timer.stop()
        gaps = np.diff(self.beats) * 1e3
        return float(gaps.max()) if gaps.size else float("nan")


def open_on_long_text(app, window, path, n_tokens: int = 520) -> dict[str, float]:
    """Open the checkpoint at ``path`` with ``n_tokens`` words in the editor, wait until every
    trace and job of the opening is done, then press one key at the end of the text (a letter
    added to the last word): how long until its trace is shown and painted, the model's part,
    and the longest stall meanwhile.

    Returns ``big_model_open_s`` (File ▸ Open until the window is back: the model built and run
    on 32 tokens), ``big_model_open_idle_s`` (until the opening trace of the whole text, the
    panels' jobs and the second row store are done), ``big_model_first_keystroke_ms_tN`` and its
    ``_model_ms_tN``, and ``big_model_first_keystroke_max_stall_ms_tN``.
    """
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextCursor

    session, editor = window.session, window.panels["tokens"].editor
    editor.setPlainText(text_of(n_tokens))
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    frames.until_quiet(window)
    t0 = time.perf_counter()
    if not window.files.open_checkpoint(path):
        raise RuntimeError("the GPT-2-small-sized checkpoint failed to open")
    opened = time.perf_counter() - t0
    frames.until_quiet(window, timeout_s=600)
    idle = time.perf_counter() - t0
    assert session.trace is not None and session.trace.n_tokens == n_tokens, "the opening showed another text"
    beat = Heartbeat()
    strokes = frames.press_keys(window, [Qt.Key.Key_S], timeout_s=600)
    stall = beat.stop()
    model_ms = session.last_model_ms
    frames.press_keys(window, [Qt.Key.Key_Backspace], timeout_s=600)  # the text as it was
    return {"big_model_open_s": opened, "big_model_open_idle_s": idle,
            f"big_model_first_keystroke_ms_t{n_tokens}": strokes.total_ms[0],
            f"big_model_first_keystroke_model_ms_t{n_tokens}": model_ms,
            f"big_model_first_keystroke_max_stall_ms_t{n_tokens}": stall}


def typing_steadily(app, window, seconds: float = 5.0, interval_ms: int = 100) -> dict[str, float]:
    """Type :data:`TYPED` into the empty editor, one character every ``interval_ms`` for
    ``seconds``, and note every trace the window shows meanwhile.

    Returns ``big_model_typing_results``, how many traces were shown while typing;
    ``big_model_typing_result_gap_ms_max``, the longest wait for a new result while typing (from
    the first key, and between results); ``big_model_typing_trace_ms_median``, the model's time
    of a trace then (one trace time); ``big_model_typing_last_result_ms``, from the last key until
    the trace of the final text is shown; ``big_model_typing_last_result_traces``, that wait in
    trace times; ``big_model_typing_last_result_beyond_its_trace_ms``, that wait less the model's
    time of that last trace (the key's handling, the wait for the worker and the delivery to the
    GUI thread: a wait for an older text's trace would show here as most of a trace time); and
    ``big_model_typing_max_stall_ms``.
    """
    from PySide6.QtCore import QTimer
    from PySide6.QtTest import QTest

    session, editor = window.session, window.panels["tokens"].editor
    editor.setPlainText("")
    editor.setFocus()
    frames.until_quiet(window, timeout_s=600)
    final = (TYPED * 3)[:int(seconds * 1000 / interval_ms)]
    chars = list(final)
    shown: list[tuple[float, float]] = []  # (when, model ms) of each trace shown
    keys: list[float] = []

    def on_trace() -> None:
        shown.append((time.perf_counter(), session.last_model_ms))

    def type_one() -> None:
        if chars:
            keys.append(time.perf_counter())
            QTest.keyClicks(editor, chars.pop(0))
        else:
            typer.stop()

    session.sig_trace_changed.connect(on_trace)
    typer = QTimer()
    typer.setInterval(interval_ms)
    typer.timeout.connect(type_one)
    beat = Heartbeat()
    typer.start()
    end = time.perf_counter() + seconds + 600
    while (typer.isActive() or session.text != final or frames.pending(window)) and time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.0005)
    stall = beat.stop()
    session.sig_trace_changed.disconnect(on_trace)
    last_key = keys[-1]
    during = [t for t, _ in shown if t <= last_key]
    gaps = np.diff([keys[0], *during, last_key]) * 1e3
    trace_ms = float(np.median([ms for _, ms in shown])) if shown else float("nan")
    last_ms = (shown[-1][0] - last_key) * 1e3 if shown else float("nan")
    return {"big_model_typing_results": float(len(during)),
            "big_model_typing_result_gap_ms_max": float(gaps.max()),
            "big_model_typing_trace_ms_median": trace_ms,
            "big_model_typing_last_result_ms": last_ms,
            "big_model_typing_last_result_traces": last_ms / trace_ms if trace_ms > 0 else float("nan"),
            "big_model_typing_last_result_beyond_its_trace_ms": last_ms - shown[-1][1] if shown else float("nan"),
            "big_model_typing_max_stall_ms": stall}
