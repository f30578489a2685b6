"""The status bar's line of text: the model, the tokens, the time a keystroke took, a warning."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from explorer.qt import theme

_MARGIN_PX = 3


class StatusLine(QWidget):
    """One line of text, cut short with "…" where it does not fit (the whole of it in the tooltip).

    It changes on every keystroke (the model's and the drawing's milliseconds), so a new text
    repaints this widget alone: its size never depends on its text (a QLabel's new text lays out
    the whole status bar again, which then repaints with the window's ground under it: 7 of the
    17 paints of a keystroke), and it paints its own ground (it is opaque).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._text = ""
        self._warning = False
        self.setAutoFillBackground(True)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def text(self) -> str:
        """The whole text (as QLabel.text)."""
        return self._text

    def setText(self, text: str) -> None:  # noqa: N802 (QLabel's name)
        """Show ``text``; the same text again changes nothing."""
        if text != self._text:
            self._text = text
            self.setToolTip(text)
            self.update()

    @property
    def warning(self) -> bool:
        """Whether the text is drawn in the theme's warning colour."""
        return self._warning

    def set_warning(self, on: bool) -> None:
        """Draw the text in the warning colour (a trace that is not all numbers, an error) or not."""
        if bool(on) != self._warning:
            self._warning = bool(on)
            self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        fm = self.fontMetrics()
        return QSize(fm.averageCharWidth() * 60, fm.height() + 2 * _MARGIN_PX)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, self.fontMetrics().height() + 2 * _MARGIN_PX)

    def paintEvent(self, _event) -> None:  # noqa: N802
        painter = QPainter(self)
        ink = QColor(theme.warning_colour(self)) if self._warning else self.palette().color(QPalette.ColorRole.WindowText)
        painter.setPen(ink)
        box = self.rect().adjusted(_MARGIN_PX, 0, -_MARGIN_PX, 0)
        shown = self.fontMetrics().elidedText(self._text, Qt.TextElideMode.ElideRight, box.width())
        painter.drawText(box, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)
