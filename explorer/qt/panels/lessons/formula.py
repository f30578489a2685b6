"""Formula panel: scaled dot-product attention for one query token, with the live numbers.

Follows the session's layer, head and query position; the numbers come from
:func:`explorer.core.lessons.formula.attention_steps`, recomputed from q, k and v (not copied from the
trace's weights), and the last line compares the result with the model's own head output. The
written formula is the loaded model's own (:mod:`explorer.core.lessons.formula_text`): its embedding
scale, its norm, QK-norm, the rotation of q and k for RoPE (and which dimensions turn), the key/value
head a query head shares, its scaling, soft cap and window, and how the block adds attention and the
MLP. The query strip shows q_i at each step (h W_Q, after QK-norm, after the rotation); with a soft
cap the table has the score before and after it.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSignalBlocker, QSize, Qt, QTimer
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from explorer.core.lessons.formula import FormulaSteps, LayerFacts, attention_steps, layer_facts
from explorer.core.lessons.formula_text import formula_lines, hidden_keys, window_text
from explorer.core.views import symmetric_levels, token_label
from explorer.qt.plots.heatmap import DIVERGING, Heatmap
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from explorer.qt.widgets.steady import LiveLabel, SteadyBox
from explorer.qt.widgets.not_applicable import NotApplicable

SCALARS = ["j", "key", "q_i·k_j", "s_ij", "exp(s_ij−max)", "a_ij"]
SCALAR_TIPS = ["key position j", "key token at position j", "dot product of the query and the key",
               "scaled score s_ij = q_i·k_j / √d_head (nats, before softmax)",
               "exp(s_ij − max_j s_ij): the softmax numerator, shifted so the largest is 1",
               "attention weight a_ij = exp(s_ij − max) / Σ_j exp(s_ij − max), in [0, 1]"]
OFFSET = "i − j"
OFFSET_TIP = "the offset of the key from the query: with RoPE, q_i·k_j depends on it alone"
UNSCALED_TIP = "score s_ij = q_i·k_j (this model does not divide by √d_head; nats, before softmax)"
RAW = "before cap"
RAW_TIP = "the scaled score before the soft cap c·tanh(s/c) (Gemma 2); s_ij is after it"
CAPPED_TIP = "score s_ij after the soft cap c·tanh(s/c), what the softmax receives (nats)"
VECTOR_COLUMNS = ["k_j", "v_j", "a_ij v_j"]
SHOW_VECTORS_UP_TO = 4  # d_head at most this: vectors also printed in the table (always in tooltips)
AGREE_TOL = 1e-5
ROW_PX = 10  # least height of one key's row in the k_j, v_j and a_ij v_j strips (they share what is left)
MIN_ROW_PX = 24  # height of each row of the q_i and out_i strips (its colour and its label beside it)
MIN_STRIP_ROWS = 4
STRIP_MIN_PX = 120  # each of the three strips' least width beside the table; with less, they go below it
STACKED_TABLE_ROWS = 10  # the table's rows in view when the strips are below it (it scrolls for more)
OUT_ROWS = ["Σ_j a_ij v_j", "head_out"]  # the out_i strip's rows: computed here, and the model's own
NOT_SEEN = QColor("#8a8a8a")


def _vec(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in v) + "]"


class _Body(QWidget):
    """The scrolled part of the panel: as tall as its least height (ROW_PX per key row in the
    strips), not the taller height its plots would like, which tripled the scrolling."""

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return QSize(super().sizeHint().width(), self.minimumSizeHint().height())

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (a scroll area asks this: wrapped labels)
        return max(self.minimumSizeHint().height(), self.layout().minimumHeightForWidth(width))


class FormulaPanel(RefreshWhenShown, QWidget):
    """The course's steps for query token i: q_i, each k_j, q_i·k_j, ÷√d_head, softmax, a_ij v_j, out_i."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.steps: FormulaSteps | None = None
        self._facts: dict[int, LayerFacts] = {}  # per layer, for the current model
        self._facts_model = None
        self._hidden_rows = 0  # rows at the top of the table for keys the window hides
        self._cells: dict[tuple[int, int], tuple] = {}  # (row, column): what the cell shows (text, tip, ink)
        self._shape = (0, 0)  # the table's (rows, columns, layer, head, query) when its cells were last set
        self._last_px = 0  # the width the last (stretched) column's contents need
        self._stale = True
        self.position_box = QSpinBox()
        self.position_box.setToolTip("the query position i (also: click a chip or a row of the attention map)")
        self.position_box.valueChanged.connect(session.set_position)
        self.header = LiveLabel()  # these four change with every keystroke: see LiveLabel
        self.formula = LiveLabel()
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.totals = LiveLabel()
        self.agreement = LiveLabel()
        self.table = QTableWidget(0, len(SCALARS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.horizontalHeader().setStretchLastSection(True)  # columns sized by _fill_table
        self.table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
        self.table.setHorizontalHeaderLabels(SCALARS)
        d_head = "d_head"  # the strips are narrow: the dimension axis says only which one
        self.q_map = Heatmap("q_i (query)", DIVERGING, colorbar=False, row_title="query i", col_title=d_head)
        self.k_map = Heatmap("k_j (keys)", DIVERGING, row_title="key j", col_title=d_head, bar_title="q and k")
        self.v_map = Heatmap("v_j (values)", DIVERGING, row_title="key j", col_title=d_head, bar_title="v")
        self.av_map = Heatmap("a_ij v_j (weighted values)", DIVERGING, row_title="key j", col_title=d_head,
                              bar_title="a_ij v_j and out_i")
        self.out_map = Heatmap("out_i = Σ_j a_ij v_j", DIVERGING, colorbar=False,
                               row_title="out_i", col_title=d_head)
        for hm in (self.k_map, self.v_map, self.av_map):
            hm.sig_row_clicked.connect(self._on_key_clicked)
        self.q_map.setToolTip("the query vector q_i, on the same colour scale as the keys k_j below")
        self.av_map.setToolTip("each value v_j scaled by its attention weight a_ij; their column sums are out_i")
        self.out_map.setToolTip("out_i computed here from q, k and v, and the model's own head output")
        self._rotary_lines = []  # partial rotary: where the turned dimensions end (hidden otherwise)
        for hm in (self.q_map, self.k_map):
            line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#202020", width=2, style=Qt.PenStyle.DashLine))
            line.setToolTip("RoPE turns the dimensions left of this line; those right of it carry no position")
            line.setVisible(False)
            hm.plot.addItem(line)
            self._rotary_lines.append(line)
        self._build_layout()
        self.gate = NotApplicable(self, "formula")  # the model before attention: one sentence instead
        self._set_strip_rows(0)
        self.follow(session)
        self.refresh()

    def _build_layout(self) -> None:
        """The query on top, fixed; below it, scrolled: the formula, then the table (left) beside
        the strips (right), in three columns so that a 1,400 x 900 window shows them all: q_i over
        k_j, v_j, and a_ij v_j over out_i. The key strips keep ROW_PX per key row and the q_i and
        out_i strips MIN_ROW_PX per row, so a short dock or window scrolls instead of squashing them.
        A dock too narrow for the table and three strips of STRIP_MIN_PX beside it (a 960-px window's)
        has the strips below the table, the full width each (:meth:`_fit_table_width`)."""
        top = QHBoxLayout()
        top.addWidget(QLabel("query i"))
        top.addWidget(self.position_box)
        top.addWidget(self.header, 1)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(SteadyBox(self.table))  # a cell's new text lays out only the table
        lv.addWidget(self.totals)
        lv.addWidget(self.agreement)
        lv.addStretch(1)
        right = QWidget()  # q_i over k_j; v_j; out_i (the column sums) over a_ij v_j: key rows side by side
        grid = QGridLayout(right)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.q_map, 0, 0)
        grid.addWidget(self.out_map, 0, 2)
        for c, hm in enumerate((self.k_map, self.v_map, self.av_map)):
            grid.addWidget(hm, 1, c)
            grid.setColumnStretch(c, 1)
        grid.setRowStretch(1, 1)
        self.split = split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 0)  # the table keeps its contents' width, the strips take the rest
        split.setStretchFactor(1, 1)
        self._split_moved_by_user = False
        split.splitterMoved.connect(self._on_split_moved)
        split.installEventFilter(self)
        body = _Body()
        bv = QVBoxLayout(body)
        bv.setContentsMargins(0, 0, 0, 0)
        bv.addWidget(self.formula)
        bv.addWidget(split, 1)
        self.scroll = QScrollArea()
        self.scroll.setWidget(body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self.scroll, 1)

    def _fit_table_width(self) -> None:
        """Give the table's side of the splitter the width of every column (at most 60 % of the width),
        unless the user has moved the splitter; the strips take the rest. When the rest is less than
        three strips of STRIP_MIN_PX, the strips go below the table (their titles were cut and the
        table scrolled sideways in a 960 x 540 window), and back beside it when the panel is wider."""
        needed = self._table_width()
        width = self.split.width()
        stacked = width - min(needed, int(0.6 * width)) < 3 * STRIP_MIN_PX
        self._stack(stacked)
        if stacked:
            return
        left, right = self.split.sizes()
        total = left + right
        want = min(needed, int(0.6 * total))
        if total > 0 and (left < want or (left > want + 8 and not self._split_moved_by_user)):
            self.split.setSizes([want, total - want])

    def _stack(self, stacked: bool) -> None:
        """The strips below the table (``stacked``, the table then STACKED_TABLE_ROWS rows high) or beside it."""
        rows = min(max(self.table.rowCount(), 1), STACKED_TABLE_ROWS)
        t = self.table
        height = (t.horizontalHeader().height() + rows * t.verticalHeader().defaultSectionSize() + 2 * t.frameWidth()
                  + t.horizontalScrollBar().sizeHint().height()) if stacked else 0
        if t.minimumHeight() != height:
            t.setMinimumHeight(height)
        orientation = Qt.Orientation.Vertical if stacked else Qt.Orientation.Horizontal
        if self.split.orientation() != orientation:
            self._split_moved_by_user = False  # the user's split was of the other orientation
            self.split.setOrientation(orientation)

    def _table_width(self) -> int:
        """The width in px the table needs for every column (as :meth:`_size_columns` sized them), its
        frame and its scroll bar; the stretched last column is never narrower than the default section."""
        t, hh = self.table, self.table.horizontalHeader()
        needed = sum(hh.sectionSize(c) for c in range(t.columnCount() - 1))
        if t.columnCount():
            needed += max(self._last_px, hh.defaultSectionSize())
        return needed + 2 * t.frameWidth() + t.verticalScrollBar().sizeHint().width() + 28

    def _on_split_moved(self, *_) -> None:
        self._split_moved_by_user = True

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt naming)
        if watched is self.split and event.type() == QEvent.Type.Resize:
            # After the splitter has laid out its sizes; dropped when the table is gone by then (a
            # window closing while the panel is hidden, as for a model without attention).
            QTimer.singleShot(0, self.table, self._fit_table_width)
        return super().eventFilter(watched, event)

    def _on_key_clicked(self, row: int) -> None:
        self.table.selectRow(row + self._hidden_rows)

    def facts(self, layer: int) -> LayerFacts | None:
        """The loaded model's facts for ``layer`` (norm, window, RoPE angles), read once per model."""
        model = self.session.model
        if model is None:
            return None
        if model is not self._facts_model:
            self._facts, self._facts_model = {}, model
        if layer not in self._facts:
            rope = model.blocks[layer].attn.rope  # shared by the layers with its base (None: no RoPE here)
            angles = next((f.rope_angles for f in self._facts.values()
                           if rope is not None and f.rope_angles is not None and f.rope_theta == rope.theta), None)
            self._facts[layer] = layer_facts(model, layer, angles)
        return self._facts[layer]

    def refresh(self) -> None:
        """Recompute the steps for the session's layer, head and selected position, and redraw."""
        if not self.gate.applies(self.session.config):
            return
        self._stale = False
        s = self.session
        i = s.selected_position()
        last = max((s.trace.n_tokens if s.trace is not None else 1) - 1, 0)
        with QSignalBlocker(self.position_box):  # set only when changed: each set repainted the box
            if self.position_box.maximum() != last:
                self.position_box.setRange(0, last)
            if self.position_box.value() != (i or 0):
                self.position_box.setValue(i or 0)
        if i is None:
            self.steps = None
            self._clear()
            return
        facts = self.facts(s.layer)
        self.steps = attention_steps(s.trace, s.layer, s.head, i, facts)
        self._draw(self.steps, s.tokens, facts)

    def _set_strip_rows(self, rows: int, query_rows: int = 1) -> None:
        """Keep ROW_PX per key row (at least MIN_STRIP_ROWS rows' worth) in the k_j, v_j and a_ij v_j
        strips, and MIN_ROW_PX per row in the q_i (``query_rows``) and out_i (two rows) strips, each
        above its own title, axes and colour bar (:meth:`Heatmap.chrome_height`)."""
        for hm in (self.k_map, self.v_map, self.av_map):
            hm.fit_rows(max(rows, MIN_STRIP_ROWS), ROW_PX)
        self.q_map.fit_rows(query_rows, MIN_ROW_PX, fixed=True)
        self.out_map.fit_rows(2, MIN_ROW_PX, fixed=True)

    def _clear(self) -> None:
        self.header.setText("no tokens yet: type some text")
        for w in (self.formula, self.totals, self.agreement):
            w.setText("")
        self.table.setRowCount(0)
        self._cells.clear()
        self._shape = (0, 0)
        for hm in (self.q_map, self.k_map, self.v_map, self.av_map, self.out_map):
            hm.clear()

    def _draw(self, st: FormulaSteps, tokens: list[str], facts: LayerFacts | None) -> None:
        tok = token_label(tokens[st.position]) if st.position < len(tokens) else "?"
        keys = window_text(st, len(tokens))
        self.header.setText(f"layer {st.layer} · head {st.head} · query {st.position} {tok!r} · {keys}")
        self.formula.setText("<br>".join(html.escape(line) for line in formula_lines(st, facts)))
        self._fill_table(st, tokens)
        self._fit_table_width()
        self.totals.setText(
            f"max_j s_ij = {st.max_score:.6f} · Σ_j exp(s_ij − max) = {st.norm:.6f} · "
            f"Σ_j a_ij = {st.weights.sum():.6f}")
        agree = "they agree" if st.max_abs_diff < AGREE_TOL else "they DISAGREE"
        self.agreement.setText(
            f"<b>out_i</b> computed here from q, k, v versus the model's head_out[{st.head}, {st.position}]: "
            f"max |Δ| = {st.max_abs_diff:.1e}, {agree}." if np.isfinite(st.max_abs_diff) else
            "<b>Some of these values are not numbers</b> (NaN or inf: the model overflowed, see the status "
            "bar), so out_i cannot be compared with the model's head_out.")
        iv = self.session.trace.interventions if self.session.trace is not None else None
        if iv is not None and (st.layer, st.head) in iv.ablate:  # switched off in the Why panel or the grid
            self.agreement.setText(f"<b>This head is switched off</b> ({iv.describe()}): the model zeroed its "
                                   "head_out, so it adds nothing; out_i here is what it would add.")
        keys = [f"{j} {token_label(tokens[j]) if j < len(tokens) else '?'}" for j in st.keys]
        rows, labels, title = _query_rows(st)  # q_i, with its QK-norm and its rotation where the layer has them
        qk = symmetric_levels(st.k, *rows)
        self._mark_rotated(st)
        self.q_map.plot.setTitle(title)
        self.q_map.set_data(np.stack(rows), qk, labels, None, blank=False)
        self.k_map.plot.setTitle("k_j (keys, after QK-norm and RoPE's rotation R(j))" if st.rotation is not None and
                                 st.qk_norm is not None else "k_j (keys, after RoPE's rotation R(j))" if st.rotation is not None
                                 else "k_j (keys)" if len(st.kv_group) < 2 else f"k_j (keys of kv head {st.kv_head})")
        self.k_map.set_data(st.k, qk, keys, None, blank=False)
        self.v_map.set_data(st.v, symmetric_levels(st.v), keys, None, blank=False)
        out_levels = symmetric_levels(st.weighted_v, st.out, st.trace_out)
        self.av_map.set_data(st.weighted_v, out_levels, keys, None, blank=False)
        self.out_map.set_data(np.stack([st.out, st.trace_out]), out_levels, OUT_ROWS, None,
                              blank=False)
        self._set_strip_rows(len(keys), len(rows))  # after the data: the axes are sized to their labels

    def _mark_rotated(self, st: FormulaSteps) -> None:
        """Under partial rotary, a line in the q and k strips where the turned dimensions end."""
        r = st.rotation.rotary_dims if st.rotation is not None and st.rotation.partial else None
        for line in self._rotary_lines:
            line.setVisible(r is not None)
            if r is not None:
                line.setValue(r)

    def _headers(self, st: FormulaSteps) -> tuple[list[str], list[str]]:
        """The table's columns and their tooltips: an i − j column for RoPE, the scaling the model uses."""
        headers, tips = list(SCALARS), list(SCALAR_TIPS)
        if not st.scaled_by_sqrt_d_head:
            tips[3] = UNSCALED_TIP
        if st.softcap:  # the score before and after c·tanh(s/c)
            tips[3] = CAPPED_TIP
            headers.insert(3, RAW)
            tips.insert(3, RAW_TIP)
        if st.rope:
            headers.insert(2, OFFSET)
            tips.insert(2, OFFSET_TIP)
        return headers + (VECTOR_COLUMNS if st.d_head <= SHOW_VECTORS_UP_TO else []), tips

    def _fill_table(self, st: FormulaSteps, tokens: list[str]) -> None:
        headers, tips = self._headers(st)
        hidden = hidden_keys(st, len(tokens))
        shape = (len(hidden) + len(st.keys), len(headers), st.layer, st.head, st.position)
        if shape != self._shape:
            self._cells.clear()  # rows or columns made anew: every cell is set
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        for c, tip in enumerate(tips):
            self.table.horizontalHeaderItem(c).setToolTip(tip)
        self._hidden_rows = len(hidden)
        self.table.setRowCount(shape[0])
        ink, changed = self.table.palette().text(), set()  # the columns with a cell set anew

        def name(j: int) -> str:
            return token_label(tokens[j]) if j < len(tokens) else "?"

        def offset(j: int) -> list[str]:  # the i − j column, for RoPE
            return [str(st.position - int(j))] if st.rope else []

        for r, j in enumerate(hidden):
            cells = [str(j), name(j)] + offset(j) + ["not seen"] + ["—"] * (3 if st.softcap else 2) + ["0"]
            tip = (f"key {j} is outside this layer's local window of {st.window or len(st.keys)} keys: "
                   "query i does not see it (weight 0)")
            changed |= self._set_row(r, cells + [""] * (len(headers) - len(cells)), tip, NOT_SEEN)
        for r, j in enumerate(st.keys):
            raw = [f"{st.raw_scores[r]:.6f}"] if st.softcap else []
            cells = [str(int(j)), name(j)] + offset(j) + [
                f"{st.dots[r]:.6f}", *raw, f"{st.scores[r]:.6f}", f"{st.exps[r]:.6f}", f"{st.weights[r]:.6f}"]
            if st.d_head <= SHOW_VECTORS_UP_TO:
                cells += [_vec(st.k[r]), _vec(st.v[r]), _vec(st.weighted_v[r])]
            tip = (f"k_{j} = {_vec(st.k[r])}\nv_{j} = {_vec(st.v[r])}\na_ij v_j = {_vec(st.weighted_v[r])}"
                   if st.d_head <= 32 else "hover the strips on the right for the exact vector values")
            changed |= self._set_row(len(hidden) + r, cells, tip, ink)
        self._size_columns(changed, same_shape=shape == self._shape)
        self._shape = shape

    def _set_row(self, r: int, cells: list[str], tip: str, ink: QColor | QBrush) -> set[int]:
        """Set the cells of row ``r`` that show something new (typing at the end changes the numbers
        only, and Qt repaints a cell for each set); returns their columns."""
        key, changed = QBrush(ink).color().rgba(), set()
        for c, text in enumerate(cells):
            if self._cells.get((r, c)) == (text, tip, key):
                continue
            item = self.table.item(r, c)
            if item is None:
                item = QTableWidgetItem()
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
            item.setText(text)
            item.setToolTip(tip)
            item.setForeground(ink)
            self._cells[(r, c)] = (text, tip, key)
            changed.add(c)
        return changed

    def _size_columns(self, changed: set[int], same_shape: bool) -> None:
        """Each column but the stretched last as wide as its contents, measured once after every cell is
        set (the header's ResizeToContents mode measured a whole column again for each new cell text: a
        keystroke at T = 32 changes 128 cells, 380 ms on a busy machine).

        While the table keeps its rows, columns and query (typing at the end of the text), a column only grows:
        the last key's name changes on every keystroke ('<unk>' and back), and a column 1 px narrower
        moved every column right of it, in a later turn (Qt's view resizes columns on a timer), so that
        the table was painted twice and the panel laid out again (3 paint passes more per keystroke).
        Then only the ``changed`` columns are measured (the keys' j and names stay, but for the last).
        """
        t, hh = self.table, self.table.horizontalHeader()
        for c in range(t.columnCount()) if not same_shape else sorted(changed):
            want = max(t.sizeHintForColumn(c), hh.sectionSizeHint(c), hh.minimumSectionSize())
            if c == t.columnCount() - 1:
                self._last_px = want  # the header stretches it over the rest of the table's width
            elif want > hh.sectionSize(c) or (want < hh.sectionSize(c) and not same_shape):
                hh.resizeSection(c, want)


def _query_rows(st: FormulaSteps) -> tuple[list[np.ndarray], list[str], str]:
    """The query strip's rows, their labels and its title: q_i alone, or h_i W_Q, its QK-norm and its
    rotation R(i) where the layer has them (under partial rotary the title says which dimensions turn)."""
    rows, labels = [], []
    if st.qk_norm is not None:
        rows, labels = [st.qk_norm.q_before], ["h W_Q"]
    r = st.rotation
    if r is not None:
        rows += [r.q_pre, st.q]
        labels += ["QK-normed" if st.qk_norm is not None else "before", f"R({st.position}) q"]
        turned = f" (dimensions 0–{r.rotary_dims - 1} turn, the rest carry no position)" if r.partial else ""
        if st.qk_norm is not None:
            return rows, labels, f"q_i: h W_Q, after QK-norm, after RoPE's rotation R({st.position}){turned}"
        return rows, labels, f"q_i before and after RoPE's rotation R({st.position}){turned}"
    if st.qk_norm is not None:
        return rows + [st.q], labels + ["QK-normed"], "q_i before and after QK-norm"
    return [st.q], [f"q_{st.position}"], "q_i (query)"
