"""Two snapshots compared on the current text: the later one's attention weights (selected head)
and next-token probabilities minus the earlier one's, on a diverging map with symmetric levels."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.core.training_views import difference_columns, difference_sentence
from explorer.core.views import axis_labels, symmetric_levels, token_label
from explorer.qt.plots.heatmap import DIVERGING, Heatmap
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.scheduler import ASYNC_MS
from explorer.qt.session import Session
from explorer.qt.panels.training.snapshot_source import SnapshotView
from model.tokens.names import token_name
from model.training.over_training import SnapshotDifference, snapshot_difference

N_TOKENS = 12  # vocabulary columns: the tokens whose probability changed most


def _difference(_checkpoint, inputs) -> SnapshotDifference:
    _key, earlier, later, ids, pe, causal = inputs
    return snapshot_difference(earlier, later, ids, positional_encoding=pe, causal=causal)


class DifferenceView(QWidget):
    """Pick an earlier and a later snapshot; see later − earlier for the current text.

    The difference is a job of the session (:meth:`Session.submit`, two forward passes), asked
    for only while the view is on screen.
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.view: SnapshotView | None = None
        self.diff: SnapshotDifference | None = None
        self._asked = None  # (inputs' key, checkpoint shown) of the request in flight
        self._have = None  # the inputs' key of self.diff
        self._steps: list[int] = []  # the steps the two boxes list, in order
        self.earlier, self.later = QComboBox(), QComboBox()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.attn = Heatmap("attention weights: later − earlier", DIVERGING, col_axis="top")
        self.probs = Heatmap("next-token probability: later − earlier", DIVERGING, col_axis="top",
                             row_title="position i (the text up to it)",
                             col_title=f"vocabulary token (the {N_TOKENS} that changed most)")
        self.attn.describe = self._describe_attention
        for box in (self.earlier, self.later):
            box.currentIndexChanged.connect(self.update_difference)
        pick = QHBoxLayout()
        for label, box in (("earlier", self.earlier), ("later", self.later)):
            pick.addWidget(QLabel(label))
            pick.addWidget(box)
        pick.addStretch(1)
        maps = QHBoxLayout()
        maps.addWidget(self.attn, 1)
        maps.addWidget(self.probs, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(pick)
        layout.addWidget(self.note)
        layout.addLayout(maps, 1)

    def set_snapshots(self, view: SnapshotView | None) -> None:
        """Offer a run's snapshots (the choices are kept by step where the new run has them)."""
        self.view = view
        steps = view.steps if view is not None else []
        index = {step: i for i, step in enumerate(steps)}
        names = [f"step {step:,}" for step in steps]
        longest = max(map(len, names), default=8)  # "step 2,000" whole, not "step 2,0"
        for box, default in ((self.earlier, 0), (self.later, len(steps) - 1)):
            kept = self._steps[box.currentIndex()] if 0 <= box.currentIndex() < len(self._steps) else None
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(longest)
            with QSignalBlocker(box):
                box.clear()
                box.addItems(names)  # at once: 3,000 addItem calls took 60 ms of the GUI thread
                box.setCurrentIndex(index.get(kept, default))
        self._steps = list(steps)
        self.update_difference()

    def update_difference(self, *_args) -> None:
        """Ask for the difference of the chosen snapshots on the current text (when on screen)."""
        s, view = self.session, self.view
        if not self.isVisible() or view is None or not view.snapshots or s.trace is None:
            return
        i, j = self.earlier.currentIndex(), self.later.currentIndex()
        if i < 0 or j < 0:
            return
        ids = tuple(int(t) for t in s.trace.token_ids)
        key = (id(view), i, j, ids, s.positional_encoding, s.causal)
        if key == self._have:
            self.draw()
            return
        if self._asked == (key, s.checkpoint):
            return  # in flight (a result for weights shown before is dropped by the session: asked again)
        self._asked = (key, s.checkpoint)
        inputs = (key, view.snapshots[i], view.snapshots[j], ids, s.positional_encoding, s.causal)
        inline = ASYNC_MS if view.snapshots[i].loaded and view.snapshots[j].loaded else 0.0  # (reading: the worker's)
        s.submit(self, _difference, inputs, self._on_result, passes=2, name="difference", inline_ms=inline)

    def _on_result(self, result: JobResult) -> None:
        self._asked = None
        self.diff, self._have = result.value, (None if result.error else result.inputs[0])
        if result.error:
            self.note.setText(f"could not compute the difference: {result.error}")
        self.draw()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().showEvent(event)
        self.update_difference()

    def draw(self) -> None:
        """Draw the selected head's weights and the probabilities of the last difference."""
        d, s = self.diff, self.session
        if d is None or d.token_ids.size == 0 or s.trace is None or s.trace.n_tokens != d.token_ids.size:
            self.attn.clear()
            self.probs.clear()
            return
        layer, head = min(s.layer, d.attn_weights.shape[0] - 1), min(s.head, d.attn_weights.shape[1] - 1)
        labels = axis_labels(s.tokens)
        keys = [f"{j} {token_label(t, 8)}" for j, t in enumerate(s.tokens)]
        if d.attn_weights.shape[0] and s.trace.blocks:
            weights = d.attn_weights[layer, head]  # (T, T): later - earlier
            masked = ~s.trace.blocks[layer].attn_mask
            self.attn.set_data(np.where(masked, np.nan, weights), symmetric_levels(weights), labels, keys,
                               blank=masked)
        else:  # the model before attention: no weights to compare
            self.attn.clear()
        cols = difference_columns(d.probs, N_TOKENS)
        names = [token_label(token_name(s.tokenizer, c), 10) for c in cols]
        probs = d.probs[:, cols]  # (T, N_TOKENS)
        self.probs.set_data(probs, symmetric_levels(probs), labels, names, blank=False)
        gained = difference_sentence(d.probs, lambda c: token_label(token_name(s.tokenizer, c), 10))
        where = f"layer {layer} head {head}" if d.attn_weights.shape[0] else "no attention in this model"
        self.note.setText(f"step {d.later_step:,} minus step {d.earlier_step:,}, {where}; red: "
                          f"higher at the later step, blue: lower. {gained}")

    def _describe_attention(self, row: int, col: int, value: float) -> str:
        tokens = self.session.tokens
        q = token_label(tokens[row]) if row < len(tokens) else "?"
        k = token_label(tokens[col]) if col < len(tokens) else "?"
        shown = "masked" if np.isnan(value) else f"{value:+.6f}"
        return f"query {row} {q!r} → key {col} {k!r}: Δ weight = {shown}"
