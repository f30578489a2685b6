"""What a keystroke costs the screen: paints counted per widget, the time to the last of them, and
the longest turn of the event loop meanwhile.

:class:`PaintCounter` is an event filter on the application that counts every ``QEvent.Paint``
by the widget that gets it (named by its dock and its place in the panel,
:func:`widget_path`) and notes when the last one came. :func:`until_quiet` runs the event loop
until a key press has had all its effects: no trace or job on the worker thread, nothing queued
for paced drawing, no chip left to fill, and three turns in a row that found nothing to do. Paint
counts do not depend on the machine's load; times do.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import shiboken6
from PySide6.QtCore import QAbstractEventDispatcher, QEvent, QEventLoop, QObject
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QDockWidget, QMainWindow, QWidget

#: Containers that only hold a panel (its dock's scroll area): left out of widget paths.
_WRAPPERS = {"_Fitted", "QScrollArea"}
_IDLE_TURNS = 3  # turns in a row with nothing to do: the key press has had all its effects


def _label(w: QWidget) -> str:
    """A widget's class, with its object name or, among siblings of its class, its index."""
    name, parent = w.objectName(), w.parentWidget()
    if name == "qt_scrollarea_viewport" or (isinstance(parent, QAbstractScrollArea) and parent.viewport() is w):
        return "viewport"
    cls = type(w).__name__
    if name and not name.startswith("qt_"):
        return f"{cls}#{name}"
    if parent is None:
        return cls
    same = [c for c in parent.children() if type(c) is type(w)]
    return f"{cls}[{same.index(w)}]" if len(same) > 1 else cls


def widget_path(w: QWidget) -> str:
    """``"dock: Panel > Child > ..."``: the dock a widget is in (its panel's name) and the widgets
    from the panel down to it; ``"window: ..."`` for the main window's own (status bar, menus)."""
    names: list[str] = []
    where = "window"
    while w is not None:
        if isinstance(w, QDockWidget):
            where = w.objectName().removeprefix("dock-")
            break
        if isinstance(w, QMainWindow):
            names.append(type(w).__name__)
            break
        if type(w).__name__ not in _WRAPPERS:
            names.append(_label(w))
        w = w.parentWidget()
    if where != "window":  # the dock's own scroll area viewport leads every panel's path
        while names and names[-1] == "viewport":
            names.pop()
    return f"{where}: " + (" > ".join(reversed(names)) or "(the panel's holder)")


#: Lines the sections print under the table (the widgets that paint most, per keystroke).
NOTES: list[str] = []


class PaintCounter(QObject):
    """Counts paint events per widget while :attr:`on` (by the widget's address: its name,
    :func:`widget_path`, is made only for a report, :meth:`name`).

    :attr:`last` is the ``time.perf_counter()`` of the latest paint; :attr:`frame_last` and
    :attr:`frame_total` are those of the keystroke's own frame: every paint until the new trace
    is shown (from the GUI thread or the worker's) and then until the worker hands over anything
    else (a panel's job, drawn when it arrives).
    """

    def __init__(self, app: QApplication, session) -> None:
        super().__init__()
        self.counts: Counter[int] = Counter()
        self.on = False
        self.last = self.frame_last = 0.0
        self.total = self.frame_total = 0
        self._widgets: dict[int, QWidget] = {}
        self._worker = session.worker
        self._traced: int | None = None  # worker deliveries when the new trace was shown
        session.sig_trace_changed.connect(self._on_session_trace_changed)
        app.installEventFilter(self)

    def _on_session_trace_changed(self) -> None:
        if self.on and self._traced is None:
            self._traced = self._worker.delivered

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if self.on and event.type() == QEvent.Type.Paint:
            key = shiboken6.getCppPointer(obj)[0]
            self._widgets.setdefault(key, obj)
            self.counts[key] += 1
            self.total += 1
            self.last = time.perf_counter()
            if self._traced is None or self._worker.delivered == self._traced:
                self.frame_total += 1
                self.frame_last = self.last
        return False

    def name(self, key: int) -> str:
        """The :func:`widget_path` of a counted widget."""
        w = self._widgets.get(key)
        return widget_path(w) if w is not None and shiboken6.isValid(w) else "(deleted)"

    def start(self) -> None:
        """Count from now on, from zero."""
        self.counts.clear()
        self.total = self.frame_total = 0
        self.last = self.frame_last = 0.0
        self._traced = None
        self.on = True

    def stop(self) -> None:
        self.on = False


def pending(window) -> bool:
    """True while a key press still has effects to come: a trace or job on the worker thread,
    paced drawing, or token chips left to fill."""
    from explorer.qt.scheduling.pacing import Pacer

    session = window.session
    return bool(session.busy or Pacer.of(session).pending or window.panels["tokens"].chips_pending)


def until_quiet(window, timeout_s: float = 120.0) -> list[float]:
    """Run the event loop until nothing is left to do (see the module docstring). Returns the ms
    of each turn that did something (waiting for the worker thread is not a turn)."""
    dispatcher = QAbstractEventDispatcher.instance()
    flags = QEventLoop.ProcessEventsFlag.AllEvents
    turns: list[float] = []
    idle, end = 0, time.perf_counter() + timeout_s
    while idle < _IDLE_TURNS:
        if time.perf_counter() > end:
            raise TimeoutError("the window did not become quiet")
        t = time.perf_counter()
        did = dispatcher.processEvents(flags)
        if did:
            turns.append((time.perf_counter() - t) * 1e3)
        if pending(window):
            idle = 0
            if not did:
                time.sleep(0.0002)  # the worker computes: waiting is not a turn of the GUI thread
        else:
            idle = 0 if did else idle + 1
    return turns


def settle_for(window, seconds: float) -> None:
    """Run the event loop for ``seconds`` and then until quiet (timers that wait, such as a panel
    that loads once it has stayed shown, have fired)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        QApplication.processEvents()
        time.sleep(0.002)
    until_quiet(window)


@dataclass
class Keystrokes:
    """Per key press (ms, paints): to the last paint it caused (``total_ms``), to the last paint of
    its own frame, its trace shown and before any job's result was drawn (``frame_ms``), the longest
    turn of the event loop (the key press's own included), the GUI thread's CPU time until all was
    done (``gui_cpu_ms``: what the key press cost it, which other processes on a busy machine do
    not lengthen), and the paints per widget, summed."""

    total_ms: list[float] = field(default_factory=list)
    frame_ms: list[float] = field(default_factory=list)
    longest_turn_ms: list[float] = field(default_factory=list)
    gui_cpu_ms: list[float] = field(default_factory=list)
    paints: list[int] = field(default_factory=list)
    frame_paints: list[int] = field(default_factory=list)
    by_widget: Counter = field(default_factory=Counter)
    counter: PaintCounter | None = None

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` widgets that painted most, with their paints per key press."""
        keys = max(len(self.paints), 1)
        return [(self.counter.name(k), count / keys) for k, count in self.by_widget.most_common(n)]


_COUNTERS: dict[int, PaintCounter] = {}


def counter_for(window) -> PaintCounter:
    """The window's paint counter (made on first use)."""
    if id(window) not in _COUNTERS:
        _COUNTERS[id(window)] = PaintCounter(QApplication.instance(), window.session)
    return _COUNTERS[id(window)]


def alternate(edits: int) -> list:
    """``edits`` keys: a letter added to the last word, then Backspace, and so on (T stays)."""
    from PySide6.QtCore import Qt

    return [Qt.Key.Key_S if i % 2 == 0 else Qt.Key.Key_Backspace for i in range(edits)]


def press_keys(window, keys, after_each: Callable[[], None] | None = None, timeout_s: float = 120.0) -> Keystrokes:
    """Press ``keys`` (Qt.Key values) in the text editor one at a time, each followed by
    :func:`until_quiet` (and ``after_each()``), and measure each (see :class:`Keystrokes`)."""
    from PySide6.QtTest import QTest

    editor = window.panels["tokens"].editor
    counter = counter_for(window)
    out = Keystrokes(counter=counter)
    for key in keys:
        counter.start()
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        QTest.keyClick(editor, key)
        t1 = time.perf_counter()
        turns = until_quiet(window, timeout_s)
        out.gui_cpu_ms.append((time.thread_time() - cpu0) * 1e3)
        counter.stop()
        out.total_ms.append(((counter.last or t1) - t0) * 1e3)
        out.frame_ms.append(((counter.frame_last or t1) - t0) * 1e3)
        out.longest_turn_ms.append(max([(t1 - t0) * 1e3, *turns]))
        out.paints.append(counter.total)
        out.frame_paints.append(counter.frame_total)
        out.by_widget.update(counter.counts)
        if after_each is not None:
            after_each()
    return out


def note_top(title: str, strokes: Keystrokes, n: int = 5) -> None:
    """Add the ``n`` widgets that painted most per key press to :data:`NOTES`."""
    NOTES.append(f"{title}: {sum(strokes.paints) / max(len(strokes.paints), 1):.1f} paints per keystroke; most:")
    NOTES.extend(f"  {per:5.2f}  {name}" for name, per in strokes.top(n))
