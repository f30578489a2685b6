"""Ctrl+C while a command starts: held back until the imports are done, then raised where it is safe.

Importing torch takes about a second and a half; a SIGINT in it raised KeyboardInterrupt inside
torch's own start-up (the process aborted: status -6, "terminate called ... KeyboardInterrupt") or
in the middle of an import (a long traceback, status -2). :func:`held_interrupts` keeps the signal
until its block ends and then raises the KeyboardInterrupt there, in plain Python, where the
command catches it (``python -m model.train``: "interrupted before training started", status 130).
This module imports nothing heavy, so it can be used before torch is.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

#: What ``python -m model.train`` says when Ctrl+C comes before its first step.
STARTING_INTERRUPTED = "interrupted before training started; nothing written"
EXIT_INTERRUPTED = 130  # the shell's status for a command ended by Ctrl+C (128 + SIGINT)


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Hold SIGINT back while the block runs; raise KeyboardInterrupt after it if one came.

    Only in the main thread (the only one Python delivers signals to); elsewhere, and where
    SIGINT is ignored, nothing changes.

    Raises
    ------
    KeyboardInterrupt
        After the block, when SIGINT arrived during it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN or before is None:  # ignored (started in the background): leave it so
        yield
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if came:
        raise KeyboardInterrupt

