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
    so it scrolled although it fitted. It is given the least height its layout needs at the view's
    width instead (:meth:`heightForWidth`): without it, word-wrapped labels were squashed below their
    text and the Generate panel's alternatives lay under the dock's bottom edge with no scroll bar.
    """

    def __init__(self, panel: QWidget) -> None:
        super().__init__()
        self.panel = panel
        panel.setParent(self)
        panel.installEventFilter(self)  # its own layout requests: a wrapped label's new text, new lines
        policy = self.sizePolicy()
        policy.setHeightForWidth(True)  # what QScrollArea reads (a widget without a layout of its own)
        self.setSizePolicy(policy)
        self._told: tuple[QSize, QSize] | None = None  # the panel's minimum and maximum the scroll area knows

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return self.panel.minimumSizeHint().expandedTo(self.panel.minimumSize())

    def sizeHint(self) -> QSize:  # noqa: N802
        return self.panel.sizeHint()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt naming)
        layout = self.panel.layout()
        return layout is not None and layout.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt naming: the scroll area asks this)
        """The panel's least height at ``width`` px: its wrapped labels' lines included."""
        least = self.minimumSizeHint().height()
        layout = self.panel.layout()
        if layout is None or not layout.hasHeightForWidth():
            return least
        return max(least, layout.totalMinimumHeightForWidth(width) if hasattr(layout, "totalMinimumHeightForWidth")
                   else layout.minimumHeightForWidth(width))

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.panel.setGeometry(0, 0, self.width(), self.height())
        super().resizeEvent(event)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt naming)
        if watched is self.panel and event.type() == QEvent.Type.LayoutRequest:
            self._tell()
        return False

    def _tell(self) -> None:
        """Tell the scroll area when the panel's least size (at this width) or its largest changed."""
        told = (self.minimumSizeHint(), self.panel.maximumSize(), self.heightForWidth(self.width()))
        if told != self._told:
            self._told = told
            self.updateGeometry()

    def event(self, event) -> bool:  # noqa: D102 (Qt API)
        if event.type() == QEvent.Type.LayoutRequest:
            # The panel's layout changed: tell the scroll area only when its minimum or maximum
            # size did. A label's new text lays its panel out again on every keystroke; passed on,
            # that laid out the dock, the main window and its docks again and repainted them.
            self._tell()
        return super().event(event)
