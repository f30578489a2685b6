"""The screen check's looks: text that is cut, docks that scroll sideways, plots too low to read,
legends over the data, and colours without contrast (WCAG 2.x), on every visible widget of one dock.

Each ``check_*`` function takes the widget to look in (a dock) and returns a list of
:class:`~explorer.qt.screens.findings.Finding`.
"""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPalette, QTextDocument
from PySide6.QtWidgets import QAbstractButton, QAbstractScrollArea, QLabel, QTabBar, QToolButton, QWidget

from explorer.core.contrast import GRAPHIC_MIN, TEXT_MIN, contrast, over
from explorer.qt.screens.findings import Finding

HEATMAP_ROW_PX = 24  #: a heatmap needs this many pixels of height per row ...
HEATMAP_CAP_PX = 150  #: ... up to this (a 32-row map needs 150 px, not 768)
CURVE_MIN_PX = 60  #: a curve, bar or scatter plot needs this much height
DENSE_ROWS = 64  #: a heatmap of more rows than this is a weight matrix (d_model rows): 1 px a row, up to the cap
_COLOUR = re.compile(r"color\s*[:=]\s*['\"]?\s*(#[0-9a-fA-F]{3,8}|[a-zA-Z]+)")


def name_of(w) -> str:
    """A widget or plot item as a reader finds it: its class, object name and (short) text."""
    text = ""
    for attr in ("text", "windowTitle"):
        if hasattr(w, attr) and callable(getattr(w, attr)):
            try:
                text = str(getattr(w, attr)())
            except TypeError:
                continue
            if text:
                break
    text = _plain(text).replace("\n", " ")
    shown = f" {text[:60]!r}" + ("…" if len(text) > 60 else "") if text else ""
    obj = w.objectName() if hasattr(w, "objectName") and w.objectName() else ""
    return type(w).__name__ + (f"#{obj}" if obj else "") + shown


def _plain(text: str) -> str:
    if "<" not in text:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


def _rgb(c: QColor) -> tuple[float, float, float]:
    return c.redF(), c.greenF(), c.blueF()


def _shown(w: QWidget, root: QWidget) -> bool:
    """Visible, with a size, and enabled (disabled text is exempt from WCAG's contrast minimum)."""
    return w.isVisible() and w.width() > 0 and w.height() > 0 and w.isEnabled() and w.window() is root.window()


# ---- text that does not fit -------------------------------------------------------------------------
def check_cut(root: QWidget) -> list[Finding]:
    """Single-line labels wider than their room (unless elided on purpose, the text whole in the
    tooltip), wrapped labels lower than their text, and buttons narrower than their text."""
    out = []
    for label in root.findChildren(QLabel):
        if not _shown(label, root) or not label.text() or label.pixmap() is not None and not label.pixmap().isNull():
            continue
        text = _plain(label.text())
        room = label.contentsRect().width() - 2 * max(label.margin(), 0) - max(label.indent(), 0)
        if label.wordWrap():
            need = label.heightForWidth(label.width())
            if need > label.height() + 1:
                out.append(Finding("cut", name_of(label), f"wrapped text needs {need} px of height, has {label.height()}"))
            continue
        fm = label.fontMetrics()
        widest = max((fm.horizontalAdvance(line) for line in text.split("\n")), default=0)
        elided_on_purpose = "…" in text and label.toolTip() and _plain(label.toolTip()) != text
        if widest > room + 1 and not elided_on_purpose:
            out.append(Finding("cut", name_of(label), f"text needs {widest} px, has {room}"))
    for button in root.findChildren(QAbstractButton):
        if _shown(button, root) and button.text() and not isinstance(button, QToolButton):
            need = button.sizeHint().width()
            if need > button.width() + 1:
                out.append(Finding("cut", name_of(button), f"needs {need} px, has {button.width()}"))
    return out


def check_tab_titles(root: QWidget) -> list[Finding]:
    """Tab titles shown shorter than they are (elided, "Atte…") without their whole title in a tooltip."""
    out = []
    for bar in root.findChildren(QTabBar):
        if not bar.isVisible():
            continue
        fm = bar.fontMetrics()
        for i in range(bar.count()):
            title, tip = bar.tabText(i), bar.tabToolTip(i)
            room = bar.tabRect(i).width() - 2 * bar.style().pixelMetric(bar.style().PixelMetric.PM_TabBarTabHSpace) // 2
            if fm.horizontalAdvance(title) > room + 1 and title not in tip:
                out.append(Finding("cut", f"tab {title!r}", f"title needs {fm.horizontalAdvance(title)} px, tab gives "
                                   f"{room} (elided, no tooltip with the whole title)"))
    return out


def check_plot_titles(root: QWidget) -> list[Finding]:
    """A plot's title wider than its plot, or reaching out of its view (pyqtgraph draws it cut, no
    tooltip); or the plot itself wider than its view (its least width, axis labels and legend, more
    than the view has: its right part, bars, ticks and legend with it, is not drawn)."""
    out = []
    for view, plot in plots_in(root):
        seen = view.mapToScene(view.viewport().rect()).boundingRect()
        whole = plot.sceneBoundingRect()
        if whole.right() > seen.right() + 1 or whole.left() < seen.left() - 1:
            out.append(Finding("cut", _plot_name(plot), f"the plot is {whole.width():.0f} px wide and its view "
                               f"{seen.width():.0f}: {max(whole.right() - seen.right(), seen.left() - whole.left()):.0f} px of it not drawn"))
            continue
        title = plot.titleLabel
        if title is None or not title.isVisible() or not title.text:
            continue
        text = title.item.sceneBoundingRect()
        seen = view.mapToScene(view.viewport().rect()).boundingRect()
        need, room = text.width(), min(plot.width(), seen.width())
        if need > room + 1 or text.left() < seen.left() - 1 or text.right() > seen.right() + 1:
            out.append(Finding("cut", _plot_name(plot), f"title needs {need:.0f} px, the plot is {plot.width():.0f} "
                               f"wide and its view {seen.width():.0f} ({max(0.0, need - room):.0f} px cut)"))
    return out


def check_scroll(dock: QWidget) -> list[Finding]:
    """A horizontal scroll bar shown in the dock (the panel wider than its dock at the default layout)."""
    out = []
    for area in dock.findChildren(QAbstractScrollArea):
        bar = area.horizontalScrollBar()
        if area.isVisible() and bar.isVisible() and bar.maximum() > 0:
            out.append(Finding("scroll", name_of(area), f"horizontal scroll bar, {bar.maximum()} px to scroll "
                               f"(view {area.viewport().width()} px wide)"))
    return out


# ---- plots ------------------------------------------------------------------------------------------
def plots_in(root: QWidget) -> list[tuple[pg.GraphicsView, pg.PlotItem]]:
    """Every visible PlotItem of a visible pyqtgraph view under ``root``, with its view."""
    found = []
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.scene() is None:
            continue
        for item in view.scene().items():
            if isinstance(item, pg.PlotItem) and item.isVisible():
                found.append((view, item))
    return found


def _data_items(plot: pg.PlotItem) -> list:
    return [i for i in plot.getViewBox().addedItems if i.isVisible()]


def check_plot_heights(root: QWidget) -> list[Finding]:
    """Each plot with something drawn at least :data:`CURVE_MIN_PX` high; a heatmap
    :data:`HEATMAP_ROW_PX` per row (rows a reader reads one by one: tokens, heads), or 1 px per row for
    one of more than :data:`DENSE_ROWS` rows (a weight matrix, read as a texture), capped at
    :data:`HEATMAP_CAP_PX`."""
    out = []
    for _view, plot in plots_in(root):
        if isinstance(plot, pg.ColorBarItem):  # its height is the heatmap's, beside it
            continue
        items = _data_items(plot)
        images = [i for i in items if isinstance(i, pg.ImageItem) and i.image is not None and i.image.size]
        if not images and not any(isinstance(i, (pg.PlotDataItem, pg.BarGraphItem, pg.ScatterPlotItem,
                                                 pg.PlotCurveItem)) for i in items):
            continue
        height = plot.getViewBox().sceneBoundingRect().height()
        if images:
            rows = max(int(i.image.shape[0]) for i in images)
            need = min(rows if rows > DENSE_ROWS else HEATMAP_ROW_PX * rows, HEATMAP_CAP_PX)
            what = f"heatmap of {rows} rows"
        else:
            need, what = CURVE_MIN_PX, "plot"
        if height + 0.5 < need:
            out.append(Finding("height", _plot_name(plot), f"{what} is {height:.0f} px high, needs {need}"))
    return out


def _plot_name(plot: pg.PlotItem) -> str:
    title = plot.titleLabel.text if plot.titleLabel is not None else ""
    left = plot.getAxis("left").labelText if "left" in plot.axes else ""
    return "plot " + repr(_plain(title or left or "untitled"))


def _scene_points(item) -> np.ndarray:
    """(n, 2) the item's drawn points in scene coordinates, those inside its view box only."""
    if isinstance(item, (pg.PlotDataItem, pg.PlotCurveItem, pg.ScatterPlotItem)):
        x, y = item.getData()
    else:
        return np.zeros((0, 2))
    if x is None or y is None or len(x) == 0:
        return np.zeros((0, 2))
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    t = item.sceneTransform()
    sx = t.m11() * x[ok] + t.m21() * y[ok] + t.dx()
    sy = t.m12() * x[ok] + t.m22() * y[ok] + t.dy()
    return np.stack([sx, sy], axis=1)


def _bar_rects(item: pg.BarGraphItem) -> list[QRectF]:
    """The drawn bars of ``item``, in scene coordinates (pyqtgraph's rule: x0 = x - width / 2 and
    x1 = x0 + width unless given; y0 = y - height / 2, or 0 without y, and y1 = y0 + height)."""
    o = item.opts

    def get(name):
        v = o.get(name)
        return None if v is None else np.asarray(v, dtype=float)

    def edges(c, lo, hi, size, zero_without_centre):
        if lo is None:
            if size is None:
                return None, None
            lo = c - size / 2.0 if c is not None else (np.zeros_like(size) if zero_without_centre else None)
        if lo is None:
            return None, None
        if hi is None:
            hi = lo + size if size is not None else None
        return lo, hi

    x0, x1 = edges(get("x"), get("x0"), get("x1"), get("width"), False)
    y0, y1 = edges(get("y"), get("y0"), get("y1"), get("height"), True)
    if x0 is None or x1 is None or y0 is None or y1 is None:
        return []
    x0, x1, y0, y1 = np.broadcast_arrays(x0, x1, y0, y1)
    t = item.sceneTransform()
    return [t.mapRect(QRectF(QPointF(min(a, b), min(c, d)), QPointF(max(a, b), max(c, d))))
            for a, b, c, d in zip(x0.ravel(), x1.ravel(), y0.ravel(), y1.ravel())
            if np.isfinite([a, b, c, d]).all() and a != b and c != d]


def check_legends(root: QWidget) -> list[Finding]:
    """A legend drawn over a plotted point or bar of its plot (legend rect vs the curves' points and
    the bars' rectangles, in scene coordinates)."""
    out = []
    for _view, plot in plots_in(root):
        legend = plot.legend
        if legend is None or not legend.isVisible() or not legend.items:
            continue
        box, vb = legend.sceneBoundingRect(), plot.getViewBox().sceneBoundingRect()
        for item in _data_items(plot):
            if isinstance(item, pg.BarGraphItem):
                bars = [r.intersected(vb) for r in _bar_rects(item)]
                bars = [r for r in bars if r.width() > 0.5 and r.height() > 0.5]
                covered = [r for r in bars if r.intersected(box).width() > 0.5 and r.intersected(box).height() > 0.5]
                if covered:
                    out.append(Finding("legend", _plot_name(plot), f"legend covers {len(covered)} of {len(bars)} "
                                       f"bars of {_item_name(item)!r}"))
                continue
            pts = _scene_points(item)
            inside_vb = ((pts[:, 0] >= vb.left()) & (pts[:, 0] <= vb.right()) & (pts[:, 1] >= vb.top())
                         & (pts[:, 1] <= vb.bottom())) if pts.size else np.zeros(0, bool)
            under = inside_vb & (pts[:, 0] >= box.left()) & (pts[:, 0] <= box.right()) & \
                (pts[:, 1] >= box.top()) & (pts[:, 1] <= box.bottom()) if pts.size else inside_vb
            if under.any():
                out.append(Finding("legend", _plot_name(plot), f"legend covers {int(under.sum())} of "
                                   f"{int(inside_vb.sum())} points of {_item_name(item)!r}"))
    return out


def _item_name(item) -> str:
    name = item.name() if hasattr(item, "name") and callable(item.name) else None
    return name or type(item).__name__


# ---- contrast ---------------------------------------------------------------------------------------
def _ground(w: QWidget) -> QColor:
    """The colour behind a widget: its own filled background, else the nearest ancestor's that fills
    (a dock, the window: the palette's Window colour)."""
    p = w
    while p is not None:
        if p.autoFillBackground() or p.isWindow() or isinstance(p, QAbstractScrollArea) and p is not w:
            role = p.backgroundRole()
            if isinstance(p, QAbstractScrollArea):
                role = p.viewport().backgroundRole()
                if not p.viewport().autoFillBackground():
                    p = p.parentWidget()
                    continue
            return p.palette().color(role)
        p = p.parentWidget()
    return w.palette().color(QPalette.ColorRole.Window)


def _named(text: str) -> list[QColor]:
    return [c for c in (QColor(m) for m in _COLOUR.findall(text)) if c.isValid()]


def check_text_contrast(root: QWidget) -> list[Finding]:
    """Each label's text (its palette's foreground, and any colour its rich text names) against what
    is behind it: at least :data:`~explorer.core.contrast.TEXT_MIN`."""
    out = []
    for label in root.findChildren(QLabel):
        if not _shown(label, root) or not _plain(label.text()).strip():
            continue
        ground = _ground(label) if not label.autoFillBackground() else label.palette().color(label.backgroundRole())
        inks = [label.palette().color(label.foregroundRole())] + _named(label.text()) + _named(label.styleSheet())
        for ink in inks:
            ratio = contrast(_rgb(ink), _rgb(ground))
            if ratio < TEXT_MIN:
                out.append(Finding("contrast", name_of(label), f"text {ink.name()} on {ground.name()}: "
                                   f"{ratio:.2f}:1 < {TEXT_MIN}:1"))
                break
    return out


def _plot_ground(view: pg.GraphicsView, plot: pg.PlotItem, inside: bool = False) -> QColor:
    """Behind a plot's texts (the view's background), or ``inside`` its view box (behind the data)."""
    vb_bg = plot.getViewBox().state.get("background")
    if inside and vb_bg is not None:
        return pg.mkColor(vb_bg)
    brush = view.backgroundBrush()
    if brush.style() != Qt.BrushStyle.NoBrush and brush.color().alpha() > 0:
        return brush.color()
    return _ground(view)


def _text_items(plot: pg.PlotItem) -> list[tuple[str, QColor]]:
    """(what, colour) of the plot's title, axis labels, tick labels and legend entries."""
    found = []
    if plot.titleLabel is not None and plot.titleLabel.isVisible() and plot.titleLabel.text:
        found.append((f"title {_plain(plot.titleLabel.text)!r}", _label_colour(plot.titleLabel)))
    for side in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(side) if side in plot.axes else None
        if axis is None or not axis.isVisible() or min(axis.width(), axis.height()) < 1:
            continue
        if axis.style.get("showValues", True):
            found.append((f"{side} axis ticks", axis.textPen().color()))
        if axis.label.isVisible() and axis.labelText:
            ink = _named(axis.label.toHtml())
            found.append((f"{side} axis label {axis.labelText!r}", ink[-1] if ink else axis.label.defaultTextColor()))
    if plot.legend is not None and plot.legend.isVisible():
        for _sample, label in plot.legend.items:
            if not _plain(label.text).strip():
                continue  # an entry without words (a swatch alone)
            found.append((f"legend {_plain(label.text)!r}", _label_colour(label)))
    return found


def _label_colour(label: pg.LabelItem) -> QColor:
    ink = _named(label.item.toHtml())
    return ink[-1] if ink else label.item.defaultTextColor()


def _drawn_colours(item) -> list[QColor]:
    """The colours of a plotted line, bar or scatter (its legend swatch has the same)."""
    if isinstance(item, pg.PlotDataItem):
        cs = []
        if item.opts.get("pen") is not None and pg.mkPen(item.opts["pen"]).style() != Qt.PenStyle.NoPen:
            cs.append(pg.mkPen(item.opts["pen"]).color())
        if item.opts.get("symbol") is not None and item.opts.get("symbolBrush") is not None:
            cs.append(pg.mkBrush(item.opts["symbolBrush"]).color())
        return cs
    if isinstance(item, pg.PlotCurveItem):
        return [pg.mkPen(item.opts["pen"]).color()]
    if isinstance(item, pg.BarGraphItem):
        brushes = item.opts.get("brushes") or [item.opts.get("brush")]
        return [pg.mkBrush(b).color() for b in brushes if b is not None][:50]
    return []


def check_plot_contrast(root: QWidget) -> list[Finding]:
    """A plot's texts against its background (:data:`TEXT_MIN`) and its lines, bars and swatches
    (:data:`GRAPHIC_MIN`), drawn over it."""
    out = []
    for view, plot in plots_in(root):
        ground = _plot_ground(view, plot)
        for what, ink in _text_items(plot):
            behind = ground
            if what.startswith("legend") and plot.legend.opts.get("brush") is not None:
                fill = pg.mkBrush(plot.legend.opts["brush"]).color()  # drawn over the plot's ground
                behind = QColor.fromRgbF(*over(_rgb(fill), fill.alphaF(), _rgb(ground)))
            ratio = contrast(over(_rgb(ink), ink.alphaF(), _rgb(behind)), _rgb(behind))
            if ratio < TEXT_MIN:
                out.append(Finding("contrast", f"{_plot_name(plot)} {what}",
                                   f"text {ink.name()} on {behind.name()}: {ratio:.2f}:1 < {TEXT_MIN}:1"))
        inside = _plot_ground(view, plot, inside=True)
        for item in _data_items(plot):
            for ink in dict.fromkeys(c.name(QColor.NameFormat.HexArgb) for c in _drawn_colours(item)):
                c = QColor(ink)
                ratio = contrast(over(_rgb(c), c.alphaF(), _rgb(inside)), _rgb(inside))
                if ratio < GRAPHIC_MIN:
                    out.append(Finding("contrast", f"{_plot_name(plot)} {_item_name(item)!r}",
                                       f"line/bar {ink} on {inside.name()}: {ratio:.2f}:1 < {GRAPHIC_MIN}:1"))
    return out


def check_dock(dock: QWidget) -> list[Finding]:
    """Every look of this module on one dock."""
    return (check_cut(dock) + check_plot_titles(dock) + check_scroll(dock) + check_plot_heights(dock) + check_legends(dock)
            + check_text_contrast(dock) + check_plot_contrast(dock))
