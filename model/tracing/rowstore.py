"""Row stores: every tensor a trace records, in buffers that grow by rows and are shared.

A :class:`RowStore` holds, in one allocation, room for ``capacity`` rows (positions) of every
tensor of :class:`model.tracing.records.Trace`: (capacity, d) rows, (n_heads, capacity, d_head) per head,
(n_heads, capacity, capacity) attention weights and a (capacity, capacity) mask per layer. A trace
made from it views rows 0..T-1 (and columns 0..T-1 of the maps), read-only. Every view references
the store's one buffer, so the buffer's reference count tells whether any array still views it
(as ``numpy.ndarray.resize`` checks before it moves memory): :mod:`model.tracing.reuse` writes only rows
that no live array can see. Attention rows are written in full, zeros (False) beyond the keys
run, so that a later append finds the cells above the diagonal as a causal map has them.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from model.tracing.records import LayerTrace, Trace

ROWS, HEADS, SQUARE, MASK = "rows", "heads", "square", "mask"
LAYER_ROWS = ("ln1", "attn_out", "resid_mid", "ln2", "mlp_out", "resid_post")
_ALIGN = 64


def _layout(config) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, kind, per-row shape) of every stored tensor; names are Trace / LayerTrace fields,
    prefixed by the layer for a block's (``"3.q"``)."""
    d, dh = config.d_model, config.d_head
    out = [(name, ROWS, (d,)) for name in ("tok", "pos", "x", "ln_final")]
    out.append(("logits", ROWS, (config.vocab_size,)))
    heads = [("q", config.n_heads), ("k", config.n_kv_heads), ("v", config.n_kv_heads),
             ("head_out", config.n_heads)]
    if config.positional == "rope":
        heads += [("q_pre_rope", config.n_heads), ("k_pre_rope", config.n_kv_heads)]
    for i in range(config.n_layers):
        out += [(f"{i}.{name}", ROWS, (d,)) for name in LAYER_ROWS]
        out += [(f"{i}.{name}", HEADS, (n, dh)) for name, n in heads]
        out += [(f"{i}.attn_weights", SQUARE, (config.n_heads,)), (f"{i}.attn_mask", MASK, ())]
    return out


def _shape(kind: str, per_row: tuple[int, ...], cap: int) -> tuple[int, ...]:
    if kind == ROWS:
        return (cap, *per_row)  # (cap, d)
    if kind == HEADS:
        return (per_row[0], cap, per_row[1])  # (n, cap, d_head)
    if kind == SQUARE:
        return (per_row[0], cap, cap)  # (n_heads, cap, cap)
    return (cap, cap)


def _rows(kind: str, a, start: int, stop: int, cols: int | None = None):
    """The rows start..stop of ``a`` in its kind's layout (and columns :cols of the square ones)."""
    if kind == ROWS:
        return a[start:stop]
    if kind == HEADS:
        return a[:, start:stop]
    if kind == SQUARE:
        return a[:, start:stop, :cols]
    return a[start:stop, :cols]


class RowStore:
    """Buffers for every recorded tensor of a trace, ``capacity`` rows each, in one allocation.

    Parameters
    ----------
    config : GPTConfig
    capacity : int
        Rows (positions) the buffers hold; attention maps are (n_heads, capacity, capacity).

    Attributes
    ----------
    ids : (n_valid,) int64    the token ids whose rows the store holds, valid for ``key``.
    key : Origin or None      the model, weights and options those rows were computed with.
    seen_rows : int           the most rows a trace made from it has viewed since it was last
                              free: rows from there on may be written while those traces live.
    busy : bool               a trace is being written into it.
    """

    def __init__(self, config, capacity: int) -> None:
        self.capacity = int(capacity)
        self.kinds: dict[str, str] = {}
        shapes = {}
        total = 0
        for name, kind, per_row in _layout(config):
            dtype = np.bool_ if kind == MASK else np.float32
            shape = _shape(kind, per_row, self.capacity)
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            shapes[name] = (total, nbytes, dtype, shape)
            self.kinds[name] = kind
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
            kind = self.kinds[name]
            src = _source_array(source, name)
            if src is None:
                continue
            _rows(kind, buf, start, stop, stop)[...] = _rows(kind, src, start, stop, stop)
            if kind in (SQUARE, MASK):
                _rows(kind, buf, start, stop)[..., stop:] = 0

    def write(self, name: str, start: int, t: torch.Tensor) -> None:
        """Write rows start.. of one tensor from the model's record (batch axis removed); the
        columns of attention rows beyond the keys run are 0 (False for the mask)."""
        kind = self.kinds[name]
        if t.dtype != torch.bool and t.dtype != torch.float32:
            t = t.float()
        t = t.detach().cpu()
        stop = start + t.shape[-2 if kind in (HEADS, SQUARE) else 0]
        buf = self.bufs[name]
        dst = _rows(kind, buf, start, stop, t.shape[-1] if kind in (SQUARE, MASK) else None)
        if kind in (HEADS, SQUARE):
            # A few rows of every head touch a page per head, each maybe never touched before: a
            # torch copy releases the GIL while the pages fault in (a numpy copy this small held
            # it: the GUI thread stood still ~140 ms per call with a new GPT-2-sized store).
            torch.from_numpy(dst).copy_(t)
            if kind == SQUARE:
                torch.from_numpy(_rows(kind, buf, start, stop)[..., t.shape[-1]:]).zero_()
            return
        dst[...] = t.numpy()
        if kind == MASK:
            _rows(kind, buf, start, stop)[..., t.shape[-1]:] = False

    def view(self, name: str, T: int) -> np.ndarray:
        """A read-only view of rows (and, for attention maps, columns) 0..T-1."""
        v = _rows(self.kinds[name], self.bufs[name], 0, T, T)
        v = v.view()
        v.flags.writeable = False
        return v


class KVSlot:
    """One block's key/value cache over a :class:`RowStore`: the ``start`` earlier positions'
    keys (rotated, for RoPE) and values live in the store's k and v buffers."""

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


def _source_array(trace: Trace, name: str):
    layer, _, field_name = name.rpartition(".")
    if not layer:
        return getattr(trace, field_name)
    return getattr(trace.blocks[int(layer)], field_name)


def trace_from_store(store: RowStore, ids: np.ndarray, dropped: int, key, p: int, rotating: bool,
                     scales: list[float], finite_rows: int = 0) -> Trace:
    """The trace of rows 0..T-1 of ``store`` (views)."""
    T = ids.shape[0]
    view = store.view
    layers = []
    for i, scale in enumerate(scales):
        q, k = view(f"{i}.q", T), view(f"{i}.k", T)
        layers.append(LayerTrace(
            ln1=view(f"{i}.ln1", T), q=q, k=k, v=view(f"{i}.v", T),
            q_pre_rope=view(f"{i}.q_pre_rope", T) if rotating else q,
            k_pre_rope=view(f"{i}.k_pre_rope", T) if rotating else k,
            attn_mask=view(f"{i}.attn_mask", T), attn_weights=view(f"{i}.attn_weights", T),
            head_out=view(f"{i}.head_out", T), attn_out=view(f"{i}.attn_out", T),
            resid_mid=view(f"{i}.resid_mid", T), ln2=view(f"{i}.ln2", T), mlp_out=view(f"{i}.mlp_out", T),
            resid_post=view(f"{i}.resid_post", T), attn_scale=float(scale),
        ))
    token_ids = ids.copy()
    token_ids.setflags(write=False)
    return Trace(token_ids=token_ids, dropped=int(dropped), positional_encoding=key.positional_encoding,
                 causal=key.causal, tok=view("tok", T), pos=view("pos", T), x=view("x", T),
                 blocks=tuple(layers), ln_final=view("ln_final", T), logits=view("logits", T),
                 reused_rows=p, _reuse=key, _finite_rows=finite_rows)


def write_records(store: RowStore, rec: dict, logits: torch.Tensor, p: int, rotating: bool) -> None:
    """Rows p.. of every tensor from the records of ``GPT._run`` (k and v are already there)."""
    for name in ("tok", "x", "ln_final"):
        store.write(name, p, rec[name][0])
    store.write("pos", p, rec["pos"])
    store.write("logits", p, logits[0])
    for i, layer in enumerate(rec["blocks"]):
        for name in (*LAYER_ROWS, "q", "head_out", "attn_weights"):
            store.write(f"{i}.{name}", p, layer[name][0])
        store.write(f"{i}.attn_mask", p, layer["attn_mask"])
        if rotating:
            store.write(f"{i}.q_pre_rope", p, layer["q_pre_rope"][0])
            store.write(f"{i}.k_pre_rope", p, layer["k_pre_rope"][0])
