"""A step of the Training panel's slider with the default model: the snapshot's weights swapped
into every panel and the window repainted, from the key press until its events, paints included,
have all been processed; and how long the 14 shipped snapshots take to appear once the panel is
brought forward (loaded off the GUI thread, after the panel has stayed shown for 0.3 s)."""

from __future__ import annotations

import time

from benchmarks import frames
from benchmarks.common import settle, stats

TEXT = "once upon a time there was a"


def _wait(app, done, timeout_s: float = 60.0) -> None:
    end = time.perf_counter() + timeout_s
    while not done():
        if time.perf_counter() > end:
            raise TimeoutError("the Training panel did not get its snapshots")
        app.processEvents()
        time.sleep(0.001)


def measure(app, window, steps: int = 60) -> dict[str, float]:
    """Median and p95 ms of ``steps`` slider steps (Right, then Left, key presses) over the
    default model's snapshots with the Training panel in front, and the snapshots' load time."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    session, panel = window.session, window.panels["training"]
    window.panels["tokens"].editor.setPlainText(TEXT)
    t0 = time.perf_counter()
    window.docks["training"].raise_()
    _wait(app, lambda: panel.source.view is not None and not panel.source.loading)
    load_s = time.perf_counter() - t0
    _wait(app, lambda: panel.curves is not None and not session.busy)  # the curves of the text
    panel.slider.setValue(0)
    panel.slider.setFocus()
    settle(app)
    times, key = [], Qt.Key.Key_Right
    for _ in range(steps):
        if panel.slider.value() == panel.slider.maximum():
            key = Qt.Key.Key_Left
        elif panel.slider.value() == 0:
            key = Qt.Key.Key_Right
        before = session.checkpoint
        t0 = time.perf_counter()
        QTest.keyClick(panel.slider, key)
        frames.until_quiet(window)  # a slow model (a busy machine) traces the snapshot on the worker
        times.append((time.perf_counter() - t0) * 1e3)
        assert session.checkpoint is not before and session.trace is not None, "the step showed nothing new"
    panel.final_button.click()
    window.docks["embeddings"].raise_()  # later sections measure the default layout
    settle(app)
    median, p95 = stats(times)
    return {"snapshot_step_ms_median": median, "snapshot_step_ms_p95": p95, "snapshot_open_s": load_s}
