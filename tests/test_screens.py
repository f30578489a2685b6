"""The screen check: the real main window, every panel and tab, looked at and read.

FAST (the inner loop): the default model × light and dark × 1,400 × 900 over every panel and tab.
SLOW (``-m slow``): models {tinystories-1L1H, tinystories-4L4H, the Llama, GPT-Neo and Qwen3
fixtures} × {light, dark} × {1,400 × 900, 1,280 × 720, 960 × 540 at device pixel ratio 2 (1,920 ×
1,080 pixels, in a child process)}. Each kind of finding is its own test, strict: a finding on main
fails it until the panel is fixed. The walker is the app's (:mod:`explorer.qt.screens`), shared with
``python -m explorer.gallery``; the end of the run prints the matrix and the findings per kind.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

import conftest
from explorer.core.contrast import contrast, luminance
from explorer.qt.screens.checks import (check_cut, check_legends, check_plot_contrast, check_plot_heights,
                                        check_plot_titles, check_text_contrast)
from explorer.qt.screens.findings import KINDS, count_by_kind, summary_lines

REPO = Path(__file__).resolve().parents[1]
DEFAULT = "builtin:tinystories-1L1H"
MODELS = [DEFAULT, "builtin:tinystories-4L4H", str(REPO / "tests/fixtures/arch/hf-llama"),
          str(REPO / "tests/fixtures/arch/hf-gpt-neo"), str(REPO / "tests/fixtures/arch3/hf-qwen3")]
SIZES = ["1400x900", "1280x720", "960x540@2"]
SHOWN = 40  # findings listed in a failing test's message (the rest are counted)


def _walk(models, sizes, out_dir: Path) -> list:
    from explorer.gallery import walk_matrix

    return walk_matrix(models, ["light", "dark"], sizes, out_dir, images=False)


def _report(name: str, results: list, seconds: float) -> None:
    conftest.SCREEN_REPORT.append(f"{name} ({seconds:.1f} s):")
    conftest.SCREEN_REPORT.extend("  " + line for line in summary_lines(results))


@pytest.fixture(scope="module")
def fast_results(qapp, tmp_path_factory):
    t0 = time.perf_counter()
    results = _walk([DEFAULT], ["1400x900"], tmp_path_factory.mktemp("screens-fast"))
    _report("fast part: the default model, both themes, 1400x900", results, time.perf_counter() - t0)
    return results


@pytest.fixture(scope="module")
def full_results(qapp, tmp_path_factory):
    t0 = time.perf_counter()
    results = _walk(MODELS, SIZES, tmp_path_factory.mktemp("screens-full"))
    _report("full matrix", results, time.perf_counter() - t0)
    return results


def _none_of(kind: str, results: list) -> None:
    lines = [f.line(r.screen) for r in results for f in r.findings if f.kind == kind]
    more = f"\n… and {len(lines) - SHOWN} more" if len(lines) > SHOWN else ""
    assert not lines, f"{len(lines)} {kind} findings:\n" + "\n".join(lines[:SHOWN]) + more


def test_fast_part_walks_every_panel_and_tab_in_both_themes(fast_results):
    from explorer.qt.panels import panel_names

    walked = {(r.screen.theme, r.screen.panel) for r in fast_results}
    assert walked >= {(t, p) for t in ("light", "dark") for p in panel_names()}
    tabs = {r.screen.tab for r in fast_results if r.screen.panel == "training"}
    assert len(tabs) >= 3  # the Training panel's tabs, each one a screen


@pytest.mark.parametrize("kind", KINDS)
def test_fast_screens(fast_results, kind):
    _none_of(kind, fast_results)


@pytest.mark.slow
def test_full_matrix_walks_every_screen(full_results):
    screens = {(r.screen.model, r.screen.theme, r.screen.size_name) for r in full_results}
    assert len(screens) == len(MODELS) * 2 * len(SIZES)
    assert all(r.screen.scale == 2 for r in full_results if r.screen.size_name.endswith("@2"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_full_matrix(full_results, kind):
    """No finding on any screen of the matrix: every model, theme and size reads right."""
    _none_of(kind, full_results)


# ---- the checks themselves, on widgets made to fail them ------------------------------------------
def test_contrast_is_wcag_s():
    assert contrast((0, 0, 0), (1, 1, 1)) == pytest.approx(21.0)
    assert contrast((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)) == pytest.approx(1.0)
    assert luminance((1, 1, 1)) == pytest.approx(1.0)
    grey = 0x76 / 255  # #767676 on white: the lightest grey with 4.5:1 (4.54)
    assert contrast((grey,) * 3, (1, 1, 1)) == pytest.approx(4.54, abs=0.01)


def _shown(qtbot, *widgets) -> QWidget:
    root = QWidget()
    layout = QVBoxLayout(root)
    for w in widgets:
        layout.addWidget(w)
    qtbot.addWidget(root)
    root.resize(300, 400)
    root.show()
    qtbot.waitExposed(root)
    return root


def test_a_cut_label_is_found_and_an_elided_one_with_its_tooltip_is_not(qtbot):
    cut = QLabel("a sentence much too long for the narrow room it was given in this layout")
    cut.setFixedWidth(80)
    elided = QLabel("a sentence…")
    elided.setFixedWidth(80)
    elided.setToolTip("a sentence much too long for the narrow room it was given")
    root = _shown(qtbot, cut, elided)
    found = check_cut(root)
    assert [f.kind for f in found] == ["cut"] and "much too long" in found[0].widget


def test_a_plot_title_wider_than_its_plot_is_found(qtbot):
    long = pg.PlotWidget(title="a plot title far too long for a plot of two hundred pixels")
    short = pg.PlotWidget(title="short")
    for plot in (long, short):
        plot.setFixedSize(200, 150)
    root = _shown(qtbot, long, short)
    qtbot.wait(20)  # the plots' layouts
    found = check_plot_titles(root)
    assert [f.kind for f in found] == ["cut"] and "far too long" in found[0].widget


def test_faint_text_and_a_faint_line_are_found(qtbot):
    faint = QLabel("<span style='color:#bbbbbb'>pale grey on white</span>")
    plot = pg.PlotWidget(background="#ffffff")
    plot.setMinimumHeight(150)
    plot.plot([0, 1, 2], [0, 1, 0], pen=pg.mkPen("#eeeeee"))
    plot.plot([0, 1, 2], [1, 0, 1], pen=pg.mkPen("#000000"))
    root = _shown(qtbot, faint, plot)
    assert len(check_text_contrast(root)) == 1
    lines = [f for f in check_plot_contrast(root) if "line/bar" in f.detail]
    assert len(lines) == 1 and "#ffeeeeee" in lines[0].detail


def test_a_legend_over_the_curve_is_found(qtbot):
    plot = pg.PlotWidget(background="#ffffff")
    plot.setMinimumHeight(200)
    legend = plot.addLegend(offset=(10, 10))  # the top left corner
    x = np.linspace(0, 1, 50)
    plot.plot(x, np.full_like(x, 0.92), pen="k", name="high and flat: under the legend")
    root = _shown(qtbot, plot)
    plot.getPlotItem().getViewBox().setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
    qtbot.wait(10)
    assert legend.isVisible() and [f.kind for f in check_legends(root)] == ["legend"]


def test_a_legend_over_a_bar_is_found_and_one_beside_the_bars_is_not(qtbot):
    """Bars are drawn data too (the positional lesson's legend sat on its reordered bars)."""
    def bars(y_of_long_bar: float) -> pg.PlotWidget:
        plot = pg.PlotWidget(background="#ffffff")
        plot.setFixedSize(300, 200)
        plot.addLegend(offset=(-5, -5))  # the bottom right corner
        plot.addItem(pg.BarGraphItem(x0=[0, 0], y=[y_of_long_bar, 0.5], height=0.1, width=[0.95, 0.1],
                                     brush="#4477aa", name="bars"))
        return plot

    low, high = bars(0.05), bars(0.95)  # a long bar at the bottom (under the legend), or at the top
    root = _shown(qtbot, low, high)
    for plot in (low, high):
        plot.getPlotItem().getViewBox().setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
    qtbot.waitUntil(lambda: low.getPlotItem().legend.sceneBoundingRect().width() > 10)
    found = check_legends(root)
    assert [f.kind for f in found] == ["legend"] and "1 of 2 bars" in found[0].detail
    assert not check_legends(_shown(qtbot, high))


def test_a_plot_wider_than_its_view_is_found(qtbot):
    """A plot whose least width (long axis labels) is more than its view has runs out of the view:
    its right part is not drawn, although its title fits."""
    wide = pg.PlotWidget(title="ok")
    wide.setFixedSize(160, 150)
    wide.getPlotItem().setMinimumWidth(260)
    fits = pg.PlotWidget(title="ok")
    fits.setFixedSize(300, 150)
    root = _shown(qtbot, wide, fits)
    qtbot.waitUntil(lambda: wide.getPlotItem().sceneBoundingRect().width() >= 259)
    found = check_plot_titles(root)
    assert [f.kind for f in found] == ["cut"] and "not drawn" in found[0].detail


def test_a_token_map_needs_room_per_row_and_a_weight_matrix_a_pixel_per_row(qtbot):
    def heatmap(rows: int, height: int) -> pg.PlotWidget:
        plot = pg.PlotWidget(background="#ffffff")
        plot.addItem(pg.ImageItem(np.random.default_rng(0).random((rows, 8))))
        plot.setFixedSize(300, height)
        return plot

    tokens, weights, squeezed = heatmap(21, 90), heatmap(128, 200), heatmap(128, 90)
    root = _shown(qtbot, tokens, weights, squeezed)
    qtbot.waitUntil(lambda: weights.getPlotItem().getViewBox().sceneBoundingRect().height() > 128)
    heights = {f.detail.split(" is ")[0]: f.detail for f in check_plot_heights(root)}
    assert "needs 150" in heights.pop("heatmap of 21 rows")  # 21 token rows: 24 px each, up to 150
    assert "needs 128" in heights.pop("heatmap of 128 rows") and not heights  # only the squeezed matrix


def test_counts_list_every_kind():
    assert list(count_by_kind([])) == list(KINDS)


# ---- the gallery ----------------------------------------------------------------------------------
def test_gallery_writes_pictures_and_an_index_that_links_them(qapp, tmp_path, capsys):
    from explorer.gallery import main

    assert main([str(tmp_path), "--models", DEFAULT, "--sizes", "1400x900", "--themes", "light", "dark",
                 "--panels", "attention", "next-token"]) == 0
    pictures = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "screens").glob("*.png"))
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert len(pictures) == 4  # 2 themes × 2 panels (the window's own row has no picture)
    for picture in pictures:
        assert f'href="{picture}"' in index and f'src="{picture}"' in index
        assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    linked = {part.split('"')[0] for part in index.split('href="')[1:]}
    assert linked == set(pictures)
    assert "1 models × 2 themes × 1 sizes" in capsys.readouterr().out
    assert (tmp_path / "findings.txt").exists()
