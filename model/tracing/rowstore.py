"""Row stores: every tensor a trace records, in buffers that grow by rows and are shared.

A :class:`RowStore` holds, in one allocation, room for ``capacity`` rows (positions) of every
tensor of :class:`model.tracing.records.Trace` that its schema stores (:mod:`model.tracing.schema`,
in each row's kind: (capacity, d) rows, (n, capacity, d_head) per head, (n_heads, capacity, capacity)
attention maps, a (capacity, capacity) mask). A trace
made from it views rows 0..T-1 (and columns 0..T-1 of the maps), read-only. Every view references
the store's one buffer, so the buffer's reference count tells whether any array still views it
(as ``numpy.ndarray.resize`` checks before it moves memory): :mod:`model.tracing.reuse` writes only rows
that no live array can see. Attention rows are written in full, zeros (False) beyond the keys
run, so that a later append finds the cells above the diagonal as a causal map has them.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import torch

from model.tracing.records import LayerTrace, Trace
from model.tracing.schema import HEADS, MASK, SQUARE, Row, array_shape, part, schema_for

_ALIGN = 64


class RowStore:
    """Buffers for every recorded tensor of a trace, ``capacity`` rows each, in one allocation.

    Parameters
    ----------
    config : GPTConfig
    capacity : int
        Rows (positions) the buffers hold; attention maps are (n_heads, capacity, capacity).

    Attributes
    ----------
    schema : TraceSchema      the rows of ``config`` (:func:`model.tracing.schema.schema_for`).
    rows : dict of str to Row  the row of each buffer in ``bufs``, by key: a model-level row's
                              attribute (``"logits"``), a block's ``"N.attr"`` (``"3.q"``);
                              every row of ``schema`` but the lazy ones.
    ids : (n_valid,) int64    the token ids whose rows the store holds, valid for ``key``.
    key : Origin or None      the model, weights and options those rows were computed with.
    seen_rows : int           the most rows a trace made from it has viewed since it was last
                              free: rows from there on may be written while those traces live.
    busy : bool               a trace is being written into it.
    """

    def __init__(self, config, capacity: int) -> None:
        self.capacity = int(capacity)
        self.schema = schema_for(config)
        self.rows: dict[str, Row] = dict(self.schema.stored(config.n_layers))
        shapes = {}
        total = 0
        for name, row in self.rows.items():
            dtype = np.bool_ if row.kind == MASK else np.float32
            shape = array_shape(row.kind, row.per_row(config), self.capacity)
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            shapes[name] = (total, nbytes, dtype, shape)
            total += -(-nbytes // _ALIGN) * _ALIGN
        # np.empty: pages are only touched (and resident) once rows are written.
        self._base = np.empty(total, np.uint8)
        self.bufs = {name: self._base[off:off + n].view(dtype).reshape(shape)
                     for name, (off, n, dtype, shape) in shapes.items()}
        self._own_refs = sys.getrefcount(self._base)  # the store's own: _base and one per buffer
        self.ids = np.zeros(0, np.int64)
        self.key = None  # the Origin its rows were computed under
        self.seen_rows = 0
        self.busy = False

    @property
    def nbytes(self) -> int:
        """Bytes allocated (those of rows never written are not resident)."""
        return int(self._base.nbytes)

    def in_use(self) -> bool:
        """True while any array (a trace's, or one derived from it) views this store's memory."""
        return sys.getrefcount(self._base) > self._own_refs

    def valid_prefix(self, key, ids: np.ndarray) -> int:
        """How many leading rows hold exactly what ``ids`` would give under ``key``."""
        if self.key is None or not self.key.same_run(key) or not key.causal:
            return 0
        return common_prefix(self.ids, ids)

    def copy_rows(self, source: Trace, start: int, stop: int) -> None:
        """Copy rows start..stop of every tensor from ``source`` (a causal trace of >= stop rows):
        columns beyond ``stop`` of its attention rows are 0 and False above the diagonal."""
        if stop <= start:
            return
        for name, buf in self.bufs.items():
            kind, (owner, attr) = self.rows[name].kind, _owner(source, name)
            if self.rows[name].same_as(functools.partial(getattr, owner)) is not None:
                continue  # the alias's rows are the same (and the trace made of this store views them)
            part(kind, buf, start, stop, stop)[...] = part(kind, getattr(owner, attr), start, stop, stop)
            if kind in (SQUARE, MASK):
                part(kind, buf, start, stop)[..., stop:] = 0

    def write(self, name: str, start: int, t: torch.Tensor) -> None:
        """Write rows start.. of one tensor from the model's record (batch axis removed); the
        columns of attention rows beyond the keys run are 0 (False for the mask)."""
        kind = self.rows[name].kind
        if t.dtype != torch.bool and t.dtype != torch.float32:
            t = t.float()
        t = t.detach().cpu()
        stop = start + t.shape[-2 if kind in (HEADS, SQUARE) else 0]
        buf = self.bufs[name]
        dst = part(kind, buf, start, stop, t.shape[-1] if kind in (SQUARE, MASK) else None)
        if kind in (HEADS, SQUARE):
            # A few rows of every head touch a page per head, each maybe never touched before: a
            # torch copy releases the GIL while the pages fault in (a numpy copy this small held
            # it: the GUI thread stood still ~140 ms per call with a new GPT-2-sized store).
            torch.from_numpy(dst).copy_(t)
            if kind == SQUARE:
                torch.from_numpy(part(kind, buf, start, stop)[..., t.shape[-1]:]).zero_()
            return
        dst[...] = t.numpy()
        if kind == MASK:
            part(kind, buf, start, stop)[..., t.shape[-1]:] = False

    def view(self, name: str, T: int) -> np.ndarray:
        """A read-only view of rows (and, for attention maps, columns) 0..T-1."""
        v = part(self.rows[name].kind, self.bufs[name], 0, T, T)
        v = v.view()
        v.flags.writeable = False
        return v


class KVSlot:
    """One block's key/value cache over a :class:`RowStore`: the ``start`` earlier positions'
    keys (rotated, for RoPE) and values live in the store's k and v buffers."""

    WRITES = ("k", "v")  # the block's rows it writes into the store, during the run

    def __init__(self, store: RowStore, layer: int, start: int) -> None:
        self.start = start
        self._k, self._v = store.bufs[f"{layer}.k"], store.bufs[f"{layer}.v"]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new positions' k, v (1, n_kv_heads, T_new, d_head); return every position's,
        (1, n_kv_heads, start + T_new, d_head) each, as views of the store."""
        stop = self.start + k.shape[2]
        torch.from_numpy(self._k[:, self.start:stop]).copy_(k[0])  # torch: the GIL is free while pages fault in
        torch.from_numpy(self._v[:, self.start:stop]).copy_(v[0])
        return (torch.from_numpy(self._k[:, :stop]).unsqueeze(0),
                torch.from_numpy(self._v[:, :stop]).unsqueeze(0))


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common start of two id arrays."""
    n = min(a.shape[0], b.shape[0])
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def _owner(trace: Trace, name: str) -> tuple[object, str]:
    """(the record, the attribute) of a store key: a block's ``"N.attr"``, or a model-level attribute."""
    layer, _, attr = name.rpartition(".")
    return (trace.blocks[int(layer)] if layer else trace), attr


def trace_from_store(store: RowStore, ids: np.ndarray, dropped: int, key, p: int, aliased: dict,
                     scales: list[float], finite_rows: int = 0, softcaps: list[float] | None = None) -> Trace:
    """The trace of rows 0..T-1 of ``store`` (views); a key in ``aliased`` (from
    :func:`write_records`) is the view of the row it names (``scales``, ``softcaps``: each layer's
    attn_scale and attn_softcap)."""
    T = ids.shape[0]
    sch = store.schema

    def arrays(rows: tuple[Row, ...], prefix: str) -> dict:
        out: dict = {}
        for row in rows:
            if not row.lazy:
                alias = aliased.get(prefix + row.attr)
                out[row.attr] = out[alias] if alias is not None else store.view(prefix + row.attr, T)
        return out

    softcaps = softcaps or [0.0] * len(scales)
    layers = tuple(LayerTrace(arrays(sch.layer, f"{i}."), scale, sch.layer, cap)
                   for i, (scale, cap) in enumerate(zip(scales, softcaps)))
    token_ids = ids.copy()
    token_ids.setflags(write=False)
    return Trace(token_ids=token_ids, dropped=int(dropped), positional_encoding=key.positional_encoding,
                 causal=key.causal, blocks=layers, _arrays=arrays(sch.model, ""), schema=sch,
                 reused_rows=p, _reuse=key, _finite_rows=finite_rows)


def write_records(store: RowStore, rec: dict, p: int) -> dict:
    """Rows p.. of every stored tensor from the records of ``GPT._run`` (k and v are there
    already: :class:`KVSlot` wrote them). Returns {key: the attribute of its alias} of the keys not
    written because the model recorded their alias's very tensor (q before RoPE with the rotation off)."""
    aliased = {}
    for name, row in store.rows.items():
        layer, _, attr = name.rpartition(".")
        record = rec["blocks"][int(layer)] if layer else rec
        same = row.same_as(record.get)
        if same is not None:
            aliased[name] = same
        elif not (layer and attr in KVSlot.WRITES):
            store.write(name, p, record[attr][0])
    return aliased
