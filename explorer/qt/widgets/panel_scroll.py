"""The scroll area a dock holds its panel in: the panel fills the view and scrolls only below its
minimum size."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget


def panel_scroll(panel: QWidget) -> QScrollArea:
    """A frameless scroll area around ``panel`` (a panel with a large minimum size can then share a
    dock area with others)."""
    scroll = QScrollArea()
    scroll.setWidget(_Fitted(panel))
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    return scroll


class _Fitted(QWidget):
    """Holds a panel in its dock's scroll area: the panel fills the view, and the view scrolls only
    below the panel's minimum size.

    A scroll area gives a panel whose layout has height-for-width (any word-wrapped label) the
    height its preferred sizes add up to: the positional lesson was 1,600 px tall in an 800 px dock,
    so it scrolled although it fitted.
    """

    def __init__(self, panel: QWidget) -> None:
        super().__init__()
        self.panel = panel
        panel.setParent(self)
        self._told: tuple[QSize, QSize] | None = None  # the panel's minimum and maximum the scroll area knows

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return self.panel.minimumSizeHint().expandedTo(self.panel.minimumSize())

    def sizeHint(self) -> QSize:  # noqa: N802
        return self.panel.sizeHint()

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.panel.setGeometry(0, 0, self.width(), self.height())
        super().resizeEvent(event)

    def event(self, event) -> bool:  # noqa: D102 (Qt API)
        if event.type() == QEvent.Type.LayoutRequest:
            # The panel's layout changed: tell the scroll area only when its minimum or maximum
            # size did. A label's new text lays its panel out again on every keystroke; passed on,
            # that laid out the dock, the main window and its docks again and repainted them.
            told = (self.minimumSizeHint(), self.panel.maximumSize())
            if told != self._told:
                self._told = told
                self.updateGeometry()
        return super().event(event)
