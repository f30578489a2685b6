"""Widgets whose contents change on every keystroke without laying out their panel again.

Qt lays a panel out again whenever a child may have changed size: a ``QLabel`` asks on every
``setText``, a table that fits its contents on every cell it is given, and each layout that is done
asks its own parent again, up to the dock. In the formula panel four changed lines and the table
re-laid out the scrolled body, its splitter and every strip on every keystroke (2–3 ms); the
positional, Why and Why attention? panels painted 21–24 widgets a keystroke for the same reason.
A :class:`SteadyBox` takes such a widget's requests itself and passes one on only when the size the
widget asks for changed.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QLabel, QSizePolicy, QWidget


class SteadyBox(QWidget):
    """Holds one widget (:attr:`inner`) and stands in for it in a layout: the same size hints and
    policy, the inner widget filling it. A request of the inner widget for a new layout reaches this
    box's layout only when the inner widget's size hint, least size hint or height at the current
    width changed; otherwise the inner widget only repaints itself.

    Parameters
    ----------
    inner : QWidget
        The widget whose contents change often (it becomes this box's child).
    parent : QWidget, optional
    """

    def __init__(self, inner: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inner = inner
        inner.setParent(self)
        self.setSizePolicy(inner.sizePolicy())
        self._asked: tuple | None = None  # what the inner widget asked for at the last layout (None: never)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt naming)
        return self.inner.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt naming)
        return self.inner.heightForWidth(width)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return self.inner.sizeHint().expandedTo(self.inner.minimumSize())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return self.inner.minimumSizeHint().expandedTo(self.inner.minimumSize())

    def asked(self) -> tuple:
        """What the inner widget asks of the layout now: its hints, its least and largest size (set
        on it), and its height at this width."""
        width = max(self.width(), 1)
        return (self.sizeHint(), self.minimumSizeHint(), self.inner.maximumSize(),
                self.heightForWidth(width) if self.hasHeightForWidth() else None)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        self._follow()  # the inner widget may have changed while hidden (it asked nothing then)
        super().showEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        self.inner.setGeometry(self.rect())
        self._asked = self.asked()
        super().resizeEvent(event)

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # from the inner widget (this box has no layout)
            self._follow()
            return True
        return super().event(event)

    def _follow(self) -> None:
        asked = self.asked()
        if asked != self._asked:
            self._asked = asked
            if self.maximumSize() != self.inner.maximumSize():
                self.setMaximumSize(self.inner.maximumSize())
            self.updateGeometry()


class LiveLabel(SteadyBox):
    """A word-wrapped label for a sentence with the trace's numbers in it, which changes on every
    keystroke: as wide as its layout makes it (it asks for no width) and as tall as its text needs
    at that width, it lays its panel out again only when its text takes one line more or less.

    The text methods of ``QLabel`` (``setText``, ``text``, ``setTextFormat``, ``setAlignment``,
    ``setTextInteractionFlags``, …) and ``setAutoFillBackground`` are those of the label inside,
    :attr:`label`. Widget methods (tool tip, style sheet, font, visibility, least height) are this
    box's; the label follows them.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 text_format: Qt.TextFormat = Qt.TextFormat.AutoText) -> None:
        label = QLabel(text)
        label.setTextFormat(text_format)
        label.setWordWrap(True)
        super().__init__(label, parent)
        self.label = label
        self._heights: tuple[tuple, dict[int, int]] = ((), {})  # the text, and its height at each width asked
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # no least width
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def __getattr__(self, name: str):
        # Only for names a QWidget lacks: setText, text, setTextFormat, setAlignment, wordWrap, ...
        try:
            label = self.__dict__["label"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(label, name)

    def setAutoFillBackground(self, enabled: bool) -> None:  # noqa: N802 (Qt naming)
        """An opaque label (``enabled``): its new text repaints the label alone, not what is behind it."""
        self.label.setAutoFillBackground(enabled)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt naming)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt naming)
        # Laying out a rich or selectable text costs 0.3 ms, and a layout asks several times per text.
        label = self.label
        margins = label.contentsMargins()  # a style sheet's padding and border
        text = (label.text(), label.textFormat(), label.font().key(), label.margin(), label.indent(),
                margins.left(), margins.top(), margins.right(), margins.bottom())
        if text != self._heights[0]:
            self._heights = (text, {})
        heights = self._heights[1]
        if width not in heights:
            heights[width] = label.heightForWidth(width)
        return max(heights[width], self.minimumHeight())

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._heights = ((), {})  # the same text may take other heights now (a style's font)
            self._follow()
        super().changeEvent(event)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return QSize(self.label.sizeHint().width(), self.heightForWidth(max(self.width(), 1)))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return QSize(0, self.heightForWidth(max(self.width(), 1)))

    def asked(self) -> tuple:
        """Only the height at this width: the label takes the width its layout gives it."""
        return (self.heightForWidth(max(self.width(), 1)),)


def set_range(box: QAbstractSpinBox, lo, hi, value=None) -> None:
    """Give a spin box the range ``lo``..``hi`` (and ``value``, if given) only where they differ:
    Qt lays the box's panel out again on every ``setRange``, even to the same range (the positional
    panel's two swap boxes re-laid it out on every keystroke)."""
    if (box.minimum(), box.maximum()) != (lo, hi):
        box.setRange(lo, hi)
    if value is not None and box.value() != value:
        box.setValue(value)
