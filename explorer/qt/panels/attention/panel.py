"""Attention panel: scores and softmax weights of the selected head, and a grid of every head."""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox, QGraphicsRectItem, QHBoxLayout, QLabel, QMenu, QSpinBox, QTabWidget, QVBoxLayout, QWidget,
)

from explorer.core.score_text import score_title
from explorer.core.attention_sink import sink_facts, sink_line, sink_paragraph
from explorer.core.head_maps import HeadScores, Mosaic, MosaicRequest, mosaic_image, mosaic_job
from explorer.core.views import axis_labels, head_names, token_label
from explorer.core.why import toggled_head
from explorer.qt import theme
from explorer.qt.plots.heatmap import DIVERGING, SEQUENTIAL, Heatmap, colormap, settle_view
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.panels.attention.head_types import HeadTypesView
from explorer.qt.widgets.pin_note import PinNote
from explorer.qt.widgets.not_applicable import NotApplicable
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import MatrixImage
from explorer.qt.session import Session

WEIGHT_LEVELS = (0.0, 1.0)


class HeadGrid(pg.GraphicsLayoutWidget):
    """Every head's attention weights as one mosaic image: rows = layers, columns = heads.

    One image item for all heads (not a plot per head: 144 plots took 6.5 s to build and many ms
    to paint). Maps larger than :data:`CELL` are max-pooled thumbnails
    (:func:`explorer.core.head_maps.pool_heads`); clicking a tile picks it.
    Tiles stay square and the mosaic sits in the top-left corner, next to its L/H labels (a locked
    aspect would centre it, far from the labels of a wide widget); the selected head is outlined.
    """

    CELL = 48
    GAP = 2

    sig_head_picked = Signal(int, int)
    """A tile was clicked: its (layer, head)."""
    sig_head_toggled = Signal(int, int)
    """A tile was Ctrl+clicked, or "switch off / on" chosen from its right-click menu: its (layer, head)."""
    sig_restore_requested = Signal()
    """"Restore all heads" was chosen from a tile's right-click menu."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(theme.plot_background(self))
        self.plot = self.addPlot(axisItems={"left": LabelAxis("left"), "top": LabelAxis("top")})
        self.plot.invertY(True)
        self.plot.hideAxis("bottom")
        self.plot.showAxis("top")
        self.plot.setMouseEnabled(False, False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.getViewBox().setDefaultPadding(0)
        self.image = MatrixImage()
        self.image.setColorMap(colormap(SEQUENTIAL))
        self.plot.addItem(self.image)
        self.marker = QGraphicsRectItem()
        self.marker.setPen(pg.mkPen("r", width=2, cosmetic=True))
        self.marker.setVisible(False)
        self.plot.addItem(self.marker)
        self.shape = (0, 0)  # (n_layers, n_heads)
        self.tile = 0  # side of one tile in image pixels, gap included
        self.selected: tuple[int, int] | None = None  # (layer, head) to outline
        self.off: tuple[tuple[int, int], ...] = ()  # heads switched off: shaded
        self._shades: list[QGraphicsRectItem] = []
        self.menu: QMenu | None = None  # the last right-click menu (tests trigger its actions)
        self.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.plot.getViewBox().sigResized.connect(self._fit_view)

    def set_mosaic(self, mosaic: Mosaic | None, names: list[str] = ()) -> None:
        """Show every head's pooled attention weights (levels 0..1), columns named ``names``
        (:func:`explorer.core.views.head_names`); clear for None."""
        if mosaic is None:
            self.image.clear()
            self.marker.setVisible(False)
            return
        shape = mosaic.pooled.shape[:2]
        tile = mosaic.side + self.GAP
        self.image.setImage(mosaic_image(mosaic, self.GAP), levels=WEIGHT_LEVELS, autoLevels=False)
        if (shape, tile, names) != (self.shape, self.tile, getattr(self, "_names", None)):
            self.shape, self.tile, self._names = shape, tile, names
            self._fit_view()
            half = (tile - self.GAP) / 2
            self.plot.getAxis("left").setTicks([[(i * tile + half, f"L{i}") for i in range(shape[0])], []])
            self.plot.getAxis("top").setTicks([[(h * tile + half, name) for h, name in enumerate(names)], []])
            self._shade()
        if self.selected is not None:
            self.mark(*self.selected)
        settle_view(self.plot.getViewBox())

    def _fit_view(self, *_) -> None:
        """Square image pixels, the mosaic as large as fits, anchored at the top-left corner."""
        if self.tile == 0:
            return
        vb = self.plot.getViewBox()
        w, h = max(vb.width(), 1.0), max(vb.height(), 1.0)
        rows, cols = self.shape[0] * self.tile, self.shape[1] * self.tile
        scale = min(w / cols, h / rows)  # screen pixels per image pixel
        self.plot.setRange(xRange=(0, w / scale), yRange=(0, h / scale), padding=0)

    def mark(self, layer: int, head: int) -> None:
        """Outline the selected head's tile (kept across later traces)."""
        self.selected = (layer, head)
        if self.tile == 0 or self.image.image is None:
            return
        side = self.tile - self.GAP
        self.marker.setRect(QRectF(head * self.tile, layer * self.tile, side, side))
        self.marker.setVisible(True)

    def tile_at(self, scene_pos) -> tuple[int, int] | None:
        """(layer, head) of the tile under a scene position, or None."""
        if self.tile == 0 or not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.getViewBox().mapSceneToView(scene_pos)
        layer, head = int(p.y() // self.tile), int(p.x() // self.tile)
        if 0 <= layer < self.shape[0] and 0 <= head < self.shape[1]:
            return layer, head
        return None

    def set_off(self, off: tuple[tuple[int, int], ...]) -> None:
        """Shade the tiles of the heads switched off."""
        if tuple(off) != self.off:
            self.off = tuple(off)
            self._shade()

    def _shade(self) -> None:
        for item in self._shades:
            self.plot.removeItem(item)
        self._shades = []
        side = self.tile - self.GAP
        for layer, head in self.off if self.tile else ():
            item = QGraphicsRectItem(QRectF(head * self.tile, layer * self.tile, side, side))
            item.setBrush(pg.mkBrush(60, 60, 60, 170))
            item.setPen(pg.mkPen("#c03020", width=2, cosmetic=True))
            self.plot.addItem(item)
            self._shades.append(item)

    def _on_scene_clicked(self, event) -> None:
        picked = self.tile_at(event.scenePos())
        if picked is None:
            return
        if event.button() == Qt.MouseButton.RightButton:
            layer, head = picked
            self.menu = QMenu(self)
            word = "back on" if picked in self.off else "off"
            self.menu.addAction(f"Switch L{layer}H{head} {word}", lambda: self.sig_head_toggled.emit(layer, head))
            restore = self.menu.addAction("Restore all heads", self.sig_restore_requested.emit)
            restore.setEnabled(bool(self.off))
            self.menu.popup(event.screenPos().toPoint())
        elif event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.sig_head_toggled.emit(*picked)
        else:
            self.sig_head_picked.emit(*picked)


class AttentionPanel(RefreshWhenShown, QWidget):
    """Scores q_i.k_j / sqrt(d_head) (masked cells blank) and weights (levels 0..1) of one head.

    Queries run down the side with row 0 at the top, keys along the top. Clicking a row pins
    that query (clicking it again releases it); hovering a row shows it in every panel. Under the
    maps, the head's mean weight on the first token, with a paragraph that explains it.

    Attributes
    ----------
    why_hook : callable or None
        Called with no argument from the paragraph's "Why panel" link, when set (the main window
        sets it when a Why panel exists).
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.layer_box, self.head_box = QSpinBox(), QSpinBox()
        self.all_heads = QCheckBox("all heads")
        self.grid_note = QLabel()  # which tiles of the grid hold values that are not numbers
        self.grid_note.setStyleSheet(theme.note_style(self))
        self.grid_note.setVisible(False)
        self.scores = Heatmap("scores q·k/√d_head", DIVERGING, col_axis="top", bar_title="score, before softmax")
        self.weights = Heatmap("weights = softmax of each row", SEQUENTIAL, col_axis="top", bar_title="weight 0..1")
        self.grid = HeadGrid()
        self.grid.sig_head_picked.connect(self._on_grid_head_picked)
        self.grid.sig_head_toggled.connect(
            lambda layer, head: session.set_interventions(toggled_head(session.interventions, layer, head)))
        self.grid.sig_restore_requested.connect(lambda: session.set_interventions(None))
        self.grid.setToolTip("click a head to show it; Ctrl+click or right-click to switch it off (every panel "
                             "follows)")
        self.off_note = QLabel()  # says that the selected head is switched off
        self.off_note.setStyleSheet(theme.note_style(self))
        self.head_types = HeadTypesView(session)  # every head's type on the probe or the text
        self.all_heads_tabs = QTabWidget()
        self.all_heads_tabs.addTab(self.grid, "attention weights")
        self.all_heads_tabs.addTab(self.head_types, "head types")
        self.all_heads_tabs.currentChanged.connect(lambda _: self._on_all_heads_toggled(self.all_heads.isChecked()))
        self.all_heads_tabs.setVisible(False)
        for hm, name in ((self.scores, "score"), (self.weights, "weight")):
            hm.describe = self._describer(hm, name)
            hm.sig_row_clicked.connect(session.toggle_pin)
            hm.sig_row_hovered.connect(session.set_hover)
        self.pin_note = PinNote(session)
        self.sink = QLabel()  # the mean weight on the first token, with a link to the paragraph
        self.sink.setTextFormat(Qt.TextFormat.RichText)
        self.sink.linkActivated.connect(self._on_sink_link)
        self.sink_text = QLabel()  # the paragraph, shown from the link
        self.sink_text.setWordWrap(True)
        self.sink_text.setTextFormat(Qt.TextFormat.RichText)
        self.sink_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.sink_text.linkActivated.connect(self._on_sink_link)
        self.sink_text.setVisible(False)
        self.why_hook = None
        self._build_layout()
        self.gate = NotApplicable(self, "attention")  # the model before attention: one sentence instead
        self.layer_box.valueChanged.connect(session.set_layer)
        self.head_box.valueChanged.connect(session.set_head)
        self._all_heads_wanted = False  # the user's choice, kept while a one-head model greys the box
        self.head_scores = HeadScores()  # the selected head's scores, updated from the first new row
        self._drawn: tuple | None = None  # (trace serial, layer, head) of the scores computed
        self._scores: tuple = ()  # (scores, levels, blank) of them, for the map (a turn later while paced)
        self._scores_drawn: tuple | None = None  # (trace serial, layer, head) the scores map shows
        self._weights_drawn: tuple | None = None  # ... and the weights map
        self._labels: tuple[list, list] = ([], [])  # (query, key) labels of the maps
        self._mosaic: tuple[Mosaic, int] | None = None  # the grid's thumbnails and their trace's serial
        self.all_heads.toggled.connect(self._on_all_heads_clicked)
        self.follow(session, self._on_session_model_changed)
        self._on_session_model_changed()

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        for label, box in (("layer", self.layer_box), ("head", self.head_box)):
            top.addWidget(QLabel(label))
            top.addWidget(box)
        top.addWidget(self.all_heads)
        top.addWidget(self.grid_note)
        top.addWidget(self.off_note)
        top.addStretch(1)
        top.addWidget(self.pin_note)
        self.maps = QHBoxLayout()
        self.maps.addWidget(self.scores, 1)
        self.maps.addWidget(self.weights, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addLayout(self.maps, 3)
        layout.addWidget(self.sink)
        layout.addWidget(self.sink_text)
        layout.addWidget(self.all_heads_tabs, 2)

    def _place_grid(self, n_layers: int, n_heads: int) -> None:
        """The grid beside the two maps when its mosaic is about square (it then gets their height),
        below them when it is wide (one layer of many heads)."""
        beside = n_heads <= 2 * n_layers
        target = self.maps if beside else self.layout()
        if self.all_heads_tabs.parentWidget() is not None and target.indexOf(self.all_heads_tabs) >= 0:
            return
        (self.layout() if beside else self.maps).removeWidget(self.all_heads_tabs)
        target.addWidget(self.all_heads_tabs, 1 if beside else 2)

    def _describer(self, hm: Heatmap, name: str):
        def describe(row: int, col: int, value: float) -> str:
            tokens = self.session.tokens
            q = token_label(tokens[row]) if row < len(tokens) else "?"
            k = token_label(tokens[col]) if col < len(tokens) else "?"
            shown = "masked (query cannot see this key)" if math.isnan(value) else f"{value:.6f}"
            return f"query {row} {q!r} → key {col} {k!r}: {name} = {shown}"
        return describe

    def _on_session_model_changed(self) -> None:
        if not self.gate.applies(self.session.config):
            return
        cfg = self.session.config
        self.scores.plot.setTitle(score_title(cfg))
        n_layers, n_heads = (cfg.n_layers, cfg.n_heads) if cfg else (1, 1)
        for box, n in ((self.layer_box, n_layers), (self.head_box, n_heads)):
            with QSignalBlocker(box):
                box.setRange(0, n - 1)
                box.setEnabled(n > 1)
        # A one-head model has no grid to show: the box is off and grey (never checked but grey),
        # and the user's choice comes back with a model of several heads.
        several = n_layers * n_heads > 1
        with QSignalBlocker(self.all_heads):
            self.all_heads.setChecked(self._all_heads_wanted and several)
            self.all_heads.setEnabled(several)
            self.all_heads.setToolTip("" if several else "this model has one layer of one head: no grid to show")
        self._place_grid(n_layers, n_heads)
        self._on_all_heads_toggled(self.all_heads.isChecked())
        self.schedule_refresh()

    def _on_all_heads_clicked(self, on: bool) -> None:
        self._all_heads_wanted = on
        self._on_all_heads_toggled(on)

    def _on_all_heads_toggled(self, on: bool) -> None:
        self.all_heads_tabs.setVisible(on and self.all_heads.isEnabled())
        self._request_mosaic()
        self.grid.mark(self.session.layer, self.session.head)
        self._note_grid_faults()

    def _request_mosaic(self) -> None:
        """Ask for the grid's thumbnails of the session's trace (pooling only the rows that
        changed since the thumbnails shown): at once while the model is fast, else on the worker."""
        s = self.session
        trace = s.trace
        if not self.grid.isVisibleTo(self) or trace is None or trace.n_tokens == 0:
            s.cancel(self, "mosaic")
            self._mosaic = None
            self.grid.set_mosaic(None)
            return
        if self._mosaic is not None and self._mosaic[1] == s.trace_serial:
            return  # shown already (a selection changed)
        previous, serial = self._mosaic if self._mosaic is not None else (None, None)
        request = MosaicRequest(trace, self.grid.CELL, previous, s.rows_unchanged(serial), s.trace_serial)
        s.submit(self, mosaic_job, request, self._on_mosaic, passes=0, name="mosaic")

    def _on_mosaic(self, result: JobResult) -> None:
        if result.error or not self.grid.isVisibleTo(self):
            return
        self._mosaic = (result.value, result.inputs.serial)
        self.grid.set_mosaic(result.value, head_names(result.inputs.trace))
        self.grid.mark(self.session.layer, self.session.head)

    def _on_grid_head_picked(self, layer: int, head: int) -> None:
        self.session.set_layer(layer)
        self.session.set_head(head)

    def refresh(self) -> None:
        """Redraw the selected head (and the grid when shown); cleared when T == 0."""
        if not self.gate.applies(self.session.config):
            return
        s = self.session
        for box, value in ((self.layer_box, s.layer), (self.head_box, s.head)):
            if box.value() != value:
                with QSignalBlocker(box):
                    box.setValue(value)
        trace = s.trace
        if trace is None or trace.n_tokens == 0:
            self.scores.clear()
            self.weights.clear()
            self._drawn = self._scores_drawn = self._weights_drawn = None
            self._request_mosaic()
            self.sink.setText("")
            self.sink_text.setText("")
            return
        if self._drawn != (s.trace_serial, s.layer, s.head):  # not for a selection alone
            self._draw_maps(trace)
        self.grid.set_off(s.interventions.ablate)
        off = (s.layer, s.head) in s.interventions.ablate
        self.off_note.setText(f"L{s.layer}H{s.head} is switched off: these weights are computed, but its output "
                              "is zeroed" if off else "")
        for hm in (self.scores, self.weights):
            hm.set_selected_row(s.position, s.hover)
        if self.grid.isVisibleTo(self):
            self._request_mosaic()
            self.grid.mark(s.layer, s.head)
        self._note_grid_faults()

    def _unchanged(self, drawn: tuple | None) -> int:
        """Rows of the session's trace, layer and head that a map showing ``drawn`` (trace serial,
        layer, head) shows already."""
        s = self.session
        return s.rows_unchanged(drawn[0]) if drawn is not None and drawn[1:] == (s.layer, s.head) else 0

    def _draw_maps(self, trace) -> None:
        """The selected head's scores, computed only for the rows that changed since they were
        computed last (:class:`~explorer.core.head_maps.HeadScores`), then drawn, then its
        weights: each in a later event-loop turn while the model is slow (at T = 1,024 the
        scores, their map and its first-token line made one turn of 60 to 90 ms)."""
        s = self.session
        lt = trace.blocks[s.layer]
        scores, levels = self.head_scores.update(lt, s.layer, s.head, self._unchanged(self._drawn))
        self._labels = (axis_labels(s.tokens), [f"{j} {token_label(t, 8)}" for j, t in enumerate(s.tokens)])
        # Blank by design: the masked cells (attn_mask: True = may attend); in a trace whose values
        # are all numbers every cell that is not one is masked (and no (T, T) mask is negated).
        blank = True if trace.nonfinite is None else ~lt.attn_mask
        self._drawn, self._scores = (s.trace_serial, s.layer, s.head), (scores, levels, blank)
        for piece in (self._draw_scores, self._draw_weights):
            if self._pacer is not None and self._pacer.active:
                self._pacer.call_later(self, piece)
            else:
                piece()

    def _current(self, drawn: tuple | None) -> bool:
        """Whether a map showing ``drawn`` must be drawn again from the scores computed last (for
        the session's trace)."""
        return self._drawn is not None and self._drawn != drawn and self._drawn[0] == self.session.trace_serial

    def _draw_scores(self) -> None:
        """The map of the scores computed last, and the first-token line (if the trace is still the session's)."""
        if not self._current(self._scores_drawn):
            return
        s = self.session
        scores, levels, blank = self._scores
        self.scores.set_data(scores, levels, *self._labels, blank=blank,
                             unchanged_rows=self._unchanged(self._scores_drawn))
        self._scores_drawn = self._drawn
        self.scores.set_selected_row(s.position, s.hover)
        self._show_sink(s.trace, s.layer, s.head, scores)

    def _draw_weights(self) -> None:
        """The weights of the head whose scores are shown (if the trace is still the session's)."""
        if not self._current(self._weights_drawn):
            return
        s = self.session
        weights = s.trace.blocks[s.layer].attn_weights[s.head]  # (T, T)
        self.weights.set_data(weights, WEIGHT_LEVELS, *self._labels, blank=False,
                              unchanged_rows=self._unchanged(self._weights_drawn))
        self._weights_drawn = self._drawn
        self.weights.set_selected_row(s.position, s.hover)

    def _show_sink(self, trace, layer: int, head: int, scores=None) -> None:
        """The head's mean weight on the first token, and (when opened) the paragraph about it;
        ``scores``: the head's (T, T) attn_scores when the caller has them."""
        facts = sink_facts(trace, layer, head, scores)
        first = token_label(self.session.tokens[0]) if self.session.tokens else "?"
        open_ = self.sink_text.isVisibleTo(self)
        link = f" · <a href='sink'>{'hide' if open_ else 'why?'}</a>" if facts is not None else ""
        self.sink.setText(html.escape(sink_line(facts, first), quote=False) + link)
        if open_:
            why = " <a href='why'>How much of it reaches the prediction: the Why panel.</a>" if self.why_hook else ""
            self.sink_text.setText(html.escape(sink_paragraph(facts, first), quote=False) + why)

    def _on_sink_link(self, link: str) -> None:
        if link == "why" and self.why_hook is not None:
            self.why_hook()
            return
        self.sink_text.setVisible(not self.sink_text.isVisibleTo(self))
        trace = self.session.trace
        if trace is not None and trace.n_tokens:
            self._show_sink(trace, self.session.layer, self.session.head)

    def _note_grid_faults(self) -> None:
        """Name the heads of the grid whose weights are not all numbers (their cells are blank)."""
        trace = self.session.trace
        bad = []
        if self.grid.isVisibleTo(self) and trace is not None and trace.nonfinite is not None:
            bad = [f"L{li} H{h}" for li, lt in enumerate(trace.blocks)
                   for h in range(lt.attn_weights.shape[0]) if not np.isfinite(lt.attn_weights[h]).all()]
        self.grid_note.setText(f"not numbers (blank) in {', '.join(bad[:6])}{' …' if len(bad) > 6 else ''}")
        self.grid_note.setVisible(bool(bad))
