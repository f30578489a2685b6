"""Colours that follow the desktop's palette (light or dark), and a dark palette of our own.

Widgets never pair a fixed light background with the palette's text colour (white on pale yellow
under a dark theme): they take both from the palette, or both from here. ``--dark`` (or any dark
desktop theme) gives :func:`dark_palette`.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QPalette, QPen
from PySide6.QtWidgets import QApplication, QWidget

Role = QPalette.ColorRole


def palette(widget: QWidget | None = None) -> QPalette:
    """The palette of ``widget``, else the application's."""
    return widget.palette() if widget is not None else QApplication.palette()


def is_dark(widget: QWidget | None = None) -> bool:
    """True when the window background is darker than its text (a dark theme)."""
    pal = palette(widget)
    return pal.color(Role.Window).lightness() < pal.color(Role.WindowText).lightness()


def dark_palette() -> QPalette:
    """A dark palette (Qt's Fusion colours darkened), for ``--dark`` and for tests of dark themes."""
    pal = QPalette()
    colours = {
        Role.Window: "#2b2b2b", Role.WindowText: "#e6e6e6", Role.Base: "#1e1e1e", Role.AlternateBase: "#2f2f2f",
        Role.ToolTipBase: "#3a3a3a", Role.ToolTipText: "#e6e6e6", Role.PlaceholderText: "#8c8c8c",
        Role.Text: "#e6e6e6", Role.Button: "#353535", Role.ButtonText: "#e6e6e6", Role.BrightText: "#ff6b6b",
        Role.Link: "#6cb4ff", Role.Highlight: "#2f65ca", Role.HighlightedText: "#ffffff",
        Role.Light: "#505050", Role.Midlight: "#404040", Role.Mid: "#303030", Role.Dark: "#1a1a1a",
        Role.Shadow: "#000000",
    }
    for role, colour in colours.items():
        pal.setColor(role, QColor(colour))
    for role in (Role.WindowText, Role.Text, Role.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7a7a"))
    return pal


def use_dark_theme(app: QApplication) -> None:
    """Fusion style with :func:`dark_palette` (the platform style may ignore a palette)."""
    app.setStyle("Fusion")
    app.setPalette(dark_palette())


def plot_background(widget: QWidget | None = None) -> QColor:
    """Background of plots: the palette's Base (white in a light theme)."""
    return palette(widget).color(Role.Base)


def plot_text(widget: QWidget | None = None) -> QColor:
    """Axis labels and titles: the palette's Text colour, a little softened towards the background."""
    pal = palette(widget)
    return mix(pal.color(Role.Text), pal.color(Role.Base), 0.15)


def mix(a: QColor, b: QColor, share_of_b: float) -> QColor:
    """``a`` moved ``share_of_b`` (0..1) of the way towards ``b``."""
    t = min(max(float(share_of_b), 0.0), 1.0)
    return QColor.fromRgbF(*(x + (y - x) * t for x, y in zip(a.getRgbF()[:3], b.getRgbF()[:3])))


def warning_colour(widget: QWidget | None = None) -> str:
    """A red for warnings that reads on the window background (#a00000 light, #ff8080 dark)."""
    return "#ff8080" if is_dark(widget) else "#a00000"


def muted_text(widget: QWidget | None = None) -> QColor:
    """Secondary text (a sentence that comes second): the Text colour a third of the way to Base."""
    pal = palette(widget)
    return mix(pal.color(Role.Text), pal.color(Role.Base), 0.35)


def caution_style(widget: QWidget | None = None) -> str:
    """Style sheet of a caution (brown-orange text), readable on the window background."""
    return f"QLabel {{ color:{'#ffb46b' if is_dark(widget) else '#9a4a00'}; }}"


def note_style(widget: QWidget | None = None) -> str:
    """Style sheet of a warning label (red text, no background of its own)."""
    return f"QLabel {{ color:{warning_colour(widget)}; }}"


def soft_box_style(widget: QWidget | None = None) -> str:
    """Style sheet of a highlighted note (a hint, a lesson's sentence): a tinted background from the
    palette with the palette's text colour, readable in light and dark themes."""
    pal = palette(widget)
    tint = mix(pal.color(Role.Base), pal.color(Role.Highlight), 0.12)
    return (f"QLabel {{ background:{tint.name()}; color:{pal.color(Role.Text).name()}; "
            f"border:1px solid {mix(tint, pal.color(Role.Text), 0.3).name()}; padding:2px 4px; }}")


def contrast_ratio(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio of two colours, 1 (same) to 21 (black on white)."""
    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        r, g, b_ = (channel(x) for x in c.getRgbF()[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * b_
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


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


TEXT_CONTRAST = 4.5  # WCAG 2 AA for text: titles, axis labels, legend labels against the plot's ground
CURVE_CONTRAST = 3.0  # WCAG 2 for graphics: curves, symbols and legend swatches against the plot's ground


def readable(colour, ground: QColor, ratio: float = CURVE_CONTRAST, towards: QColor | None = None) -> QColor:
    """``colour`` moved just far enough towards ``towards`` (default: black on a light ground, white on
    a dark one) to reach ``ratio`` (WCAG 2) against ``ground``; the colour itself when it does already.
    Keeps a curve's hue where it can: #1f5fa8 on #1e1e1e (2.6:1) becomes a lighter blue."""
    colour, ground = QColor(colour), QColor(ground)
    if contrast_ratio(colour, ground) >= ratio:
        return colour
    if towards is None:
        towards = QColor("#000000") if ground.lightnessF() >= 0.5 else QColor("#ffffff")
    lo, hi, aim = 0.0, 1.0, ratio + 0.05  # a little over: the 8-bit colour drawn must still reach it
    for _ in range(20):  # the least share that reaches the ratio
        mid = (lo + hi) / 2
        if contrast_ratio(QColor(mix(colour, towards, mid).name()), ground) >= aim:
            hi = mid
        else:
            lo = mid
    return QColor(mix(colour, towards, hi).name())


def curve_colour(colour, widget: QWidget | None = None) -> QColor:
    """A curve's or swatch's colour that reads on this widget's plot ground (:data:`CURVE_CONTRAST`)."""
    return readable(colour, plot_background(widget), CURVE_CONTRAST)


def curve_pen(colour, widget: QWidget | None = None, **kwargs):
    """A pyqtgraph pen in :func:`curve_colour` (``kwargs`` as ``pg.mkPen``: width, style)."""
    import pyqtgraph as pg

    return pg.mkPen(curve_colour(colour, widget), **kwargs)


def context_colour(widget: QWidget | None = None) -> QColor:
    """A quiet grey for curves behind the one in question (the other heads): the least that still
    reads on the plot's ground (:data:`CURVE_CONTRAST`), in either theme."""
    ground = plot_background(widget)
    return readable(mix(ground, palette(widget).color(Role.Text), 0.1), ground, CURVE_CONTRAST,
                    towards=palette(widget).color(Role.Text))


def legend_ground(widget: QWidget | None = None) -> QColor:
    """A legend's box: the plot's ground, nearly opaque (curves behind it do not show through)."""
    ground = QColor(plot_background(widget))
    ground.setAlpha(235)
    return ground


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
    from explorer.qt.plots.plot_items import ShrinkingTitle, use_shrinking_title

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
