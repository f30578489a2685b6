"""Which token labels an axis shows, and how: every one when they fit, turned upright before any is
dropped, and when some must be dropped, never the selected token or the last one."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from explorer.qt.plot_items import LabelAxis

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
    return max((text_width(axis, t, fm) for t in labels), default=0.0)


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
