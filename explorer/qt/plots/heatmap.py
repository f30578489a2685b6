"""A labelled heatmap: matrix row 0 at the top, token tick labels, axis titles, a colour bar that
says what its numbers are, hover readout, clicks, and outlines for the pinned and hovered rows.

The image item reads arrays row-major (``data[row, col]``) and the view's y axis is inverted, so
the matrix appears as printed: ``data[0, 0]`` in the top-left corner. Every update changes the
existing items in place; view ranges are fixed to the data (no auto-range), and the mouse zooms
and pans them (:mod:`explorer.qt.plots.zoom`; labels follow what is in view). Colours of the ground,
the labels and the titles come from the palette (:mod:`explorer.qt.theme`).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.qt import theme
from explorer.qt.plots.matrix_view import MatrixView
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import RowOutline, use_shrinking_title
from explorer.qt.plots.ticks import TickLabels, text_width, thinned_ticks, widen_axis  # noqa: F401 (imported from here)
from explorer.qt.plots.zoom import ZoomPan

DIVERGING = "CET-D1A"  # blue - white - red, for signed values with symmetric levels
MASKED_COLOUR = "#c8c8c8"  # shows through NaN (masked) cells
NOTE_STYLE = "QLabel { color:#a00000; }"  # a light theme's warning; widgets use theme.note_style()
SEQUENTIAL = "viridis"  # for values in a natural range such as attention weights 0..1
BAR_PX = 12  # thickness of the colour bar under the map
QUERY_TITLE = "query i (the token that looks)"
KEY_TITLE = "key j (the token looked at)"
TOKEN_TITLE = "token i"
READABLE_ROW_PX = 24  # a map's cells need this many px of height per row to be read ...
READABLE_MAX_PX = 150  # ... up to this much for all its rows (a 32-row map 150 px, not 768)


def dimension_title(name: str = "d_model") -> str:
    """The title of a dimension axis: "dimension (d_model)"."""
    return f"dimension ({name})"


def readable_px(rows: int) -> int:
    """The least height in px of the cells of a map of ``rows`` rows that can be read:
    :data:`READABLE_ROW_PX` a row, at most :data:`READABLE_MAX_PX` for them all."""
    return min(READABLE_ROW_PX * max(int(rows), 1), READABLE_MAX_PX)


def colormap(name: str) -> pg.ColorMap:
    """A pyqtgraph colour map by name (the ones bundled with pyqtgraph)."""
    return pg.colormap.get(name)


def settle_view(vb: pg.ViewBox) -> None:
    """Apply a view's pending range and transform now rather than at paint time.

    pyqtgraph defers them to the first paint, which then moves items and schedules the view to
    be painted again (each plot was painted two or three times per update when T changed:
    11 paints instead of 6, 26 -> 19 ms for the default window).
    """
    vb.prepareForPaint()


class Heatmap(TickLabels, QWidget):
    """A matrix drawn as coloured cells, with axis labels and titles and a value readout under the mouse.

    Parameters
    ----------
    title : str
    cmap : str
        Colour map name, :data:`DIVERGING` or :data:`SEQUENTIAL`.
    col_axis : str
        ``"top"`` (keys of an attention map) or ``"bottom"`` (dimensions).
    colorbar : bool
        A colour bar under the map, titled ``bar_title``.
    square : bool
        Keep cells square.
    row_title, col_title, bar_title : str
        What the rows, the columns and the colour bar's numbers are. By default an attention
        map's (``col_axis="top"``): :data:`QUERY_TITLE`, :data:`KEY_TITLE`; else tokens and
        dimensions; the bar "value".
    """

    sig_cell_clicked = Signal(int, int)
    """A cell (row, col) was clicked."""
    sig_row_clicked = Signal(int)
    """A row was clicked (e.g. a query position of an attention map)."""
    sig_row_hovered = Signal(object)
    """The mouse moved onto a row (int), or off the rows (None)."""

    def __init__(self, title: str = "", cmap: str = DIVERGING, col_axis: str = "bottom",
                 colorbar: bool = True, square: bool = False, parent: QWidget | None = None, *,
                 row_title: str | None = None, col_title: str | None = None, bar_title: str = "value") -> None:
        super().__init__(parent)
        self.data = np.zeros((0, 0), dtype=np.float32)
        self.levels = (0.0, 1.0)
        self._range = (0, 0)
        self._tick_key = None
        self._keep: tuple = ()  # rows whose labels thinning keeps (pinned, hovered)
        self._updating = self._resized_again = False
        self._widest_col: float | None = None
        self.readable = False  # keep_readable: the least height follows the rows shown
        self._hovered_row: int | None = None
        self.row_labels: list[str] | None = []
        self.col_labels: list[str] | None = None
        self.describe: Callable[[int, int, float], str] | None = None
        self.graphics = pg.GraphicsLayoutWidget()
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
            self.bar = pg.ColorBarItem(values=self.levels, colorMap=colormap(cmap), interactive=False, width=BAR_PX,
                                       orientation="horizontal")
            self.bar.setImageItem(self.image, insert_in=self.plot)
            self.plot.layout.setRowFixedHeight(4, 4)  # pyqtgraph leaves 10 px between the map's axis and the bar
            self.bar.axis.setStyle(hideOverlappingLabels=24)  # the end labels ("0", "1.0") may reach out
            self.bar.axis.enableAutoSIPrefix(False)  # the values themselves ("0.5"), not "500 (x0.001)"
        else:
            self.image.setColorMap(colormap(cmap))
        self._selection, self._hover = RowOutline(), RowOutline(dashed=True)  # pinned and hovered rows
        self._marked = RowOutline()  # one cell a tour step points at (set_marked_cell)
        for outline in (self._selection, self._hover, self._marked):
            outline.setVisible(False)
            self.plot.addItem(outline)
        self.readout = QLabel(" ")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.faults: np.ndarray | None = None  # (rows, cols) True where a value is not a number
        self.note = QLabel()  # says how many cells are not numbers, while some are
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        attention = col_axis == "top"
        self.titles = {"row": QUERY_TITLE if attention else TOKEN_TITLE,
                       "col": KEY_TITLE if attention else dimension_title(), "bar": bar_title}
        self.titles.update({k: v for k, v in (("row", row_title), ("col", col_title)) if v is not None})
        self._apply_palette()
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
        self.col_axis = p.getAxis(col_axis)
        self.keys_are_rows = col_axis == "top"  # an attention map: key j is token j, as query j is
        for name in ("left", col_axis):
            p.getAxis(name).setStyle(tickLength=0)
        # Let the first and last column labels reach past the plot's corners (pyqtgraph hides a
        # label that sticks out, which dropped the labels of key 0 and of the newest key).
        p.getAxis(col_axis).setStyle(hideOverlappingLabels=40)

    def set_titles(self, row: str | None = None, col: str | None = None, bar: str | None = None) -> None:
        """Change what the axis titles and the colour bar's title say (None: keep)."""
        for key, text in (("row", row), ("col", col), ("bar", bar)):
            if text is not None:
                self.titles[key] = text
        self._show_titles()

    def _show_titles(self) -> None:
        ink = theme.plot_text(self)
        left = self.plot.getAxis("left")
        if left.labelText != self.titles["row"] or left.labelStyle.get("color") != ink.name():
            left.set_title(self.titles["row"], ink)
            left._fixed_width = 0  # fitted again to labels + the new title
            widen_axis(left, self.row_labels or ["0000"], QFontMetrics(self.font()))
        if self.col_axis.labelText != self.titles["col"] or self.col_axis.labelStyle.get("color") != ink.name():
            self.col_axis.set_title(self.titles["col"], ink)
            self._fit_col_axis()
        if self.bar is not None and self.bar.axis.labelText != self.titles["bar"]:
            self.bar.axis.setLabel(self.titles["bar"], color=ink.name())

    def _apply_palette(self) -> None:
        """Ground, labels and titles in the palette's colours (called again when it changes)."""
        self.graphics.setBackground(theme.plot_background(self))
        ink = theme.plot_text(self)
        axes = [self.plot.getAxis("left"), self.col_axis] + ([self.bar.axis] if self.bar is not None else [])
        for axis in axes:
            axis.setTextPen(ink)
            axis.setPen(ink)
        if self.bar is not None:
            self.bar.axis.setLabel(self.titles["bar"], color=ink.name())
        self.plot.titleLabel.setText(self.plot.titleLabel.text, color=ink.name())
        self.note.setStyleSheet(theme.note_style(self))
        self._show_titles()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()

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
        keep the trace's buffers alive (:mod:`model.tracing.reuse`), and a caller's array may change.
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
        col_labels = None if col_labels is None else list(col_labels)
        if col_labels != self.col_labels:
            self._widest_col = None
        self.col_labels = col_labels
        if data.size == 0:
            self._tick_key = None
            self.image.clear()
            self.plot.getAxis("left").setTicks([[], []] if row_labels is not None else None)
            self.col_axis.setTicks([[], []] if col_labels is not None else None)
            self._selection.setVisible(False)
            self._hover.setVisible(False)
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
        """Show ``levels`` on the colour bar if they changed.

        Panels with levels fixed per model call this when the model changes, so that the bar's
        new labels are laid out then, not on the first keystroke.
        """
        levels = (float(levels[0]), float(levels[1]))
        if self.bar is not None and self.bar.levels() != levels:
            self.bar.setLevels(levels)

    def chrome_height(self) -> int:
        """Height in px of everything but the cells: title, axes and their titles, colour bar,
        margins, the readout line and the note when shown (the plots' least heights, measured)."""
        least = Qt.SizeHint.MinimumSize
        px = self.graphics.ci.effectiveSizeHint(least).height() + 2 * self.graphics.frameWidth()
        px += self.readout.sizeHint().height() + (self.note.sizeHint().height() if self.note.isVisibleTo(self) else 0)
        return math.ceil(px)

    def keep_readable(self, on: bool = True) -> None:
        """Keep the map at least as high as its :meth:`chrome_height` and :func:`readable_px` of
        its rows, from now on (each new shape, or axis that grows, sets the least height again):
        a lesson's dock then scrolls rather than squash the map to a few px a row."""
        self.readable = bool(on)
        self._fit_readable()

    def _fit_readable(self) -> None:
        if not self.readable or self.data.size == 0:
            return
        px = self.chrome_height() + readable_px(self.data.shape[0])
        if px != self.minimumHeight():
            self.setMinimumHeight(px)

    def _update_ticks(self, *args) -> None:
        super()._update_ticks(*args)
        self._fit_readable()  # turned column labels take more height: the cells keep theirs

    def fit_rows(self, rows: int, row_px: int, fixed: bool = False) -> None:
        """Give the map room for ``rows`` rows of at least ``row_px`` px each, above its
        :meth:`chrome_height`: as its least height, or as its fixed height with ``fixed``."""
        px = self.chrome_height() + max(int(rows), 1) * int(row_px)
        if fixed:
            self.setFixedHeight(px)
        else:
            self.setMinimumHeight(px)

    def clear(self) -> None:
        """Show nothing (no rows)."""
        self.set_data(np.zeros((0, 0), dtype=np.float32), self.levels, [], [])

    def set_selected_row(self, row: int | None, hover: int | None = None) -> None:
        """Outline the pinned row (solid) and the hovered one (dashed); None: no outline.

        A thinned axis keeps the labels of both.
        """
        rows, cols = self.data.shape if self.data.ndim == 2 else (0, 0)
        for outline, r in ((self._selection, row), (self._hover, None if hover == row else hover)):
            if r is None or not 0 <= r < rows:
                outline.setVisible(False)
                continue
            outline.setRect(QRectF(0, r, cols, 1))
            outline.setVisible(True)
        keep = tuple(r for r in (row, hover) if r is not None)
        if keep != self._keep:
            self._keep = keep
            if self._tick_key is not None and (self._tick_key[0][1] > 1 or self._tick_key[1][1] > 1):
                self._update_ticks()  # thinned: the kept labels changed

    def set_marked_cell(self, cell: tuple[int, int] | None) -> None:
        """Outline one cell (row, col), e.g. the one a tour step points at; None: no mark."""
        rows, cols = self.data.shape if self.data.ndim == 2 else (0, 0)
        if cell is None or not (0 <= cell[0] < rows and 0 <= cell[1] < cols):
            self._marked.setVisible(False)
            return
        self._marked.setRect(QRectF(cell[1], cell[0], 1, 1))
        self._marked.setVisible(True)

    @property
    def marked_cell(self) -> tuple[int, int] | None:
        """The outlined cell (row, col) of :meth:`set_marked_cell`, or None."""
        if not self._marked.isVisible():
            return None
        r = self._marked.rect()
        return int(r.top()), int(r.left())

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
        self._set_hovered_row(cell[0] if cell else None)

    def _set_hovered_row(self, row: int | None) -> None:
        if row != self._hovered_row:
            self._hovered_row = row
            self.sig_row_hovered.emit(row)

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        """The mouse left the map: no row is hovered any more."""
        self.readout.setText(" ")
        self._set_hovered_row(None)
        super().leaveEvent(event)

    def _on_scene_clicked(self, event) -> None:
        if event.double():
            if self.plot.sceneBoundingRect().contains(event.scenePos()):
                self.zoom.reset()  # the whole matrix again
            return
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.sig_cell_clicked.emit(*cell)
            self.sig_row_clicked.emit(cell[0])
