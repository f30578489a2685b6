"""The Why panel's Patching tab: where in the model does a changed word change the answer?

The clean text is the session's; the corrupted text (the same number of tokens, a word changed) is
typed here. The metric's target is the Why panel's (the explained token, by default the clean
top-1), the foil the corrupted run's top-1 unless one is typed. The sweep
(:func:`explorer.core.patching_view.patching_job`) is a session job, off the GUI thread, and
runs again when the text, the model or the heads switched off change while the tab is shown.
Four maps, one colour scale each (0 = the corrupted answer, 1 = the clean one): the residual
before each layer at each position, the attention and MLP outputs per layer and position, each
head's output; positions are labelled with both texts' tokens. When the identity check fails the
tab says so and draws nothing.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from explorer.core import patching_view as pv
from explorer.core.views import symmetric_levels, token_label
from explorer.qt import theme
from explorer.qt.panels.why.views import align_top
from explorer.qt.plots.heatmap import DIVERGING, Heatmap
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from explorer.qt.widgets.explain_target import ExplainTarget
from explorer.qt.widgets.steady import LiveLabel
from model.explain.report import resolve_target
from model.tokens.names import token_name

MAPS = {"resid_pre": "residual before each layer", "attn_out": "attention output", "mlp_out": "MLP output",
        "head_out": "each head's output (every position)"}


#: A map's height: its titles, tick labels and colour bar, and this much per layer (at most MAX_MAP_PX).
BASE_MAP_PX, ROW_PX, MAX_MAP_PX = 190, 22, 420


class PatchingView(RefreshWhenShown, QWidget):
    """A corrupted text, the metric, the identity check and the four patching maps."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.target = ExplainTarget.of(session)
        self.corrupted = QLineEdit()
        self.corrupted.setPlaceholderText("the same text with one word changed (as many tokens), then Enter")
        self.foil = QLineEdit()
        self.foil.setPlaceholderText("foil: the corrupted top-1")
        self.foil.setMaximumWidth(220)
        self.button = QPushButton("Patch")
        for signal in (self.corrupted.returnPressed, self.foil.returnPressed, self.button.clicked):
            signal.connect(self.schedule_refresh)
        self.status = align_top(LiveLabel(), plain=True)
        self.summary = align_top(LiveLabel(), plain=True)
        self.maps = {key: Heatmap(title, DIVERGING, col_axis="top", row_title="layer",
                                  col_title="head" if key == "head_out" else "position: clean/corrupted token",
                                  bar_title="0 = corrupted, 1 = clean") for key, title in MAPS.items()}
        self.result = None  # the PatchingResult drawn
        self._asked = None
        self._build()
        self.follow(session)
        session.sig_interventions_changed.connect(self.schedule_refresh)
        self.target.sig_target_changed.connect(self.schedule_refresh)

    def _build(self) -> None:
        top = QHBoxLayout()
        for w, stretch in ((QLabel("corrupted text"), 0), (self.corrupted, 1), (self.foil, 0), (self.button, 0)):
            top.addWidget(w, stretch)
        grid = QGridLayout()
        for i, hm in enumerate(self.maps.values()):
            grid.addWidget(hm, i // 2, i % 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(align_top(QLabel(
            "<b>Activation patching</b>: run the corrupted text, copy one activation of this text's run (the clean "
            "one) into it, and see how much of the clean answer comes back. The target is the one explained above.")))
        layout.addLayout(top)
        layout.addWidget(self.status)
        layout.addWidget(self.summary)
        layout.addLayout(grid, 1)

    def refresh(self) -> None:
        """Ask for the sweep of the session's text against the corrupted one (drawn when it arrives)."""
        s, text = self.session, self.corrupted.text().strip()
        if s.trace is None or s.tokenizer is None or not text or s.trace.n_tokens == 0:
            self._show(None, "Type a corrupted text: this text with one word changed." if s.trace is not None else "")
            return
        try:
            foil = resolve_target(self.foil.text().strip(), s.tokenizer, s.config.vocab_size, "foil") \
                if self.foil.text().strip() else None
        except ValueError as exc:
            self._show(None, str(exc))
            return
        ids = tuple(s.tokenizer.encode(text).ids)
        request = pv.PatchingRequest(s.trace, ids, self.target.target, foil, should_stop=s.job_superseded)
        if request == self._asked:
            return
        self._asked = request
        self.status.setText("patching…")
        s.submit(self, pv.patching_job, request, self._on_result, passes=pv.patching_passes(s.config, len(ids)),
                 name="patching")

    def _on_result(self, result: JobResult) -> None:
        self._asked = None
        if result.error:
            self._show(None, f"could not patch: {result.error}")
            return
        outcome = result.value
        if outcome.result is None:
            self._show(None, outcome.message)
        elif not outcome.result.identity_ok:
            self._show(None, pv.identity_failure(outcome.result))
        else:
            self._show(outcome.result, "")

    def _show(self, r, message: str) -> None:
        """Draw a result (None: clear the maps and say ``message``)."""
        self.result = r
        self.status.setStyleSheet(theme.note_style(self) if message and r is None and self.corrupted.text() else "")
        if r is None:
            self.status.setText(message)
            self.summary.setText("")
            for hm in self.maps.values():
                hm.clear()
            return
        name = self._name
        labels = pv.position_labels(r, lambda t: token_label(name(t), 10))
        self.status.setText(pv.metric_line(r, name))
        self.summary.setText(pv.strongest(r, labels))
        L = r.resid_pre.shape[0]
        layers = [f"L{i}" for i in range(L)]
        m = symmetric_levels(*r.maps.values(), floor=1.0)
        for key, hm in self.maps.items():
            cols = [f"H{h}" for h in range(r.head_out.shape[1])] if key == "head_out" else labels
            hm.set_data(np.asarray(r.maps[key], dtype=np.float32), m, layers, cols)
            hm.setMinimumHeight(min(MAX_MAP_PX, BASE_MAP_PX + ROW_PX * L))  # every layer readable; the dock scrolls

    def _name(self, token_id: int) -> str:
        return token_name(self.session.tokenizer, token_id)
