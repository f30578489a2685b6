"""The positional panel's shift test: move every token by s positions and measure the selected layer's scores.

For RoPE the scores stay the same within float32 noise (a score depends on the offset i − j only; the
sentence says how much of each head turns, and that a NoPE layer turns none); for a learned table
they change (p_(i+s) is another vector). The numbers come from
:func:`explorer.core.lessons.rope.shift_check`, run as a session job (:meth:`Session.submit`).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QWidget

from explorer.core.lessons import rope
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.session import Session
from explorer.qt.widgets.steady import set_range

DEFAULT_SHIFT = 10


class ShiftView(QWidget):
    """A spin box for s and the sentence :func:`explorer.core.lessons.rope.shift_check` writes, with one
    example score before and after the shift."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.check: rope.ShiftCheck | None = None
        self.wanted = DEFAULT_SHIFT  # the user's s, kept while a longer text leaves less room
        self.shift_box = QSpinBox()
        self.shift_box.setRange(1, DEFAULT_SHIFT)
        self.shift_box.setValue(DEFAULT_SHIFT)
        self.shift_box.setToolTip("move every token by this many positions: 0..T−1 becomes s..s+T−1")
        self.shift_box.valueChanged.connect(self._on_shift_box_changed)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("<b>Shift test</b>: move every token by s ="), 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.shift_box, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.label, 1)

    def _on_shift_box_changed(self, value: int) -> None:
        self.wanted = value
        self.refresh()

    def refresh(self) -> None:
        """Ask for the shift test of the session's tokens (drawn when it arrives)."""
        s = self.session
        if s.trace is None or s.trace.n_tokens == 0 or s.model is None:
            s.cancel(self)
            self.check = None
            self.label.setText("No tokens to shift.")
            return
        room = s.config.context_length - s.trace.n_tokens
        with QSignalBlocker(self.shift_box):
            set_range(self.shift_box, 1, max(room, 1), min(self.wanted, max(room, 1)))
        self.shift_box.setEnabled(room > 0)
        request = rope.ShiftRequest(s.trace.token_ids, self.shift_box.value(), s.causal, s.layer)
        s.submit(self, rope.shift_job, request, self._on_check)

    def _on_check(self, result: JobResult) -> None:
        if result.error:
            self.check = None
            self.label.setText(f"The shift test failed: {result.error}")
            return
        self.check = c = result.value
        self.label.setText(c.sentence + self._example(c))

    def _example(self, c: rope.ShiftCheck) -> str:
        """One score before and after the shift: the selected head, the last query and the first key."""
        if not c.shift or c.n_tokens == 0:
            return ""
        h, i = min(self.session.head, c.scores.shape[0] - 1), c.n_tokens - 1
        j = int(np.flatnonzero(~np.isnan(c.scores[h, i]))[0])
        return (f" For example head {h}: s_{i},{j} = {c.scores[h, i, j]:.6f} at positions ({i}, {j}) and "
                f"{c.shifted[h, i, j]:.6f} at ({i + c.shift}, {j + c.shift}).")
