"""The session's worker thread: model computations off the GUI thread, newest request per key.

:class:`Worker` runs one piece of work at a time on one thread. A request replaces a queued
request with the same key (typing coalesces to the newest text; a panel's new request replaces
its own older one), the lowest priority number goes first (the trace of the newest text before
any panel's job), and each result comes back to the GUI thread through a queued signal, where
its ``deliver`` callback decides whether it is still wanted. :class:`JobResult` is what a panel's
job (:meth:`explorer.qt.session.Session.submit`) hands back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

import shiboken6
from PySide6.QtCore import QObject, QThreadPool, Signal

from explorer.qt.scheduling.pacing import settle_layouts

#: A panel's job: fn(checkpoint, inputs) -> value, run on the worker thread or at once.
JobFn = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class JobResult:
    """A finished job, handed to the panel that asked for it, on the GUI thread.

    Attributes
    ----------
    value : Any            what the job's function returned (None when it raised).
    error : str            "" or the exception as ``"ValueError: ..."`` (also shown in the status bar).
    ms : float             how long the function ran, in milliseconds.
    inputs : Any           the inputs it was given (the request this result answers).
    """

    value: Any
    error: str
    ms: float
    inputs: Any


def timed(work: Callable[[], Any]) -> tuple[Any, Exception | None, float]:
    """Run ``work()``: (its value or None, the exception it raised or None, milliseconds)."""
    t0 = time.perf_counter()
    try:
        return work(), None, (time.perf_counter() - t0) * 1e3
    except Exception as exc:  # reported where the result is delivered; the app keeps running
        return None, exc, (time.perf_counter() - t0) * 1e3


class Requests:
    """The newest request of each requester: numbers requests per (requester, name) and says
    whether a result is still wanted (its request is the newest and its requester still exists)."""

    def __init__(self) -> None:
        self._newest: dict[tuple[int, str], int] = {}

    def new(self, requester: QObject, name: str) -> tuple[tuple[int, str], int]:
        """Register a request: its key (for the worker's coalescing) and its number."""
        key = (id(requester), name)
        self._newest[key] = self._newest.get(key, 0) + 1
        return key, self._newest[key]

    def cancel(self, requester: QObject, name: str) -> None:
        """No result of the requester's earlier requests is wanted any more."""
        key = (id(requester), name)
        if key in self._newest:
            self._newest[key] += 1

    def wanted(self, key: tuple[int, str], number: int, requester: QObject) -> bool:
        """True while request ``number`` is its requester's newest and the requester exists."""
        return self._newest.get(key) == number and shiboken6.isValid(requester)


@dataclass(frozen=True)
class _Item:
    key: Hashable
    work: Callable[[], Any]
    deliver: Callable[[Any, Exception | None, float], None]
    priority: int


class _Relay(QObject):
    """Carries a finished item from the worker thread to the GUI thread (queued connection)."""

    sig_done = Signal(object)
    """(item, value, exception or None, ms) of one finished piece of work."""


class Worker(QObject):
    """One worker thread that runs queued work one piece at a time, newest per key, by priority."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._relay = _Relay(self)
        self._relay.sig_done.connect(self._on_done)
        self._queue: dict[Hashable, _Item] = {}
        self._running: _Item | None = None
        self._superseded = False  # newer work waits that the running work delays (read on its thread)
        self._closed = False
        #: Results handed over to the GUI thread so far (a benchmark tells a keystroke's own frame
        #: from the drawing of work that came back from this thread after it).
        self.delivered = 0

    @property
    def busy(self) -> bool:
        """True from the start of a piece of work until its result was delivered."""
        return self._running is not None

    @property
    def queued(self) -> int:
        """Pieces of work waiting for the thread."""
        return len(self._queue)

    @property
    def superseded(self) -> bool:
        """True while the running work is no longer what should run first: newer work with its
        key, or work of a higher priority (a trace before a panel's job), was queued after it
        started, or the worker is shutting down. Long work (the Why panel's leave-one-out) asks
        this between its steps, from the worker thread, and stops early; a plain bool read, so
        it needs no lock."""
        return self._superseded

    def active_threads(self) -> int:
        """Threads running work right now (0 or 1)."""
        return self._pool.activeThreadCount()

    def submit(self, key: Hashable, work: Callable[[], Any],
               deliver: Callable[[Any, Exception | None, float], None], priority: int = 1) -> None:
        """Queue ``work`` (replacing queued work with the same key); start it when the thread is free.

        ``deliver(value, exception, ms)`` runs on the GUI thread when it has finished (not after
        :meth:`shutdown`). Work that is already running is never interrupted: the caller drops
        its result when a newer one is wanted.
        """
        if self._closed:
            return
        self._queue.pop(key, None)  # re-inserted at the end: the oldest waiting work goes first
        running = self._running
        if running is not None and (running.key == key or priority < running.priority):
            self._superseded = True
        self._queue[key] = _Item(key, work, deliver, priority)
        if self._running is None:
            self._start_next()

    def drop_queued(self) -> None:
        """Forget every piece of work that has not started."""
        self._queue.clear()

    def shutdown(self, timeout_ms: int = 30000, wait: bool = True) -> None:
        """Drop queued work and (with ``wait``) wait for running work to finish; nothing is
        delivered afterwards."""
        self._closed = True
        self._superseded = True
        self._queue.clear()
        if wait:
            self._pool.waitForDone(timeout_ms)

    def _start_next(self) -> None:
        if not self._queue or self._closed:
            return
        key = min(self._queue, key=lambda k: self._queue[k].priority)  # ties: the oldest
        item = self._running = self._queue.pop(key)
        self._superseded = False
        relay = self._relay
        self._pool.start(lambda: relay.sig_done.emit((item, *timed(item.work))))

    def _on_done(self, payload) -> None:
        item, value, exc, ms = payload
        del payload
        self._running = None
        self.delivered += 1
        try:
            if not self._closed:
                item.deliver(value, exc, ms)
                settle_layouts()  # what the result's drawing changed, laid out before it is painted
        finally:
            # The next piece starts once this result is handed over: a trace then replaces the
            # one shown before the next trace starts, so that the rows of two traces, not three,
            # are alive while someone types (model.tracing.reuse writes rows no live trace views; the
            # GPT-2-small-sized model's traces of 1,024 tokens are 1.2 GB each).
            del value
            if self._running is None:  # unless ``deliver`` submitted work that started at once
                self._start_next()
