"""Where the Model map's boxes, lanes and arrows go on a canvas of a given size (pixels)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF

from explorer.core.model_map.layout import MapLayout
from model.tracing.schema import MASK, SQUARE

MARGIN, WIRE_MARGIN = 8.0, 16.0  # around the map; left of the first column, for wires coming in
GAP_X, GAP_Y, LANE_GAP = 30.0, 6.0, 6.0  # between columns (arrows run here), stacked boxes, lanes
MIN_BOX_W, MAX_BOX_W = 36.0, 150.0  # 36: Qwen3's eight columns fit a 960-px window's dock
MIN_BOX_H, MAX_BOX_H = 14.0, 96.0
COLLAPSED_SHARE = 0.6  # a collapsed block's boxes, as a share of an expanded box's height
SIDE_PANEL = 150.0  # room right of the output lane's last box for the top tokens


@dataclass(frozen=True)
class Placed:
    """The canvas geometry of one map: each box's image rectangle and each lane's band."""

    boxes: dict[str, QRectF]
    lanes: list[QRectF]
    titles: list[QRectF]
    label_h: float
    gap_x: float = GAP_X

    def box_at(self, point: QPointF) -> str | None:
        """The key of the box under ``point`` (its image or its label), or None."""
        for key, rect in self.boxes.items():
            if rect.adjusted(0, 0, 0, self.label_h).contains(point):
                return key
        return None

    def lane_at(self, point: QPointF) -> int | None:
        """The index of the lane under ``point``, or None."""
        return next((i for i, r in enumerate(self.lanes) if r.contains(point)), None)


def place(layout: MapLayout, width: float, height: float, title_h: float, label_h: float) -> Placed:
    """Lay ``layout`` out on a ``width`` x ``height`` canvas: one column grid for every lane (so a
    token's columns line up from lane to lane), box widths and heights shared, sized to fit
    within their limits (the canvas scrolls beyond them)."""
    columns = max((lane.columns for lane in layout.lanes), default=1)
    side = SIDE_PANEL if any(b.row.dims == ("vocab_size",) for b in layout.lanes[-1].boxes) else 0.0
    free_w = width - MARGIN - WIRE_MARGIN - side - (columns - 1) * GAP_X
    box_w = min(MAX_BOX_W, max(MIN_BOX_W, free_w / max(columns, 1)))
    weights = sum(lane.slots * (COLLAPSED_SHARE if lane.collapsed else 1.0) for lane in layout.lanes)
    fixed = sum(title_h + LANE_GAP + lane.slots * (label_h + GAP_Y) for lane in layout.lanes) + 2 * MARGIN
    box_h = min(MAX_BOX_H, max(MIN_BOX_H, (height - fixed) / max(weights, 1.0)))
    boxes: dict[str, QRectF] = {}
    lanes, titles = [], []
    y = MARGIN
    for lane in layout.lanes:
        h = box_h * (COLLAPSED_SHARE if lane.collapsed else 1.0)
        top = y
        titles.append(QRectF(MARGIN, y, width - 2 * MARGIN, title_h))
        y += title_h
        boxes.update(_lane_boxes(lane, y, box_w, h, label_h))
        y += lane.slots * (h + label_h + GAP_Y)
        lanes.append(QRectF(0, top, width, y - top))
        y += LANE_GAP
    return Placed(boxes, lanes, titles, label_h)


def _lane_boxes(lane, top: float, box_w: float, h: float, label_h: float) -> dict[str, QRectF]:
    """One lane's box rectangles: ``box_w`` x ``h``, except attention maps and masks, which are
    square and share their column's height with the column's other boxes (the weights, alone in
    theirs, get the height of q, k and v stacked, up to the box width), centred in the column."""
    column_h = lane.slots * (h + label_h + GAP_Y)
    out: dict[str, QRectF] = {}
    for c in range(lane.columns):
        members = sorted((b for b in lane.boxes if b.column == c), key=lambda b: b.slot)
        share = column_h / max(len(members), 1) - label_h - GAP_Y
        y = top
        for b in members:
            x = MARGIN + WIRE_MARGIN + c * (box_w + GAP_X)
            if b.row.kind in (SQUARE, MASK):
                side = max(h, min(box_w, share))
                out[b.key] = QRectF(x + (box_w - side) / 2, y, side, side)
            else:
                out[b.key] = QRectF(x, y, box_w, h)
            y = out[b.key].bottom() + label_h + GAP_Y
    return out


def content_height(layout: MapLayout, title_h: float, label_h: float) -> float:
    """The height the map needs at the smallest box height (the canvas's minimum)."""
    return 2 * MARGIN + sum(title_h + LANE_GAP + lane.slots * (label_h + GAP_Y + MIN_BOX_H *
                                                              (COLLAPSED_SHARE if lane.collapsed else 1.0))
                            for lane in layout.lanes)


def content_width(layout: MapLayout) -> float:
    """The width the map needs at the smallest box width."""
    columns = max((lane.columns for lane in layout.lanes), default=1)
    side = SIDE_PANEL if any(b.row.dims == ("vocab_size",) for b in layout.lanes[-1].boxes) else 0.0
    return MARGIN + WIRE_MARGIN + side + columns * MIN_BOX_W + (columns - 1) * GAP_X + MARGIN


def wire(src: QRectF, dst: QRectF, band_y: float | None, others=(), floor_y: float = 0.0) -> list[QPointF]:
    """The polyline of an arrow from box ``src`` to box ``dst``: along the source's height to the
    gap before the destination, then to its height, then in. ``band_y``: for an arrow from a lane
    above, the height of its horizontal run above the destination's lane (None: the same lane).
    When the run along the source's height would cross one of ``others`` (the lane's other boxes),
    it runs at ``floor_y`` (the lane's bottom) instead."""
    if abs(src.center().x() - dst.center().x()) < 1 and src.top() > dst.top():  # below it, same column (a mask)
        return [QPointF(src.center().x(), src.top()), QPointF(dst.center().x(), dst.bottom())]
    turn = dst.left() - (GAP_X / 2 if dst.left() > MARGIN + WIRE_MARGIN + 1 else WIRE_MARGIN / 2)
    start = QPointF(src.right(), src.center().y())
    if band_y is not None:  # from a lane above
        out = src.right() + GAP_X / 2
        return [start, QPointF(out, start.y()), QPointF(out, band_y), QPointF(turn, band_y),
                QPointF(turn, dst.center().y()), QPointF(dst.left(), dst.center().y())]
    run = QRectF(QPointF(src.right() + 1, start.y() - 1), QPointF(turn, start.y() + 1))
    if any(run.intersects(r) for r in others):
        out = src.right() + GAP_X / 2
        return [start, QPointF(out, start.y()), QPointF(out, floor_y), QPointF(turn, floor_y),
                QPointF(turn, dst.center().y()), QPointF(dst.left(), dst.center().y())]
    return [start, QPointF(turn, start.y()), QPointF(turn, dst.center().y()), QPointF(dst.left(), dst.center().y())]
