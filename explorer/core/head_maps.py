"""Attention maps for drawing, brought up to date from the first row that changed (no Qt here).

With prefix reuse (``GPT.trace(..., reuse=)``) typing at the end of a 1,024-token text changes
one row of every attention map; the rows before it are the earlier trace's. The attention panel
redraws only those rows:

* :class:`HeadScores` keeps one head's attn_scores as drawn (masked and non-finite cells NaN)
  and each row's largest |score|, and computes only the new rows from q and k (a 1,024 x 1,024
  map: one row instead of the layer's 12 heads, 142 ms);
* :func:`pool_heads` keeps every head's max-pooled thumbnail (the "all heads" mosaic) and pools
  only the blocks of rows that changed: pooling 144 maps of 1,024 x 1,024 reads 600 MB.

Rows 0..p-1 of two traces are the same when the session says so
(``Session.rows_unchanged``); a causal map's rows never change after they are computed, and
its cells right of the diagonal are masked (score NaN, weight 0), so a row block above the
changed rows keeps its pooled values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.tracing.records import LayerTrace, Trace, scores_from

POOL_BLOCKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def pool_block(n_tokens: int, cell: int) -> int:
    """The side of the blocks of cells one thumbnail pixel shows: the smallest of
    :data:`POOL_BLOCKS` that makes a T x T map at most ``cell`` pixels wide (1 for T <= cell).

    A block changes only when T passes cell x block (at 48, 96, 144, 192, 288, 384, ... with 48),
    so that typing keeps the blocks, and only the changed rows are pooled again."""
    for block in POOL_BLOCKS:
        if -(-n_tokens // block) <= cell:
            return block
    return -(-n_tokens // cell)


def _pooled_rows(weights: np.ndarray, start: int, block: int) -> np.ndarray:
    """Block maxima of rows start.. of (n, T, T) maps: (n, ceil((T - start) / block), ceil(T / block))."""
    n_rows, n_cols = weights.shape[1], weights.shape[2]
    part = weights[:, start:]
    pooled = np.maximum.reduceat(part, np.arange(0, n_rows - start, block), axis=1)
    return np.maximum.reduceat(pooled, np.arange(0, n_cols, block), axis=2)


def max_pooled(weights: np.ndarray, cell: int) -> np.ndarray:
    """A (T, T) matrix shrunk by the maximum of ``pool_block(T, cell)``-square blocks.

    Exact when T <= cell. For a thumbnail of attention weights the block maximum keeps the
    strong links visible (a block mean would fade towards 1/T as T grows).

    Returns
    -------
    (ceil(T / b), ceil(T / b)) float32 array, b = pool_block(T, cell): at most (cell, cell).
    """
    w = np.asarray(weights, dtype=np.float32)
    if w.shape[0] == 0:
        return w
    return _pooled_rows(w[None], 0, pool_block(w.shape[0], cell))[0]


@dataclass(frozen=True)
class Mosaic:
    """Every head's max-pooled attention weights (the "all heads" thumbnails).

    Attributes
    ----------
    pooled : (n_layers, n_heads, cell, cell) float32   thumbnail (l, h) in [:side, :side]; read-only.
    block : int        cells per thumbnail pixel, each way (:func:`pool_block`).
    n_tokens : int     T of the trace pooled.
    """

    pooled: np.ndarray
    block: int
    n_tokens: int

    @property
    def side(self) -> int:
        """Pixels of one thumbnail, each way: ceil(T / block)."""
        return -(-self.n_tokens // self.block)


def pool_heads(trace: Trace, cell: int, previous: Mosaic | None = None, unchanged: int = 0) -> Mosaic:
    """Every head's thumbnail of ``trace``, pooling again only the rows from ``unchanged`` on.

    Parameters
    ----------
    trace : Trace         with T >= 1.
    cell : int            the largest thumbnail side in pixels.
    previous : Mosaic     the thumbnails of an earlier trace whose first ``unchanged`` rows
                          (of every tensor) are ``trace``'s, or None.
    unchanged : int       rows shared with that trace (``Session.rows_unchanged``; 0: pool all).

    Returns
    -------
    Mosaic (a new one: ``previous`` is not changed).
    """
    T = trace.n_tokens
    block = pool_block(T, cell)
    if previous is None or previous.block != block or not trace.causal or previous.pooled.shape[:2] != (
            len(trace.blocks), trace.blocks[0].n_heads):
        unchanged = 0
    first = min(unchanged, T, previous.n_tokens if previous is not None else 0) // block  # first row block to pool
    if first == 0:
        pooled = np.zeros((len(trace.blocks), trace.blocks[0].n_heads, cell, cell), np.float32)
    else:
        pooled = previous.pooled.copy()
    side = -(-T // block)
    for layer, lt in enumerate(trace.blocks):
        rows = _pooled_rows(lt.attn_weights, first * block, block)  # (n_heads, side - first, side)
        pooled[layer, :, first:side, :side] = rows
        pooled[layer, :, side:, :] = 0  # rows beyond T (a shorter text): gone
    pooled.setflags(write=False)
    return Mosaic(pooled, block, T)


@dataclass(frozen=True)
class MosaicRequest:
    """The inputs of :func:`mosaic_job`: the trace, the thumbnail side, the thumbnails shown
    (or None), the rows the trace shares with theirs, and the trace's serial (for the answer)."""

    trace: Trace
    cell: int
    previous: Mosaic | None
    unchanged: int
    serial: int | None


def mosaic_job(checkpoint, request: MosaicRequest) -> Mosaic:
    """:func:`pool_heads` as a session job (``Session.submit``): ``fn(checkpoint, inputs)``."""
    return pool_heads(request.trace, request.cell, request.previous, request.unchanged)


def mosaic_image(mosaic: Mosaic, gap: int = 2) -> np.ndarray:
    """The thumbnails tiled into one image: rows = layers, columns = heads, ``gap`` NaN pixels
    between tiles.

    Returns
    -------
    (n_layers * (s + gap) - gap, n_heads * (s + gap) - gap) float32, s = ``mosaic.side``; tile
    (l, h) starts at row l * (s + gap), column h * (s + gap). Values in [0, 1], gaps NaN.
    """
    n_layers, n_heads = mosaic.pooled.shape[:2]
    s = mosaic.side
    step = s + gap
    out = np.full((n_layers * step - gap, n_heads * step - gap), np.nan, dtype=np.float32)
    for layer in range(n_layers):
        for head in range(n_heads):
            out[layer * step:layer * step + s, head * step:head * step + s] = mosaic.pooled[layer, head, :s, :s]
    return out


def head_mosaic(trace: Trace, cell: int = 48, gap: int = 2) -> np.ndarray:
    """Every head's attention weights, max-pooled to at most ``cell`` pixels a side, tiled into
    one image (:func:`pool_heads`, :func:`mosaic_image`); exact when T <= cell."""
    return mosaic_image(pool_heads(trace, cell), gap)


class HeadScores:
    """One head's attn_scores as a heatmap draws them, kept up to date row by row.

    :meth:`update` gives the (T, T) scores of a layer and head as the trace has them (masked
    cells -inf) and their symmetric colour levels (those of the finite scores);
    when the layer and head are the ones of the previous call and the first ``unchanged`` rows
    are the previous trace's, it computes only the rows after them from q and k. The array it
    returns is its own buffer: valid until the next call (a heatmap copies what it is given).
    """

    def __init__(self) -> None:
        self._buf = np.zeros((0, 0), np.float32)  # (capacity, capacity): rows < _rows valid, -inf right of T
        self._absmax = np.zeros(0, np.float32)  # per row, the largest |finite score| (0 if none)
        self._finite = np.zeros(0, bool)  # per row, whether it holds any finite score
        self._key: tuple[int, int] | None = None
        self._rows = 0  # rows valid in the buffers

    def update(self, lt: LayerTrace, layer: int, head: int, unchanged: int = 0) -> tuple[np.ndarray, tuple]:
        """(scores (T, T) float32, -inf where masked, (-m, m) levels as
        :func:`explorer.core.views.symmetric_levels` gives them).

        ``unchanged``: rows 0..unchanged-1 of ``lt`` equal those of the trace the previous call
        was given (0: compute every row).
        """
        T = lt.q.shape[1]
        start = min(unchanged, self._rows, T) if self._key == (layer, head) else 0
        if T > self._buf.shape[0]:
            self._grow(max(T, 2 * self._buf.shape[0], 64), start)
        if start < T:
            if start == 0:
                rows = lt.head_attn_scores(head)  # (T, T): kept, or one head's computed
            else:
                kv = lt.kv_head(head)
                rows = scores_from(lt.q[head:head + 1, start:], lt.k[kv:kv + 1], lt.attn_mask[start:],
                                   lt.attn_scale, lt.attn_softcap)[0]  # (T - start, T)
            part = self._buf[start:T]
            part[:, T:] = -np.inf  # right of the diagonal: masked (rows are reused only when causal)
            part = part[:, :T]
            part[...] = rows
            finite = np.isfinite(part)
            self._absmax[start:T] = np.max(np.abs(part), axis=1, where=finite, initial=0.0)
            self._finite[start:T] = finite.any(axis=1)
        self._key, self._rows = (layer, head), T
        if not self._finite[:T].any():
            return self._buf[:T, :T], (-1.0, 1.0)
        m = max(float(self._absmax[:T].max()), 1e-6)
        return self._buf[:T, :T], (-m, m)

    def _grow(self, capacity: int, keep: int) -> None:
        buf = np.empty((capacity, capacity), np.float32)  # a row is written whole when it is computed
        buf[:keep, :keep] = self._buf[:keep, :keep]
        buf[:keep, keep:] = -np.inf
        absmax, finite = np.zeros(capacity, np.float32), np.zeros(capacity, bool)
        absmax[:keep], finite[:keep] = self._absmax[:keep], self._finite[:keep]
        self._buf, self._absmax, self._finite = buf, absmax, finite
