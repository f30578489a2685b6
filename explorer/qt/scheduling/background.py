"""Long work (an export of gigabytes) on a worker thread, with a progress dialog and Cancel,
while the window keeps responding."""

from __future__ import annotations

import threading
from typing import Callable

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QWidget

from explorer.core.export import ExportCancelled
from explorer.qt import dialogs

STEPS = 1000  # resolution of the progress bar
POLL_MS = 50


def run_with_progress(parent: QWidget | None, title: str, text: str,
                      work: Callable[[Callable[[int, int], bool]], None]) -> bool:
    """Run ``work(progress)`` on a worker thread and return when it ends.

    A progress dialog (:func:`explorer.qt.dialogs.progress`) follows ``progress(done, total)``
    calls; its Cancel makes the next ``progress`` call return False, and ``work`` then raises
    :class:`explorer.core.export.ExportCancelled`. The event loop runs meanwhile (the dialog is
    window-modal), so the window repaints and stays responsive.

    Returns
    -------
    bool
        True when the work finished, False when it was cancelled.

    Raises
    ------
    Exception
        Whatever ``work`` raised, other than ExportCancelled (re-raised on the GUI thread).
    """
    state = {"done": 0, "total": 1, "error": None}
    cancel = threading.Event()

    def report(done: int, total: int) -> bool:
        state["done"], state["total"] = done, max(total, 1)
        return not cancel.is_set()

    def target() -> None:
        try:
            work(report)
        except BaseException as exc:  # handed to the GUI thread
            state["error"] = exc

    box = dialogs.progress(parent, title, text, STEPS)
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(POLL_MS)
    thread = threading.Thread(target=target, name="export", daemon=True)

    def poll() -> None:
        box.set_value(min(STEPS, STEPS * state["done"] // state["total"]))
        if box.cancelled():
            cancel.set()
        if not thread.is_alive():
            loop.quit()

    timer.timeout.connect(poll)
    thread.start()
    timer.start()
    if thread.is_alive():
        loop.exec()
    timer.stop()
    thread.join()
    box.close()
    error = state["error"]
    if isinstance(error, ExportCancelled):
        return False
    if error is not None:
        raise error
    return True
