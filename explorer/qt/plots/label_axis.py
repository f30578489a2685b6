"""A token-label axis made for drawing on every keystroke.

pyqtgraph's ``AxisItem`` regenerates its tick picture in Python whenever its ticks change: one
QPointF, one ``QPainter.boundingRect`` and one laid-out ``drawText`` per label, recorded into a
QPicture and then played back. For an axis of 32 token labels that is about 1.3 ms, and a
keystroke changes the labels of six to eight such axes (the newest token's text changes), which
made axis painting the largest part of a keystroke (about 8 of 26 ms at T = 32).
:class:`LabelAxis` draws explicit ticks (``setTicks``) from ``QStaticText`` objects cached per
label string, so a label is laid out once and then only drawn, and places again only the labels
whose value or text changed. Axes without explicit ticks (numbered dimensions) are painted by
pyqtgraph as before.

**pyqtgraph version.** It uses ``AxisItem._tickLevels`` and ``AxisItem._updateMaxTextSize``, which
are not pyqtgraph's public API (see :mod:`explorer.qt.plots.plot_items` for the pin and its test).
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QRegion, QStaticText

MAX_CACHED = 4096  # label layouts kept per axis (a new vocabulary's words replace old ones)
AREA_MARGIN_PX = 2  # a label's glyphs may reach this far past its layout (repainted with it)
NUMBER_GAP_PX = 8  # numbered tick labels need this much room between them
TITLE_SHARE = 0.8  # pyqtgraph reserves this share of an axis title's height (its bounding rect overestimates)

#: Label widths in px by font key (QFont.key()): the metrics and each label's width, for every axis.
_WIDTHS: dict[str, tuple[QFontMetricsF, dict[str, float]]] = {}


class LabelAxis(pg.AxisItem):
    """A pyqtgraph ``AxisItem`` whose explicit tick labels are painted from cached static text.

    Use it like ``AxisItem`` (``PlotItem(axisItems={"left": LabelAxis("left")})``). Only the
    first tick level given to ``setTicks`` is drawn (the tick lists this app makes have one
    level); ``setTicks(None)`` returns the axis to pyqtgraph's numbered ticks and painting.
    A label is drawn only when it fits inside the axis's bounding rectangle, as pyqtgraph does
    (``hideOverlappingLabels`` sets how far past the plot's corners that reaches). A top or bottom
    axis can draw its labels turned (:meth:`set_vertical`, reading upwards), so that narrow
    columns still get every label; :meth:`set_title` names the axis.
    """

    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self._static: dict[str, QStaticText] = {}
        self._static_font: QFont | None = None
        self.vertical = False  # labels of a top/bottom axis turned to read upwards

    def set_vertical(self, on: bool) -> None:
        """Turn a top or bottom axis's labels to read upwards (True) or lay them flat (False)."""
        on = bool(on) and self.orientation in ("top", "bottom")
        if on != self.vertical:
            self.vertical = on
            self.update()

    def set_title(self, text: str, colour: QColor | None = None) -> None:
        """Name the axis (pyqtgraph's axis label), in ``colour`` when given; "" hides the title."""
        if colour is not None:
            self.labelStyle = {"color": QColor(colour).name()}
        # Token and dimension axes never need an SI prefix; with one enabled, pyqtgraph lays the
        # title's rich text out again on every range change (ten times a keystroke).
        self.enableAutoSIPrefix(False)
        self.setLabel(text or None)

    def title_space(self) -> float:
        """The px the title takes across the axis (0 without one): add it to a fixed width/height."""
        return self.label.boundingRect().height() * TITLE_SHARE if self.label.isVisible() else 0.0

    def line_height(self) -> float:
        """Height in px of one line of label text (the pitch turned labels need)."""
        font = self.style["tickFont"] or QFont()
        if getattr(self, "_line_font", None) != font:
            self._line_font, self._line_height = QFont(font), QFontMetricsF(font).height()
        return self._line_height

    def setTickFont(self, font) -> None:  # noqa: N802 (pyqtgraph API)
        super().setTickFont(font)
        self._static = {}

    def setStyle(self, **kwargs) -> None:  # noqa: N802 (pyqtgraph API)
        super().setStyle(**kwargs)
        if "tickFont" in kwargs:
            self._static = {}

    def static_text(self, text: str, font: QFont) -> QStaticText:
        """The laid-out label ``text`` in ``font`` (cached; the cache is cleared on a font change)."""
        self._check_font(font)
        return self._laid_out(text, font)[0]

    def _check_font(self, font: QFont) -> None:
        """Forget the cached layouts when they were made in another font (or are too many)."""
        if font != self._static_font or len(self._static) >= MAX_CACHED:
            self._static, self._static_font = {}, QFont(font)

    def _laid_out(self, text: str, font: QFont) -> tuple[QStaticText, float, float]:
        """(static text, width, height) of a label in ``font`` (cached; :meth:`_check_font` first)."""
        entry = self._static.get(text)
        if entry is None:
            st = QStaticText(text)
            st.setTextFormat(Qt.TextFormat.PlainText)
            st.prepare(font=font)
            size = st.size()
            entry = self._static[text] = (st, size.width(), size.height())
        return entry

    def label_width(self, text: str) -> float:
        """Width in px of ``text`` drawn as a label of this axis (:meth:`widest_label` of one)."""
        return self.widest_label((text,))

    def widest_label(self, labels) -> float:
        """Width in px of the widest of ``labels`` drawn as labels of this axis (0 for none).

        Measured with font metrics, not laid out, once per label and font for every axis of the
        app (:data:`_WIDTHS`): an axis of 1,024 new labels (a pasted text in a 1,024-token model)
        is measured for its width on every update, but only the few labels that fit are drawn
        (laying out all as QStaticText cost 35 ms a heatmap), and the row and column axes of
        both attention maps measure the same tokens (four times 1,024 measures: about 20 ms).
        """
        font = self.style["tickFont"] or QFont()
        key = font.key()
        table = _WIDTHS.get(key)
        if table is None or len(table[1]) >= MAX_CACHED * 4:
            table = _WIDTHS[key] = (QFontMetricsF(font), {})
        metrics, widths = table
        best = 0.0
        for text in labels:
            width = widths.get(text)
            if width is None:
                width = widths[text] = metrics.horizontalAdvance(text)
            if width > best:
                best = width
        return best

    def paint(self, p: QPainter, opt, widget) -> None:  # noqa: D102 (QGraphicsItem API)
        if self._tickLevels is None or self.orientation not in ("left", "right", "top", "bottom"):
            super().paint(p, opt, widget)
            return
        bounds = self.mapRectFromParent(self.geometry())
        font = self.style["tickFont"] or QFont()
        ticks, labels = self._placed(bounds, font)
        if labels:
            labels = self._exposed(p, labels)
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
            if self.vertical:  # turned a quarter left: screen point (x, y) is (-y, x) after rotate(-90)
                p.save()
                p.rotate(-90)
                for corner, st in labels:
                    p.drawStaticText(QPointF(-corner.y(), corner.x()), st)
                p.restore()
                return
            for corner, st in labels:
                p.drawStaticText(corner, st)

    def _exposed(self, p: QPainter, labels: list) -> list:
        """The labels that the part of the view painted now reaches (all of them when it is all,
        or unknown): after a keystroke the view repaints a few rectangles far apart (the labels
        that changed, the new row), and the other labels would be drawn only to be clipped away."""
        engine = p.paintEngine()
        clip = engine.systemClip() if engine is not None else None  # device coordinates; empty: none
        if clip is None or clip.isEmpty() or not p.deviceTransform().isAffine():
            return labels
        to_item, invertible = p.deviceTransform().inverted()
        exposed = to_item.map(clip)  # item coordinates
        if not invertible or QRegion(self.boundingRect().toAlignedRect()).subtracted(exposed).isEmpty():
            return labels  # all of the axis is painted again
        return [label for label, area in zip(labels, self._placed_cache[4]) if exposed.intersects(area.toAlignedRect())]

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803 (pyqtgraph API)
        """pyqtgraph's numbered tick levels on a top or bottom axis, keeping only those whose labels
        fit between their ticks (:data:`NUMBER_GAP_PX` apart), with a wider major step (1, 2 or 5
        times a power of ten) when none does. pyqtgraph spaces ticks by the axis's length alone: a
        strip of d_head = 32 dimensions 40 px wide drew "0102030". Explicit ticks are not touched."""
        levels = super().tickSpacing(minVal, maxVal, size)
        dif = abs(maxVal - minVal)
        if self._tickLevels is not None or self.orientation not in ("top", "bottom") or not levels \
                or size <= 0 or dif == 0:
            return levels
        px = size / dif  # px per unit
        major = levels[0][0]
        need = self.widest_label(self.tickStrings([minVal, maxVal, -abs(major)], 1, major)) + NUMBER_GAP_PX
        kept = [level for level in levels if level[0] * px >= need]
        if kept:
            return kept
        step = major
        while step * px < need:
            mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
            step *= 2.5 if round(mantissa) == 2 else 2  # 1 -> 2 -> 5 -> 10
        return [(step, 0)]

    def setTicks(self, ticks) -> None:  # noqa: N802 (pyqtgraph API)
        """pyqtgraph's, but new explicit ticks on an axis whose size, range and style stayed
        repaint only the ticks and labels that changed: a keystroke changes the newest token's
        label, and the rest of the axis stays painted."""
        areas = self._changed_areas(ticks)
        self._tickLevels, self.picture = ticks, None
        if areas is None:
            self.update()
        for area in areas or ():
            self.update(area)

    def _changed_areas(self, ticks) -> list[QRectF] | None:
        """Where the labels and ticks that ``ticks`` adds or drops are (item coordinates), or None
        when the whole axis must be painted again (no placement to compare with, or another one)."""
        cached, old = getattr(self, "_placed_cache", None), self._tickLevels
        if cached is None or cached[0] is not old or not old or not ticks:
            return None
        bounds, font = self.mapRectFromParent(self.geometry()), self.style["tickFont"] or QFont()
        if self._placement_key(bounds, font) != cached[1]:
            return None
        was, now = ({(value, str(text)) for value, text in level[0]} if level else set() for level in (old, ticks))
        changed = was ^ now
        if len(changed) > max(8, len(now) // 2):
            return None  # a different set of labels: painted whole
        spots, clip = cached[3], self.boundingRect()
        self._check_font(font)
        areas = []
        for pair in changed:
            if pair not in spots:
                spots[pair] = self._spot(bounds, clip, *pair, font, self.style["showValues"])
            if spots[pair][2] is not None:
                areas.append(spots[pair][2])
        return areas

    def _placement_key(self, bounds: QRectF, font: QFont) -> tuple:
        """What the placement of labels depends on besides the ticks themselves."""
        return (bounds.getRect(), tuple(self.range), font.key(), self.style["tickLength"], self.vertical,
                tuple(self.style["tickTextOffset"]), self.style["showValues"], self.style["hideOverlappingLabels"])

    def _placed(self, bounds: QRectF, font: QFont) -> tuple[list, list]:
        """Tick lines and (top-left corner, static text) of the labels that fit, computed when
        the ticks, the axis's size, its range or its style changed, and otherwise reused.

        New ticks on an axis whose size, range and style stayed (a keystroke changed the newest
        token's label) place only their new (value, text) pairs: the others are where they were
        (placing all 32 labels of each of five axes was about 1.6 ms of a keystroke)."""
        key = self._placement_key(bounds, font)
        cached = getattr(self, "_placed_cache", None)
        if cached is not None and cached[0] is self._tickLevels and cached[1] == key:
            return cached[2]
        spots = cached[3] if cached is not None and cached[1] == key and len(cached[3]) < MAX_CACHED else {}
        given = self._tickLevels[0] if self._tickLevels else []
        show = self.style["showValues"]
        if show and given:  # let an axis without a fixed size grow to its labels, as pyqtgraph's does
            self._check_font(font)
            sizes = [self._laid_out(str(text), font) for _, text in given]
            across = self.orientation in ("left", "right") or self.vertical
            self._updateMaxTextSize(max(w if across else 0.8 * h for _, w, h in sizes))
        ticks, labels, areas, clip = [], [], [], None
        for value, text in given:
            spot = spots.get((value, str(text)))
            if spot is None:
                if clip is None:
                    clip = self.boundingRect()
                spot = spots[(value, str(text))] = self._spot(bounds, clip, value, str(text), font, show)
            tick, label, area = spot
            if tick is not None:
                ticks.append(tick)
            if label is not None:
                labels.append(label)
                areas.append(area)
        self._placed_cache = (self._tickLevels, key, (ticks, labels), spots, areas)
        return ticks, labels

    def _spot(self, bounds: QRectF, clip: QRectF, value: float, text: str, font: QFont, show: bool) -> tuple:
        """(tick line or None, (corner, static text) or None when the label does not fit in ``clip``,
        the area both cover or None) of one tick at data ``value``."""
        x = self.value_to_pixel(value, bounds)
        tick = self._tick_line(bounds, x) if self.style["tickLength"] != 0 else None
        area, label = (QRectF(tick[0], tick[1]).normalized() if tick is not None else None), None
        if show:
            st, w, h = self._laid_out(text, font)
            rect = self._label_rect(bounds, x, h, w) if self.vertical else self._label_rect(bounds, x, w, h)
            if clip.contains(rect):
                label = (rect.bottomLeft() if self.vertical else rect.topLeft(), st)  # turned: drawn upwards from there
                area = rect if area is None else rect.united(area)
        m = AREA_MARGIN_PX
        return tick, label, area.adjusted(-m, -m, m, m) if area is not None else None

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
        offset = self.style["tickTextOffset"][0 if self.orientation in ("left", "right") else 1]
        gap = max(0, self.style["tickLength"]) + offset
        if self.orientation == "left":
            return QRectF(bounds.right() - gap - width, x - height / 2, width, height)
        if self.orientation == "right":
            return QRectF(bounds.left() + gap, x - height / 2, width, height)
        if self.orientation == "top":
            return QRectF(x - width / 2, bounds.bottom() - gap - height, width, height)
        return QRectF(x - width / 2, bounds.top() + gap, width, height)
