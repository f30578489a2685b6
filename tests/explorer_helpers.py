"""Helpers shared by the explorer widget tests: a window on the tiny model, dialogs that never block."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QSettings, Qt


class DialogRecorder:
    """Stands in for explorer.qt.dialogs: records every call, answers from queues, never blocks."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.infos: list[tuple[str, str]] = []
        self.files: list[str] = []  # answers for open_file / save_file / open_folder, first in first out
        self.texts: list[str] = []  # answers for ask_text, first in first out (None when empty: cancelled)
        self.asked: list[tuple[str, str, str]] = []  # ask_text's (title, label, proposed text)
        self.confirms: list[tuple[str, str]] = []
        self.confirm_answer = True
        self.progress: list["FakeProgress"] = []
        self.cancel_after: int | None = None  # the progress dialog's Cancel is pressed after this many updates

    def install(self, monkeypatch) -> "DialogRecorder":
        from explorer.qt import dialogs

        monkeypatch.setattr(dialogs, "error", lambda _p, title, text: self.errors.append((title, text)))
        monkeypatch.setattr(dialogs, "info", lambda _p, title, text: self.infos.append((title, text)))
        monkeypatch.setattr(dialogs, "open_file", lambda *a, **k: self.files.pop(0) if self.files else None)
        monkeypatch.setattr(dialogs, "save_file", lambda *a, **k: self.files.pop(0) if self.files else None)
        monkeypatch.setattr(dialogs, "open_folder", lambda *a, **k: self.files.pop(0) if self.files else None)
        monkeypatch.setattr(dialogs, "ask_choice", lambda *a, **k: None)
        monkeypatch.setattr(dialogs, "ask_int", lambda *a, **k: None)
        monkeypatch.setattr(dialogs, "ask_text", self._ask_text)
        monkeypatch.setattr(dialogs, "confirm", self._confirm)
        monkeypatch.setattr(dialogs, "progress", self._progress)
        return self

    def _ask_text(self, _parent, title, label, text="") -> str | None:
        self.asked.append((title, label, text))
        return self.texts.pop(0) if self.texts else None

    def _confirm(self, _parent, title, text) -> bool:
        self.confirms.append((title, text))
        return self.confirm_answer

    def _progress(self, _parent, title, text, maximum) -> "FakeProgress":
        self.progress.append(FakeProgress(title, text, maximum, self.cancel_after))
        return self.progress[-1]


class Questions(DialogRecorder):
    """DialogRecorder that also answers ask_int / ask_choice / open_folder from queues and logs every question."""

    def __init__(self) -> None:
        super().__init__()
        self.ints: list[int | None] = []
        self.choices: list[int | None] = []
        self.asked: list[str] = []  # "ask_int: <label>", "ask_choice: <text>", ...
        self.proposed: list[str] = []  # the directory/default name each file picker was given

    def install(self, monkeypatch) -> "Questions":
        from explorer.qt import dialogs

        super().install(monkeypatch)

        def answer(kind, queue, text, directory=None):
            self.asked.append(f"{kind}: {text}")
            if directory is not None:
                self.proposed.append(directory)
            return queue.pop(0) if queue else None

        monkeypatch.setattr(dialogs, "ask_int", lambda _p, _t, label, *a: answer("ask_int", self.ints, label))
        monkeypatch.setattr(dialogs, "ask_choice", lambda _p, _t, text, _c: answer("ask_choice", self.choices, text))
        monkeypatch.setattr(dialogs, "open_file", lambda _p, t, d="", *a: answer("open_file", self.files, t, d))
        monkeypatch.setattr(dialogs, "save_file", lambda _p, t, d="", *a: answer("save_file", self.files, t, d))
        monkeypatch.setattr(dialogs, "open_folder", lambda _p, t, d="": answer("open_folder", self.files, t, d))
        return self


class FakeProgress:
    """Stands in for dialogs.Progress: records what is shown; "presses" Cancel after n updates."""

    def __init__(self, title: str, text: str, maximum: int, cancel_after: int | None) -> None:
        self.title, self.text, self.maximum = title, text, maximum
        self.values: list[int] = []
        self.texts: list[str] = [text]
        self.updates = 0  # set_value and set_text calls
        self.cancel_after = cancel_after
        self.closed = False

    def set_value(self, value: int) -> None:
        self.values.append(value)
        self.updates += 1

    def set_maximum(self, maximum: int) -> None:
        self.maximum = maximum

    def set_text(self, text: str) -> None:
        self.texts.append(text)
        self.updates += 1

    def cancelled(self) -> bool:
        return self.cancel_after is not None and self.updates >= self.cancel_after

    def close(self) -> None:
        self.closed = True


def make_window(qtbot, tmp_path, checkpoint, compute_mode: str = "sync"):
    """A shown MainWindow with its own settings file, on ``checkpoint``."""
    from explorer.qt.main_window import MainWindow
    from explorer.qt.session import Session

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(session=Session(compute_mode=compute_mode), settings=settings)
    if qtbot is not None:
        qtbot.addWidget(window)
    window.set_checkpoint(checkpoint)
    window.resize(1400, 900)
    window.show()
    if qtbot is not None:
        qtbot.waitExposed(window)
    return window


def fake_clock(monkeypatch, checkpoint, ms_per_token: float):
    """Make the session's timings exact: its clock moves only while ``checkpoint``'s model traces,
    by ``ms_per_token`` per token. Tests that depend on "slow" or "fast" then never depend on the
    machine's speed or load."""
    import threading
    import types

    import explorer.qt.scheduling.jobs
    import explorer.qt.scheduling.scheduler

    now, lock = [0.0], threading.Lock()
    clock = types.SimpleNamespace(perf_counter=lambda: now[0])
    monkeypatch.setattr(explorer.qt.scheduling.scheduler, "time", clock)
    monkeypatch.setattr(explorer.qt.scheduling.jobs, "time", clock)
    trace = checkpoint.model.trace

    def timed_trace(ids, **kwargs):
        n = min(len(ids), checkpoint.config.context_length)  # trace() runs the last context_length ids
        with lock:
            now[0] += n * ms_per_token / 1e3
        return trace(ids, **kwargs)

    monkeypatch.setattr(checkpoint.model, "trace", timed_trace)
    return now


def click_cell(qtbot, heatmap, row: int, col: int) -> None:
    """A real mouse click on the centre of a heatmap cell."""
    scene = heatmap.plot.getViewBox().mapViewToScene(QPointF(col + 0.5, row + 0.5))
    pos = heatmap.graphics.mapFromScene(scene)
    qtbot.mouseClick(heatmap.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def pixel_at_cell(heatmap, row: int, col: int):
    """The colour drawn at the centre of a cell, read from a grab of the widget."""
    scene = heatmap.plot.getViewBox().mapViewToScene(QPointF(col + 0.5, row + 0.5))
    pos = heatmap.graphics.mapFromScene(scene)
    image = heatmap.graphics.grab().toImage()
    return image.pixelColor(pos.x(), pos.y())


def lut_colour(heatmap, fraction: float):
    """The colour map's colour at ``fraction`` of the level range (0 = bottom, 1 = top)."""
    cmap = heatmap.bar.colorMap() if heatmap.bar is not None else None
    return cmap.map(np.array([fraction]), mode="qcolor")[0]


def sync_session(checkpoint, text: str = ""):
    """A Session that traces at once (no worker thread), on ``checkpoint``, with ``text``."""
    from explorer.qt.session import Session

    s = Session(compute_mode="sync")
    s.set_checkpoint(checkpoint)
    s.set_text(text)
    return s


def shown(qtbot, panel, width: int = 1200, height: int = 900, exposed: bool = True):
    """``panel`` shown at ``width`` x ``height`` (owned by qtbot), waited for until exposed."""
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    if exposed:
        qtbot.waitExposed(panel)
    return panel
