"""The Model map's drawing: one QPainter widget, every box a small image of its tensor.

No plot widgets: each box is a QImage made from a few thousand numbers (a colour look-up per
cell), drawn scaled into its rectangle, so a repaint on every keystroke costs little.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPainterPath, QPen, QPixmap, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from explorer.core.model_map.boxes import BOOL, UNIT, BoxImage
from explorer.core.model_map.layout import MapLayout
from explorer.core.views import token_label
from explorer.qt import theme
from explorer.qt.panels.model_map.geometry import GAP_X, Placed, content_height, content_width, place, wire
from explorer.qt.plots.heatmap import DIVERGING, MASKED_COLOUR, SEQUENTIAL, colormap
from model.tracing.schema import MASK, SQUARE

_LUTS: dict[str, np.ndarray] = {}


def lut(name: str) -> np.ndarray:
    """(256, 4) uint8 RGBA colours of a pyqtgraph colour map (made once)."""
    if name not in _LUTS:
        table = colormap(name).getLookupTable(0.0, 1.0, 256, alpha=False)
        rgba = np.full((256, 4), 255, np.uint8)
        rgba[:, :3] = table[:, :3]
        _LUTS[name] = rgba
    return _LUTS[name]


def to_qimage(image: BoxImage, on: QColor, off: QColor) -> QImage:
    """The box's array as an RGBA QImage, one pixel per cell (NaN: the masked grey)."""
    data = image.data
    lo, hi = image.levels
    if image.scale == BOOL:
        rgba = np.where(data[..., None] > 0.5, np.array(on.getRgb(), np.uint8), np.array(off.getRgb(), np.uint8))
    else:
        with np.errstate(invalid="ignore"):
            t = np.clip((data - lo) / (hi - lo if hi > lo else 1.0), 0.0, 1.0)
        rgba = lut(SEQUENTIAL if image.scale == UNIT else DIVERGING)[np.nan_to_num(t * 255).astype(np.uint8)]
        rgba[np.isnan(data)] = QColor(MASKED_COLOUR).getRgb()
    rgba = np.ascontiguousarray(rgba, dtype=np.uint8)
    h, w = data.shape
    return QImage(rgba.data, w, h, 4 * w, QImage.Format.Format_RGBA8888).copy()


def _arrow_head(a: QPointF, b: QPointF, size: float = 6.0) -> QPolygonF:
    """The head of an arrow that ends at ``b``, coming from ``a``."""
    d = b - a
    n = max((d.x() ** 2 + d.y() ** 2) ** 0.5, 1e-6)
    ux, uy = d.x() / n, d.y() / n
    left = QPointF(b.x() - size * ux + size * 0.5 * uy, b.y() - size * uy - size * 0.5 * ux)
    right = QPointF(b.x() - size * ux - size * 0.5 * uy, b.y() - size * uy + size * 0.5 * ux)
    return QPolygonF([b, left, right])


class MapCanvas(QWidget):
    """Paints a :class:`~explorer.core.model_map.layout.MapLayout` with one image per box.

    Set :attr:`layout_`, then :meth:`set_images` with each box's :class:`BoxImage`; hovering reads
    out what a box holds, a click on a box or on a collapsed lane is signalled.
    """

    sig_box_clicked = Signal(str)
    """A box (its dotted name) was clicked."""
    sig_lane_clicked = Signal(int)
    """A collapsed lane (its block) was clicked."""
    sig_hovered = Signal(str, QPointF)
    """The mouse is over a box (its dotted name) at this point, or over nothing ("")."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.layout_: MapLayout | None = None
        self.images: dict[str, BoxImage] = {}
        self._qimages: dict[str, QImage] = {}
        self._scaled: dict[str, QPixmap] = {}  # each box's image at its drawn size (made once per change)
        self._wires: list[tuple[QPainterPath, QPolygonF]] | None = None  # the arrows at this geometry
        self.tokens: list[str] = []
        self.start = 0  # the first token drawn
        self.selected: int | None = None  # the selected token's column, within the window
        self.highlight: str | None = None  # a box outlined for a tour step
        self.side_lines: list[str] = []  # the top tokens beside the output lane
        self.placed: Placed | None = None
        self.small = QFont(self.font())
        self.small.setPointSizeF(max(7.0, self.font().pointSizeF() * 0.9))

    # ---- content ---------------------------------------------------------------------------------
    def set_layout(self, layout: MapLayout | None) -> None:
        """A new map (model, expanded block): positions are computed again."""
        self.layout_ = layout
        self.placed, self._wires, self._scaled = None, None, {}
        self.updateGeometry()
        self.update()

    def set_images(self, images: dict[str, BoxImage], tokens: list[str], start: int, selected: int | None,
                   side_lines: list[str]) -> None:
        """Each box's array, the tokens of the window (from ``start``), the selected token's column."""
        pal = self.palette()
        on, off = theme.mix(pal.color(pal.ColorRole.Text), pal.color(pal.ColorRole.Base), 0.25), pal.color(
            pal.ColorRole.Base)
        self.images = images
        self._qimages = {key: to_qimage(im, on, off) for key, im in images.items() if im.data.size}
        self._scaled = {}
        self.tokens, self.start, self.selected, self.side_lines = tokens, start, selected, side_lines
        self.update()

    def set_highlight(self, key: str | None) -> None:
        """Outline one box (a tour step's), or none."""
        if key != self.highlight:
            self.highlight = key
            self.update()

    # ---- geometry ----------------------------------------------------------------------------------
    def _metrics(self) -> tuple[float, float]:
        title_h = QFontMetricsF(self.font()).height() + 4
        return title_h, QFontMetricsF(self.small).height() + 2

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        if self.layout_ is None:
            return QSize(200, 120)
        title_h, label_h = self._metrics()
        return QSize(int(content_width(self.layout_)), int(content_height(self.layout_, title_h, label_h)))

    def sizeHint(self) -> QSize:  # noqa: N802
        return self.minimumSizeHint().expandedTo(QSize(900, 700))

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.placed, self._wires, self._scaled = None, None, {}
        super().resizeEvent(event)

    def geometry_(self) -> Placed | None:
        """The boxes' rectangles at the current size (computed when first needed)."""
        if self.placed is None and self.layout_ is not None:
            title_h, label_h = self._metrics()
            self.placed = place(self.layout_, self.width(), self.height(), title_h, label_h)
        return self.placed

    # ---- painting ----------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt naming)
        p = QPainter(self)
        p.fillRect(self.rect(), theme.plot_background(self))
        placed = self.geometry_()
        if placed is not None:
            ink = theme.plot_text(self)
            self._paint_lanes(p, placed, ink)
            self._paint_arrows(p, placed)
            for lane in self.layout_.lanes:
                for b in lane.boxes:
                    self._paint_box(p, b, placed.boxes[b.key], ink)
            self._paint_side(p, placed, ink)
            self._paint_tokens(p, placed, ink)
        p.end()

    def _paint_tokens(self, p: QPainter, placed: Placed, ink: QColor) -> None:
        """The tokens over the input lane's last box's columns, when each column has room for one."""
        boxes = self.layout_.lanes[0].boxes if self.layout_.lanes else ()
        image = self.images.get(boxes[-1].key) if boxes else None
        if image is None or not image.data.size:
            return
        rect, cols = placed.boxes[boxes[-1].key], image.data.shape[1]
        w = rect.width() / cols
        metrics = QFontMetricsF(self.small)
        title_end = placed.titles[0].left() + QFontMetricsF(self.font()).horizontalAdvance(self.layout_.lanes[0].title)
        if w < 3 * metrics.averageCharWidth() or rect.left() < title_end + 8:  # no room, or over the lane's title
            return
        p.setPen(ink)
        p.setFont(self.small)
        title = placed.titles[0]
        for i in range(cols):
            cell = QRectF(rect.left() + i * w, title.top(), w, title.height())
            text = metrics.elidedText(self.token_text(i), Qt.TextElideMode.ElideRight, w)
            p.drawText(cell, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom, text)

    def _paint_lanes(self, p: QPainter, placed: Placed, ink: QColor) -> None:
        pal = self.palette()
        band = theme.mix(pal.color(pal.ColorRole.Base), pal.color(pal.ColorRole.Text), 0.04)
        for k, (lane, rect, title) in enumerate(zip(self.layout_.lanes, placed.lanes, placed.titles)):
            if k % 2:
                p.fillRect(rect, band)
            p.setPen(ink)
            p.setFont(self.font())
            p.drawText(title.adjusted(2, 0, 0, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, lane.title)

    def _paint_arrows(self, p: QPainter, placed: Placed) -> None:
        arrow = theme.muted_text(self)
        p.setPen(QPen(arrow, 1.3))
        for path, head in self._arrows(placed):
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawPath(path)
            p.setBrush(arrow)
            p.drawPolygon(head)

    def _arrows(self, placed: Placed) -> list[tuple[QPainterPath, QPolygonF]]:
        """Each arrow's line and head at the current geometry (computed once per layout and size)."""
        if self._wires is None:
            lane_of = {b.key: k for k, lane in enumerate(self.layout_.lanes) for b in lane.boxes}
            self._wires = []
            for src, dst in self.layout_.arrows:
                if src not in placed.boxes or dst not in placed.boxes:
                    continue
                lane = lane_of[dst]
                band = None if lane_of[src] == lane else placed.titles[lane].bottom() - 2
                others = [placed.boxes[o.key] for o in self.layout_.lanes[lane].boxes if o.key not in (src, dst)]
                points = wire(placed.boxes[src], placed.boxes[dst], band, others, placed.lanes[lane].bottom() - 3)
                path = QPainterPath(points[0])
                for q in points[1:]:
                    path.lineTo(q)
                self._wires.append((path, _arrow_head(points[-2], points[-1])))
        return self._wires

    def _paint_box(self, p: QPainter, box, rect: QRectF, ink: QColor) -> None:
        image = self._scaled_image(box.key, rect)
        target = rect
        if image is not None:
            p.drawPixmap(target.topLeft(), image)
        pal = self.palette()
        frame = theme.mix(ink, pal.color(pal.ColorRole.Base), 0.45)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(frame, 1))
        p.drawRect(target)
        self._paint_selected(p, box, target)
        if box.key == self.highlight:
            p.setPen(QPen(pal.color(pal.ColorRole.Highlight), 3))
            p.drawRect(target.adjusted(-3, -3, 3, 3))
        p.setPen(ink)
        p.setFont(self.small)
        # As wide as the column's pitch, no wider: wider, neighbours' labels ran into each other in a
        # narrow map ("q before norm" over "RMSNorm h"); a longer label is elided (the tooltip has it).
        width = max(rect.width(), 36) + GAP_X - 4
        label = QRectF(rect.center().x() - width / 2, target.bottom() + 1, width, QFontMetricsF(self.small).height())
        shown = QFontMetricsF(self.small).elidedText(box.label, Qt.TextElideMode.ElideRight, label.width())
        p.drawText(label, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, shown)

    def _scaled_image(self, key: str, rect: QRectF) -> QPixmap | None:
        """The box's image at the size of ``rect`` (scaled once per new image or size: a scaled
        draw on every paint cost most of the paint)."""
        image = self._qimages.get(key)
        w, h = max(1, round(rect.width())), max(1, round(rect.height()))
        scaled = self._scaled.get(key)
        if image is not None and (scaled is None or (scaled.width(), scaled.height()) != (w, h)):
            scaled = self._scaled[key] = QPixmap.fromImage(image.scaled(
                w, h, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.FastTransformation))
        return scaled if image is not None else None

    def _paint_selected(self, p: QPainter, box, target: QRectF) -> None:
        """Outline the selected token: its column (its row too, in an attention map)."""
        image = self.images.get(box.key)
        if self.selected is None or image is None or not image.data.size:
            return
        rows, cols = image.data.shape
        if not 0 <= self.selected < cols:
            return
        w, h = target.width() / cols, target.height() / rows
        pen = QPen(self.palette().color(self.palette().ColorRole.Highlight), 1.5)
        p.setPen(pen)
        if box.row.kind in (SQUARE, MASK):
            p.drawRect(QRectF(target.left(), target.top() + self.selected * h, target.width(), h))
        else:
            p.drawRect(QRectF(target.left() + self.selected * w, target.top(), w, target.height()))

    def _paint_side(self, p: QPainter, placed: Placed, ink: QColor) -> None:
        """The top tokens at the selected position, right of the output lane's last box, in as
        many columns as the lane's height needs."""
        last = self.layout_.lanes[-1].boxes[-1:] if self.layout_.lanes else ()
        if not last or not self.side_lines:
            return
        rect, lane = placed.boxes[last[0].key], placed.lanes[-1]
        p.setPen(ink)
        p.setFont(self.small)
        metrics = QFontMetricsF(self.small)
        line_h = metrics.height()
        rows = max(1, int((lane.bottom() - rect.top()) // line_h))
        width = max(metrics.horizontalAdvance(t) for t in self.side_lines) + 12
        for k, text in enumerate(self.side_lines):
            x, y = rect.right() + 10 + (k // rows) * width, rect.top() + (k % rows) * line_h
            p.drawText(QRectF(x, y, width, line_h), Qt.AlignmentFlag.AlignLeft, text)

    # ---- mouse -----------------------------------------------------------------------------------------
    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        placed = self.geometry_()
        key = placed.box_at(event.position()) if placed is not None else None
        self.sig_hovered.emit(key or "", event.position())
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.sig_hovered.emit("", QPointF())
        super().leaveEvent(event)

    def mousePressEvent(self, event) -> None:  # noqa: N802
        placed = self.geometry_()
        if placed is None or event.button() != Qt.MouseButton.LeftButton:
            return
        lane = placed.lane_at(event.position())
        if lane is not None and self.layout_.lanes[lane].collapsed:
            self.sig_lane_clicked.emit(self.layout_.lanes[lane].layer)
            return
        key = placed.box_at(event.position())
        if key is not None:
            self.sig_box_clicked.emit(key)

    def cell_at(self, key: str, point: QPointF) -> tuple[int, int] | None:
        """(row, col) of ``key``'s array under ``point``, or None."""
        placed, image = self.geometry_(), self.images.get(key)
        if placed is None or image is None or not image.data.size:
            return None
        rect = placed.boxes[key]
        rows, cols = image.data.shape
        if not rect.contains(point):
            return None
        c = int((point.x() - rect.left()) / rect.width() * cols)
        r = int((point.y() - rect.top()) / rect.height() * rows)
        return min(r, rows - 1), min(c, cols - 1)

    def token_text(self, i: int) -> str:
        """The label of window column ``i``'s token."""
        j = self.start + i
        return token_label(self.tokens[j]) if 0 <= j < len(self.tokens) else ""
