"""Long work on a worker thread with a progress dialog and Cancel, while the window keeps responding.

One helper for every such job (an export of gigabytes, a model fetched from the Hugging Face Hub):
:func:`run_with_progress` starts the work on a thread, shows a window-modal progress dialog
(:func:`explorer.qt.dialogs.progress`) and polls the work's own account of how far it is every
:data:`POLL_MS`, running the event loop meanwhile, so that the window repaints. Cancel sets the
work's ``cancel`` event; the work stops at its next step, and the helper either waits for that (an
export, which must leave no file behind) or returns at once (a download, which stops by itself).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QWidget

from explorer.qt import dialogs

STEPS = 1000  # resolution of the progress bar
POLL_MS = 50

#: ``status() -> (text or None, fraction done in [0, 1] or None)``: what the dialog shows, asked on the
#: GUI thread at every poll (None text: the first text stays; None fraction: a busy bar, how far unknown).
Status = Callable[[], "tuple[str | None, float | None]"]


@dataclass(frozen=True)
class Outcome:
    """How background work ended: ``value`` what it returned; ``cancelled`` True after Cancel (then
    ``value`` is None)."""

    value: Any = None
    cancelled: bool = False


def run_with_progress(parent: QWidget | None, title: str, text: str, work: Callable[[threading.Event], Any],
                      status: Status, *, wait_when_cancelled: bool = True,
                      cancelled_by: tuple[type[BaseException], ...] = ()) -> Outcome:
    """Run ``work(cancel)`` on a worker thread and return when it ends (or is cancelled).

    Parameters
    ----------
    parent, title, text
        The progress dialog's parent, title and first text.
    work : callable (threading.Event) -> value
        Runs on the worker thread; it should stop soon after the event is set (Cancel).
    status : callable () -> (text or None, fraction or None)
        How far the work is (see :data:`Status`); read by the GUI thread, so it must only read.
    wait_when_cancelled : bool
        True waits, after Cancel, for the work to stop (it may raise one of ``cancelled_by`` or
        return); False returns at once and leaves the thread to end by itself.
    cancelled_by : tuple of exception types
        What the work raises when it stops for Cancel: an outcome, not an error.

    Returns
    -------
    Outcome

    Raises
    ------
    Exception
        Whatever ``work`` raised besides ``cancelled_by`` (re-raised on the GUI thread).
    """
    result: dict[str, Any] = {}
    cancel = threading.Event()

    def target() -> None:
        try:
            result["value"] = work(cancel)
        except BaseException as exc:  # handed to the GUI thread
            result["error"] = exc

    box = dialogs.progress(parent, title, text, STEPS if status()[1] is not None else 0)  # 0: a busy bar
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(POLL_MS)
    thread = threading.Thread(target=target, name=title, daemon=True)

    def poll() -> None:
        shown, fraction = status()
        if shown is not None:
            box.set_text(shown)
        if fraction is not None:
            box.set_maximum(STEPS)
            box.set_value(min(STEPS, round(STEPS * fraction)))
        if box.cancelled():
            cancel.set()
            if not wait_when_cancelled:
                loop.quit()
        if not thread.is_alive():
            loop.quit()

    timer.timeout.connect(poll)
    thread.start()
    timer.start()
    if thread.is_alive():
        loop.exec()
    timer.stop()
    box.close()
    if cancel.is_set() and not wait_when_cancelled:
        return Outcome(cancelled=True)
    thread.join()
    error = result.get("error")
    if isinstance(error, cancelled_by):
        return Outcome(cancelled=True)
    if error is not None:
        raise error
    return Outcome(result.get("value"))
