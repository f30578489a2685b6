"""Colours that follow the desktop's palette (light or dark), and a dark palette of our own.

Widgets never pair a fixed light background with the palette's text colour (white on pale yellow
under a dark theme): they take both from the palette, or both from here. ``--dark`` (or any dark
desktop theme) gives :func:`dark_palette`.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
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


TEXT_CONTRAST = 4.5  # WCAG 2 AA for text: titles, axis labels, legend labels against the plot's ground
CURVE_CONTRAST = 3.0  # WCAG 2 for graphics: curves, symbols and legend swatches against the plot's ground


def readable(colour, ground: QColor, ratio: float = CURVE_CONTRAST, towards: QColor | None = None) -> QColor:
    """``colour`` moved just far enough towards ``towards`` (default: black on a light ground, white on
    a dark one) to reach ``ratio`` (WCAG 2) against ``ground``; the colour itself when it does already.
    Keeps a curve's hue where it can: #1f5fa8 on #1e1e1e (2.6:1) becomes a lighter blue."""
    colour, ground = QColor(colour), QColor(ground)
    key = (colour.rgba(), ground.rgba(), ratio, None if towards is None else QColor(towards).rgba())
    if key not in _READABLE:  # (asked for every bar and curve colour on every keystroke)
        if len(_READABLE) > 4096:
            _READABLE.clear()
        _READABLE[key] = _readable(colour, ground, ratio, towards).rgba()
    return QColor.fromRgba(_READABLE[key])


_READABLE: dict[tuple, int] = {}  # readable's answers


def _readable(colour: QColor, ground: QColor, ratio: float, towards) -> QColor:
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
