"""Which token labels an axis shows, and how: every one when they fit, turned upright before any is
dropped, and when some must be dropped, never the selected token or the last one."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from explorer.qt.plots.label_axis import LabelAxis

UPRIGHT_PITCH = 0.8  # turned labels need columns this share of a text line apart (a descender may touch)
LABEL_GAP_PX = 6  # flat labels need this much room between them


def thinned_ticks(labels: Sequence[str] | None, step: int, keep: Iterable[int | None] = ()):
    """Tick specs for pyqtgraph's ``AxisItem.setTicks``: every ``step``-th label, always the first,
    the last and every index in ``keep`` (the selected token), and no other label closer than
    ``step`` to one of those.

    Cell i spans [i, i + 1], so its label sits at i + 0.5. None (numbered axis) stays None.
    """
    if labels is None:
        return None
    n, step = len(labels), max(1, step)
    if step == 1 or n == 0:
        shown = list(range(n))
    else:
        forced = sorted({i for i in keep if i is not None and 0 <= i < n} | {0, n - 1})
        shown, ahead = [], 0  # forced[ahead] is the next forced label at or after i
        for i in range(n):
            while forced[ahead] < i:
                ahead += 1
            if i == forced[ahead]:
                shown.append(i)
            elif (not shown or i - shown[-1] >= step) and forced[ahead] - i >= step:
                shown.append(i)  # regular labels start again from each forced one
    return [[(i + 0.5, str(labels[i])) for i in shown], []]


def text_width(axis: pg.AxisItem, text: str, fm: QFontMetrics) -> float:
    """Width in px of a tick label: from the label's cached layout on a :class:`LabelAxis`
    (measuring 32 labels with QFontMetrics on every keystroke cost about 0.3 ms per axis)."""
    return axis.label_width(text) if isinstance(axis, LabelAxis) else fm.horizontalAdvance(text)


def widest(axis: pg.AxisItem, labels: Sequence[str], fm: QFontMetrics) -> float:
    """The widest of ``labels`` in px (0 for none)."""
    if isinstance(axis, LabelAxis):
        return axis.widest_label(labels)
    return max((fm.horizontalAdvance(t) for t in labels), default=0.0)


def widen_axis(axis: pg.AxisItem, labels: Sequence[str] | None, fm: QFontMetrics) -> None:
    """Give a side axis a fixed width that fits ``labels`` and its title, growing but never shrinking.

    pyqtgraph sizes an axis to its widest label by default, so a label that changes width on a
    keystroke (a word typed letter by letter) re-lays out the whole plot and repaints it twice;
    a fixed width that only grows keeps the layout still (measured: paint 40 -> 18 ms at T = 1).
    """
    needed = widest(axis, list(labels) if labels else ["0000"], fm) + 12
    if isinstance(axis, LabelAxis):
        needed += axis.title_space()
    if needed > getattr(axis, "_fixed_width", 0):
        axis._fixed_width = needed
        axis.setWidth(needed)
        relayout(axis)


def set_axis_height(axis: LabelAxis, height: float) -> None:
    """Fix a top/bottom axis's height (when it changed) and lay its plot out at once."""
    if abs(height - getattr(axis, "_fixed_height", -1.0)) > 0.5:
        axis._fixed_height = height
        axis.setHeight(height)
        relayout(axis)


def relayout(axis: pg.AxisItem) -> None:
    """Lay out the axis's plot now: a deferred layout repaints the plot once more."""
    plot = axis.parentItem()
    if plot is not None and hasattr(plot, "layout"):
        plot.layout.activate()


def column_layout(axis: LabelAxis, widest_px: float, pitch: float) -> tuple[bool, int]:
    """How a top/bottom axis labels columns ``pitch`` px apart whose widest label is ``widest_px``:
    (upright, step).

    Flat when every label fits across its column; else upright (turned) when a text line fits
    in a column; else upright with every ``step``-th label (plus the selected and the last).
    """
    if widest_px + LABEL_GAP_PX <= pitch:
        return False, 1
    need = UPRIGHT_PITCH * axis.line_height()
    return True, max(1, math.ceil(need / max(pitch, 1e-6)))


def row_step(axis: LabelAxis, pitch: float) -> int:
    """Every how many rows ``pitch`` px tall a side axis can label without overlapping."""
    return max(1, math.ceil(axis.line_height() / max(pitch, 1e-6)))


class TickLabels:
    """The tick labels of a :class:`~explorer.qt.plots.heatmap.Heatmap` (a mixin listed before QWidget):
    which rows and columns are labelled, flat or upright, and the column axis's height.

    It reads the heatmap's ``plot``, ``col_axis``, ``data``, ``row_labels``, ``col_labels``,
    ``keys_are_rows``, ``_keep`` (the pinned and hovered rows) and ``zoom`` (the rows and columns
    in view: a zoomed map labels as soon as its labels fit), and keeps ``_tick_key``, the labels
    last given to each axis.
    """

    _tick_key = None
    _updating = _resized_again = False
    _widest_col: float | None = None  # the widest column label in px (None: measure again)

    def _widest_col_label(self) -> float:
        """Width in px of the widest column label (measured once per set of labels)."""
        if self._widest_col is None:
            self._widest_col = widest(self.col_axis, self.col_labels or [], QFontMetrics(self.font()))
        return self._widest_col

    def _fit_col_axis(self) -> None:
        """A top axis of token labels gets a fixed height: one line flat, the widest label upright."""
        axis = self.col_axis
        if axis.orientation != "top":
            return  # a bottom axis of numbered dimensions sizes itself (pyqtgraph)
        across = self._widest_col_label() if axis.vertical else axis.line_height()
        if axis.vertical and across <= getattr(axis, "_upright_px", 0.0):
            across = axis._upright_px  # upright labels: grow only, so typing never re-lays out
        axis._upright_px = across if axis.vertical else 0.0
        set_axis_height(axis, across + 8 + axis.title_space())

    def _update_ticks(self, *_) -> None:
        """Label every row and column that fits (columns turned upright before any is dropped);
        recomputed on resize. A thinned axis keeps the pinned and hovered rows and the last.

        Turning the column labels changes the column axis's height and so the rows' room: a
        resize that this causes is handled by the call that caused it (never half-way through).
        """
        if self._updating:
            self._resized_again = True
            return
        self._updating = True
        try:
            for _ in range(3):  # settles at once, or after the one re-layout that turning causes
                self._resized_again = False
                self._update_ticks_once()
                if not self._resized_again:
                    break
        finally:
            self._updating = False

    def _update_ticks_once(self) -> None:
        if self.data.size == 0:
            return
        rows, cols = self.zoom.visible_extent()  # rows and columns in view (all, unless zoomed)
        vb = self.plot.getViewBox()
        fm = QFontMetrics(self.font())
        old_rows, old_cols = self._tick_key or (None, None)
        upright, c_step = False, 1
        if self.col_labels is not None:
            upright, c_step = column_layout(self.col_axis, self._widest_col_label(), max(vb.width(), 1.0) / cols)
        keep_cols = self._keep if c_step > 1 and self.keys_are_rows else ()
        cols_key = (self.col_labels, c_step, upright, keep_cols)
        # Each axis is touched only when its own labels change: setTicks makes pyqtgraph rebuild
        # and repaint that axis, which costs about 1 ms for 32 labels.
        if cols_key != old_cols:
            self.col_axis.set_vertical(upright)
            self._fit_col_axis()  # may lay the plot out again: the rows' room is read after it
            self.col_axis.setTicks(thinned_ticks(self.col_labels, c_step, keep_cols)
                                   if self.col_labels is not None else None)
        left = self.plot.getAxis("left")
        r_step = row_step(left, max(vb.height(), 1.0) / rows)
        keep_rows = self._keep if r_step > 1 else ()
        rows_key = (self.row_labels, r_step, keep_rows)
        if rows_key != old_rows:
            widen_axis(left, self.row_labels or [str(self.data.shape[0] - 1)], fm)
            left.setTicks(thinned_ticks(self.row_labels, r_step, keep_rows))
        self._tick_key = (rows_key, cols_key)

