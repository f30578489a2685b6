"""An axis of text labels (token strings) that repaints cheaply on every keystroke.

pyqtgraph's ``AxisItem`` regenerates its tick picture in Python whenever its ticks change: one
QPointF, one ``QPainter.boundingRect`` and one laid-out ``drawText`` per label, recorded into a
QPicture and then played back. For an axis of 32 token labels that is about 1.3 ms, and a
keystroke changes the labels of six to eight such axes (the newest token's text changes), which
made axis painting the largest part of a keystroke (about 8 of 26 ms at T = 32).

:class:`LabelAxis` draws explicit ticks (``setTicks``) from ``QStaticText`` objects cached per
label string, so a label is laid out once and then only drawn. Axes without explicit ticks
(numbered dimensions) are painted by pyqtgraph as before.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QPainter, QStaticText

MAX_CACHED = 4096  # label layouts kept per axis (a new vocabulary's words replace old ones)


class LabelAxis(pg.AxisItem):
    """A pyqtgraph ``AxisItem`` whose explicit tick labels are painted from cached static text.

    Use it like ``AxisItem`` (``PlotItem(axisItems={"left": LabelAxis("left")})``). Only the
    first tick level given to ``setTicks`` is drawn (the tick lists this app makes have one
    level); ``setTicks(None)`` returns the axis to pyqtgraph's numbered ticks and painting.
    A label is drawn only when it fits inside the axis's bounding rectangle, as pyqtgraph does
    (``hideOverlappingLabels`` sets how far past the plot's corners that reaches).
    """

    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self._static: dict[str, QStaticText] = {}
        self._static_font: QFont | None = None
        self._widths: dict[str, float] = {}  # label_width's answers (asked for every label per keystroke)

    def setTickFont(self, font) -> None:  # noqa: N802 (pyqtgraph API)
        super().setTickFont(font)
        self._static, self._widths = {}, {}

    def setStyle(self, **kwargs) -> None:  # noqa: N802 (pyqtgraph API)
        super().setStyle(**kwargs)
        if "tickFont" in kwargs:
            self._static, self._widths = {}, {}

    def static_text(self, text: str, font: QFont) -> QStaticText:
        """The laid-out label ``text`` in ``font`` (cached; the cache is cleared on a font change)."""
        if font != self._static_font or len(self._static) >= MAX_CACHED:
            self._static, self._static_font, self._widths = {}, QFont(font), {}
        st = self._static.get(text)
        if st is None:
            st = QStaticText(text)
            st.setTextFormat(Qt.TextFormat.PlainText)
            st.prepare(font=font)
            self._static[text] = st
        return st

    def label_width(self, text: str) -> float:
        """Width in px of ``text`` drawn as a label of this axis (laid out once, then cached)."""
        width = self._widths.get(text)
        if width is None:
            width = self.static_text(text, self.style["tickFont"] or QFont()).size().width()
            self._widths[text] = width
        return width

    def paint(self, p: QPainter, opt, widget) -> None:  # noqa: D102 (QGraphicsItem API)
        if self._tickLevels is None or self.orientation not in ("left", "right", "top", "bottom"):
            super().paint(p, opt, widget)
            return
        bounds = self.mapRectFromParent(self.geometry())
        font = self.style["tickFont"] or QFont()
        ticks, labels = self._placed(bounds, font)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        p.setPen(self.pen())
        p.drawLine(*self._axis_line(bounds))
        if ticks:
            p.setPen(self.tickPen())
            for start, stop in ticks:
                p.drawLine(start, stop)
        if labels:
            p.setFont(font)
            p.setPen(self.textPen())
            for corner, st in labels:
                p.drawStaticText(corner, st)

    def _placed(self, bounds: QRectF, font: QFont) -> tuple[list, list]:
        """Tick lines and (top-left corner, static text) of the labels that fit, computed when
        the ticks, the axis's size, its range or its style changed, and otherwise reused."""
        key = (bounds.getRect(), tuple(self.range), font.key(), self.style["tickLength"],
               tuple(self.style["tickTextOffset"]), self.style["showValues"], self.style["hideOverlappingLabels"])
        cached = getattr(self, "_placed_cache", None)
        if cached is not None and cached[0] is self._tickLevels and cached[1] == key:
            return cached[2]
        ticks, labels = [], []
        given = self._tickLevels[0] if self._tickLevels else []
        texts = [self.static_text(str(text), font) for _, text in given] if self.style["showValues"] else []
        if texts:  # let an axis without a fixed size grow to its labels, as pyqtgraph's does
            side = self.orientation in ("left", "right")
            self._updateMaxTextSize(max(st.size().width() if side else 0.8 * st.size().height() for st in texts))
        clip = self.boundingRect()
        for i, (value, _) in enumerate(given):
            x = self.value_to_pixel(value, bounds)
            if self.style["tickLength"] != 0:
                ticks.append(self._tick_line(bounds, x))
            if texts:
                rect = self._label_rect(bounds, x, texts[i].size().width(), texts[i].size().height())
                if clip.contains(rect):
                    labels.append((rect.topLeft(), texts[i]))
        self._placed_cache = (self._tickLevels, key, (ticks, labels))
        return ticks, labels

    def value_to_pixel(self, value: float, bounds: QRectF) -> float:
        """Item coordinate along the axis of data ``value`` (pyqtgraph's mapping; an inverted
        view has a reversed range)."""
        lo, hi = self.range
        if hi == lo:
            return 0.0
        if self.orientation in ("left", "right"):
            return bounds.height() - (value - lo) / (hi - lo) * bounds.height()
        return (value - lo) / (hi - lo) * bounds.width()

    def _axis_line(self, bounds: QRectF) -> tuple[QPointF, QPointF]:
        if self.orientation == "left":
            return QPointF(bounds.right() - 1, bounds.top() - 1), QPointF(bounds.right() - 1, bounds.bottom() + 1)
        if self.orientation == "right":
            return QPointF(bounds.left() + 1, bounds.top() - 1), QPointF(bounds.left() + 1, bounds.bottom() + 1)
        if self.orientation == "top":
            return QPointF(bounds.left() - 1, bounds.bottom() - 1), QPointF(bounds.right() + 1, bounds.bottom() - 1)
        return QPointF(bounds.left() - 1, bounds.top() + 1), QPointF(bounds.right() + 1, bounds.top() + 1)

    def _tick_line(self, bounds: QRectF, x: float) -> tuple[QPointF, QPointF]:
        """A tick of ``tickLength`` px from the axis line (a negative length points into the plot)."""
        n = self.style["tickLength"]
        if self.orientation == "left":
            return QPointF(bounds.right(), x), QPointF(bounds.right() - n, x)
        if self.orientation == "right":
            return QPointF(bounds.left(), x), QPointF(bounds.left() + n, x)
        if self.orientation == "top":
            return QPointF(x, bounds.bottom()), QPointF(x, bounds.bottom() - n)
        return QPointF(x, bounds.top()), QPointF(x, bounds.top() + n)

    def _label_rect(self, bounds: QRectF, x: float, width: float, height: float) -> QRectF:
        """Where a label of this size goes: beside the axis line, centred on its tick."""
        gap = max(0, self.style["tickLength"]) + self.style["tickTextOffset"][0 if self.orientation in ("left", "right") else 1]
        if self.orientation == "left":
            return QRectF(bounds.right() - gap - width, x - height / 2, width, height)
        if self.orientation == "right":
            return QRectF(bounds.left() + gap, x - height / 2, width, height)
        if self.orientation == "top":
            return QRectF(x - width / 2, bounds.bottom() - gap - height, width, height)
        return QRectF(x - width / 2, bounds.top() + gap, width, height)
