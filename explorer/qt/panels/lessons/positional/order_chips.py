"""The positional panel's order chips: the reordered tokens, dragged into any order."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem

from explorer.core.views import token_label


class OrderChips(QListWidget):
    """The reordered tokens as chips that can be dragged into any order."""

    sig_order_changed = Signal(list)
    """The user dragged a chip: the original index of each chip, left to right."""

    def __init__(self) -> None:
        super().__init__()
        self.setFlow(QListWidget.Flow.LeftToRight)
        self.setWrapping(False)
        self.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setFixedHeight(44)
        self.setSpacing(2)
        self.setStyleSheet("QListWidget::item { background:#e8f0fb; color:#000000; border:1px solid #8fa8c8; "
                           "border-radius:4px; padding:2px 5px; }")  # the chip's own ink: readable in a dark theme
        self.setToolTip("Drag the chips into any order")
        self.model().rowsMoved.connect(lambda *_: self.sig_order_changed.emit(self.order()))

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
