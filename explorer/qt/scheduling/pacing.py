"""Panels that skip work while hidden (a closed dock, a tab behind another) and catch up when shown,
and that refresh one per event-loop turn while the model is slow."""

from __future__ import annotations

import time
from typing import Callable

import shiboken6
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer

LAYOUT_DEPTH = 8  # nested layouts a change may run up through (label, its box, the tab, the panel, ...)


def settle_layouts() -> None:
    """Lay out now, every level of it, what the drawing of this turn changed, so that the window
    paints it once.

    A label's new text asks its layout to be redone; that layout, once done, asks its parent's,
    and so on up, each in a later pass of the event queue, and a paint pass came between every
    two: the Why panel's result was painted in up to six passes (63 paints a keystroke, 32 with
    this), the formula panel's table in four. Called after a trace was shown, a selection changed,
    a job's result was drawn and each paced piece.
    """
    for _ in range(LAYOUT_DEPTH):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


class Pacer(QObject):
    """Runs queued drawing one piece per event-loop turn, so that the window repaints and input is
    handled between pieces instead of once after all of them.

    A slow model's result is many large views at once: a GPT-2-small-sized model's update took
    about 25 ms of panel refreshes and 35 ms of painting in one turn, a 66 ms stall of the GUI.
    Paced, the longest turn is one piece: a panel's refresh (and its paint), or a part of one
    that a panel queues with :meth:`call_later` (a map of three, a batch of token chips). All of
    it goes through this one queue: separate zero-interval timers all fire in the same turn
    (chips, a map and a panel made a 224 ms turn). The session's traces already run on a worker
    thread in that case, so the views follow a frame or two apart. Fast models (traced on the
    GUI thread) are not paced: every panel is drawn in the keystroke's own turn, except for the
    model's first update (:attr:`Session.pacing_new_model <explorer.qt.session.Session.pacing_new_model>`):
    a snapshot of another run adopted as the model redrew every shown panel in one turn.
    Get the session's pacer with :meth:`of`.
    """

    def __init__(self, session) -> None:
        super().__init__(session)
        self._session = session
        self._queue: list[tuple[QObject, Callable[[], None] | None]] = []  # (panel, None) or (owner, work)
        self._draw_ms = 0.0
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run_next)

    @classmethod
    def of(cls, session) -> Pacer:
        """The session's pacer (made on first use, a child of the session)."""
        pacer = session.findChild(Pacer)
        return pacer if pacer is not None else cls(session)

    @property
    def active(self) -> bool:
        """True while the session traces on the worker thread (the model is slow), and while a newly
        opened model reaches the panels."""
        return self._session.traces_off_gui_thread or self._session.pacing_new_model

    @property
    def pending(self) -> int:
        """Pieces of drawing waiting for their turn."""
        return len(self._queue)

    def add(self, panel: RefreshWhenShown) -> None:
        """Queue ``panel`` (once) for a refresh in a later turn of the event loop."""
        self._push(panel, None)

    def call_later(self, owner: QObject, work: Callable[[], None]) -> None:
        """Run ``work()`` in a later turn of the event loop, after what is queued (once: the same
        owner and work queued twice runs once); dropped when ``owner`` is deleted first."""
        self._push(owner, work)

    def _push(self, owner: QObject, work: Callable[[], None] | None) -> None:
        if not any(o is owner and w == work for o, w in self._queue):
            self._queue.append((owner, work))
        if not self._timer.isActive():
            self._timer.start()

    def _run_next(self) -> None:
        try:
            if self._queue:
                owner, work = self._queue.pop(0)
                t0 = time.perf_counter()
                # Deleted since it was queued (its window closed), or hidden: it catches up when shown.
                if shiboken6.isValid(owner):
                    if work is not None:
                        work()
                    elif owner.is_shown():
                        owner.catch_up()
                settle_layouts()
                self._draw_ms += (time.perf_counter() - t0) * 1e3
        finally:  # a piece that raised is reported by Qt; the pieces after it still run
            if self._queue:
                self._timer.start()
            else:
                self._session.set_paced_draw_ms(self._draw_ms)
                self._draw_ms = 0.0


class RefreshWhenShown:
    """Mixin for a panel QWidget with a ``refresh()`` method; list it before QWidget in the bases.

    Connect session signals to :meth:`schedule_refresh`: it refreshes at once when the panel can
    be seen, and otherwise marks it stale. A stale panel refreshes in ``showEvent`` and in
    :meth:`catch_up`, which the main window calls when the panel's dock becomes visible (a dock
    tabbed behind another is still ``isVisible()`` in Qt 6, but has an empty visible region).
    A panel given a session (:meth:`follow` or :meth:`pace_with`) refreshes through the session's
    :class:`Pacer` while the model is slow.
    """

    _stale = False
    _pacer: Pacer | None = None

    def is_shown(self) -> bool:
        """True when some of the panel is on screen."""
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def pace_with(self, session) -> None:
        """Refresh one panel per event-loop turn (through the session's Pacer) while it is slow."""
        self._pacer = Pacer.of(session)

    def follow(self, session, on_model_changed=None) -> None:
        """Refresh (when shown) on every new trace and selection, and on a new model through
        ``on_model_changed`` when given (it should end by scheduling a refresh itself)."""
        self.pace_with(session)
        session.sig_model_changed.connect(on_model_changed or self.schedule_refresh)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self.schedule_refresh)

    def schedule_refresh(self, *_args) -> None:
        """Refresh now if shown (in a later turn while the model is slow), else when next shown."""
        if not self.is_shown():
            self._stale = True
        elif self._pacer is not None and self._pacer.active:
            self._stale = True
            self._pacer.add(self)
        else:
            self._stale = False
            self.refresh()

    def catch_up(self) -> None:
        """Refresh if an update was skipped while hidden."""
        if self._stale:
            self._stale = False
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().showEvent(event)
        self.catch_up()
