"""The scheduling calls a :class:`~explorer.qt.session.Session` hands to its
:class:`~explorer.qt.scheduling.scheduler.Scheduler`, in one place: where traces and jobs run, how
long they should take, and stopping them. The session owns the state; these only pass through."""

from __future__ import annotations

from PySide6.QtCore import QObject


class SchedulerCalls:
    """The scheduler's part of the session's API; the class that mixes it in has ``self.scheduler``."""

    compute_mode = property(lambda self: self.scheduler.compute_mode, doc='"auto", "sync" or "async".')
    worker = property(lambda self: self.scheduler.worker, doc="The worker thread (Worker).")
    busy = property(lambda self: self.scheduler.busy,
                    doc="True while the worker thread runs a trace or a job (until its result is handed over).")
    traces_off_gui_thread = property(lambda self: self.scheduler.traces_off_gui_thread,
                                     doc="True when edits are traced on the worker thread (async mode, or a slow "
                                         "model in auto mode).")

    def expected_ms(self, passes: int = 1) -> float:
        """How long ``passes`` forward passes over the whole current text should take, in ms (the scheduler's)."""
        return self.scheduler.expected_ms(passes)

    def is_slow(self, passes: int, limit_ms: float) -> bool:
        """True when ``passes`` forward passes are expected to take longer than ``limit_ms`` (never in sync mode)."""
        return self.scheduler.is_slow(passes, limit_ms)

    def job_superseded(self) -> bool:
        """For a long job's ``should_stop``: newer work waits behind it on the worker thread (the scheduler's)."""
        return self.scheduler.job_superseded()

    def cancel(self, requester: QObject, name: str = "") -> None:
        """Forget ``requester``'s pending job (its result, if it still arrives, is dropped)."""
        self.scheduler.cancel(requester, name)

    def shutdown(self, timeout_ms: int = 30000, wait: bool = True) -> None:
        """Drop queued work and wait for a running trace or job to finish (call before the app exits);
        with ``wait=False`` return at once (a closing window goes while a slow trace finishes), and
        call it again with ``wait=True`` before the process ends."""
        self.scheduler.shutdown(timeout_ms, wait)
