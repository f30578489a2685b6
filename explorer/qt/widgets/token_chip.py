"""One token chip of the token strip, painted by itself (no style sheet, no rich-text label).

A strip holds up to context_length + 32 chips (1,056 for a 1,024-token model). As QLabels with a
style sheet and rich text each, showing 1,000 of them cost about 0.5 ms a chip: style-sheet
parsing, rich-text layout and polish. A chip here lays out its two lines once per text change
as ``QStaticText`` and paints a rounded rectangle: about a tenth of that.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen, QStaticText
from PySide6.QtWidgets import QWidget

from explorer.core.views import Chip, token_label
from explorer.qt import theme

# kind -> (background, border, dashed border, text colour), each chip's own colours: never the
# palette's text on a fixed background. One set for light themes, one for dark ones.
COLOURS = {
    "normal": ("#e8f0fb", "#8fa8c8", False, "#000000"),
    "generated": ("#e3f3e1", "#4f9a4a", False, "#000000"),
    "unk": ("#fde2cf", "#c0601c", True, "#000000"),
    "dropped": ("#f0f0f0", "#d0d0d0", False, "#6e6e6e"),
}
DARK_COLOURS = {
    "normal": ("#2c3b50", "#6a84a8", False, "#ececec"),
    "generated": ("#24402a", "#5fae5a", False, "#ececec"),
    "unk": ("#4e3121", "#d9773a", True, "#ececec"),
    "dropped": ("#303030", "#4a4a4a", False, "#a0a0a0"),
}
SELECTED_BORDER = "#000000"
DARK_SELECTED_BORDER = "#ffffff"
PAD_X, PAD_Y, RADIUS = 5, 2, 4.0
SMALL = 0.83  # the second line's size, relative to the widget's font


def _static(text: str, font: QFont) -> QStaticText:
    st = QStaticText(text)
    st.setTextFormat(Qt.TextFormat.PlainText)
    st.prepare(font=font)
    return st


class ChipLabel(QWidget):
    """One token chip: the token (bold) over ``id N · position``, coloured by kind; reports hover
    and clicks by its index in the strip.

    Attributes
    ----------
    kind : str
        ``"normal"``, ``"generated"`` (written by the model: green, "gen" on its second line),
        ``"unk"`` (unknown to the vocabulary: orange, dashed) or ``"dropped"`` (outside the
        context window: grey).
    selected : bool
        Whether the chip is the pinned position (a thick border).
    hovered : bool
        Whether its position is shown because the mouse is on it somewhere (a thick dashed border).
    """

    sig_hovered = Signal(int)
    """The mouse entered chip i (-1: it left)."""
    sig_clicked = Signal(int)
    """Chip i was clicked."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
        self.kind = "normal"
        self.selected = self.hovered = False
        self._shown = None
        self._html = ""
        self._lines: tuple[QStaticText, QStaticText] | None = None
        self._hint = QSize(20, 20)

    def show_chip(self, chip: Chip, selected: bool, hovered: bool = False, generated: bool = False) -> None:
        """Show a token: its label, id and position, styled by kind (normal, generated, unknown,
        dropped); ``selected`` (pinned) and ``hovered`` draw a thick border, dashed for hover."""
        if (chip, selected, hovered, generated) == self._shown:
            return  # unchanged: nothing to lay out or paint
        if self._shown is not None and self._shown[0] == chip and self._shown[3] == generated:
            self._shown = (chip, selected, hovered, generated)  # only the border changes: no new layout
            self.selected, self.hovered = selected, hovered
            self.update()
            return
        self._shown = (chip, selected, hovered, generated)
        self.kind = "dropped" if chip.dropped else ("unk" if chip.is_unk else "generated" if generated else "normal")
        self.selected, self.hovered = selected, hovered
        pos = "–" if chip.dropped else str(chip.position)
        token, sub = token_label(chip.token), f"id {chip.token_id} · {pos}" + (" · gen" if generated else "")
        self._html = f"<b>{html.escape(token)}</b><br><span style='font-size:small'>{sub}</span>"
        bold, small = self._fonts()
        self._lines = (_static(token, bold), _static(sub, small))
        a, b = self._lines[0].size(), self._lines[1].size()
        hint = QSize(int(max(a.width(), b.width()) + 0.999) + 2 * PAD_X, int(a.height() + b.height() + 0.999) + 2 * PAD_Y)
        if hint != self._hint:
            self._hint = hint
            self.updateGeometry()
        tip = f"text {chip.original!r} · id {chip.token_id} · position {pos}"
        if chip.is_unk and generated:  # its text is U+FFFD, the rendering of a token that names no text
            tip = f"the model wrote the unknown token (id {chip.token_id}); the text shows it as {chip.original!r}"
        elif chip.original == "" and chip.token_id >= 0:
            tip = (f"the special token {chip.token!r} (id {chip.token_id} · position {pos}), which stands for no "
                   "text: it is a token here, and the text has nothing for it")
        elif chip.is_unk:
            tip = f"unknown to the vocabulary: original text {chip.original!r} (shown as <unk>, id {chip.token_id})"
        if chip.dropped:
            tip += " · outside the context window (not run)"
        if generated:
            tip += " · generated by the model (the Generate panel shows the alternatives it had)"
        self.setToolTip(tip)
        self.update()

    def _fonts(self) -> tuple[QFont, QFont]:
        bold, small = QFont(self.font()), QFont(self.font())
        bold.setBold(True)
        if small.pointSizeF() > 0:
            small.setPointSizeF(small.pointSizeF() * SMALL)
        else:
            small.setPixelSize(max(6, round(small.pixelSize() * SMALL)))
        return bold, small

    def text(self) -> str:
        """The chip's two lines as rich text: ``<b>token</b><br>…id N · position…``."""
        return self._html

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return self._hint

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return self._hint

    def paintEvent(self, _event) -> None:  # noqa: N802
        if self._lines is None:
            return
        dark = theme.is_dark(self)
        background, border, dashed, ink = (DARK_COLOURS if dark else COLOURS)[self.kind]
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        marked = self.selected or self.hovered
        width = 2.0 if marked else 1.0
        pen = QPen(QColor((DARK_SELECTED_BORDER if dark else SELECTED_BORDER) if marked else border), width)
        dash = (dashed and not marked) or (self.hovered and not self.selected)
        pen.setStyle(Qt.PenStyle.DashLine if dash else Qt.PenStyle.SolidLine)
        p.setPen(pen)
        p.setBrush(QColor(background))
        half = width / 2
        p.drawRoundedRect(QRectF(self.rect()).adjusted(half, half, -half, -half), RADIUS, RADIUS)
        p.setPen(QColor(ink))
        top, sub = self._lines
        y = float(PAD_Y)
        for line, font in zip((top, sub), self._fonts()):
            p.setFont(font)
            p.drawStaticText(QPointF((self.width() - line.size().width()) / 2, y), line)
            y += line.size().height()
        p.end()

    def enterEvent(self, event) -> None:  # noqa: N802
        self.sig_hovered.emit(self.index)
        super().enterEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.sig_hovered.emit(-1)
        super().leaveEvent(event)

    def mousePressEvent(self, event) -> None:  # noqa: N802
        self.sig_clicked.emit(self.index)
        super().mousePressEvent(event)
