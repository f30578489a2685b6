"""Embeddings panel: token embedding e_i, how position enters, and the first block's input x_i.

The middle map follows the loaded model (:func:`explorer.core.architecture.embedding_titles`): a
learned table's rows p_i (x_i = e_i + p_i); for a RoPE model, which adds nothing to the input, the
angles RoPE turns each pair of q_i and k_j by (position i, pair j, folded into [0, 2π)); for a
model without positional encoding, a note saying so instead of a map of zeros.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget

from explorer.core.lessons import rope
from explorer.core.architecture import embedding_titles
from explorer.core.views import axis_labels, embedding_levels, embedding_views, token_label
from model.core.architectures import has_attention
from explorer.qt import theme
from explorer.qt.plots.heatmap import DIVERGING, TOKEN_TITLE, Heatmap, dimension_title
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session

TITLES = {"e": "e_i token embedding", "p": "p_i position", "x": "x_i = e_i + p_i"}
BAR_TITLES = {"e": "value of e_i", "p": "value of p_i", "x": "value of x_i"}
CYCLIC = "CET-C2"  # a cyclic colour map: an angle of 2π has the colour of 0
ANGLE_LEVELS = (0.0, 2 * math.pi)
PAGES = {"learned": 0, "rope": 1}


class EmbeddingsPanel(RefreshWhenShown, QWidget):
    """Three maps, rows = tokens (row 0 on top): e_i and x_i (T, d_model) with fixed symmetric levels
    per model, and between them p_i (T, d_model) or RoPE's angles (T, d_head/2); a note above them
    says where position enters when the model has no table."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.heatmaps = {key: Heatmap(title, DIVERGING, row_title=TOKEN_TITLE, col_title=dimension_title("d_model"),
                                      bar_title=BAR_TITLES[key]) for key, title in TITLES.items()}
        self.rope_map = Heatmap("RoPE angle", CYCLIC, row_title="position i",
                                col_title="pair j: θ_j radians per position",
                                bar_title="angle i·θ_j, radians (mod 2π)")
        self.rope_map.describe = self._describe_angle
        self.rope_map.set_bar_levels(ANGLE_LEVELS)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(theme.soft_box_style(self))
        self.levels = dict.fromkeys(TITLES, (-1.0, 1.0))
        self._titles = None
        self.angles = np.zeros((0, 0), np.float32)  # the model's rope_angles for its whole context
        self._todo: list[str] = []  # the maps still to draw, while paced
        self._todo_serial: int | None = None  # ... for the trace with this serial
        self._labels: list[str] = []
        self._drawn: dict[str, int | None] = {}  # the serial of the trace each map shows
        self._build_layout()
        for hm in (*self.heatmaps.values(), self.rope_map):
            hm.sig_row_clicked.connect(session.toggle_pin)
            hm.sig_row_hovered.connect(session.set_hover)
        self.pace_with(session)
        session.sig_model_changed.connect(self._on_session_model_changed)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self._on_session_selection_changed)
        self._on_session_model_changed()
        self.schedule_refresh()  # a panel made after the trace (a screenshot of it alone) draws it

    def _build_layout(self) -> None:
        self.middle = QStackedWidget()
        self.middle.addWidget(self.heatmaps["p"])
        self.middle.addWidget(self.rope_map)
        maps = QHBoxLayout()
        maps.addWidget(self.heatmaps["e"])
        maps.addWidget(self.middle)
        maps.addWidget(self.heatmaps["x"])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.note)
        layout.addLayout(maps, 1)

    @property
    def kind(self) -> str:
        """The loaded model's positional scheme: ``"learned"``, ``"rope"`` or ``"none"``; ``"window"``
        for the model before attention (e_i only: its input is the window of them side by side)."""
        cfg = self.session.config
        if cfg is None:
            return "learned"
        return cfg.positional if has_attention(cfg) else "window"

    def _on_session_model_changed(self) -> None:
        model = self.session.model
        if model is None:
            return
        tok = model.tok_emb.weight.detach().numpy()
        table = getattr(model, "pos_emb", None)  # None: no learned table (RoPE, none, the window model)
        pos = table.weight.detach().numpy() if table is not None else None
        self.levels = embedding_levels(tok, pos)
        for key, hm in self.heatmaps.items():
            hm.set_bar_levels(self.levels[key])
        angles = model.rope_angles(model.config.context_length) if self.kind == "rope" else None
        self.angles = angles if angles is not None else np.zeros((0, 0), np.float32)
        self.middle.setCurrentIndex(PAGES.get(self.kind, 0))
        self.middle.setVisible(self.kind in PAGES)  # no middle map without positional encoding
        self.heatmaps["x"].setVisible(self.kind != "window")  # its input is the window, not one x_i
        self._show_titles()

    def _show_titles(self) -> None:
        """Titles and note for the model's scheme; set only when they change (a title re-lays out its plot)."""
        t = embedding_titles(self.session.config, self.session.positional_encoding)
        if t == self._titles:
            return
        self._titles = t
        self.heatmaps["e"].plot.setTitle(t.e)
        self.heatmaps["x"].plot.setTitle(t.x)
        self.heatmaps["p"].plot.setTitle(t.position)
        self.rope_map.plot.setTitle(t.position)
        self.note.setText(t.note)
        self.note.setVisible(bool(t.note))

    def _views(self) -> list[str]:
        """The maps to draw: the middle one as the model's scheme has it."""
        if self.kind == "window":
            return ["e"]
        return ["e", *{"learned": ["p"], "rope": ["rope"]}.get(self.kind, []), "x"]

    def _draw_one(self, key: str) -> None:
        """One map, its array taken from the session's trace now (a list of views kept until the
        paced turn would keep the trace's row buffers alive); only rows after those it shows
        already are compared (``Session.rows_unchanged``)."""
        s = self.session
        if s.trace is None or s.trace_serial != self._todo_serial:
            return  # a newer trace: its refresh is on its way
        unchanged = s.rows_unchanged(self._drawn.get(key))
        if key == "rope":
            data = rope.angle_view(self.angles[:s.trace.n_tokens])
            freqs = rope.pair_frequencies(self.angles) if len(self.angles) > 1 else np.zeros(data.shape[1])
            self.rope_map.set_data(data, ANGLE_LEVELS, self._labels, rope.pair_labels(freqs), blank=False,
                                   unchanged_rows=unchanged)
        else:
            self.heatmaps[key].set_data(embedding_views(s.trace)[key], self.levels[key], self._labels, blank=False,
                                        unchanged_rows=unchanged)
        self._drawn[key] = s.trace_serial

    def refresh(self) -> None:
        """Redraw from the session's trace (cleared when there is none or it is empty).

        While the model is slow (paced), one map is drawn per turn of the event loop: three
        (1,024, 768) maps of a GPT-2-sized model in one turn blocked the window for about 0.1 s.
        """
        self._show_titles()
        trace = self.session.trace
        if trace is None or trace.n_tokens == 0:
            self._todo = []
            for hm in (*self.heatmaps.values(), self.rope_map):
                hm.clear()
            return
        self._todo, self._todo_serial = self._views(), self.session.trace_serial
        self._labels = axis_labels(self.session.tokens)
        paced = self._pacer is not None and self._pacer.active
        while self._todo:
            self._draw_one(self._todo.pop(0))
            if paced and self._todo:
                self._pacer.call_later(self, self._draw_later)  # the next map in a later turn
                break
        self._on_session_selection_changed()

    def _draw_later(self) -> None:
        if self._todo:
            self._draw_one(self._todo.pop(0))
            self._on_session_selection_changed()
        if self._todo:
            self._pacer.call_later(self, self._draw_later)

    def _describe_angle(self, row: int, col: int, value: float) -> str:
        tokens = self.session.tokens
        tok = token_label(tokens[row]) if row < len(tokens) else "?"
        angle = float(self.angles[row, col]) if row < len(self.angles) else float("nan")
        freq = angle / row if row else (float(self.angles[1, col]) if len(self.angles) > 1 else float("nan"))
        return (f"position {row} {tok!r} · pair {col} (θ_{col} = {freq:.4g} rad per position): "
                f"{row} × θ_{col} = {angle:.4g} rad, {value:.4f} after whole turns ({math.degrees(value):.1f}°)")

    def _on_session_selection_changed(self) -> None:
        for hm in (*self.heatmaps.values(), self.rope_map):
            hm.set_selected_row(self.session.position, self.session.hover)
