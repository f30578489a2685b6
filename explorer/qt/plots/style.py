"""Plots styled from the theme (:mod:`explorer.qt.theme`): the palette's plot ground, text in the
palette's plot ink, titles fitted or elided (:class:`~explorer.qt.plots.plot_items.ShrinkingTitle`),
and curves, markers, bars and legend swatches moved just far enough to read on the ground (WCAG 2).

A view that adds or recolours curves, bars or legend entries after :func:`style_plots` (when its data
arrives) calls :func:`restyle` after drawing them: one call, and what it drew reads on the ground too.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QWidget

from explorer.qt.plots.plot_items import ShrinkingTitle, use_shrinking_title
from explorer.qt.theme import context_colour, curve_colour, legend_ground, mix, plot_background, plot_text


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
                _style(self.view, self._open(), self.widget)
            except RuntimeError:  # a view being destroyed: its scene's items are gone already
                pass
        return False

    def _open(self) -> list:
        """The plots not closed (a closed ``PlotWidget``'s plot has no axes any more)."""
        return [plot for plot in self.plots if getattr(plot, "axes", None) is not None]

    def restyle_items(self) -> None:
        """Curves, bars and legend entries of the plots again (those added since, and redrawn ones)."""
        ink = plot_text(self.widget)
        for plot in self._open():
            _style_items(plot, self.widget, ink)


def style_plots(view, plots, widget: QWidget | None = None) -> None:
    """Give a pyqtgraph view (a ``GraphicsLayoutWidget`` or ``PlotWidget``) the palette's plot
    background and each of its ``plots`` (``PlotItem``) axes, axis titles and title in the
    palette's plot text (:func:`plot_text`): never pyqtgraph's fixed grey on a fixed white.
    ``widget`` (default ``view``) is whose palette is read; the styling follows its palette when
    that changes later."""
    widget = view if widget is None else widget
    _style(view, plots, widget)
    widget.installEventFilter(_PaletteFollower(view, plots, widget))


def restyle(widget: QWidget) -> None:
    """Style the curves, markers, bars and legend entries of the plots that :func:`style_plots` styled
    for ``widget`` again: those a view added or redrew since (its data arrived) come out readable on
    the ground as those made before did. Cheap where nothing changed (each item remembers the colour
    it was asked in); titles and axes are left as they are."""
    for follower in widget.findChildren(_PaletteFollower, options=Qt.FindChildOption.FindDirectChildrenOnly):
        follower.restyle_items()


CONTEXT = "context"
"""The colour a curve behind the one in question is asked in: :func:`~explorer.qt.theme.context_colour`
of the theme shown (a quiet grey in either), not one fixed grey moved to read."""


def context_pen(widget: QWidget | None = None, **kwargs):
    """A pen for a curve behind the one in question (``kwargs`` as ``pg.mkPen``), to be given to
    :func:`mark_context` once the curve is made: it stays the quiet grey of the theme shown."""
    import pyqtgraph as pg

    return pg.mkPen(context_colour(widget), **kwargs)


def mark_context(item):
    """Mark ``item`` (a ``PlotDataItem``) as context: styling gives it the theme's quiet grey
    (:data:`CONTEXT`). Returns ``item``."""
    item._asked_colours = {"pen": CONTEXT}
    return item


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
    """Curves, symbols and single-colour bars readable on the ground (from the colour each was asked
    in), and the legend's labels in ``ink`` on a box of the ground's colour."""
    import pyqtgraph as pg

    for item in list(plot.items):
        if isinstance(item, pg.ScatterPlotItem):  # markers: their fill is what must read
            asked = getattr(item, "_asked_colours", None)
            if asked is None:
                asked = item._asked_colours = {"brush": QColor(pg.mkBrush(item.opts["brush"]).color())}
            _set_if_changed(item, "brush", curve_colour(asked["brush"], widget), item.setBrush)
        elif isinstance(item, pg.BarGraphItem):
            _style_bars(item, widget)
        elif isinstance(item, pg.PlotDataItem):
            _style_curve(item, widget)
    legend = plot.legend
    if legend is not None:
        legend.setLabelTextColor(ink)  # labels made from now on
        legend.setBrush(legend_ground(widget))
        legend.setPen(mix(ink, plot_background(widget), 0.6))
        for sample, label in legend.items:
            if getattr(label, "_drawn_in", None) != ink.name():  # setLabelTextColor keeps the drawn text's colour
                label.setText(label.text, color=ink.name())
                label._drawn_in = ink.name()
            sample.update()


def _brush_colour(brush) -> QColor:
    import pyqtgraph as pg

    return QColor(pg.mkBrush(brush).color())


def _set_if_changed(item, key: str, colour: QColor, setter) -> None:
    """Give ``item`` a brush of ``colour`` for ``key`` (through ``setter``) unless it has it: a restyle
    where nothing changed repaints nothing."""
    import pyqtgraph as pg

    if _brush_colour(item.opts.get(key)).name() != colour.name():
        setter(pg.mkBrush(colour))


def _style_curve(item, widget: QWidget) -> None:
    """A curve's line, its symbols' outline and their fill, each readable on the ground."""
    import pyqtgraph as pg

    asked = getattr(item, "_asked_colours", None)
    if asked is None:  # the colours it was made in, kept: a theme switch starts again from them
        asked = {key: QColor(_pen_colour(item.opts.get(key))) for key in ("pen", "symbolPen")
                 if _pen_colour(item.opts.get(key)) is not None}
        if item.opts.get("symbol") is not None and item.opts.get("symbolBrush") is not None:
            asked["symbolBrush"] = _brush_colour(item.opts["symbolBrush"])
        item._asked_colours = asked
    for key, colour in asked.items():
        want = context_colour(widget) if colour is CONTEXT else curve_colour(colour, widget)
        if key == "symbolBrush":
            _set_if_changed(item, key, want, item.setSymbolBrush)
            continue
        now = _pen_colour(item.opts.get(key))
        if now is not None and now.name() == want.name():
            continue
        pen = QPen(item.opts[key]) if isinstance(item.opts[key], QPen) else pg.mkPen(item.opts[key])
        pen.setColor(want)
        item.setPen(pen) if key == "pen" else item.setSymbolPen(pen)


def _style_bars(item, widget: QWidget) -> None:
    """Bars of one colour (``brush``) readable on the ground; bars coloured one by one (``brushes``)
    are their panel's to colour (with :func:`~explorer.qt.theme.curve_colour`) as it draws them."""
    if item.opts.get("brushes") is not None or item.opts.get("brush") is None:
        return
    asked = getattr(item, "_asked_colours", None)
    if asked is None:
        asked = item._asked_colours = {"brush": _brush_colour(item.opts["brush"])}
    _set_if_changed(item, "brush", curve_colour(asked["brush"], widget), lambda b: item.setOpts(brush=b))
