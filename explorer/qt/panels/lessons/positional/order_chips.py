"""The positional panel's order chips: the reordered tokens, dragged into any order."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QListView, QListWidget, QListWidgetItem, QSizePolicy

from explorer.core.views import token_label

MAX_LINES = 3  # lines of chips shown at most; a longer text scrolls the chips (downwards only)


class OrderChips(QListWidget):
    """The reordered tokens as chips that can be dragged into any order.

    The chips wrap into lines as wide as the list, and the list is as high as its lines (up to
    :data:`MAX_LINES`, then it scrolls down): one line of 21 chips scrolled sideways in a 999 px dock.
    """

    sig_order_changed = Signal(list)
    """The user dragged a chip: the original index of each chip, left to right."""

    def __init__(self) -> None:
        super().__init__()
        self.setFlow(QListWidget.Flow.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)  # wrapped again at each new width
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setSpacing(2)
        self.setStyleSheet("QListWidget::item { background:#e8f0fb; color:#000000; border:1px solid #8fa8c8; "
                           "border-radius:4px; padding:2px 5px; }")  # the chip's own ink: readable in a dark theme
        self.setToolTip("Drag the chips into any order")
        self.model().rowsMoved.connect(lambda *_: self.sig_order_changed.emit(self.order()))
        self._fit_height()

    def show_order(self, tokens: list[str], perm: np.ndarray) -> None:
        """One chip per reordered position p: the current text of token perm[p] and its original
        index (chips are rebuilt only when a text or the order changed)."""
        texts = [f"{token_label(tokens[p], 10)}  ({p})" for p in perm]
        if len(texts) == self.count() and list(perm) == self.order():  # the same order: new texts in place
            for r, text in enumerate(texts):  # (rebuilt, 32 chips took 14 ms of a keystroke on a busy machine)
                if self.item(r).text() != text:
                    self.item(r).setText(text)
            return
        with QSignalBlocker(self):
            self.clear()
            for p, text in zip(perm, texts):
                item = QListWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, int(p))
                self.addItem(item)

    def order(self) -> list[int]:
        """The original index of each chip, left to right."""
        return [int(self.item(r).data(Qt.ItemDataRole.UserRole)) for r in range(self.count())]

    def line_height(self) -> int:
        """Height in px of one line of chips (a chip and the spacing above and below it)."""
        if self.count():
            return self.rectForIndex(self.model().index(0, 0)).height() + 2 * self.spacing()
        return self.fontMetrics().height() + 6 + 2 * self.spacing()  # the chip's padding and border

    def updateGeometries(self) -> None:  # noqa: N802 (Qt API: called after the chips are laid out)
        super().updateGeometries()
        self._fit_height()

    def _fit_height(self) -> None:
        """As high as the lines of chips, at most :data:`MAX_LINES` of them (to the last chip's
        bottom and the spacing under it: every line is as high as one chip)."""
        line = self.line_height()
        last = self.model().index(self.count() - 1, 0)
        used = self.rectForIndex(last).bottom() + 1 + self.spacing() if self.count() else line
        px = min(used, MAX_LINES * line) + 2 * self.frameWidth()
        if px != self.height() or px != self.minimumHeight():
            self.setFixedHeight(px)
