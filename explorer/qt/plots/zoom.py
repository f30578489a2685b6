"""Zoom and pan for a heatmap's view: the mouse wheel zooms around the pointer, a drag pans, a
double-click shows the whole matrix again; the view never leaves the matrix.

A 1,024 x 1,024 attention map in a 400-pixel view shows 2.5 cells per pixel and a label for one
row in 60; zoomed to 20 rows, each row has its label (the heatmap labels what is in view). While
the view shows the whole matrix it follows the matrix as the text grows; a zoomed view stays
where it is, and when it showed the last rows or columns (the newest tokens) it moves with them.
"""

from __future__ import annotations

import pyqtgraph as pg

MIN_CELLS = 4  # the closest zoom shows this many rows or columns (or all, when there are fewer)
_EPS = 1e-6


class ZoomPan:
    """The view-range side of a heatmap: its extent (rows, cols), the view's limits, and what
    happens to a zoomed view when the matrix changes size.

    Parameters
    ----------
    viewbox : pyqtgraph.ViewBox
        The heatmap's view (y inverted: row 0 at the top). Its mouse is switched on: wheel zoom,
        drag pan (pyqtgraph's own, kept within the limits set here).
    """

    def __init__(self, viewbox: pg.ViewBox) -> None:
        self.viewbox = viewbox
        self.extent = (0, 0)  # (rows, cols) of the matrix shown
        viewbox.setMouseEnabled(True, True)
        viewbox.setMouseMode(pg.ViewBox.PanMode)

    def view(self) -> tuple[float, float, float, float]:
        """(row0, row1, col0, col1): the part of the matrix in view, in cells."""
        (x0, x1), (y0, y1) = self.viewbox.viewRange()
        return (y0, y1, x0, x1)

    def zoomed(self) -> bool:
        """True when the view shows less than the whole matrix."""
        rows, cols = self.extent
        if rows == 0 or cols == 0:
            return False
        y0, y1, x0, x1 = self.view()
        return y0 > _EPS or x0 > _EPS or y1 < rows - 1e-3 or x1 < cols - 1e-3

    def visible_extent(self) -> tuple[float, float]:
        """(rows, cols) in view, in cells (at most the matrix's): what a label's room is judged by."""
        rows, cols = self.extent
        y0, y1, x0, x1 = self.view()
        return (max(min(y1, rows) - max(y0, 0.0), 1e-6), max(min(x1, cols) - max(x0, 0.0), 1e-6))

    def col_slice(self) -> slice:
        """The columns in view, whole or in part."""
        _, _, x0, x1 = self.view()
        return slice(max(0, int(x0)), max(0, int(x1 + 0.999)))

    def set_extent(self, rows: int, cols: int) -> None:
        """The matrix now has ``rows`` x ``cols`` cells: limits follow; a whole view shows the
        whole new matrix, a zoomed one keeps its place (moving with the last rows or columns
        when it showed them)."""
        old_rows, old_cols = self.extent
        keep = self.zoomed()
        y0, y1, x0, x1 = self.view()
        self.extent = (rows, cols)
        self.viewbox.setLimits(xMin=0, xMax=max(cols, 1), yMin=0, yMax=max(rows, 1),
                               minXRange=min(cols, MIN_CELLS) or 1, minYRange=min(rows, MIN_CELLS) or 1,
                               maxXRange=max(cols, 1), maxYRange=max(rows, 1))
        if not keep:
            self.reset()
            return
        yr = _moved(y0, y1, old_rows, rows)
        xr = _moved(x0, x1, old_cols, cols)
        self.viewbox.setRange(xRange=xr, yRange=yr, padding=0)

    def reset(self) -> None:
        """Show the whole matrix."""
        rows, cols = self.extent
        self.viewbox.setRange(xRange=(0, max(cols, 1)), yRange=(0, max(rows, 1)), padding=0)


def _moved(lo: float, hi: float, old_n: int, n: int) -> tuple[float, float]:
    """A zoomed range [lo, hi) of an axis that had ``old_n`` cells and now has ``n``: kept, moved
    by the change when it reached the end, and pushed back inside [0, n)."""
    span = min(hi - lo, n)
    if hi >= old_n - 1e-3:  # it showed the newest rows (or columns): follow them
        hi = n
        lo = hi - span
    lo = max(0.0, min(lo, n - span))
    return (lo, lo + span)
