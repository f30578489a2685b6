"""A matrix image coloured at the resolution it is seen at.

A heatmap of a 1,024-token attention map holds 1,048,576 cells, and its view is a few hundred
pixels wide: colouring every cell (and Qt scaling the picture down at every paint) cost about
25 ms a map, and it was done again on every keystroke and every repaint. :class:`MatrixView`
colours only the cells the view shows, at most one per device pixel: the cell under each
pixel's centre, which is the picture Qt's own (nearest-neighbour) scaling of the whole image
gave. Zoomed in, it colours the visible cells only, whatever the matrix's size.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPaintEngine

from explorer.qt.plots.plot_items import MatrixImage


def sample_indices(start: int, stop: int, n: int) -> np.ndarray:
    """``n`` indices in [start, stop): the cell under the centre of each of ``n`` equal parts
    (every index when ``n`` >= stop - start)."""
    span = stop - start
    if n >= span:
        return np.arange(start, stop)
    return start + ((np.arange(n) + 0.5) * (span / n)).astype(np.intp)


def sampled(image: np.ndarray, part: tuple[int, int, int, int, int, int]) -> np.ndarray:
    """The cells of ``image`` a view part shows: rows r0..r1 and columns c0..c1 sampled to
    (out_rows, out_cols) (a plain slice when nothing is left out)."""
    r0, r1, c0, c1, out_rows, out_cols = part
    if out_rows >= r1 - r0 and out_cols >= c1 - c0:
        return image[r0:r1, c0:c1]
    rows = sample_indices(r0, r1, out_rows)
    cols = sample_indices(c0, c1, out_cols)
    return image[rows][:, cols]  # (out_rows, out_cols)


MAX_VECTOR_CELLS = 65_536  # an SVG draws at most this many cells as rectangles (a larger view: sampled)


class MatrixView(MatrixImage):
    """A :class:`~explorer.qt.plots.plot_items.MatrixImage` that colours only what its view shows, at
    most one cell per device pixel (see the module's docstring). The item still spans the whole
    matrix (its bounding rectangle, ``image``, hover and clicks are the matrix's)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.part: tuple[int, int, int, int, int, int] | None = None  # what qimage shows

    def render(self) -> None:  # noqa: D102 (pyqtgraph API: a whole-image render, e.g. for a histogram)
        super().render()
        self.part = None

    def viewTransformChanged(self) -> None:  # noqa: N802 (pyqtgraph API)
        """The view moved, zoomed or was resized: forget the cached view rectangle. pyqtgraph's
        ``ImageItem`` overrides the method that clears it without clearing it, so ``viewRect()``
        kept the first view it was asked for: the rows a growing text added, and any zoom, were
        then never coloured."""
        self._cachedView = None
        super().viewTransformChanged()

    def visible_part(self, transform, pixel_ratio: float = 1.0) -> tuple[int, int, int, int, int, int] | None:
        """(r0, r1, c0, c1, out_rows, out_cols): the rows and columns in view and how many device
        pixels they cover (at most their number), for a painter ``transform`` (item to device);
        None when no cell is in view."""
        rows, cols = self.image.shape[:2]
        view = self.viewRect()
        x0, y0, x1, y1 = 0.0, 0.0, float(cols), float(rows)
        if view is not None:
            view = view.normalized()
            x0, x1 = max(x0, view.left()), min(x1, view.right())
            y0, y1 = max(y0, view.top()), min(y1, view.bottom())
        c0, c1 = max(0, math.floor(x0)), min(cols, math.ceil(x1))
        r0, r1 = max(0, math.floor(y0)), min(rows, math.ceil(y1))
        if c1 <= c0 or r1 <= r0:
            return None
        across = math.hypot(transform.m11(), transform.m12()) * pixel_ratio  # device px per cell
        down = math.hypot(transform.m21(), transform.m22()) * pixel_ratio
        out_cols = min(c1 - c0, max(1, math.ceil((c1 - c0) * across)))
        out_rows = min(r1 - r0, max(1, math.ceil((r1 - r0) * down)))
        return (r0, r1, c0, c1, out_rows, out_cols)

    def paint(self, painter, *args) -> None:  # noqa: D102 (QGraphicsItem API)
        if self.image is None:
            return
        if not self.simple():
            super().paint(painter, *args)
            return
        device = painter.device()
        ratio = device.devicePixelRatioF() if device is not None else 1.0
        part = self.visible_part(painter.transform(), ratio)
        if part is None:
            return
        engine = painter.paintEngine()
        if engine is not None and engine.type() == QPaintEngine.Type.SVG:
            self.paint_cells(painter, part)
            return
        if self._renderRequired or part != self.part or self.qimage is None:
            self.render_part(sampled(self.image, part))
            self.part = part
        r0, r1, c0, c1 = part[:4]
        painter.drawImage(QRectF(c0, r0, c1 - c0, r1 - r0), self.qimage)

    def paint_cells(self, painter, part: tuple[int, int, int, int, int, int]) -> None:
        """Draw the cells in view as one filled rectangle each, in the image's colours (NaN cells
        are left out: transparent), for vector output (an SVG export): a picture embedded with
        ``image-rendering="optimizeSpeed"`` was drawn by librsvg and ImageMagick as a smooth
        gradient. Above :data:`MAX_VECTOR_CELLS` the cells are sampled as on screen."""
        r0, r1, c0, c1, out_rows, out_cols = part
        if (r1 - r0) * (c1 - c0) > MAX_VECTOR_CELLS:
            side = max(1, math.isqrt(MAX_VECTOR_CELLS))
            part = (r0, r1, c0, c1, min(out_rows, side), min(out_cols, side))
            r0, r1, c0, c1, out_rows, out_cols = part
        else:
            part = (r0, r1, c0, c1, r1 - r0, c1 - c0)
            out_rows, out_cols = r1 - r0, c1 - c0
        words = self.cell_colours(sampled(self.image, part))  # (out_rows, out_cols) 0xAARRGGBB, 0 = blank
        height, width = (r1 - r0) / out_rows, (c1 - c0) / out_cols
        painter.save()
        painter.setPen(Qt.PenStyle.NoPen)
        for r in range(out_rows):
            for c in range(out_cols):
                word = int(words[r, c])
                if word >> 24:
                    painter.fillRect(QRectF(c0 + c * width, r0 + r * height, width, height), QColor.fromRgba(word))
        painter.restore()
