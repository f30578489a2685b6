"""Stopping long work between its steps when newer work waits for the same thread.

:func:`stop_if` is for work that is handed its ``should_stop`` (the Why panel's leave-one-out);
:func:`stop_when` sets one for whatever the calling thread runs inside it, which
:func:`check` asks: the transformer asks between two blocks, so that a trace of a slow model can
give way to the trace of a newer text (:class:`explorer.qt.scheduling.scheduler.Scheduler`).
No Qt here.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator


class Interrupted(RuntimeError):
    """Long work stopped between two of its steps because its ``should_stop()`` said so (a newer
    request is waiting for the same thread); it has no result."""


def stop_if(should_stop: Callable[[], bool] | None) -> None:
    """Raise :class:`Interrupted` when ``should_stop`` is given and returns True."""
    if should_stop is not None and should_stop():
        raise Interrupted("stopped: a newer request is waiting")


_local = threading.local()


@contextmanager
def stop_when(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Within the block, :func:`check` on this thread raises :class:`Interrupted` once
    ``should_stop()`` returns True (nested blocks: the innermost one's)."""
    before = getattr(_local, "should_stop", None)
    _local.should_stop = should_stop
    try:
        yield
    finally:
        _local.should_stop = before


def check() -> None:
    """Raise :class:`Interrupted` when this thread runs inside :func:`stop_when` and its
    ``should_stop()`` returns True; otherwise nothing (a thread-local read)."""
    stop_if(getattr(_local, "should_stop", None))
