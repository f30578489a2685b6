"""Plots styled from the theme (:mod:`explorer.qt.theme`): the palette's plot ground, text in the
palette's plot ink, titles fitted or elided (:class:`~explorer.qt.plots.plot_items.ShrinkingTitle`),
and curves, markers and legend swatches moved just far enough to read on the ground (WCAG 2).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QWidget

from explorer.qt.plots.plot_items import ShrinkingTitle, use_shrinking_title
from explorer.qt.theme import curve_colour, legend_ground, mix, plot_background, plot_text


def _pen_colour(pen) -> QColor | None:
    """The colour of a pyqtgraph pen option (a QPen, a colour, or None: no line)."""
    if pen is None:
        return None
    if isinstance(pen, QPen):
        return None if pen.style() == Qt.PenStyle.NoPen else pen.color()
    import pyqtgraph as pg

    made = pg.mkPen(pen)
    return None if made.style() == Qt.PenStyle.NoPen else made.color()


class _PaletteFollower(QObject):
    """Styles a view's plots again when its palette changes (a theme switched while the app runs)."""

    def __init__(self, view, plots, widget: QWidget) -> None:
        super().__init__(widget)
        self.view, self.plots, self.widget = view, list(plots), widget

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if event.type() == QEvent.Type.PaletteChange:
            try:
                _style(self.view, self.plots, self.widget)
            except RuntimeError:  # a view being destroyed: its scene's items are gone already
                pass
        return False


def style_plots(view, plots, widget: QWidget | None = None) -> None:
    """Give a pyqtgraph view (a ``GraphicsLayoutWidget`` or ``PlotWidget``) the palette's plot
    background and each of its ``plots`` (``PlotItem``) axes, axis titles and title in the
    palette's plot text (:func:`plot_text`): never pyqtgraph's fixed grey on a fixed white.
    ``widget`` (default ``view``) is whose palette is read; the styling follows its palette when
    that changes later."""
    widget = view if widget is None else widget
    _style(view, plots, widget)
    widget.installEventFilter(_PaletteFollower(view, plots, widget))


def _style(view, plots, widget: QWidget) -> None:
    view.setBackground(plot_background(widget))
    ink = plot_text(widget)
    for plot in plots:
        for name in ("left", "bottom", "top", "right"):
            axis = plot.getAxis(name)
            axis.setTextPen(ink)  # tick labels and the axis title
            axis.setPen(ink)
            if axis.labelStyle.get("color") != ink.name():
                axis.labelStyle = {**axis.labelStyle, "color": ink.name()}
                axis._updateLabel()  # pyqtgraph's own: the axis title again in the new colour
        _style_title(plot, ink)
        _style_items(plot, widget, ink)


def _style_title(plot, ink: QColor) -> None:
    """The title in ``ink`` now and later (a LabelItem keeps its colour option), fitted or elided."""
    title = plot.titleLabel
    if not isinstance(title, ShrinkingTitle):
        use_shrinking_title(plot, title.text if title.isVisible() else "")
        title = plot.titleLabel
    title.opts["color"] = ink.name()
    if title.text:
        title.setText(title.text, color=ink.name())


def _style_items(plot, widget: QWidget, ink: QColor) -> None:
    """Curves and symbols readable on the ground (from the colour each was asked in), and the legend's
    labels in ``ink`` on a box of the ground's colour."""
    import pyqtgraph as pg

    for item in plot.listDataItems():
        if isinstance(item, pg.ScatterPlotItem):  # markers: their fill is what must read
            asked = getattr(item, "_asked_colours", None)
            if asked is None:
                asked = item._asked_colours = {"brush": QColor(pg.mkBrush(item.opts["brush"]).color())}
            item.setBrush(pg.mkBrush(curve_colour(asked["brush"], widget)))
            continue
        if not isinstance(item, pg.PlotDataItem):  # bars: their panel colours each bar as it draws it
            continue
        asked = getattr(item, "_asked_colours", None)
        if asked is None:  # the colours it was made in, kept: a theme switch starts again from them
            asked = item._asked_colours = {key: QColor(_pen_colour(item.opts.get(key))) for key in ("pen", "symbolPen")
                                           if _pen_colour(item.opts.get(key)) is not None}
        for key, colour in asked.items():
            pen = QPen(item.opts[key]) if isinstance(item.opts[key], QPen) else QPen(QColor(colour))
            pen.setColor(curve_colour(colour, widget))
            item.setPen(pen) if key == "pen" else item.setSymbolPen(pen)
    legend = plot.legend
    if legend is not None:
        legend.setLabelTextColor(ink)
        legend.setBrush(legend_ground(widget))
        legend.setPen(mix(ink, plot_background(widget), 0.6))
        for sample, _label in legend.items:
            sample.update()
