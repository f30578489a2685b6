"""Helpers shared by the benchmarks: statistics, resident memory, an offscreen app and window."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def stats(ms: list[float]) -> tuple[float, float]:
    """(median, 95th percentile) of a list of milliseconds."""
    a = np.asarray(ms, dtype=float)
    return float(np.median(a)), float(np.percentile(a, 95))


def rss_mb() -> float:
    """Resident memory of this process in MB (Linux /proc; 0.0 where that is not available)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def offscreen_app():
    """The QApplication on the offscreen platform (torch is imported first, as the app does)."""
    import torch  # noqa: F401  (before the QApplication)

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication(["benchmarks"])


def new_window(size: tuple[int, int] = (1400, 900)):
    """A shown MainWindow with the default layout, its settings in a temporary file, dialogs muted,
    in a process set up as the app sets up its own (glibc's mmap threshold pinned, the start-up's
    objects frozen out of the garbage collector's sight)."""
    from PySide6.QtCore import QSettings

    from explorer.app import freeze_startup_objects, pin_malloc_threshold
    from explorer.qt import dialogs
    from explorer.qt.main_window import MainWindow

    pin_malloc_threshold()
    app = offscreen_app()
    app.setCursorFlashTime(0)  # a blinking cursor repaints the editor every 500 ms: no paint is the keystroke's
    dialogs.error = lambda *args, **kwargs: None
    dialogs.info = lambda *args, **kwargs: None
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    window.files.open_default()
    window.resize(*size)
    window.show()
    app.processEvents()
    freeze_startup_objects()
    return app, window


def settle(app, rounds: int = 3) -> None:
    """Let queued events run: scene-change signals, update requests, then the paints they cause."""
    for _ in range(rounds):
        app.processEvents()
