"""Embeddings panel: token embedding e_i, positional encoding p_i and their sum x_i, one heatmap each."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QWidget

from explorer.core.views import axis_labels, embedding_levels, embedding_views
from explorer.qt.heatmap import DIVERGING, TOKEN_TITLE, Heatmap, dimension_title
from explorer.qt.panels.lazy import RefreshWhenShown
from explorer.qt.session import Session

TITLES = {"e": "e_i token embedding", "p": "p_i position", "x": "x_i = e_i + p_i"}
BAR_TITLES = {"e": "value of e_i", "p": "value of p_i", "x": "value of x_i"}


class EmbeddingsPanel(RefreshWhenShown, QWidget):
    """Three heatmaps (T, d_model), rows = tokens, columns = dimensions, fixed symmetric levels per model."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.heatmaps = {key: Heatmap(title, DIVERGING, row_title=TOKEN_TITLE, col_title=dimension_title("d_model"),
                                      bar_title=BAR_TITLES[key]) for key, title in TITLES.items()}
        self.levels = dict.fromkeys(TITLES, (-1.0, 1.0))
        self._todo: list = []  # (key, array) of the maps still to draw, while paced
        self._labels: list[str] = []
        self._later = QTimer(self)
        self._later.setSingleShot(True)
        self._later.setInterval(0)
        self._later.timeout.connect(self._draw_later)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        for hm in self.heatmaps.values():
            layout.addWidget(hm)
            hm.sig_row_clicked.connect(session.toggle_pin)
            hm.sig_row_hovered.connect(session.set_hover)
        self.pace_with(session)
        session.sig_model_changed.connect(self._on_session_model_changed)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self._on_session_selection_changed)
        self._on_session_model_changed()
        self.schedule_refresh()  # a panel made after the trace (a screenshot of it alone) draws it

    def _on_session_model_changed(self) -> None:
        model = self.session.model
        if model is None:
            return
        tok = model.tok_emb.weight.detach().numpy()
        pos = model.pos_emb.weight.detach().numpy() if model.pos_emb is not None else None
        self.levels = embedding_levels(tok, pos)
        for key, hm in self.heatmaps.items():
            hm.set_bar_levels(self.levels[key])

    def refresh(self) -> None:
        """Redraw from the session's trace (cleared when there is none or it is empty).

        While the model is slow (paced), one heatmap is drawn per turn of the event loop: three
        (1,024, 768) maps of a GPT-2-sized model in one turn blocked the window for about 0.1 s.
        """
        self._later.stop()
        trace = self.session.trace
        if trace is None or trace.n_tokens == 0:
            for hm in self.heatmaps.values():
                hm.clear()
            return
        self._todo = list(embedding_views(trace).items())
        self._labels = axis_labels(self.session.tokens)
        paced = self._pacer is not None and self._pacer.active
        while self._todo:
            key, data = self._todo.pop(0)
            self.heatmaps[key].set_data(data, self.levels[key], self._labels, blank=False)
            if paced and self._todo:
                self._later.start()  # the next map in the next turn
                break
        self._on_session_selection_changed()

    def _draw_later(self) -> None:
        if self._todo:
            key, data = self._todo.pop(0)
            self.heatmaps[key].set_data(data, self.levels[key], self._labels, blank=False)
            self._on_session_selection_changed()
        if self._todo:
            self._later.start()

    def _on_session_selection_changed(self) -> None:
        for hm in self.heatmaps.values():
            hm.set_selected_row(self.session.position, self.session.hover)
