"""Every pyqtgraph text (titles, axis labels, legend labels) reads at WCAG 2's 4.5:1 and every curve
and legend swatch at 3:1 against its plot's ground, in the light and the dark theme; the what-if
chart's legend lies outside the curves. Colours are read from the real items, as drawn (a legend
label's rendered text, a curve's symbols, a bar's fill), after each view's data arrived: curves and
legend entries made or redrawn then must read as those made with the view."""

from __future__ import annotations

import re

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


S, L, H = 4, 1, 2  # snapshots, layers, heads of the made-up runs below


def _training_curves():
    """Curves over training of one text, as :func:`model.training.over_training` gives them."""
    from model.training.over_training import TrainingCurves

    rising = np.linspace(0.1, 0.9, S)
    mass = np.repeat(rising[:, None, None], H, axis=2)  # (S, L, H)
    return TrainingCurves(np.array([0, 10, 100, 1000]), np.arange(6), 0, 5, 3, "next token",
                          np.linspace(5, 2, S), rising, np.array([1, 2, 2, 3]), rising[::-1].copy(),
                          mass * 2, mass, mass / 2, mass / 3, np.array([[0, 5.0], [1000, 2.5]]))


def _head_type_curves():
    """Every head's scores over training and the probe's losses (L0H1 the highest at the end)."""
    from model.training.heads_over_training import HeadTypeCurves

    scores = np.full((S, L, H), 0.1)
    scores[:, 0, 1] = np.linspace(0.2, 0.9, S)
    return HeadTypeCurves(np.array([0, 10, 100, 1000]), np.arange(6), 0, 3, scores, scores / 2, scores,
                          np.full(S, 8.0), np.linspace(8, 3, S))


def _views(qtbot):
    from explorer.qt.panels.training.curves import CurvesView
    from explorer.qt.panels.training.head_curves import HeadTypeCurvesView
    from explorer.qt.panels.why.views import WhatIfView

    what_if = shown(qtbot, WhatIfView(), 700, 400)
    what_if.show_what_ifs([("as is", 1.0, 1.0, 0.5, "a b c"), ("head off", 1.2, 1.1, 0.4, "a b c")],
                          [np.linspace(0, 2, 5), np.linspace(2, 0, 5)], list("abcde"), "entropy per query row")
    curves = shown(qtbot, CurvesView(), 700, 500)
    curves.set_curves(_training_curves(), 0, 0, lambda i: f"t{i}", "p(target)")  # the other head drawn now
    heads = shown(qtbot, HeadTypeCurvesView(), 700, 500)
    heads.set_curves(_head_type_curves())
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
        for item in plot.items:
            if not item.isVisible():
                continue
            if isinstance(item, pg.ScatterPlotItem):  # markers: their fill
                check("markers", pg.mkBrush(item.opts["brush"]).color(), 3.0)
            elif isinstance(item, pg.BarGraphItem):  # bars: their fill, one or one per bar
                for brush in item.opts.get("brushes") or [item.opts.get("brush")]:
                    check(f"bars {item.name()!r}", pg.mkBrush(brush).color(), 3.0)
            elif isinstance(item, pg.PlotDataItem):
                if item.opts.get("pen") is not None:
                    check(f"curve {item.name()!r}", QColor(pg.mkPen(item.opts["pen"]).color()), 3.0)
                if item.opts.get("symbol") is not None and item.opts.get("symbolBrush") is not None:
                    check(f"symbols of {item.name()!r}", pg.mkBrush(item.opts["symbolBrush"]).color(), 3.0)
        legend = plot.legend
        if legend is not None:
            brush = pg.mkBrush(legend.opts["brush"])
            box = ground if brush.style() == Qt.BrushStyle.NoBrush else over(brush.color(), ground)
            for sample, label in legend.items:
                if label.text:
                    check(f"legend label {label.text!r}", _label_colour(label), 4.5, box)
                swatch = sample.item.opts.get("pen")
                if isinstance(sample.item, pg.BarGraphItem):
                    swatch = sample.item.opts.get("brush")
                    check(f"legend swatch {label.text!r}", pg.mkBrush(swatch).color(), 3.0, box)
                elif swatch is not None:
                    check(f"legend swatch {label.text!r}", QColor(pg.mkPen(swatch).color()), 3.0, box)
    return found


def _label_colour(label) -> QColor:
    """The colour a pyqtgraph LabelItem draws in: the last colour its rendered text names (its colour
    option is not enough: changing it leaves the text drawn before in its old colour)."""
    named = re.findall(r"color:\s*(#[0-9a-fA-F]{6})", label.item.toHtml())
    return QColor(named[-1]) if named else label.item.defaultTextColor()


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


def test_the_positional_panel_s_bars_read_on_their_ground(qtbot, palette_name, tiny_checkpoint):
    """The next-token plots (PE on and off) once the comparison arrived: title, ticks, legend and both bars."""
    from explorer.qt.panels.lessons.positional.panel import PositionalPanel
    from explorer_helpers import sync_session

    panel = shown(qtbot, PositionalPanel(sync_session(tiny_checkpoint, "the cat sat on the mat .")), 1200, 800)
    qtbot.waitUntil(lambda: panel.comparison is not None and len(panel.bars[True, True].opts["width"]) > 0)
    problems = {pe: _problems(plot.scene().views()[0], [plot]) for pe, plot in panel.bar_plots.items()}
    assert {pe: v for pe, v in problems.items() if v} == {}


def test_curves_and_legend_entries_made_after_styling_read_once_restyled(qtbot, palette_name):
    """The kind of fault: a view styled when made draws new curves (with symbols) and legend entries
    when its data arrives; :func:`restyle` makes them read as the first ones did."""
    from explorer.qt.plots.style import restyle, style_plots

    view = shown(qtbot, pg.PlotWidget(), 500, 300)
    plot = view.getPlotItem()
    plot.addLegend()
    plot.plot([0, 1], [0, 1], pen=pg.mkPen("#1f5fa8", width=2), name="made with the view")
    style_plots(view, [plot])
    plot.plot([0, 1], [1, 0], pen=pg.mkPen("#1f5fa8", width=2), symbol="o", name="made later")
    plot.addItem(pg.BarGraphItem(x0=[0], y=[0.5], height=0.2, width=[0.5], brush="#ee8833", name="bars later"))
    restyle(view)
    assert _problems(view, [plot]) == []


def test_the_why_panel_s_marked_bars_read_on_their_ground(qtbot, palette_name):
    """Attention, direct and leave-one-out bars with a row marked as disagreeing (drawn orange)."""
    from explorer.qt.panels.why.bars import SourceBars

    bars = shown(qtbot, SourceBars(), 900, 300)
    bars.show_sources(["0 the", "1 cat", "2 sat"], np.array([[0.2, 0.5, 0.3], [0.1, -0.4, 0.2], [0.3, 0.2, np.nan]]),
                      marked=[1], query=2)
    assert _problems(bars, bars.plots) == []


def test_the_next_token_bars_read_with_the_why_panel_s_target_in_orange(qtbot, palette_name, tiny_checkpoint):
    """The next-token bars once the trace arrived, the Why panel's target among them (drawn orange)."""
    from explorer.qt.panels.next_token import NextTokenPanel
    from explorer.qt.widgets.explain_target import ExplainTarget
    from explorer_helpers import sync_session

    session = sync_session(tiny_checkpoint, "the cat sat on the mat .")
    panel = shown(qtbot, NextTokenPanel(session), 600, 500)
    qtbot.waitUntil(lambda: panel.top is not None and len(panel.bars.opts["brushes"] or []) > 1)
    ExplainTarget.of(session).set_target(int(panel.top.ids[1]))
    qtbot.waitUntil(lambda: len({pg.mkBrush(b).color().name() for b in panel.bars.opts["brushes"]}) == 2)
    assert _problems(panel.graphics, [panel.plot]) == []


def test_a_theme_switched_after_the_data_arrived_keeps_everything_readable(qtbot, qapp):
    """Light to dark and back while the views show their data: curves, symbols and legend labels follow."""
    before = QApplication.palette()
    try:
        views = _views(qtbot)
        for palette in (theme.dark_palette(), before):
            QApplication.setPalette(palette)
            qtbot.waitUntil(lambda: all(view.backgroundBrush().color() == theme.plot_background(widget)
                                        for widget, view, _plots in views.values()))
            problems = {name: _problems(view, plots) for name, (_widget, view, plots) in views.items()}
            assert {k: v for k, v in problems.items() if v} == {}
    finally:
        QApplication.setPalette(before)
