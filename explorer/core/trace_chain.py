"""The chain of traces the session computes, one from another (prefix reuse), and which rows two
of them share.

``GPT.trace(ids, ..., reuse=prev)`` computes only the rows where ``ids`` leave ``prev`` (the
unchanged prefix of a causal model: typing at the end computes one position, not T). ``prev``
must be the trace computed last for that model, which is not always the one shown: typing is
coalesced, so a trace can be computed and never shown. :class:`TraceChain` keeps that trace (from
any thread) and numbers every trace it makes; :meth:`TraceChain.rows_unchanged` says how many
leading rows two numbered traces share, so that a panel redraws only rows p.. of what it drew
before, even when traces it never drew came in between. No Qt here.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable

from model import Trace
from model.tracing.reuse import prepare_spare

HISTORY = 256  # traces remembered for rows_unchanged (a panel further behind redraws everything)
ALL_ROWS = 2 ** 62  # rows_unchanged of a trace and itself (callers take the min with T)


@dataclass(frozen=True)
class _Made:
    serial: int
    base: int | None  # the serial of the trace it reused rows of (None: computed whole)
    reused_rows: int


class TraceChain:
    """The most recently computed trace of one model, for the next trace to reuse (thread-safe).

    Attributes
    ----------
    owner : object or None
        What the kept trace belongs to (the session's checkpoint); a trace for another owner is
        computed whole and starts a new chain (the trace finished last is always the one kept).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: object | None = None
        self._latest: Trace | None = None
        self._latest_serial: int | None = None
        self._serial = 0
        self._made: deque[_Made] = deque(maxlen=HISTORY)

    def forget(self) -> None:
        """The next trace is computed whole (weights changed in place, which the model cannot see;
        a new model). Already numbered traces keep their numbers."""
        with self._lock:
            self.owner, self._latest, self._latest_serial = None, None, None

    def trace(self, owner: object, model, ids, **options) -> tuple[Trace, int]:
        """``model.trace(ids, **options, reuse=<the latest trace of owner>)`` and its serial number.

        Parameters
        ----------
        owner : object
            The checkpoint the model belongs to (compared by identity).
        model : GPT
        ids : sequence of int
            As ``GPT.trace`` takes them (cropped to the context there).
        **options
            ``positional_encoding``, ``causal``, ``interventions``: passed on (the model reuses
            rows only where they and the weights match the previous trace's).

        Returns
        -------
        (Trace, int)
            The trace (equal to one computed whole, its ``reused_rows`` taken from the previous
            one) and its serial, for :meth:`rows_unchanged`.

        Raises
        ------
        Whatever ``GPT.trace`` raises (the chain is then unchanged).
        """
        with self._lock:
            mine = self.owner is owner
            prev, base = (self._latest, self._latest_serial) if mine else (None, None)
        trace = model.trace(ids, **options, reuse=prev)
        with self._lock:
            self._serial += 1
            serial = self._serial
            reused = trace.reused_rows if prev is not None else 0
            self._made.append(_Made(serial, base if reused else None, reused))
            self.owner, self._latest, self._latest_serial = owner, trace, serial
        return trace, serial

    def prepare_spare(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Copy the latest trace's rows into a second row store ahead of the next edit
        (:func:`model.tracing.reuse.prepare_spare`), so that an edit of a row it shows (the first
        keystroke after opening a model on a long text) computes only its new rows at once.
        Returns the rows prepared (0 without a latest trace)."""
        with self._lock:
            latest = self._latest
        return prepare_spare(latest, should_stop) if latest is not None else 0

    def rows_unchanged(self, since: int | None, now: int | None) -> int:
        """How many leading rows trace ``now`` shares with trace ``since`` (both serials from
        :meth:`trace`): every tensor's rows 0..n-1 are identical in both. 0 when either is None,
        unknown or too old, or when the two are not one chain of reuse (a model change, an
        intervention, an edit before the window slid); :data:`ALL_ROWS` when they are the same."""
        if since is None or now is None:
            return 0
        with self._lock:
            made = {m.serial: m for m in self._made}
        shared: int | None = None
        serial = now
        while serial != since:
            m = made.get(serial)
            if m is None or m.base is None or serial < since:
                return 0
            shared = m.reused_rows if shared is None else min(shared, m.reused_rows)
            serial = m.base
        return ALL_ROWS if shared is None else shared
