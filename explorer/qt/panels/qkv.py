"""Q/K/V panel: q, k and v of the selected layer and head (T, d_head), or the weights W_Q, W_K, W_V.

k and v (and W_K, W_V) are those of the key/value head the selected query head reads: its own,
or the group's with grouped-query attention.
"""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.core.architecture import qkv_caption
from explorer.core.views import axis_labels, head_weight_views, qkv_views, symmetric_levels
from explorer.qt.plots.heatmap import DIVERGING, TOKEN_TITLE, Heatmap, dimension_title
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from explorer.qt.widgets.not_applicable import NotApplicable

NAMES = ("q", "k", "v")


class QKVPanel(RefreshWhenShown, QWidget):
    """Three heatmaps: q_i = h_i W_Q, k_i = h_i W_K, v_i = h_i W_V, or the d_model x d_head weights.

    Levels are symmetric, shared by the three maps, from the values shown.
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.heatmaps = {n: Heatmap(n, DIVERGING, row_title=TOKEN_TITLE, col_title=dimension_title("d_head"),
                                    bar_title=f"value of {n}") for n in NAMES}
        self._drawn: tuple | None = None  # (trace serial, layer, head) of the q, k, v shown
        self.show_weights = QCheckBox("weights W_Q, W_K, W_V")
        self.show_weights.setToolTip("show the d_model × d_head weight matrices instead of q, k, v")
        self.caption = QLabel()
        self.caption.setWordWrap(True)  # one line in a wide dock; lines in a 960 px window's (no sideways scrolling)
        top = QHBoxLayout()
        top.addWidget(self.caption, 1)
        top.addWidget(self.show_weights)
        maps = QHBoxLayout()
        for name in NAMES:
            maps.addWidget(self.heatmaps[name])
            self.heatmaps[name].sig_row_clicked.connect(self._on_heatmap_row_clicked)
            self.heatmaps[name].sig_row_hovered.connect(self._on_heatmap_row_hovered)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addLayout(maps, 1)
        self.gate = NotApplicable(self, "qkv")  # the model before attention: one sentence instead
        self.show_weights.toggled.connect(self.refresh)
        self.follow(session)
        self.refresh()

    def _on_heatmap_row_clicked(self, row: int) -> None:
        if not self.show_weights.isChecked():  # rows are tokens (not d_model dimensions)
            self.session.toggle_pin(row)

    def _on_heatmap_row_hovered(self, row) -> None:
        if not self.show_weights.isChecked():
            self.session.set_hover(row)

    def refresh(self) -> None:
        """Redraw for the session's layer and head (cleared when there is nothing to show)."""
        if not self.gate.applies(self.session.config):
            return
        s = self.session
        layer, head = s.layer, s.head
        self.caption.setText(qkv_caption(s.config, layer, head, s.kv_head(layer, head) if s.model else 0,
                                         s.positional_encoding, not self.show_weights.isChecked()))
        if self.show_weights.isChecked() and s.model is not None:
            arrays = head_weight_views(s.head_weights(layer), head, s.kv_head(layer, head))  # each (d_model, d_head)
            labels = None  # rows are the d_model input dimensions, numbered
            titles = {n: f"W_{n.upper()}" for n in NAMES}
            axes = ("d_model in", "→ d_head out", "weight")
            selected = hover = None
        elif s.trace is not None and s.trace.n_tokens:
            arrays = qkv_views(s.trace, layer, head)  # each (T, d_head)
            labels = axis_labels(s.tokens)
            titles = {n: n for n in NAMES}
            axes = (TOKEN_TITLE, dimension_title("d_head"), "value")
            selected, hover = s.position, s.hover
        else:
            for hm in self.heatmaps.values():
                hm.clear()
            self._drawn = None
            return
        levels = symmetric_levels(*arrays.values())
        drawn = (s.trace_serial, layer, head) if labels is not None else None
        same = drawn is not None and self._drawn is not None and self._drawn[1:] == drawn[1:]
        unchanged = s.rows_unchanged(self._drawn[0]) if same else 0
        for n in NAMES:
            hm = self.heatmaps[n]
            hm.plot.setTitle(titles[n])
            hm.set_titles(axes[0], axes[1], f"{axes[2]} of {titles[n].split(' ')[0]}")
            hm.set_data(arrays[n], levels, labels, blank=False, unchanged_rows=unchanged)
            hm.set_selected_row(selected, hover)
        self._drawn = drawn
