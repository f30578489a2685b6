"""What kind of head is each head? A layers x heads grid of one head-type score, on the probe or
on the text, beside the selected head's attention pattern on the probe.

The scores are :mod:`model.explain.heads`' (previous-token, duplicate-token, induction; key 0 never
counts), computed by session jobs (:mod:`explorer.core.head_types`): the probe once per model
(and per set of heads switched off), the text's on each new trace while the text is chosen.
Hovering a cell names the head's type and its three scores; clicking one selects that head in
every panel and shows its attention on the probe.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.core.head_types import TYPE_NAMES, head_tooltip, probe_job, text_job
from explorer.core.views import axis_labels, token_label
from explorer.qt.plots.heatmap import SEQUENTIAL, Heatmap
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from model.explain.heads import HEAD_TYPES, PROBE_SEED
from model.tokens.names import token_names

SOURCES = {"probe": "the probe (random tokens, repeated)", "text": "this text"}


class HeadTypesView(RefreshWhenShown, QWidget):
    """A grid of every head's score of one type (levels 0..1), and the selected head on the probe."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.kind_box, self.source_box = QComboBox(), QComboBox()
        for kind in reversed(HEAD_TYPES):  # induction first
            self.kind_box.addItem(f"{TYPE_NAMES[kind]} score", kind)
        for key, text in SOURCES.items():
            self.source_box.addItem(text, key)
        self.kind_box.currentIndexChanged.connect(self._draw)
        self.source_box.currentIndexChanged.connect(self.schedule_refresh)
        self.grid = Heatmap("", SEQUENTIAL, col_axis="top", square=True, row_title="layer", col_title="head",
                            bar_title="score 0..1")
        self.grid.describe = self._describe
        self.grid.sig_cell_clicked.connect(self._on_grid_cell_clicked)
        self.grid.plot.scene().sigMouseMoved.connect(self._on_grid_mouse_moved)
        self.pattern = Heatmap("", SEQUENTIAL, col_axis="top", bar_title="weight 0..1")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.probe = None  # (HeadTypeScores with attn_weights, checkpoint, interventions) of the probe shown
        self.text_scores = None  # (HeadTypeScores, trace serial)
        self.probe_error = ""  # why the probe could not be scored ("" when it could)
        self._build()
        self.follow(session, self._on_session_model_changed)
        session.sig_interventions_changed.connect(self.schedule_refresh)
        self.schedule_refresh()  # drawn when first shown

    def _build(self) -> None:
        top = QHBoxLayout()
        for w in (QLabel("colour by"), self.kind_box, QLabel("on"), self.source_box):
            top.addWidget(w)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.note)
        layout.addWidget(self.grid, 2)
        layout.addWidget(self.pattern, 3)

    def kind(self) -> str:
        """The head type the grid is coloured by."""
        return self.kind_box.currentData()

    def source(self) -> str:
        """``"probe"`` or ``"text"``."""
        return self.source_box.currentData()

    def _on_session_model_changed(self) -> None:
        self.probe = self.text_scores = None
        self.schedule_refresh()

    def refresh(self) -> None:
        """Ask for the scores that are missing (the probe's for this model, the text's for this trace), then draw."""
        s = self.session
        if s.checkpoint is None:
            return
        if self.probe is None or self.probe[1:] != (s.checkpoint, s.interventions):
            s.submit(self, probe_job, None, self._on_probe, passes=1, name="probe")
        if self.source() == "text" and s.trace is not None and (self.text_scores is None
                                                                or self.text_scores[1] != s.trace_serial):
            s.submit(self, text_job, s.trace, self._on_text, passes=0, name="text")
        self._draw()

    def _on_probe(self, result: JobResult) -> None:
        self.probe_error = f"No head scores for this model: {result.error}" if result.error else ""
        if result.error:
            self._draw()
            return
        self.probe = (result.value, self.session.checkpoint, self.session.interventions)
        self._draw()

    def _on_text(self, result: JobResult) -> None:
        if not result.error and result.inputs is self.session.trace:
            self.text_scores = (result.value, self.session.trace_serial)
            self._draw()

    def scores(self):
        """The HeadTypeScores the grid shows (None while they are computed)."""
        if self.source() == "probe":
            return self.probe[0] if self.probe is not None else None
        return self.text_scores[0] if self.text_scores is not None else None

    def _draw(self, *_args) -> None:
        scores, s = self.scores(), self.session
        if scores is None or s.config is None:
            self.grid.clear()
            self.note.setText(self.probe_error or ("computing the head scores…" if s.config is not None else ""))
            self._draw_pattern()
            return
        grid = scores.by_type[self.kind()]
        L, H = grid.shape
        self.grid.set_data(grid, (0.0, 1.0), [f"L{i}" for i in range(L)], [f"H{h}" for h in range(H)])
        self.grid.plot.setTitle(f"{TYPE_NAMES[self.kind()]} score, on {SOURCES[self.source()]}")
        self.note.setText(self._note(scores, grid))
        self._draw_pattern()

    def _note(self, scores, grid: np.ndarray) -> str:
        where = (f"{scores.repeat} random tokens (seed {PROBE_SEED}), then the same again"
                 + (" after the BOS" if scores.n_bos else "") if self.source() == "probe" else "the text's own tokens")
        if not np.isfinite(grid).any():
            return f"On {where} no query has a key of this pattern (the text repeats no token): nothing to score."
        layer, head = np.unravel_index(np.nanargmax(grid), grid.shape)
        return (f"Mean attention on the pattern's keys over the queries that have one, on {where}; the first "
                f"token never counts as a key. Highest: L{layer}H{head} ({grid[layer, head]:.2f}). Click a head "
                f"to select it and see its attention on the probe below: in the second copy an induction head "
                f"looks {self.probe[0].repeat - 1 if self.probe else 'R - 1'} keys back, a previous-token "
                "head one.")

    def _draw_pattern(self) -> None:
        s = self.session
        if self.probe is None or s.config is None:
            self.pattern.clear()
            return
        view = self.probe[0]
        layer, head = min(s.layer, view.attn_weights.shape[0] - 1), min(s.head, view.attn_weights.shape[1] - 1)
        names = token_names(s.tokenizer, view.token_ids.tolist())
        self.pattern.set_data(view.attn_weights[layer, head], (0.0, 1.0), axis_labels(names),
                              [f"{j} {token_label(t, 8)}" for j, t in enumerate(names)], blank=None)
        self.pattern.plot.setTitle(f"L{layer}H{head} on the probe")

    def _describe(self, row: int, col: int, _value: float) -> str:
        scores = self.scores()
        where = "on the probe" if self.source() == "probe" else "on this text"
        return head_tooltip(scores.by_type, row, col, where) if scores is not None else ""

    def _on_grid_mouse_moved(self, pos) -> None:
        cell = self.grid.cell_at(pos)
        self.grid.setToolTip(self.grid.describe_cell(*cell) if cell else "")

    def _on_grid_cell_clicked(self, layer: int, head: int) -> None:
        self.session.set_layer(layer)
        self.session.set_head(head)
