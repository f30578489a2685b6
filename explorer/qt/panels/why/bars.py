"""The Why panel's bars: attention against influence, one row per source token shown.

They take plain numbers (from :mod:`explorer.core.why` and the explanation) and draw them; they
compute nothing of the model.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QScrollBar, QWidget

from explorer.qt import theme
from explorer.qt.plots.style import style_plots
from explorer.qt.plots.heatmap import settle_view, widen_axis
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import scroll_by_wheel

BAR_H = 0.7
PLAIN, MARKED = "#4477aa", "#ee7733"


class SourceBars(pg.GraphicsLayoutWidget):
    """Three bar plots sharing their rows (one per source token shown, in text order, the first on
    top): attention weight, direct logit attribution and leave-one-out effect; tokens marked as
    disagreeing drawn orange. No leave-one-out bar for the query itself or a source not computed.
    Rows keep a readable height: when they do not fit, the plots scroll together (:attr:`scroll`,
    which the panel places beside them, or the mouse wheel)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plots, self.bars = [], []
        for col, title in enumerate(("attention a_ij", "direct contribution (DLA)", "leave-one-out: logit − logit without j")):
            plot = self.addPlot(row=0, col=col, title=title, axisItems={"left": LabelAxis("left")})
            plot.invertY(True)
            plot.setMouseEnabled(False, False)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            if col:
                plot.getAxis("left").setStyle(showValues=False)
                plot.addItem(pg.InfiniteLine(0, angle=90, pen=pg.mkPen("#888888")))
            bars = pg.BarGraphItem(x0=[], y=[], height=BAR_H, width=[], brushes=[])
            plot.addItem(bars)
            self.plots.append(plot)
            self.bars.append(bars)
        style_plots(self, self.plots)
        self.scroll = QScrollBar(Qt.Orientation.Vertical)
        self.scroll.setVisible(False)
        self.scroll.valueChanged.connect(self._on_scroll_changed)
        self.plots[0].getViewBox().sigResized.connect(lambda *_: self._show_window())
        self.rows: list[str] = []
        self.values = np.zeros((3, 0))
        self.query = -1
        self.missing = ""
        self.first = 0  # the first row in view
        self._window = (-1, -1)

    def show_sources(self, labels: list[str], values: np.ndarray, marked: list[int], query: int,
                     missing: str = "") -> None:
        """``labels`` one per row (``"j token"``); ``values`` (3, rows): attention, direct,
        leave-one-out (NaN for the query itself and for sources not computed); ``marked`` and
        ``query`` are rows; ``missing`` says why a leave-one-out was not computed."""
        n = values.shape[1]
        self.values, self.query, self.missing = values, query, missing
        self.rows = [("◆ " if r in marked else "") + label + (" (query)" if r == query else "")
                     for r, label in enumerate(labels[:n])]
        ys = np.arange(n, dtype=float)
        plain, marked_brush = (pg.mkBrush(theme.curve_colour(c, self)) for c in (PLAIN, MARKED))  # read on the ground
        brushes = np.array([marked_brush if r in marked else plain for r in range(n)], dtype=object)
        for k, (plot, bars) in enumerate(zip(self.plots, self.bars)):
            drawn = np.isfinite(values[k])
            v = values[k][drawn]
            bars.setOpts(x0=np.minimum(v, 0), y=ys[drawn], width=np.abs(v), height=BAR_H, brushes=list(brushes[drawn]))
            top = float(np.abs(v).max()) if v.size else 1.0
            top = top or 1.0
            plot.setXRange(*((0, top * 1.05) if k == 0 else (-top * 1.05, top * 1.05)), padding=0)
            plot.getAxis("bottom").setTickSpacing(levels=[(nice_step(top / 3), 0)])  # 3 or 4 labels from 0: no overlap
        axis = self.plots[0].getAxis("left")
        ticks = [(float(r), f"{self.rows[r]}  {values[0, r]:.3f}") for r in range(n)]
        widen_axis(axis, [t for _, t in ticks], QFontMetrics(self.font()))
        axis.setTicks([ticks, []])
        self._window = (-1, -1)
        self._show_window()

    def rows_in_view(self) -> int:
        """How many rows fit at a readable height (a text line and a gap each)."""
        row_px = QFontMetrics(self.font()).height() + 4
        return max(1, int(self.plots[0].getViewBox().height() // row_px))

    def _show_window(self) -> None:
        """All rows when they fit, else ``rows_in_view`` of them from :attr:`first`."""
        n, rows = self.values.shape[1], self.rows_in_view()
        scrolls = n > rows
        rows = rows if scrolls else max(n, 1)
        with QSignalBlocker(self.scroll):
            self.scroll.setRange(0, max(0, n - rows))
            self.scroll.setPageStep(rows)
            self.first = min(self.first, max(0, n - rows)) if scrolls else 0
            self.scroll.setValue(self.first)
        if self.scroll.isVisibleTo(self.scroll.parentWidget() or self.scroll) != scrolls:
            self.scroll.setVisible(scrolls)
        if (self.first, rows) == self._window:
            return
        self._window = (self.first, rows)
        for plot in self.plots:
            plot.setYRange(self.first - 0.5, self.first + rows - 0.5, padding=0)
            settle_view(plot.getViewBox())

    def _on_scroll_changed(self, value: int) -> None:
        self.first = int(value)
        self._show_window()

    def wheelEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        """The mouse wheel scrolls rows that do not fit."""
        if not scroll_by_wheel(self.scroll, event):
            super().wheelEvent(event)

    def describe_row(self, r: int) -> str:
        """Every number of row r, for the readout under the bars and the tooltip."""
        a, d, e = self.values[:, r]
        if not np.isnan(e):
            hide = f"{e:+.4f}"
        elif r == self.query:
            hide = "(the query itself: always sees itself)"
        else:
            hide = f"not computed: {self.missing}" if self.missing else "not computed"
        return f"{self.rows[r]}: attention {a:.4f} · direct {d:+.4f} · leave-one-out {hide}"

    def row_at(self, scene_pos) -> int | None:
        """The row under a scene position, or None."""
        for plot in self.plots:
            if plot.sceneBoundingRect().contains(scene_pos):
                r = int(round(plot.getViewBox().mapSceneToView(scene_pos).y()))
                return r if 0 <= r < self.values.shape[1] else None
        return None


def nice_step(x: float) -> float:
    """The smallest of 1, 2 and 5 times a power of ten that is at least ``x`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(x))
    return min(m * power for m in (1, 2, 5, 10) if m * power >= x * (1 - 1e-9))
