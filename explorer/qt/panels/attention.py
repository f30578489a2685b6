"""Attention panel: scores and softmax weights of the selected head, and a grid of every head."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.core.views import attention_views, axis_labels, symmetric_levels, token_label
from explorer.qt.heatmap import DIVERGING, SEQUENTIAL, Heatmap, colormap
from explorer.qt.panels.lazy import RefreshWhenShown
from explorer.qt.session import Session

WEIGHT_LEVELS = (0.0, 1.0)


class HeadGrid(pg.GraphicsLayoutWidget):
    """Small attention-weight maps, one per (layer, head): rows = layers, columns = heads."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground("w")
        self.images: dict[tuple[int, int], pg.ImageItem] = {}
        self.plots: dict[tuple[int, int], pg.PlotItem] = {}
        self.on_pick = None  # callable(layer, head), set by the panel
        self.scene().sigMouseClicked.connect(self._on_scene_clicked)

    def rebuild(self, n_layers: int, n_heads: int) -> None:
        """Make one small plot per head (only when the model changes)."""
        self.clear()
        self.images, self.plots = {}, {}
        for layer in range(n_layers):
            for head in range(n_heads):
                plot = self.addPlot(row=layer, col=head, title=f"L{layer} H{head}")
                plot.invertY(True)
                plot.hideAxis("left")
                plot.hideAxis("bottom")
                plot.setMouseEnabled(False, False)
                plot.setMenuEnabled(False)
                plot.hideButtons()
                plot.setAspectLocked(True)  # square cells, like the big maps' T x T
                image = pg.ImageItem(axisOrder="row-major")
                image.setColorMap(colormap(SEQUENTIAL))
                plot.addItem(image)
                self.images[layer, head], self.plots[layer, head] = image, plot

    def set_trace(self, trace) -> None:
        """Show every head's attention weights (levels 0..1); clear when T == 0."""
        for (layer, head), image in self.images.items():
            if trace is None or trace.n_tokens == 0:
                image.clear()
                continue
            w = trace.blocks[layer].attn_weights[head]  # (T, T)
            image.setImage(w, levels=WEIGHT_LEVELS, autoLevels=False)
            self.plots[layer, head].setRange(xRange=(0, w.shape[1]), yRange=(0, w.shape[0]), padding=0)

    def mark(self, layer: int, head: int) -> None:
        """Show which head is selected (its title in bold with a marker)."""
        for (li, h), plot in self.plots.items():
            chosen = (li, h) == (layer, head)
            plot.setTitle(f"▶ L{li} H{h}" if chosen else f"L{li} H{h}", bold=chosen, color="k" if chosen else "#888")

    def _on_scene_clicked(self, event) -> None:
        for (layer, head), plot in self.plots.items():
            if plot.sceneBoundingRect().contains(event.scenePos()) and self.on_pick is not None:
                self.on_pick(layer, head)
                return


class AttentionPanel(RefreshWhenShown, QWidget):
    """Scores q_i.k_j / sqrt(d_head) (masked cells blank) and weights (levels 0..1) of one head.

    Queries run down the side with row 0 at the top, keys along the top. Clicking a row selects
    that query position.
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.layer_box, self.head_box = QSpinBox(), QSpinBox()
        self.all_heads = QCheckBox("all heads")
        self.scores = Heatmap("scores q·k/√d_head", DIVERGING, col_axis="top")
        self.weights = Heatmap("weights = softmax", SEQUENTIAL, col_axis="top")
        self.grid = HeadGrid()
        self.grid.on_pick = self._on_grid_pick
        self.grid.setVisible(False)
        for hm, name in ((self.scores, "score"), (self.weights, "weight")):
            hm.describe = self._describer(hm, name)
            hm.sig_row_clicked.connect(session.set_position)
        self._build_layout()
        self.layer_box.valueChanged.connect(session.set_layer)
        self.head_box.valueChanged.connect(session.set_head)
        self.all_heads.toggled.connect(self._on_all_heads_toggled)
        session.sig_model_changed.connect(self._on_session_model_changed)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self.schedule_refresh)
        self._on_session_model_changed()

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        for label, box in (("layer", self.layer_box), ("head", self.head_box)):
            top.addWidget(QLabel(label))
            top.addWidget(box)
        top.addWidget(self.all_heads)
        top.addStretch(1)
        maps = QHBoxLayout()
        maps.addWidget(self.scores)
        maps.addWidget(self.weights)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addLayout(maps, 3)
        layout.addWidget(self.grid, 2)

    def _describer(self, hm: Heatmap, name: str):
        def describe(row: int, col: int, value: float) -> str:
            tokens = self.session.tokens
            q = token_label(tokens[row]) if row < len(tokens) else "?"
            k = token_label(tokens[col]) if col < len(tokens) else "?"
            shown = "masked (query cannot see this key)" if math.isnan(value) else f"{value:.6f}"
            return f"query {row} {q!r} → key {col} {k!r}: {name} = {shown}"
        return describe

    def _on_session_model_changed(self) -> None:
        cfg = self.session.config
        n_layers, n_heads = (cfg.n_layers, cfg.n_heads) if cfg else (1, 1)
        for box, n in ((self.layer_box, n_layers), (self.head_box, n_heads)):
            box.blockSignals(True)
            box.setRange(0, n - 1)
            box.setEnabled(n > 1)
            box.blockSignals(False)
        self.all_heads.setEnabled(n_layers * n_heads > 1)
        self.grid.rebuild(n_layers, n_heads)
        self._on_all_heads_toggled(self.all_heads.isChecked())
        self.schedule_refresh()

    def _on_all_heads_toggled(self, on: bool) -> None:
        self.grid.setVisible(on and self.all_heads.isEnabled())
        self.grid.set_trace(self.session.trace if self.grid.isVisibleTo(self) else None)

    def _on_grid_pick(self, layer: int, head: int) -> None:
        self.session.set_layer(layer)
        self.session.set_head(head)

    def refresh(self) -> None:
        """Redraw the selected head (and the grid when shown); cleared when T == 0."""
        s = self.session
        for box, value in ((self.layer_box, s.layer), (self.head_box, s.head)):
            if box.value() != value:
                box.blockSignals(True)
                box.setValue(value)
                box.blockSignals(False)
        trace = s.trace
        if trace is None or trace.n_tokens == 0:
            self.scores.clear()
            self.weights.clear()
            self.grid.set_trace(None)
            return
        views = attention_views(trace, s.layer, s.head)
        labels = axis_labels(s.tokens)
        keys = [token_label(t, 8) for t in s.tokens]
        self.scores.set_data(views["scores"], symmetric_levels(views["scores"]), labels, keys)
        self.weights.set_data(views["weights"], WEIGHT_LEVELS, labels, keys)
        selected = s.selected_position() if s.position is not None else None
        self.scores.set_selected_row(selected)
        self.weights.set_selected_row(selected)
        if self.grid.isVisibleTo(self):
            self.grid.set_trace(trace)
            self.grid.mark(s.layer, s.head)
