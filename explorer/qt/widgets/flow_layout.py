"""A layout that places widgets left to right and wraps them into new lines (Qt's "flow layout")."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    """Widgets in reading order, wrapped to the available width; hidden widgets take no room.

    Parameters
    ----------
    spacing : int
        Pixels between neighbours and between lines.
    """

    def __init__(self, parent: QWidget | None = None, spacing: int = 3) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._gap = spacing
        self._height_for_width: dict[int, int] = {}  # Qt asks several times per layout pass
        self._minimum: QSize | None = None  # likewise (each answer visits every item: 1,056 chips)
        self._shown: list | None = None  # see _hints
        self._placed: dict[int, tuple[int, int, int, int]] = {}  # id(item) -> geometry last set

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 (Qt naming)
        self._items.append(item)
        self._forget()

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int):  # noqa: N802
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int):  # noqa: N802
        self._forget()
        if not 0 <= index < len(self._items):
            return None
        self._placed.pop(id(self._items[index]), None)
        return self._items.pop(index)

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        if width not in self._height_for_width:
            self._height_for_width[width] = self._arrange(QRect(0, 0, width, 0), move=False)
        return self._height_for_width[width]

    def invalidate(self) -> None:
        """Forget cached sizes (items changed), then let Qt re-lay out."""
        self._forget()
        super().invalidate()

    def _forget(self) -> None:
        self._height_for_width.clear()
        self._minimum = None
        self._shown = None

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802
        return self.minimumSize()

    def minimumSize(self) -> QSize:  # noqa: N802
        if self._minimum is None:
            size = QSize()
            for item in self._items:
                size = size.expandedTo(item.minimumSize())
            m = self.contentsMargins()
            self._minimum = size + QSize(m.left() + m.right(), m.top() + m.bottom())
        return QSize(self._minimum)

    def _hints(self) -> list[tuple[QLayoutItem, int, int]]:
        """(item, width, height) of every shown item, read once per change of the items: a layout
        pass measures and places them several times (heightForWidth, then setGeometry)."""
        if self._shown is None:
            self._shown = []
            for item in self._items:
                widget = item.widget()
                if widget is None or not widget.isHidden():
                    hint = item.sizeHint()
                    self._shown.append((item, hint.width(), hint.height()))
        return self._shown

    def _arrange(self, rect: QRect, move: bool) -> int:
        """Place (or only measure) the items; returns the height used."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        left, right, gap = area.x(), area.right() + 1, self._gap
        x, y, line = left, area.y(), 0
        placed = self._placed if move else None
        for item, w, h in self._hints():
            if x + w > right and line > 0:
                x, y, line = left, y + line + gap, 0
            if placed is not None and placed.get(id(item)) != (x, y, w, h):
                placed[id(item)] = (x, y, w, h)  # an item already there is not moved again
                item.setGeometry(QRect(x, y, w, h))
            x += w + gap
            line = max(line, h)
        return y + line - rect.y() + m.bottom()
