"""A labelled heatmap: matrix row 0 at the top, token tick labels, colour bar, hover readout, clicks.

The image item reads arrays row-major (``data[row, col]``) and the view's y axis is inverted, so
the matrix appears as printed: ``data[0, 0]`` in the top-left corner. Every update changes the
existing items in place; view ranges are fixed to the data (no auto-range), and the mouse zooms
and pans them (:mod:`explorer.qt.zoom`; labels follow what is in view).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QFontMetrics, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from explorer.qt.matrix_view import MatrixView
from explorer.qt.plot_items import LabelAxis, use_shrinking_title
from explorer.qt.zoom import ZoomPan

DIVERGING = "CET-D1A"  # blue - white - red, for signed values with symmetric levels
MASKED_COLOUR = "#c8c8c8"  # shows through NaN (masked) cells
NOTE_STYLE = "QLabel { color:#a00000; }"
SEQUENTIAL = "viridis"  # for values in a natural range such as attention weights 0..1
BAR_AXIS_PX = 45  # pyqtgraph's fixed width of a colour bar's axis, widened when labels need it


def colormap(name: str) -> pg.ColorMap:
    """A pyqtgraph colour map by name (the ones bundled with pyqtgraph)."""
    return pg.colormap.get(name)


def thinned_ticks(labels: Sequence[str] | None, step: int):
    """Tick specs for pyqtgraph's ``AxisItem.setTicks``: every ``step``-th label from the first,
    and the last when it does not crowd the one before.

    Cell i spans [i, i + 1], so its label sits at i + 0.5. None (numbered axis) stays None.
    """
    if labels is None:
        return None
    n, step = len(labels), max(1, step)
    shown = list(range(0, n, step))
    if shown and shown[-1] != n - 1:
        if n - 1 - shown[-1] < step and len(shown) > 1:
            shown.pop()  # too close to the last: the last (the newest token) wins; row 0 stays
        shown.append(n - 1)
    return [[(i + 0.5, str(labels[i])) for i in shown], []]


def settle_view(vb: pg.ViewBox) -> None:
    """Apply a view's pending range and transform now rather than at paint time.

    pyqtgraph defers them to the first paint, which then moves items and schedules the view to
    be painted again (each plot was painted two or three times per update when T changed:
    11 paints instead of 6, 26 -> 19 ms for the default window).
    """
    vb.prepareForPaint()


def text_width(axis: pg.AxisItem, text: str, fm: QFontMetrics) -> float:
    """Width in px of a tick label: from the label's cached layout on a :class:`LabelAxis`
    (measuring 32 labels with QFontMetrics on every keystroke cost about 0.3 ms per axis)."""
    return axis.label_width(text) if isinstance(axis, LabelAxis) else fm.horizontalAdvance(text)


def widen_axis(axis: pg.AxisItem, labels: Sequence[str] | None, fm: QFontMetrics) -> None:
    """Give a side axis a fixed width that fits ``labels``, growing but never shrinking.

    pyqtgraph sizes an axis to its widest label by default, so a label that changes width on a
    keystroke (a word typed letter by letter) re-lays out the whole plot and repaints it twice;
    a fixed width that only grows keeps the layout still (measured: paint 40 -> 18 ms at T = 1).
    """
    texts = list(labels) if labels else ["0000"]
    needed = max(text_width(axis, t, fm) for t in texts) + 12
    if needed > getattr(axis, "_fixed_width", 0):
        axis._fixed_width = needed
        axis.setWidth(needed)
        plot = axis.parentItem()
        if plot is not None and hasattr(plot, "layout"):
            plot.layout.activate()  # lay out now: a deferred layout repaints the plot once more


class Heatmap(QWidget):
    """A matrix drawn as coloured cells, with axis labels and a value readout under the mouse.

    Parameters
    ----------
    title : str
    cmap : str
        Colour map name, :data:`DIVERGING` or :data:`SEQUENTIAL`.
    col_axis : str
        ``"top"`` (keys of an attention map) or ``"bottom"`` (dimensions).
    colorbar : bool
    square : bool
        Keep cells square (attention maps).
    """

    sig_cell_clicked = Signal(int, int)
    """A cell (row, col) was clicked."""
    sig_row_clicked = Signal(int)
    """A row was clicked (e.g. a query position of an attention map)."""

    def __init__(self, title: str = "", cmap: str = DIVERGING, col_axis: str = "bottom",
                 colorbar: bool = True, square: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data = np.zeros((0, 0), dtype=np.float32)
        self.levels = (0.0, 1.0)
        self._range = (0, 0)
        self._tick_key = None
        self.row_labels: list[str] | None = []
        self.col_labels: list[str] | None = None
        self.describe: Callable[[int, int, float], str] | None = None
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        axes = {"left": LabelAxis("left"), col_axis: LabelAxis(col_axis)}
        self.plot = self.graphics.addPlot(axisItems=axes)
        use_shrinking_title(self.plot, title)
        self.image = MatrixView()
        self.plot.addItem(self.image)
        self._setup_plot(col_axis)
        self.zoom = ZoomPan(self.plot.getViewBox())  # wheel zooms, drag pans, double-click shows it all
        self.plot.setAspectLocked(square)
        self.bar = None
        if colorbar:
            self.bar = pg.ColorBarItem(values=self.levels, colorMap=colormap(cmap), interactive=False, width=12)
            self.bar.setImageItem(self.image, insert_in=self.plot)
        else:
            self.image.setColorMap(colormap(cmap))
        self._selection = QGraphicsRectItem()
        self._selection.setPen(QPen(Qt.GlobalColor.black, 0))
        self._selection.setVisible(False)
        self.plot.addItem(self._selection)
        self.readout = QLabel(" ")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.faults: np.ndarray | None = None  # (rows, cols) True where a value is not a number
        self.note = QLabel()  # says how many cells are not numbers, while some are
        self.note.setStyleSheet(NOTE_STYLE)
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.readout)
        self.graphics.scene().sigMouseMoved.connect(self._on_scene_moved)
        self.graphics.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.plot.getViewBox().sigResized.connect(self._update_ticks)
        self.plot.getViewBox().sigRangeChanged.connect(self._update_ticks)  # zoomed: labels as they fit

    def _setup_plot(self, col_axis: str) -> None:
        p = self.plot
        p.invertY(True)  # row 0 at the top
        p.setMenuEnabled(False)
        p.hideButtons()
        p.getViewBox().setDefaultPadding(0)
        # NaN cells (masked scores) are transparent: a grey ground tells them from a white 0.
        p.getViewBox().setBackgroundColor(MASKED_COLOUR)
        if col_axis == "top":
            p.showAxis("top")
            p.hideAxis("bottom")
            p.getAxis("top").setHeight(QFontMetrics(self.font()).height() + 8)  # never re-laid out
        self.col_axis = p.getAxis(col_axis)
        for name in ("left", col_axis):
            p.getAxis(name).setStyle(tickLength=0)
        # Let the first and last column labels reach past the plot's corners (pyqtgraph hides a
        # label that sticks out, which dropped the labels of key 0 and of the newest key).
        p.getAxis(col_axis).setStyle(hideOverlappingLabels=40)

    def set_data(self, data: np.ndarray, levels: tuple[float, float], row_labels: Sequence[str] | None = (),
                 col_labels: Sequence[str] | None = None, blank: np.ndarray | bool | None = None,
                 unchanged_rows: int = 0) -> None:
        """Show ``data`` (rows, cols) with fixed colour ``levels`` (lo < hi); NaN cells are blank.

        ``row_labels`` / ``col_labels`` None label rows / columns with their index (dimensions).
        ``blank`` says which cells are blank by design (masked scores, gaps): a (rows, cols) bool
        array, False for none, True for every cell that is not a number, or None for "every NaN
        cell" (arrays that mark blanks with NaN).
        Every other cell that is not a finite number (NaN or inf from an overflowing model) is
        never drawn as a value: it is left blank, a note under the map counts such cells, and
        hovering one says so. The heatmap keeps its own copy of ``data``: a view of a trace would
        keep the trace's buffers alive (:mod:`model.reuse`), and a caller's array may change.
        ``unchanged_rows``: the caller knows that rows 0..unchanged_rows-1 are those it gave last
        time (``Session.rows_unchanged``); only the others are compared to see whether the
        picture changed.
        """
        original, given = data, np.asarray(data, dtype=np.float32)
        data = self._check_finite(given, blank)
        levels = (float(levels[0]), float(levels[1]))
        # The same picture again (p_i while typing at the end, a selection change) is not redrawn.
        start = max(0, min(int(unchanged_rows), data.shape[0])) if data.ndim else 0
        unchanged = (self.image.image is not None and levels == self.levels and data.shape == self.data.shape
                     and np.array_equal(data[start:], self.data[start:], equal_nan=True))
        if unchanged:
            data = self.data  # the copy held already
        elif data is given and (given is original or given.base is not None or not given.flags.writeable):
            data = given.copy()
        self.data = data
        self.levels = levels
        self.row_labels = None if row_labels is None else list(row_labels)
        self.col_labels = None if col_labels is None else list(col_labels)
        if data.size == 0:
            self._tick_key = None
            self.image.clear()
            self.plot.getAxis("left").setTicks([[], []] if row_labels is not None else None)
            self.col_axis.setTicks([[], []] if col_labels is not None else None)
            self._selection.setVisible(False)
            self.readout.setText(" ")
            return
        rows, cols = data.shape
        if not unchanged:
            self.image.setImage(data, levels=self.levels, autoLevels=False)
        self.set_bar_levels(self.levels)
        if (rows, cols) != self._range:  # the view range changes with the shape (or a zoom) only
            self._range = (rows, cols)
            self.zoom.set_extent(rows, cols)
        self._update_ticks()
        settle_view(self.plot.getViewBox())

    def _check_finite(self, data: np.ndarray, blank) -> np.ndarray:
        """``data`` with every non-finite value as NaN (blank); sets ``faults`` and the note."""
        finite = np.isfinite(data)
        if finite.all():
            self.faults = None
            self.note.setVisible(False)
            return data
        intended = np.isnan(data) if blank is None else np.broadcast_to(np.asarray(blank, dtype=bool), data.shape)
        faults = ~finite & ~intended
        self.faults = faults if faults.any() else None
        if self.faults is not None:
            n = int(np.count_nonzero(faults))
            self.note.setText(f"{n:,} of {data.size:,} values here are not numbers (NaN or inf): left blank")
        self.note.setVisible(self.faults is not None)
        return np.where(finite, data, np.float32(np.nan))  # an infinity is not drawn as the end colour

    def set_bar_levels(self, levels: tuple[float, float]) -> None:
        """Show ``levels`` on the colour bar (and fit its axis) if they changed.

        Panels with levels fixed per model call this when the model changes, so that the bar's
        re-layout happens then, not on the first keystroke.
        """
        levels = (float(levels[0]), float(levels[1]))
        if self.bar is not None and self.bar.levels() != levels:
            self.bar.setLevels(levels)
            self._fit_bar_axis()

    def _fit_bar_axis(self) -> None:
        """Widen the colour bar's axis (grow only) so that every tick label fits.

        pyqtgraph gives it a fixed 45 px, which clips or drops labels such as "-0.0025" or
        "-10000" (small or large levels, e.g. the tensors of a model with a small d_model).
        """
        axis = self.bar.axis
        lo, hi = self.levels
        length = max(self.bar.getViewBox().height(), 100.0)
        if getattr(self, "_bar_key", None) == (lo, hi, int(length)):
            return  # the labels are the ones already fitted (set_data runs per keystroke)
        self._bar_key = (lo, hi, int(length))
        labels = [text for spacing, values in axis.tickValues(lo, hi, length)
                  for text in axis.tickStrings(values, axis.scale, spacing)]
        font = axis.style.get("tickFont") or self.font()
        needed = max([QFontMetrics(font).horizontalAdvance(t) for t in labels] + [0])
        needed += axis.style.get("tickTextOffset", [5, 2])[0] + 8
        if needed > getattr(axis, "_fixed_width", BAR_AXIS_PX):
            axis._fixed_width = needed
            axis.setWidth(needed)

    def _update_ticks(self, *_) -> None:
        """Label as many rows/columns as fit without overlapping (recomputed on resize)."""
        if self.bar is not None:
            self._fit_bar_axis()
        if self.data.size == 0:
            return
        rows, cols = self.zoom.visible_extent()  # rows and columns in view (all, unless zoomed)
        vb = self.plot.getViewBox()
        fm = QFontMetrics(self.font())
        row_step = math.ceil(fm.height() / (max(vb.height(), 1.0) / rows))
        col_step = 1
        if self.col_labels is not None:
            in_view = self.col_labels[self.zoom.col_slice()] or self.col_labels  # a zoomed view: those in it
            widest = max(text_width(self.col_axis, c, fm) for c in in_view) + 6
            col_step = math.ceil(widest / (max(vb.width(), 1.0) / cols))
        # Each axis is touched only when its own labels change: setTicks makes pyqtgraph rebuild
        # and repaint that axis, which costs about 1 ms for 32 labels.
        old_rows, old_cols = self._tick_key or (None, None)
        rows_key, cols_key = (self.row_labels, row_step), (self.col_labels, col_step)
        if rows_key != old_rows:
            widen_axis(self.plot.getAxis("left"), self.row_labels or [str(self.data.shape[0] - 1)], fm)
            self.plot.getAxis("left").setTicks(thinned_ticks(self.row_labels, row_step))
        if cols_key != old_cols:
            self.col_axis.setTicks(thinned_ticks(self.col_labels, col_step) if self.col_labels is not None else None)
        self._tick_key = (rows_key, cols_key)

    def clear(self) -> None:
        """Show nothing (no rows)."""
        self.set_data(np.zeros((0, 0), dtype=np.float32), self.levels, [], [])

    def set_selected_row(self, row: int | None) -> None:
        """Outline one row (None: no outline)."""
        rows, cols = self.data.shape if self.data.ndim == 2 else (0, 0)
        if row is None or not 0 <= row < rows:
            self._selection.setVisible(False)
            return
        self._selection.setRect(QRectF(0, row, cols, 1))
        self._selection.setVisible(True)

    def cell_at(self, scene_pos) -> tuple[int, int] | None:
        """(row, col) of the cell under a scene position, or None outside the data."""
        if self.data.size == 0 or not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.getViewBox().mapSceneToView(scene_pos)
        row, col = math.floor(p.y()), math.floor(p.x())
        rows, cols = self.data.shape
        return (row, col) if 0 <= row < rows and 0 <= col < cols else None

    def describe_cell(self, row: int, col: int) -> str:
        """The readout text for one cell: labels and the exact value."""
        value = float(self.data[row, col])
        fault = self.faults is not None and bool(self.faults[row, col])
        if self.describe is not None and not fault:
            return self.describe(row, col, value)
        r = self.row_labels[row] if self.row_labels and row < len(self.row_labels) else f"row {row}"
        c = self.col_labels[col] if self.col_labels and col < len(self.col_labels) else f"dim {col}"
        shown = "not a number (NaN or inf)" if fault else "masked" if math.isnan(value) else f"{value:.6g}"
        return f"{r}  ·  {c}  =  {shown}"

    def _on_scene_moved(self, pos) -> None:
        cell = self.cell_at(pos)
        self.readout.setText(self.describe_cell(*cell) if cell else " ")

    def _on_scene_clicked(self, event) -> None:
        if event.double():
            if self.plot.sceneBoundingRect().contains(event.scenePos()):
                self.zoom.reset()  # the whole matrix again
            return
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.sig_cell_clicked.emit(*cell)
            self.sig_row_clicked.emit(cell[0])
