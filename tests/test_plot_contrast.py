"""Every pyqtgraph text (titles, axis labels, legend labels) reads at WCAG 2's 4.5:1 and every curve
and legend swatch at 3:1 against its plot's ground, in the light and the dark theme; the what-if
chart's legend lies outside the curves. Colours are read from the real items."""

from __future__ import annotations

import numpy as np
import pytest
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from explorer.qt import theme
from explorer_helpers import shown


def luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour given as three channels in [0, 1]."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio (1 to 21) of two opaque colours."""
    hi, lo = sorted((luminance(QColor(a).getRgbF()[:3]), luminance(QColor(b).getRgbF()[:3])), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def over(top: QColor, ground: QColor) -> QColor:
    """``top`` (with its alpha) painted over an opaque ``ground``."""
    a = top.alphaF()
    return QColor.fromRgbF(*(a * t + (1 - a) * g for t, g in zip(top.getRgbF()[:3], ground.getRgbF()[:3])))


def test_the_contrast_function_agrees_with_wcag_s_examples():
    assert contrast(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert contrast(QColor("#969696"), QColor("#ffffff")) == pytest.approx(2.96, abs=0.01)  # pyqtgraph's grey
    assert contrast(QColor("#1f5fa8"), QColor("#1e1e1e")) == pytest.approx(2.6, abs=0.05)
    assert contrast(QColor("#222222"), QColor("#1e1e1e")) == pytest.approx(1.05, abs=0.01)


@pytest.fixture(params=["light", "dark"])
def palette_name(request, qapp):
    before = QApplication.palette()
    if request.param == "dark":
        QApplication.setPalette(theme.dark_palette())
    yield request.param
    QApplication.setPalette(before)


def _views(qtbot):
    from explorer.qt.panels.training.curves import CurvesView
    from explorer.qt.panels.training.head_curves import HeadTypeCurvesView
    from explorer.qt.panels.why.views import WhatIfView

    what_if = shown(qtbot, WhatIfView(), 700, 400)
    what_if.show_what_ifs([("as is", 1.0, 1.0, 0.5, "a b c"), ("head off", 1.2, 1.1, 0.4, "a b c")],
                          [np.linspace(0, 2, 5), np.linspace(2, 0, 5)], list("abcde"), "entropy per query row")
    curves = shown(qtbot, CurvesView(), 700, 500)
    heads = shown(qtbot, HeadTypeCurvesView(), 700, 500)
    return {"what-if": (what_if, what_if.graphics, [what_if.plot]), "training": (curves, curves, list(curves.plots)),
            "head types": (heads, heads.view, [*heads.plots.values(), heads.loss])}


def _problems(view, plots) -> list[str]:
    ground = QColor(view.backgroundBrush().color())
    found = []

    def check(what: str, colour: QColor, least: float, on: QColor = ground) -> None:
        ratio = contrast(colour, on)
        if ratio < least:
            found.append(f"{what} {QColor(colour).name()} on {on.name()}: {ratio:.2f}:1")

    for plot in plots:
        title = plot.titleLabel
        if title.text:
            check(f"title {title.text!r}", _label_colour(title), 4.5)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            if axis.isVisible():
                check(f"{name} axis labels", axis.textPen().color(), 4.5)
                if axis.labelText:
                    check(f"{name} axis title", QColor(axis.labelStyle.get("color", "#969696")), 4.5)
        for item in plot.listDataItems():
            if isinstance(item, pg.ScatterPlotItem):  # markers: their fill
                check("markers", pg.mkBrush(item.opts["brush"]).color(), 3.0)
            elif item.opts.get("pen") is not None:
                check(f"curve {item.name()!r}", QColor(pg.mkPen(item.opts["pen"]).color()), 3.0)
        legend = plot.legend
        if legend is not None:
            brush = pg.mkBrush(legend.opts["brush"])
            box = ground if brush.style() == Qt.BrushStyle.NoBrush else over(brush.color(), ground)
            for sample, label in legend.items:
                check(f"legend label {label.text!r}", _label_colour(label), 4.5, box)
                check(f"legend swatch {label.text!r}", QColor(pg.mkPen(sample.item.opts["pen"]).color()), 3.0, box)
    return found


def _label_colour(label) -> QColor:
    """The colour a pyqtgraph LabelItem draws in (its option, else pyqtgraph's foreground grey)."""
    return pg.mkColor(label.opts.get("color") or pg.getConfigOption("foreground"))


def test_plot_text_and_curves_read_on_their_ground(qtbot, palette_name):
    views = _views(qtbot)  # (widget, pyqtgraph view, plots): the widgets kept alive while they are read
    problems = {name: _problems(view, plots) for name, (_widget, view, plots) in views.items()}
    assert {k: v for k, v in problems.items() if v} == {}


def test_the_what_if_legend_is_beside_the_curves_not_on_them(qtbot, palette_name):
    from explorer.qt.panels.why.views import WhatIfView

    view = shown(qtbot, WhatIfView(), 700, 400)
    view.show_what_ifs([("as is", 1.0, 1.0, 0.5, "a b c"), ("head off", 1.2, 1.1, 0.4, "a b c")],
                       [np.linspace(0, 2, 5), np.linspace(2, 0, 5)], list("abcde"), "entropy per query row")
    QApplication.processEvents()
    legend = view.legend.sceneBoundingRect()
    data = view.plot.getViewBox().sceneBoundingRect()
    assert legend.width() > 0 and not legend.intersects(data)
