"""Our pyqtgraph items: a colour-mapped matrix image, a plot title and a row outline, each made
for drawing on every keystroke (the token-label axis is :mod:`explorer.qt.plots.label_axis`).

**pyqtgraph version.** These classes and :class:`~explorer.qt.plots.label_axis.LabelAxis` use
pyqtgraph internals that are not its public API: ``AxisItem._tickLevels`` and
``AxisItem._updateMaxTextSize``, ``LabelItem._sizeHint``, and ``ImageItem``'s ``qimage``,
``_renderRequired`` and ``_unrenderable`` render state. They are tested with pyqtgraph 0.14
(0.14.0), the minor version ``pyproject.toml`` pins (``~=0.14.0``); ``tests/test_plot_items.py``
fails when one of them changes (``test_the_pyqtgraph_internals_we_use_are_there`` and the
drawing tests), which is the signal to re-check these files before moving the pin.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPen


class ShrinkingTitle(pg.LabelItem):
    """A plot title that may be narrower than its text, which is then elided ("…") to the width
    the plot gives it, with the whole text in its tooltip.

    pyqtgraph's title asks for its text's width, so a long title ("e_i token embedding") made
    the plot wider than its widget when three heatmaps share a row, and the colour bar on the
    right was cut off; a title that only overhung its plot was cut by the widget's edge
    (GPT-Neo's "scores q·k (this model does not divide by √d_head)" ended after "by"). Setting
    the same text again changes nothing. ``text`` is always the whole title.
    """

    def setText(self, text, **args) -> None:  # noqa: N802 (pyqtgraph API)
        """Show ``text`` (pyqtgraph's, but the same text and style again change nothing: a title
        set anew on every update laid its plot out again, and the plot repainted three more times)."""
        if text == getattr(self, "text", None) and all(self.opts.get(k) == v for k, v in args.items()):
            return
        self.opts.update(args)
        self._show(text)

    def _show(self, text) -> None:
        """Lay out ``text``, elided to the title's width when it is wider (the tooltip has all of it)."""
        text = "" if text is None else str(text)
        # The text item is as wide as its text and its document's margin on each side (4 px): a
        # text elided to the title's width alone reached 3 px past a narrow plot (the formula's
        # "a_ij v_j (weighted values)" in a 155 px strip), and pyqtgraph cut it there.
        width = self.rect().width()
        room = max(width - 2 * self.item.document().documentMargin() - 2, 1.0) if width > 0 else 0.0
        shown = elided(text, title_font(self.item.font(), self.opts), room)
        self.setToolTip(text if shown != text else "")
        if shown != getattr(self, "_shown", None) or self.opts != getattr(self, "_shown_opts", None):
            self._shown, self._shown_opts = shown, dict(self.opts)
            super().setText(shown)
        self.text = text

    def resizeEvent(self, ev) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(ev)
        if ev is not None and getattr(self, "text", None) is not None:
            self._show(self.text)  # a new width: elided again (or whole again)

    def updateMin(self) -> None:  # noqa: N802 (pyqtgraph API)
        super().updateMin()
        self.setMinimumWidth(0)
        # Neither its least nor its preferred width is its text's: a new text (a title that names
        # the token typed) re-divided the plots of a grid between its columns on every keystroke,
        # and every plot of the grid was laid out and repainted again.
        for which in (Qt.SizeHint.MinimumSize, Qt.SizeHint.PreferredSize):
            self._sizeHint[which] = (0, self._sizeHint[which][1])
        self.updateGeometry()


def title_font(base: QFont, opts: dict) -> QFont:
    """The font a pyqtgraph ``LabelItem`` draws in: ``base`` with its ``size`` ("11pt", "14px") and ``bold``."""
    font = QFont(base)
    size = str(opts.get("size") or "")
    if size.endswith("pt"):
        font.setPointSizeF(float(size[:-2]))
    elif size.endswith("px"):
        font.setPixelSize(round(float(size[:-2])))
    if opts.get("bold") in (True, False):
        font.setBold(opts["bold"])
    return font


def elided(text: str, font: QFont, width: float) -> str:
    """``text`` cut at its end with "…" so that it fits ``width`` px in ``font``; the text itself
    when it fits, when the width is not known yet (0 or less), or when it is rich text (has tags)."""
    if width <= 0 or "<" in text or QFontMetricsF(font).horizontalAdvance(text) <= width:
        return text
    return QFontMetricsF(font).elidedText(text, Qt.TextElideMode.ElideRight, width)


def plain_numbers(plot) -> None:
    """Tick labels that are the values themselves on every axis of ``plot`` (a PlotItem or
    PlotWidget): pyqtgraph's automatic SI prefix turned an axis of 0..0.7 into 0..700 with
    "(x0.001)" after its title, and a step axis of a run of 8 steps "(x0.001)" under its own ticks."""
    for name in ("left", "bottom", "right", "top"):
        plot.getAxis(name).enableAutoSIPrefix(False)


def use_shrinking_title(plot: pg.PlotItem, title: str) -> None:
    """Put a :class:`ShrinkingTitle` where ``plot``'s title goes (above the view), showing ``title``."""
    old = plot.titleLabel
    plot.layout.removeItem(old)
    old.setParentItem(None)
    if old.scene() is not None:
        old.scene().removeItem(old)
    plot.titleLabel = ShrinkingTitle("", size="11pt", parent=plot)
    plot.layout.addItem(plot.titleLabel, 0, 0, 1, 3)  # over the axes too: room for more of the text
    plot.setTitle(title or None)


class MatrixImage(pg.ImageItem):
    """pyqtgraph's ``ImageItem`` (row-major) with a fast render for a float matrix and a colour map.

    The colours are the ones pyqtgraph computes (index = (value - lo) * n / (hi - lo), clipped to
    [0, n - 1], for an n-entry lookup table; NaN transparent), made with two numpy operations into
    a premultiplied ARGB32 image. pyqtgraph's own path (kept for any other kind of image) made an
    8-bit indexed image, which Qt converts to ARGB on every draw: 0.35 ms per heatmap per paint at
    250 x 290 px against 0.05 ms premultiplied, plus about 0.2 ms of Python per render.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(axisOrder="row-major", **kwargs)
        self._lut_key = None
        self._argb_table_cache = np.zeros(0, np.uint32)
        self._pixels = np.zeros((0, 0), np.uint32)

    def render(self) -> None:  # noqa: D102 (pyqtgraph API)
        if not self.simple():
            super().render()
            return
        self.render_part(self.image)

    def simple(self) -> bool:
        """True when the image is a float matrix drawn through a uint8 lookup table with two
        levels (what this class renders itself); else pyqtgraph renders it."""
        data, lut = self.image, self.lut
        return bool(data is not None and data.ndim == 2 and data.size and data.dtype.kind == "f"
                    and self.levels is not None and np.size(self.levels) == 2 and not self.autoDownsample
                    and isinstance(lut, np.ndarray) and lut.dtype == np.uint8 and lut.ndim == 2
                    and lut.shape[1] in (3, 4))

    def cell_colours(self, data: np.ndarray) -> np.ndarray:
        """The colour of each cell of ``data`` (rows, cols) as premultiplied 0xAARRGGBB words (uint32),
        0 (transparent) for NaN; requires :meth:`simple`."""
        table = self._argb_table(self.lut)
        n = len(table)
        lo, hi = (float(v) for v in np.ravel(self.levels))
        with np.errstate(invalid="ignore"):
            scaled = (data - lo) * (n / ((hi - lo) or 1.0))
        nan = np.isnan(scaled)
        index = np.clip(np.where(nan, 0.0, scaled), 0, n - 1).astype(np.intp)
        pixels = table[index]
        pixels[nan] = 0  # transparent: a masked cell shows the view's grey ground
        return pixels

    def render_part(self, data: np.ndarray) -> None:
        """Make ``qimage`` from ``data`` (the whole image, or the cells of it a view shows), in the
        image's colours; requires :meth:`simple`."""
        self._pixels = np.ascontiguousarray(self.cell_colours(data))
        rows, cols = self._pixels.shape
        self.qimage = QImage(self._pixels.data, cols, rows, 4 * cols, QImage.Format.Format_ARGB32_Premultiplied)
        self._renderRequired = False
        self._unrenderable = False

    def _argb_table(self, lut: np.ndarray) -> np.ndarray:
        """The lookup table as premultiplied 0xAARRGGBB words (cached per table)."""
        key = (lut.shape, lut.tobytes())
        if key != self._lut_key:
            rgba = np.full((len(lut), 4), 255, np.uint32)
            rgba[:, : lut.shape[1]] = lut
            a = rgba[:, 3]
            r, g, b = (rgba[:, i] * a // 255 for i in range(3))
            self._argb_table_cache = (a << 24) | (r << 16) | (g << 8) | b
            self._lut_key = key
        return self._argb_table_cache


class RowOutline(pg.GraphicsObject):
    """An outline around a rectangle of cells that shows on any colour: a light halo under a dark
    line, both a fixed number of screen pixels wide; ``dashed`` for a row that is only hovered.

    Its bounding rectangle reaches a few pixels past the cells (computed from the view's scale),
    so that moving it never leaves a trace of the halo behind.
    """

    HALO_PX, LINE_PX = 4.0, 2.0

    def __init__(self, dashed: bool = False) -> None:
        super().__init__()
        self._rect = QRectF()
        self.dashed = dashed
        self.setZValue(10)

    def rect(self) -> QRectF:
        """The outlined cells, in data coordinates."""
        return QRectF(self._rect)

    def setRect(self, rect: QRectF) -> None:  # noqa: N802 (QGraphicsRectItem's name)
        """Outline ``rect`` (data coordinates)."""
        self.prepareGeometryChange()
        self._rect = QRectF(rect)
        self.update()

    def viewTransformChanged(self) -> None:  # noqa: N802 (pyqtgraph API)
        self.prepareGeometryChange()  # the margin in data units follows the zoom

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt API)
        mx, my = (self.HALO_PX + 1) * (self.pixelWidth() or 0.0), (self.HALO_PX + 1) * (self.pixelHeight() or 0.0)
        return self._rect.adjusted(-mx, -my, mx, my)

    def paint(self, p: QPainter, *_args) -> None:  # noqa: D102 (Qt API)
        if self._rect.isEmpty():
            return
        halo, line = QPen(QColor(255, 255, 255), self.HALO_PX), QPen(QColor(0, 0, 0), self.LINE_PX)
        halo.setCosmetic(True)
        line.setCosmetic(True)
        if self.dashed:
            line.setStyle(Qt.PenStyle.DashLine)
            halo.setWidthF(self.HALO_PX - 1)
        p.setBrush(Qt.BrushStyle.NoBrush)
        for pen in (halo, line):
            p.setPen(pen)
            p.drawRect(self._rect)


def scroll_by_wheel(scroll, event, rows: int = 3) -> bool:
    """Move ``scroll`` (a QScrollBar) by ``rows`` per wheel notch when it is shown (a list of bars
    longer than its view); True when the wheel event was used, else the caller passes it on."""
    if not scroll.isVisible():
        return False
    scroll.setValue(scroll.value() - int(np.sign(event.angleDelta().y())) * rows)
    event.accept()
    return True
