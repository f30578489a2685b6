"""Positional-encoding panel: reorder the tokens and see what order changes, with PE on and off.

The numbers come from :func:`explorer.core.lessons.positional.compare_orders` (four traces: original and
reordered, positional encoding on and off), run as a job of the session (:meth:`Session.submit`:
on the worker thread when the model is slow); this file only asks for them and draws them. For a
RoPE model the switch is the rotation of q and k (:func:`explorer.core.architecture.position_switch`),
and the shift test (:class:`explorer.qt.panels.lessons.positional.shift.ShiftView`) shows that its scores
depend on offsets only.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from explorer.core.lessons import positional
from explorer.core.architecture import order_warning, position_switch, switch_name
from explorer.core.lessons.positional_sentence import fmt
from explorer.core.views import axis_labels, token_label
from explorer.qt import theme
from explorer.qt.plots.heatmap import SEQUENTIAL, Heatmap, settle_view
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.panels.lessons.positional.order_chips import OrderChips
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.scheduling.scheduler import NOTICEABLE_MS
from explorer.qt.panels.lessons.positional.shift import ShiftView
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.style import style_plots
from explorer.qt.session import Session
from explorer.qt.widgets.flow_layout import FlowLayout
from explorer.qt.widgets.not_applicable import NotApplicable
from explorer.qt.widgets.steady import LiveLabel, set_range
from model.formats.refs import BuiltinRef
from model.tokens.names import token_name

TWIN = BuiltinRef("tinystories-1L1H-nope").path  # the shipped twin, trained without positional encoding
TWIN_OF = "tinystories-1L1H.safetensors"  # the model the twin was trained beside (same recipe, with PE)
TOP_K = 5
PASSES = 4  # forward passes per comparison: original and reordered, PE on and off
SLOW_MS = 250.0  # a comparison expected to take longer stops following every keystroke (Update button)
BAR_H = 0.4
COLUMNS = ["token", "now at", "attn Δ, {} off", "block Δ, {} off", "attn Δ, {} on", "block Δ, {} on"]
CHANGED = QColor("#fbd9b5")


class PositionalPanel(RefreshWhenShown, QWidget):
    """Original order versus a reordering: attention weights, next-token bars, the Δ table and
    the sentence the numbers support, with positional encoding on and off."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.mode: tuple = ("reverse",)
        self.perm = np.zeros(0, np.int64)
        self.comparison: positional.OrderComparison | None = None
        self._stale = True
        self._build_controls()
        self._build_views()
        self._build_layout()
        self.gate = NotApplicable(self, "positional")  # the model before attention: one sentence instead
        self.pace_with(session)
        session.sig_model_changed.connect(self._on_session_changed)
        session.sig_trace_changed.connect(self._on_session_text_changed)  # the switches stay: not laid out again
        session.sig_selection_changed.connect(self._on_session_text_changed)
        session.sig_options_changed.connect(self._on_session_changed)
        self.refresh()

    # ---- building -------------------------------------------------------------------------------
    def _build_controls(self) -> None:
        s = self.session
        self.pe_box = QCheckBox(position_switch(None, formula=True).label)
        self.causal_box = QCheckBox("causal mask")
        self.pe_box.toggled.connect(s.set_positional_encoding)
        self.causal_box.toggled.connect(s.set_causal)
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet(theme.caution_style(self))
        self.twin_button = QPushButton("Open the twin trained without positional encoding")
        self.twin_button.clicked.connect(self.open_twin)
        self.twin_button.setToolTip("the course's model trained the same way without positional encoding")
        self.shift_view = ShiftView(s)
        self.keep_last = QCheckBox("keep the last token in place")
        self.keep_last.setChecked(True)  # the lesson's case: the prediction's token stays last
        self.keep_last.toggled.connect(lambda _: self._set_mode(self.mode))
        self.i_box, self.j_box = QSpinBox(), QSpinBox()
        self.buttons = {}
        for name, text, mode in (("reverse", "Reverse", lambda: ("reverse",)),
                                 ("rotate", "Rotate ←", lambda: ("rotate", 1)),
                                 ("shuffle", "Shuffle", lambda: ("shuffle", 0)),
                                 ("again", "Shuffle again", self._next_shuffle),
                                 ("swap", "Swap", lambda: ("swap", self.i_box.value(), self.j_box.value()))):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, m=mode: self._set_mode(m()))
            self.buttons[name] = button
        self.last_ms = 0.0  # how long the last comparison took
        self._waiting = False  # a comparison was asked for and has not arrived
        self._out_of_date = False  # the session changed since the comparison asked for last
        self.update_button = QPushButton("Update")
        self.update_button.clicked.connect(self.refresh)
        self.update_button.setVisible(False)
        self.chips = OrderChips()
        self.chips.sig_order_changed.connect(self._on_chips_order_changed)

    def _build_views(self) -> None:
        self.maps, self.bar_plots, self.bars, self.row_labels = {}, {}, {}, {}
        self.grid = QGridLayout()
        self.grid.setContentsMargins(0, 0, 0, 0)
        for row, pe in enumerate((True, False)):
            self.row_labels[pe] = QLabel(f"<b>PE<br>{'on' if pe else 'off'}</b>")
            self.grid.addWidget(self.row_labels[pe], row, 0)
            for col, reordered in enumerate((False, True)):
                order = "reordered" if reordered else "original"  # short: the row label says PE on/off
                hm = Heatmap(f"attention, {order}", SEQUENTIAL, col_axis="top", colorbar=False,
                             row_title="query i", col_title="key j")
                hm.setToolTip(f"attention weights of the selected head, {order} order, PE {'on' if pe else 'off'}")
                hm.setMinimumWidth(120)
                hm.keep_readable()  # its rows' room: the dock scrolls instead (they were 73 px for 21 rows)
                self.maps[pe, reordered] = hm
                self.grid.addWidget(hm, row, col + 1)
            view = pg.GraphicsLayoutWidget()
            view.setMinimumSize(120, 120)  # wider when its labels need it: _fit_bar_view
            plot = view.addPlot(title="next token", axisItems={"left": LabelAxis("left")})
            view.setToolTip(f"next-token probabilities at the last position, PE {'on' if pe else 'off'}")
            plot.invertY(True)
            plot.setMouseEnabled(False, False)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            # The legend in a row of the plot's own layout under its axis, not over the bars (in the
            # view's corner it covered the reordered bars, which are long where the original's are short).
            plot.legend = pg.LegendItem(labelTextSize="8pt", verSpacing=-6)
            plot.layout.addItem(plot.legend, 4, 1)  # plot(name=...) and BarGraphItem(name=...) entries go here
            for reordered, colour in ((False, "#4477aa"), (True, "#ee8833")):
                bars = pg.BarGraphItem(x0=[], y=[], height=BAR_H, width=[], brush=colour,
                                       name="reordered" if reordered else "original")
                plot.addItem(bars)
                self.bars[pe, reordered] = bars
            style_plots(view, [plot], self)  # ground, text, bars and legend read in either theme
            self.bar_plots[pe] = plot
            plot.geometryChanged.connect(lambda plot=plot: self._fit_bar_view(plot))  # its axis grew to its labels
            self.grid.addWidget(view, row, 3)
        for c in (1, 2, 3):
            self.grid.setColumnStretch(c, 1)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([c.format("PE") for c in COLUMNS])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.tv_label = LiveLabel()  # both follow every keystroke
        self.sentence = LiveLabel()
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sentence.setStyleSheet(theme.soft_box_style(self))

    def _build_layout(self) -> None:
        """The switches and the reorder buttons in lines that wrap (never wider than the dock), the
        chips, the maps and bars, then the sentences and the table, in one column: a dock too low
        for the maps' rows (:meth:`Heatmap.keep_readable`) scrolls, and the wrapped sentences get the
        height of their lines (a splitter between the maps and the sentences squeezed them)."""
        options = FlowLayout(spacing=6)
        for w in (self.pe_box, self.causal_box, self.twin_button):
            options.addWidget(w)
        swap = QWidget()  # "swap [i] with [j] Swap" wraps as one
        row = QHBoxLayout(swap)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (QLabel("swap"), self.i_box, QLabel("with"), self.j_box, self.buttons["swap"]):
            row.addWidget(w)
        reorder = FlowLayout(spacing=6)
        for w in (*(self.buttons[n] for n in ("reverse", "rotate", "shuffle", "again")), swap, self.keep_last,
                  self.update_button):
            reorder.addWidget(w)
        views = QWidget()
        views.setLayout(self.grid)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(options)
        layout.addWidget(self.warning)
        layout.addLayout(reorder)
        layout.addWidget(self.chips)
        layout.addWidget(views, 3)
        for w in (self.sentence, self.shift_view, self.tv_label):
            layout.addWidget(w)
        layout.addWidget(self.table, 2)

    # ---- reordering -------------------------------------------------------------------------------
    def _next_shuffle(self) -> tuple:
        seed = self.mode[1] + 1 if self.mode[0] == "shuffle" else 1
        return ("shuffle", seed)

    def permutation(self, n: int) -> np.ndarray:
        """The current reordering applied to n tokens (:func:`explorer.core.lessons.positional.order_for`)."""
        return positional.order_for(self.mode, n, self.keep_last.isChecked())

    def _set_mode(self, mode: tuple) -> None:
        self.mode = mode
        self._stale = True
        self.refresh()  # the user's own action: computed even when the model is slow

    def _on_chips_order_changed(self, order: list) -> None:
        self._set_mode(("custom", tuple(int(p) for p in order)))

    # ---- model switching ----------------------------------------------------------------------------
    def open_twin(self) -> None:
        """Ask for the twin checkpoint trained without positional encoding (the window opens it)."""
        self.session.request_open(TWIN)

    def _update_options(self) -> None:
        """The switches, labels and warning for the loaded model's positional scheme."""
        s = self.session
        switch, name = position_switch(s.config, formula=True), switch_name(s.config)
        for box, value in ((self.pe_box, s.positional_encoding and switch.enabled), (self.causal_box, s.causal)):
            with QSignalBlocker(box):
                box.setChecked(value)
        self.pe_box.setText(switch.label)
        self.pe_box.setEnabled(switch.enabled)
        self.pe_box.setToolTip(switch.tooltip)
        for pe, label in self.row_labels.items():
            label.setText(f"<b>{name}<br>{'on' if pe else 'off'}</b>")
        self.table.setHorizontalHeaderLabels([c.format(name) for c in COLUMNS])
        # The twin is the course's model trained the same way without its table: offered for that model only.
        name = Path(s.checkpoint.path).name if s.checkpoint and s.checkpoint.path else ""
        self.twin_button.setVisible(name == TWIN_OF and TWIN.exists())
        self.warning.setText(order_warning(s.config, s.positional_encoding, self.twin_button.isVisibleTo(self)))
        self.warning.setVisible(bool(self.warning.text()))  # its own line: none without a warning

    # ---- computing --------------------------------------------------------------------------------------
    def _current(self) -> tuple[np.ndarray, list[str]]:
        """The session's ids and token texts (empty without a trace)."""
        s = self.session
        if s.trace is None or s.model is None:
            return np.zeros(0, np.int64), []
        return s.trace.token_ids, s.tokens

    def _update_order(self, ids: np.ndarray, tokens: list[str]) -> None:
        """The order for the current tokens, shown on the chips with the tokens' current texts."""
        n = len(ids)
        for box in (self.i_box, self.j_box):
            set_range(box, 0, max(n - 1, 0))
        self.perm = positional.canonical_order(ids, self.permutation(n))
        self.chips.show_order(tokens, self.perm)

    def _slow(self) -> bool:
        """Whether the comparison, with the current model and text, is too slow to follow every edit."""
        return self.session.is_slow(PASSES, SLOW_MS)

    def _on_session_changed(self) -> None:
        if self.gate.applies(self.session.config):
            self._update_options()
        self._on_session_text_changed()

    def _on_session_text_changed(self) -> None:
        """A new trace or selection: the comparison is out of date (the switches and labels, which
        follow the model and its options, are as they were; setting them again cost a keystroke
        0.2 ms while the panel was hidden)."""
        if not self.gate.applies(self.session.config):
            return
        self._stale = True
        if self.is_shown():  # else when shown (refresh): a chip per token, 1,024 of them, took ms per key
            self._update_order(*self._current())
        self._out_of_date = True
        if not self._show_update_state():
            self.schedule_refresh()

    def _show_update_state(self) -> bool:
        """Show the Update button while the comparison is too slow for the current model to follow
        every edit, saying whether what is drawn is out of date. Returns whether it is shown."""
        slow = self._slow()
        self.update_button.setVisible(slow)
        self.update_button.setText("Update (out of date)" if self._out_of_date else "Update")
        self.update_button.setToolTip(
            f"The four traces take about {self.session.expected_ms(PASSES):.0f} ms with this model: the "
            "comparison follows the text and the selection only when you press Update")
        return slow

    def refresh(self) -> None:
        """Ask for the comparison of the session's tokens, layer, head and mask (drawn when it arrives)."""
        if not self.gate.applies(self.session.config):
            return
        self._stale = self._out_of_date = False
        self._update_options()
        self._show_update_state()
        ids, tokens = self._current()
        self._update_order(ids, tokens)
        self.shift_view.refresh()
        s = self.session
        if len(ids) == 0:
            s.cancel(self)  # a comparison still running is for text that is gone
            self.comparison = None
            self._clear()
            return
        self._waiting = True
        request = positional.CompareRequest(ids, self.perm, s.layer, s.head, s.causal, tuple(tokens), TOP_K)
        s.submit(self, positional.compare_job, request, self._on_comparison, passes=PASSES)
        # On the worker thread: the old numbers stay until the new ones arrive, with a note when
        # that takes long enough to be seen (one for a few ms only flashed and laid the panel out twice).
        if self._waiting and s.is_slow(PASSES, NOTICEABLE_MS):
            self.tv_label.setText("Computing the four traces for the current text…")

    def _on_comparison(self, result: JobResult) -> None:
        self._waiting = False
        self._show_update_state()
        if result.error:
            self.comparison = None
            self.sentence.setText(f"The comparison failed: {html.escape(result.error)}")
            return
        self.comparison = result.value
        self.last_ms = result.ms
        self._draw(self.comparison, list(result.inputs.tokens))

    def _clear(self) -> None:
        for hm in self.maps.values():
            hm.clear()
        for bars in self.bars.values():
            bars.setOpts(x0=[], y=[], width=[], height=BAR_H)
        for plot in self.bar_plots.values():
            plot.getAxis("left").setTicks([[], []])
        self.table.setRowCount(0)
        self.tv_label.setText("")
        self.sentence.setText("No tokens yet: type some text to reorder.")

    def _token_name(self, token_id: int) -> str:
        return token_name(self.session.tokenizer, token_id)

    def _draw(self, c: positional.OrderComparison, tokens: list[str]) -> None:
        reordered_tokens = [tokens[p] for p in c.perm]
        for (pe, reordered), hm in self.maps.items():
            labels = axis_labels(reordered_tokens if reordered else tokens)
            hm.set_data(c.run(pe, reordered).attn_weights, (0.0, 1.0), labels, [lb.split(" ", 1)[1] for lb in labels])
        for pe, plot in self.bar_plots.items():
            self._draw_bars(c, pe, plot)
        self._fill_table(c, tokens)
        name = "RoPE" if c.positional == "rope" else "PE"
        self.tv_label.setText(
            f"Next token at the last position, total variation between the two orders: "
            f"{name} off {fmt(c.last_tv[0])} · {name} on {fmt(c.last_tv[1])}  (Δ = ‖out_i − out'_i‖ / ‖out_i‖, "
            f"each token against itself at its new place; shaded above {positional.REL_TOL:g})")
        pe = self.session.positional_encoding
        first, second = (pe, not pe)
        what = "RoPE rotation" if c.positional == "rope" else "Positional encoding"
        self.sentence.setText(
            f"<b>{what} {'on' if first else 'off'}:</b> {html.escape(c.sentence(first))}<br>"
            f"<span style='color:{theme.muted_text(self).name()}'><b>{'On' if second else 'Off'}:</b> "
            f"{html.escape(c.sentence(second))}</span>"
            + (f"<br><i>{html.escape(c.repeats)}</i>" if c.repeats else ""))  # why equal tokens do not cross

    def _draw_bars(self, c: positional.OrderComparison, pe: bool, plot) -> None:
        """Grouped bars: the union of both orders' top tokens, original (blue) above reordered (orange)."""
        a, b = c.run(pe, False), c.run(pe, True)
        ids = list(dict.fromkeys([int(i) for i in a.top_ids] + [int(i) for i in b.top_ids]))
        ys = np.arange(len(ids), dtype=float)
        pa, pb = a.last_probs[ids], b.last_probs[ids]
        self.bars[pe, False].setOpts(x0=np.zeros(len(ids)), y=ys - BAR_H / 2, width=pa, height=BAR_H)
        self.bars[pe, True].setOpts(x0=np.zeros(len(ids)), y=ys + BAR_H / 2, width=pb, height=BAR_H)
        ticks = [(y, f"{token_label(self._token_name(i), 9)} {p:.3f}/{q:.3f}") for y, i, p, q in zip(ys, ids, pa, pb)]
        plot.getAxis("left").setTicks([ticks, []])
        self._fit_bar_view(plot)
        top = max(float(c.run(True, False).top_probs.max()), float(c.run(True, True).top_probs.max()),
                  float(c.run(False, False).top_probs.max()), float(c.run(False, True).top_probs.max()))
        plot.setRange(xRange=(0, top * 1.05), yRange=(-0.5, max(len(ids), 1) - 0.5), padding=0)
        settle_view(plot.getViewBox())  # the range applied now, not in a first paint that paints again

    @staticmethod
    def _fit_bar_view(plot) -> None:
        """The bar plot's view at least as wide as the plot's least width (its labels, "token p/p'",
        and its legend): narrower, the plot ran out of the view and its long bars were not drawn."""
        view = plot.getViewWidget()
        least = view.centralWidget.effectiveSizeHint(Qt.SizeHint.MinimumSize).width()  # the plot and its margins
        need = max(120, math.ceil(least) + 2 * view.frameWidth())
        if view.minimumWidth() != need:
            view.setMinimumWidth(need)

    def _fill_table(self, c: positional.OrderComparison, tokens: list[str]) -> None:
        n = len(tokens)
        self.table.setRowCount(n)
        values = (c.attn_delta[0], c.block_delta[0], c.attn_delta[1], c.block_delta[1])
        for i in range(n):
            cells = [f"{i} {token_label(tokens[i])}", str(int(c.inverse[i]))] + [f"{v[i]:.2e}" for v in values]
            for col, text in enumerate(cells):
                item = self.table.item(i, col)
                if item is None:
                    item = QTableWidgetItem()
                    self.table.setItem(i, col, item)
                item.setText(text)
                shade = col >= 2 and values[col - 2][i] > positional.REL_TOL
                item.setBackground(CHANGED if shade else QBrush())  # unshaded: the palette's own
                item.setForeground(QBrush(QColor("#000000")) if shade else QBrush())
