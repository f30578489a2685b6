"""Prefix reuse: trace only the positions an edit changed, into buffers shared between traces.

In a causal model nothing at positions 0..p-1 depends on the tokens from p on. When the ids of a
new trace keep the first p ids of an earlier one (typing at the end, editing the last word,
deleting at the end), with the same weights and options, rows 0..p-1 of every recorded tensor are
the earlier trace's, and only positions p.. are run, against the earlier keys and values (a
key/value cache, as in incremental decoding; RoPE's keys stay valid because positions do not
move). Without the causal mask every row sees every key, so a bidirectional trace is computed
whole, as is one whose window slid (T > context_length shifts every position).

Memory. A trace made with ``reuse`` views rows 0..T-1 of a :class:`model.tracing.rowstore.RowStore`:
one allocation that holds every recorded tensor with room for ``capacity`` rows (at least 1,024
or context_length, doubled beyond). Rows are written once and never again while any array that
views them is alive (every view references the store's buffer, so its reference count says so),
which keeps every trace immutable for its readers:

* typing at the end appends rows p.. to the store the previous trace views (rows it cannot see);
* an edit of rows the previous trace shows goes to a store that no array views any more (the
  trace before it, once dropped), copying only the rows where that store differs, so that two
  stores alternate while someone types;
* otherwise a new store is allocated (and the rows before p copied once).

A lineage of traces made one from another shares a small pool of stores (:class:`Lineage`); the
stores nobody views are dropped beyond one spare. attn_scores are not stored: a trace computes
them from q and k on first use (:attr:`model.tracing.records.LayerTrace.attn_scores`).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch

from model.tracing.records import LayerTrace, Trace
from model.tracing.rowstore import KVSlot, RowStore, common_prefix, trace_from_store, write_records
from model.tracing.schema import first_rows

MIN_CAPACITY = 1024  # rows of a new store (at most context_length): most models never outgrow it
MAX_SPARE = 1  # stores kept for reuse that no array views (each as big as a trace)
MAX_POOL = 8  # stores a lineage remembers (those still viewed are alive anyway)


@dataclass(frozen=True)
class Origin:
    """What a later trace needs to reuse this trace's rows: the model (weakly), its weights'
    version, the options and interventions, and where the rows live (the lineage and store; None
    for a trace made in one piece without ``reuse``)."""

    model: weakref.ref
    version: int
    positional_encoding: bool
    causal: bool
    interventions: object = None
    lineage: Lineage | None = None
    store: RowStore | None = None

    def same_run(self, other: Origin) -> bool:
        """True when both traces ran the same model with the same weights and options, and
        neither with interventions."""
        return (self.model() is other.model() and self.version == other.version
                and self.positional_encoding == other.positional_encoding and self.causal == other.causal
                and self.interventions is None and other.interventions is None)


_PARAMETERS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()


def weights_version(model: torch.nn.Module) -> int:
    """A number that grows whenever a parameter is changed in place through autograd-visible ops
    (``torch.Tensor._version``: ``copy_``, ``load_state_dict``, optimiser steps); writes through
    ``.data`` are not seen."""
    params = _PARAMETERS.get(model)
    if params is None:  # walking the module tree costs more than the sum
        params = _PARAMETERS[model] = tuple(model.parameters())
    return sum(p._version for p in params)


def origin(model, positional_encoding: bool, causal: bool, interventions=None, lineage=None) -> Origin:
    """The :class:`Origin` of a trace of ``model`` made now with these options."""
    return Origin(weakref.ref(model), weights_version(model), bool(positional_encoding), bool(causal),
                  interventions, lineage)


class Lineage:
    """The stores that a chain of traces made one from another shares (thread-safe): the ones
    traces view, and at most :data:`MAX_SPARE` that nothing views (kept to be written again)."""

    def __init__(self, model) -> None:
        self.model = weakref.ref(model)
        self.stores: list[RowStore] = []
        self._lock = threading.Lock()

    def claim(self, prev_store: RowStore | None, key: Origin, ids: np.ndarray, p: int) -> tuple[RowStore, int]:
        """A store to write rows p..T-1 of ``ids`` into, and how many leading rows it already
        holds (those from there to p are then copied from the previous trace); marked busy."""
        T = ids.shape[0]
        with self._lock:
            if (prev_store is not None and not prev_store.busy and p >= prev_store.seen_rows
                    and T <= prev_store.capacity and prev_store.valid_prefix(key, ids) >= p):
                store, held = prev_store, p  # an append: rows nobody has seen
            else:
                free = [s for s in self.stores if not s.busy and s.capacity >= T and not s.in_use()]
                if free:
                    store = max(free, key=lambda s: min(s.valid_prefix(key, ids), p))
                    held = min(store.valid_prefix(key, ids), p)
                    store.seen_rows = 0
                else:
                    store, held = self._new_store(key, T), 0
            store.busy = True
            self._prune(store)
        return store, held

    def claim_spare(self, viewed: RowStore, key: Origin, ids: np.ndarray) -> tuple[RowStore, int]:
        """A store other than ``viewed`` that no array views, to copy rows of ``ids`` into ahead of
        the next edit, and how many leading rows it already holds; marked busy."""
        T = ids.shape[0]
        with self._lock:
            free = [s for s in self.stores if s is not viewed and not s.busy and s.capacity >= T and not s.in_use()]
            store = max(free, key=lambda s: s.valid_prefix(key, ids)) if free else self._new_store(key, T)
            held = store.valid_prefix(key, ids)
            store.busy, store.seen_rows = True, 0
            self._prune(store)
        return store, held

    def _new_store(self, key: Origin, T: int) -> RowStore:
        """A new store for T rows (at least MIN_CAPACITY, at most context_length), in the pool (under the lock)."""
        cap = min(key.model().config.context_length, max(MIN_CAPACITY, 1 << (T - 1).bit_length()))
        store = RowStore(key.model().config, cap)
        self.stores.append(store)
        return store

    def release(self, store: RowStore, key: Origin, ids: np.ndarray, valid: int, seen: int) -> None:
        """The write is over: the store holds ``ids[:valid]`` and ``seen`` rows are viewed."""
        with self._lock:
            store.ids, store.key = ids[:valid].copy(), key
            store.seen_rows = max(store.seen_rows, seen)
            store.busy = False

    def _prune(self, keep: RowStore) -> None:
        spare = [s for s in self.stores if s is not keep and not s.busy and not s.in_use()]
        drop = {id(s) for s in spare[:-MAX_SPARE]} if len(spare) > MAX_SPARE else set()
        self.stores = [s for s in self.stores if id(s) not in drop][-MAX_POOL:]
        if keep not in self.stores:
            self.stores.append(keep)


def prepare_spare(trace: Trace, should_stop: Callable[[], bool] = lambda: False, step_rows: int = 64) -> int:
    """Copy the rows of ``trace`` into a second store of its lineage, one that no array views,
    so that the next trace that changes a row ``trace`` shows writes its new rows there at once.

    Without it, the first edit of such a row (the first keystroke after a model opened on a
    text, or after a paste) first copies every row before the edit into a new store: 2.9 s of a
    GPT-2-small-sized model's first keystroke at T = 520, against 50 ms for the next ones (two
    stores then alternate, see the module docstring). Call it where the time is free (the app's
    worker thread, after a trace that computed many rows).

    Parameters
    ----------
    trace : Trace
        A causal trace made with ``reuse`` (from a store); anything else is left alone.
    should_stop : callable () -> bool
        Asked between steps of ``step_rows`` rows: True stops the copy (newer work waits). The
        rows copied so far stay valid, and the next trace copies only the rest.
    step_rows : int
        Rows copied per step.

    Returns
    -------
    int
        The leading rows of ``trace`` that the spare store holds (0 when there is none).
    """
    o = trace._reuse
    if not isinstance(o, Origin) or o.lineage is None or o.store is None or not trace.causal:
        return 0
    ids = np.asarray(trace.token_ids, dtype=np.int64)
    T = ids.shape[0]
    store, valid = o.lineage.claim_spare(o.store, o, ids)
    try:
        while valid < T and not should_stop():
            stop = min(T, valid + step_rows)
            store.copy_rows(trace, valid, stop)
            valid = stop
    finally:
        o.lineage.release(store, o, ids, valid, 0)
    return valid


def _sliced(prev: Trace, T: int, dropped: int, key: Origin, finite_rows: int) -> Trace:
    """The first T rows of ``prev``, as views of its arrays (an edit that only deleted at the end)."""
    layers = tuple(LayerTrace(first_rows(lt, lt.recorded, T), lt.attn_scale, lt.recorded, lt.attn_softcap)
                   for lt in prev.blocks)
    return Trace(token_ids=prev.token_ids[:T], dropped=dropped, positional_encoding=prev.positional_encoding,
                 causal=prev.causal, blocks=layers, _arrays=first_rows(prev, prev.schema.model, T),
                 schema=prev.schema, reused_rows=T, _reuse=key, _finite_rows=finite_rows)


def trace_reusing(model, ids: np.ndarray, dropped: int, positional_encoding: bool, causal: bool,
                  prev: Trace) -> Trace:
    """``model.trace(ids, ...)`` computing only the positions where ``ids`` leave ``prev``.

    Parameters
    ----------
    model : GPT
    ids : (T,) int64      the ids to run (already cropped to the context and checked).
    dropped : int         how many leading ids were cropped away.
    positional_encoding : bool   whether position is used (False also for a model without any).
    causal : bool
    prev : Trace          an earlier trace (of any model or options: it is only reused when it fits).

    Returns
    -------
    Trace
        Its ``reused_rows`` leading rows are ``prev``'s; it equals a full trace up to float rounding.
    """
    if not isinstance(prev, Trace):
        raise TypeError(f"reuse must be a Trace, not {type(prev).__name__}")
    T = ids.shape[0]
    prev_origin = prev._reuse if isinstance(prev._reuse, Origin) else None
    fits = prev_origin is not None and prev_origin.lineage is not None and prev_origin.lineage.model() is model
    lineage = prev_origin.lineage if fits else Lineage(model)
    key = origin(model, positional_encoding, causal, lineage=lineage)
    same = prev_origin is not None and prev_origin.same_run(key)
    common = common_prefix(prev.token_ids, ids) if same else 0
    p = common if causal else 0  # without the mask every row sees the new tokens
    if same and not causal and common == T == prev.n_tokens:
        p = T  # the same ids: the same trace
    # Rows known to hold only finite numbers: prev's first p, when its nonfinite was computed and None.
    finite_rows = p if prev.__dict__.get("nonfinite", False) is None else 0
    if same and p == T:  # nothing new (deleting at the end): views of prev's first T rows
        return _sliced(prev, T, dropped, replace(key, store=prev_origin.store if fits else None), finite_rows)
    if T == 0:
        return replace(model.trace(ids, positional_encoding=positional_encoding, causal=causal), _reuse=key)
    store, held = lineage.claim(prev_origin.store if fits else None, key, ids, p)
    key = replace(key, store=store)
    valid = held
    try:
        store.copy_rows(prev, held, p)
        valid = p
        rec: dict = {}
        caches = [KVSlot(store, i, p) for i in range(model.config.n_layers)]
        new_ids = torch.from_numpy(ids[p:]).to(model.tok_emb.weight.device).unsqueeze(0)
        model._run(new_ids, positional_encoding, causal, rec, caches=caches)
        aliased = write_records(store, rec, p)
        del rec, caches
        trace = trace_from_store(store, ids, dropped, key, p, aliased, [b.attn.scale for b in model.blocks],
                                 finite_rows, [b.attn.softcap for b in model.blocks])
        valid = T
    finally:
        lineage.release(store, key, ids, valid, T if valid == T else 0)
    return trace
