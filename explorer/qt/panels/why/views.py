"""The Why panel's views: the logit-lens table, the head switches, the what-if table with its
entropy curves, and the score's five maps (attention against influence as bars:
:mod:`explorer.qt.panels.why.bars`).

Each view takes plain numbers (from :mod:`explorer.core.why` and the explanation) and draws them;
none computes anything of the model.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHeaderView,
    QLabel,
    QLayout,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from explorer.core.score_text import score_formula, score_terms_title
from explorer.core.views import axis_labels, symmetric_levels, token_label
from explorer.qt.plots.style import style_plots
from explorer.qt.plots.heatmap import DIVERGING, Heatmap
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import plain_numbers
from explorer.qt.plots.ticks import LABEL_GAP_PX, thinned_ticks, widest
from explorer.qt.widgets.steady import LiveLabel
from model.explain.scores import TERMS

TARGET = QColor("#fde9c8")
TINTED_TEXT = QColor("#202020")  # text on a light tint of our own (the palette's text may be light)
TERM_TITLES = {"token_token": "token·token", "token_pos": "token·position", "pos_token": "position·token",
               "pos_pos": "position·position", "rest": "rest (biases, LN shift)"}
CURVE_COLOURS = ("#222222", "#4477aa", "#ee7733", "#228833", "#aa3377")


def table(columns: int) -> QTableWidget:
    """A read-only table without row numbers, rows 20 px high."""
    t = QTableWidget(0, columns)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(20)
    return t


def set_cell(t: QTableWidget, row: int, col: int, text: str, bold: bool = False, shade: QColor | None = None) -> None:
    """Put ``text`` in a cell (reusing its item), bold and shaded as asked."""
    item = t.item(row, col)
    if item is None:
        item = QTableWidgetItem()
        t.setItem(row, col, item)
    item.setText(text)
    font = QFont(t.font())
    font.setBold(bold)
    item.setFont(font)
    item.setBackground(QBrush(shade) if shade is not None else QBrush())
    item.setForeground(QBrush(TINTED_TEXT) if shade is not None else QBrush())  # a light tint: dark text in any theme


class LensTable(QTableWidget):
    """One column per logit-lens stage (its title and KL to the final distribution), one row per
    rank; the target's cells shaded, its probability at each stage in the last row."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def show_stages(self, columns: list[tuple[str, float, list[tuple[int, str, float]], float]], target: int) -> None:
        """``columns``: (title, KL in nats, [(id, token, prob), ...], target prob) per stage."""
        k = max((len(c[2]) for c in columns), default=0)
        self.setColumnCount(len(columns))
        self.setRowCount(k + 1)
        # "KL 0.123" without its unit (in the tooltip): "nats" made the 9 stages of a 4-layer model 93 px
        # wider than an 830 px dock, which scrolled sideways.
        self.setHorizontalHeaderLabels([f"{title}\nKL {kl:.3f}" for title, kl, _, _ in columns])
        for c, (title, kl, _, _) in enumerate(columns):
            self.horizontalHeaderItem(c).setToolTip(f"{title}: KL divergence to the model's output, {kl:.3f} nats")
        self.setVerticalHeaderLabels([str(r + 1) for r in range(k)] + ["target"])
        for c, (_, _, top, target_prob) in enumerate(columns):
            for r in range(k):
                tid, name, p = top[r] if r < len(top) else (-1, "", float("nan"))
                set_cell(self, r, c, f"{token_label(name, 14)}  {p:.3f}" if tid >= 0 else "",
                         bold=tid == target, shade=TARGET if tid == target else None)
            set_cell(self, k, c, f"p = {target_prob:.3f}", bold=True)
        bar = self.horizontalScrollBar().sizeHint().height()  # room for it when the stages overflow
        self.setFixedHeight(self.horizontalHeader().height() + (k + 1) * 20 + 2 * self.frameWidth() + bar + 2)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Columns as wide as their contents while they all fit the view; else they share the view's
        width (their texts elided, whole in the tooltips): the table never scrolls sideways."""
        hh = self.horizontalHeader()
        need = sum(max(self.sizeHintForColumn(c), hh.sectionSizeHint(c)) for c in range(self.columnCount()))
        mode = QHeaderView.ResizeMode.ResizeToContents if need <= self.viewport().width() else \
            QHeaderView.ResizeMode.Stretch
        if self.columnCount() and hh.sectionResizeMode(0) != mode:
            hh.setSectionResizeMode(mode)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        self._fit_columns()


class HeadSwitches(QWidget):
    """One button per head (rows = layers), showing its direct contribution to the target's logit;
    a click switches the head off or back on (:attr:`sig_head_toggled`)."""

    sig_head_toggled = Signal(int, int)
    """The button of (layer, head) was clicked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(2)
        self.buttons: dict[tuple[int, int], QToolButton] = {}

    def set_shape(self, n_layers: int, n_heads: int) -> None:
        """One button per head of a model of this shape (rebuilt only when the shape changes)."""
        if len(self.buttons) == n_layers * n_heads and (n_layers - 1, n_heads - 1) in self.buttons:
            return
        for button in self.buttons.values():
            self.grid.removeWidget(button)
            button.deleteLater()
        self.buttons = {}
        for layer in range(n_layers):
            for head in range(n_heads):
                b = QToolButton()
                b.setCheckable(True)
                b.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
                b.clicked.connect(lambda _=False, li=layer, h=head: self.sig_head_toggled.emit(li, h))
                self.grid.addWidget(b, layer, head)
                self.buttons[layer, head] = b

    def show_heads(self, contributions: np.ndarray | None, off: tuple[tuple[int, int], ...]) -> None:
        """Label each button with its head and direct contribution; an ablated head is checked."""
        for (layer, head), b in self.buttons.items():
            value = "" if contributions is None else f"\n{contributions[layer, head]:+.3f}"
            is_off = (layer, head) in off
            b.setText(f"L{layer}H{head}{' off' if is_off else ''}{value}")
            b.setChecked(is_off)
            b.setStyleSheet(f"QToolButton {{ background:#f4c7c3; color:{TINTED_TEXT.name()}; }}" if is_off else "")
            b.setToolTip(f"layer {layer} head {head}: click to switch it {'back on' if is_off else 'off'} "
                         "(its output zeroed before W_O, in every panel)")


class WhatIfView(QWidget):
    """The what-if table (mean entropy, the query row's entropy, the target's probability, the top
    tokens) and each what-if's attention-row entropies of the selected head as curves."""

    COLUMNS = ["what if", "mean entropy (bits)", "entropy of query row", "p(target)", "top 3"]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = table(len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.graphics = pg.GraphicsLayoutWidget()
        self.plot = self.graphics.addPlot(axisItems={"bottom": LabelAxis("bottom")})
        self.plot.setMouseEnabled(False, False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("left", "entropy (bits)")
        plain_numbers(self.plot)  # bits as they are, never "(x0.001)"
        # The legend under the plot, not on it: inside, the curves ran through it where they end.
        self.legend = pg.LegendItem(labelTextSize="8pt", verSpacing=-4, colCount=4)
        self.graphics.addItem(self.legend, row=1, col=0)
        self.legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.graphics.ci.layout.setRowStretchFactor(0, 1)
        self.plot.legend = self.legend  # plot(name=...) adds its entry here
        # One entry per row of the table, made once; only a label whose text changes is set again
        # (pyqtgraph lays out every legend label in HTML: rebuilding them cost about 20 ms a draw).
        self.curves = [self.plot.plot(pen=pg.mkPen(c, width=2), name=f"row {k}")
                       for k, c in enumerate(CURVE_COLOURS[:4])]
        style_plots(self.graphics, [self.plot], self)  # after the curves: their colours read on the ground
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)
        layout.addWidget(self.graphics, 1)

    def show_what_ifs(self, rows: list[tuple[str, float, float, float, str]], curves: list[np.ndarray],
                      tokens: list[str], title: str, query: int | None = None) -> None:
        """``rows``: (knob, mean entropy, row entropy, p(target), top 3) per what-if; ``curves``
        their entropies per query row; the token labels where they fit (always the ``query``'s)."""
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [row[0], f"{row[1]:.3f}", f"{row[2]:.3f}", f"{row[3]:.3f}", row[4]]
            for c, text in enumerate(cells):
                set_cell(self.table, r, c, text, bold=r == 0)
        self.table.setFixedHeight(self.table.horizontalHeader().height() + len(rows) * 20 + 4)
        T = len(tokens)
        for k, (curve, (_, label)) in enumerate(zip(self.curves, self.legend.items)):
            if k < len(curves):
                curve.setData(np.arange(T, dtype=float), curves[k])
                if label.text != rows[k][0]:
                    label.setText(rows[k][0])
            else:
                curve.setData([], [])
        if self.plot.titleLabel.text != title:
            self.plot.setTitle(title)
        axis = self.plot.getAxis("bottom")
        labels = axis_labels(tokens)
        room = self.plot.getViewBox().width() or 600.0  # px for T columns (before the first layout: a guess)
        step = math.ceil((widest(axis, labels, QFontMetrics(self.font())) + LABEL_GAP_PX) * T / room) if T else 1
        ticks = thinned_ticks(labels, step, [query])[0]  # at i + 0.5 (cells); here points sit at i
        axis.setTicks([[(x - 0.5, label) for x, label in ticks], []])
        top = max([float(np.nanmax(c)) for c in curves if c.size] + [1.0])
        self.plot.setRange(xRange=(-0.5, max(T, 1) - 0.5), yRange=(0, top * 1.1), padding=0)


class ScoreTermsView(QWidget):
    """Layer 0's scores of one head and their five terms as heatmaps on one colour scale, each term
    titled with its share; or the note saying why the split does not apply."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = LiveLabel()
        self.maps = {name: Heatmap(title, DIVERGING, col_axis="top", colorbar=name == "scores")
                     for name, title in [("scores", "scores"), *TERM_TITLES.items()]}
        grid = QGridLayout()
        for k, hm in enumerate(self.maps.values()):
            hm.setMinimumWidth(150)
            hm.keep_readable()  # room for its rows whatever its chrome: the dock scrolls instead
            grid.addWidget(hm, k // 3, k % 3)
        self.holder = QWidget()
        self.holder.setLayout(grid)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.holder, 1)

    def show_terms(self, terms, scores: np.ndarray | None, tokens: list[str], head: int, scale: float = 1.0,
                   d_head: int = 1) -> None:
        """``terms`` a ScoreTerms (maps and shares) and layer 0's scores of ``head`` (T, T), computed
        with the factor ``scale`` (the trace's ``attn_scale``: 1/√d_head, or 1 for GPT-Neo)."""
        self.holder.setVisible(True)
        T = len(tokens)
        rows = axis_labels(tokens)
        keys = [label.split(" ", 1)[1] for label in rows]
        total = sum(terms.maps[name] for name in TERMS)
        mask = np.isfinite(total)
        err = float(np.abs(total[mask] - scores[mask]).max()) if mask.any() else 0.0
        levels = symmetric_levels(*(terms.maps[n] for n in TERMS), np.where(mask, scores, np.nan))
        shown = {"scores": np.where(mask, scores, np.nan), **terms.maps}
        for name, hm in self.maps.items():
            share = f"  {100 * terms.shares[name]:.1f} %" if name in terms.shares else ""
            hm.plot.setTitle(f"{TERM_TITLES.get(name) or score_terms_title(scale, d_head)}{share}")
            hm.set_data(shown[name][:T, :T], levels, rows, keys)
        self.note.setText(
            f"Layer 0, head {head}: with LN1's scale frozen per token, every score {score_formula(scale, d_head)} is the sum of "
            f"these five maps (largest difference from the model's scores {err:.1e}). The share is each map's "
            f"Σ|value| over the cells a query can see.")

    def show_note(self, note: str, head: int) -> None:
        """The split does not apply: say why, show no maps."""
        self.holder.setVisible(False)
        self.note.setText(f"The score's four terms (layer 0, head {head}) {note}.")

    def clear(self) -> None:
        """No maps, no note."""
        for hm in self.maps.values():
            hm.clear()
        self.note.setText("")


def align_top(label: QLabel | LiveLabel, plain: bool = False) -> QLabel | LiveLabel:
    """A word-wrapped, selectable label aligned to the top left (``plain``: never read as HTML);
    a :class:`~explorer.qt.widgets.steady.LiveLabel` for a sentence that follows every keystroke."""
    label.setWordWrap(True)
    if plain:
        label.setTextFormat(Qt.TextFormat.PlainText)
    label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def column(*items) -> QWidget:
    """A page with ``items`` one under the other: widgets and layouts, or (item, stretch) pairs."""
    page = QWidget()
    col = QVBoxLayout(page)
    col.setContentsMargins(2, 2, 2, 2)
    for item in items:
        item, stretch = item if isinstance(item, tuple) else (item, 0)
        if isinstance(item, QLayout):
            col.addLayout(item, stretch)
        else:
            col.addWidget(item, stretch)
    return page
