"""The parts of the Why attention? panel: the blocks, the phrase table, the parameter curve, the losses.

Each part is one widget with an object name (``why-attention-blocks``, ...), so that a tour can find
it and outline it (:attr:`explorer.qt.panels.lessons.why_attention.panel.WhyAttentionPanel.parts`).
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from explorer.core.lessons.why_attention import TRANSFORMER, WINDOW, Blocks, ParameterCurve, PhraseShift
from explorer.core.views import symmetric_levels, token_label
from explorer.qt.plots.style import style_plots
from explorer.qt import theme
from explorer.qt.plots.heatmap import DIVERGING, Heatmap
from explorer.qt.plots.plot_items import plain_numbers, use_shrinking_title
from explorer.qt.widgets.steady import LiveLabel

MIN_MAP_HEIGHT = 230  # px: a 128-row block with its title, axes and colour bar
WINDOW_TICKS = (2, 8, 32, 128, 512, 1024)  # window sizes labelled on the log axis
COUNT_LABELS = {2: "100", 3: "1,000", 4: "10,000", 5: "100,000", 6: "1M", 7: "10M", 8: "100M"}  # log10: label
Y_RANGE = (2.0, 8.0)  # log10(parameters): every count of both models from n = 2 to 1,024, and room for the legend

#: One colour per model, each at least 3.9 : 1 against the light (#ffffff) and dark (#1e1e1e) plot backgrounds.
COLOURS = {TRANSFORMER: "#3a7bd5", WINDOW: "#c85a00"}


def sentence_label() -> LiveLabel:
    """A wrapped label for a sentence of the lesson, which follows every keystroke."""
    return LiveLabel(text_format=Qt.TextFormat.PlainText)


def _matrix(title: str, out: str) -> Heatmap:
    """A weight matrix's map that keeps its cells readable (the dock scrolls rather than squash it)."""
    hm = Heatmap(title, DIVERGING, row_title="d_model in", col_title=f"→ {out} out", bar_title="weight")
    hm.keep_readable()
    return hm


class BlocksView(QWidget):
    """W_in[a] and W_in[b] of the model before attention beside the transformer's W_Q, W_K, W_V.

    Attributes
    ----------
    block_a, block_b : Heatmap   the two blocks (d_model, d_mlp), on one colour scale.
    shared : dict of str to Heatmap   W_Q, W_K, W_V (d_model, d_head), on one colour scale.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("why-attention-blocks")
        self.block_a, self.block_b = _matrix("W_in[a]", "d_mlp"), _matrix("W_in[b]", "d_mlp")
        self.shared = {name: _matrix(name, "d_head") for name in ("W_Q", "W_K", "W_V")}
        self.window_box, self.shared_box = QWidget(), QWidget()  # the two halves, for a tour to outline
        self.window_box.setObjectName("why-attention-window-blocks")
        self.shared_box.setObjectName("why-attention-shared")
        self.captions = {}
        for box, maps in ((self.window_box, (self.block_a, self.block_b)), (self.shared_box, tuple(self.shared.values()))):
            column = QVBoxLayout(box)
            column.setContentsMargins(0, 0, 0, 0)
            self.captions[box] = title = LiveLabel()
            column.addWidget(title)
            row = QHBoxLayout()
            for hm in maps:
                row.addWidget(hm)
            column.addLayout(row, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.window_box, 2)
        layout.addWidget(self.shared_box, 3)
        self.setMinimumHeight(MIN_MAP_HEIGHT)  # a small dock scrolls (panel_scroll) rather than squash the maps

    def show_blocks(self, blocks: Blocks, token: str) -> None:
        """Draw the token's two blocks and the shared matrices."""
        a, b = blocks.places
        token = html.escape(token)
        self.captions[self.window_box].setText(f"<b>the model before attention</b>: “{token}” at place {a} meets "
                                               f"W_in[{a}], at place {b} W_in[{b}]")
        self.captions[self.shared_box].setText(f"<b>the transformer</b>: one W_Q, W_K, W_V for “{token}” at places "
                                               f"{a} and {b} (layer 0, head 0)")
        levels = symmetric_levels(blocks.block_a, blocks.block_b)
        for hm, place, data in ((self.block_a, a, blocks.block_a), (self.block_b, b, blocks.block_b)):
            hm.plot.setTitle(f"W_in[{place}]")
            hm.set_data(data, levels, None, None, blank=False)
        shared_levels = symmetric_levels(*blocks.shared.values())
        for name, hm in self.shared.items():
            hm.plot.setTitle(name)
            hm.set_data(blocks.shared[name], shared_levels, None, None, blank=False)
        self.setToolTip(f"the weights “{token}” meets at places {a} and {b} of the window")

    def clear(self) -> None:
        for hm in (self.block_a, self.block_b, *self.shared.values()):
            hm.clear()


def _two_row_table(table: QTableWidget, name: str, columns: tuple[str, ...]) -> None:
    """A read-only table of one row per model, as high as its rows (no scrolling), named ``name``."""
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(columns)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setWordWrap(False)
    height = table.horizontalHeader().sizeHint().height() + table.rowCount() * table.verticalHeader().defaultSectionSize()
    table.setFixedHeight(height + 2 * table.frameWidth())


class PhraseTable(QTableWidget):
    """One row per model: its top next token after the phrase first and last in the window, and the
    total variation between the two predictions."""

    COLUMNS = ("model", "phrase first: next", "last, after your text", "total variation")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(2, len(self.COLUMNS), parent)
        _two_row_table(self, "why-attention-phrase", self.COLUMNS)

    def show_shift(self, shift: PhraseShift, name, labels: dict[str, str]) -> None:
        """Fill the rows from the result (``name``: a token id to its text)."""
        for row, (key, p) in enumerate(shift.predictions.items()):
            cells = (labels[key], f"{token_label(name(p.top_early), 14)}  {float(p.early[p.top_early]):.3f}",
                     f"{token_label(name(p.top_late), 14)}  {float(p.late[p.top_late]):.3f}", f"{p.tv:.3f}")
            for col, text in enumerate(cells):
                self.setItem(row, col, QTableWidgetItem(text))


class ValidationTable(QTableWidget):
    """One row per model: its parameters and the validation loss its checkpoint stores."""

    COLUMNS = ("model", "parameters", "validation loss (nats/token)")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(2, len(self.COLUMNS), parent)
        _two_row_table(self, "why-attention-val-loss", self.COLUMNS)

    def show_rows(self, rows, labels: dict[str, str]) -> None:
        for row, (key, params, loss) in enumerate(rows):
            for col, text in enumerate((labels[key], f"{params:,}", "not recorded" if loss is None else f"{loss:.3f}")):
                self.setItem(row, col, QTableWidgetItem(text))


class ParameterPlot(pg.PlotWidget):
    """Parameters against the window n, both axes log: each model's total (solid) and the part that
    grows with n (dashed: the first layer, the positional table), the real models marked at their n."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("why-attention-params")
        plot = self.getPlotItem()
        use_shrinking_title(plot, "parameters as the window n grows")
        plain_numbers(plot)
        plot.setLogMode(x=True, y=True)
        plot.setLabel("bottom", "window n (tokens, log scale)")
        plot.setLabel("left", "parameters (log scale)")
        plot.setMouseEnabled(False, False)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.showGrid(x=True, y=True, alpha=0.2)
        # The legend in a row of the plot's own layout under its bottom axis, not on the curves: in a
        # short dock (1,280 x 720) a legend inside covered half of every line.
        legend = pg.LegendItem(labelTextSize="8pt", verSpacing=-6, colCount=1, brush=theme.plot_background(self),
                               labelTextColor=theme.plot_text(self))
        plot.layout.addItem(legend, 4, 1)
        plot.legend = legend  # plot(name=...) adds its entry here
        style_plots(self, [plot])
        plot.getAxis("bottom").setTicks([[(math.log10(n), f"{n:,}") for n in WINDOW_TICKS], []])
        plot.getAxis("left").setTicks([[(float(e), COUNT_LABELS[e]) for e in sorted(COUNT_LABELS)], []])
        plot.setRange(xRange=(math.log10(WINDOW_TICKS[0]), math.log10(WINDOW_TICKS[-1])), yRange=Y_RANGE, padding=0.06)
        self.at_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.muted_text(self), width=1,
                                                                              style=Qt.PenStyle.DotLine))
        plot.addItem(self.at_line, ignoreBounds=True)
        self.totals, self.growing = {}, {}
        for key, label, part in ((WINDOW, "model before attention", "its first layer W_in"),
                                 (TRANSFORMER, "transformer", "its positional table")):
            self.totals[key] = plot.plot(pen=pg.mkPen(COLOURS[key], width=2), name=label)
            self.growing[key] = plot.plot(pen=pg.mkPen(COLOURS[key], width=2, style=Qt.PenStyle.DashLine),
                                          name=part)
        self.marks = {key: plot.plot(pen=None, symbol=symbol, symbolSize=9, symbolBrush=None,
                                     symbolPen=pg.mkPen(COLOURS[key], width=2))
                      for key, symbol in ((WINDOW, "o"), (TRANSFORMER, "s"))}
        self.setMinimumHeight(200)
        self.setMaximumHeight(300)

    def show_curve(self, curve: ParameterCurve, real: dict[str, int]) -> None:
        """Draw the curves; ``real``: the loaded models' own n_params, marked at their window."""
        n = curve.windows.astype(np.float64)
        for key in self.totals:
            self.totals[key].setData(n, curve.totals[key].astype(np.float64))
            grows = curve.growing[key].astype(np.float64)
            keep = grows > 0  # log axes: a part of 0 parameters is not drawn
            self.growing[key].setData(n[keep], grows[keep])
        for key, count in real.items():  # the real models, at their own window
            self.marks[key].setData([float(curve.at)], [float(count)])
        self.at_line.setValue(math.log10(curve.at) if curve.at else 0.0)
