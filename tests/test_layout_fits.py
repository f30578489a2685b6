"""Screens read right at the default layout: every strip of the formula lesson has room for its rows,
the lesson fits a 1,400 x 900 window without scrolling, and titles that do not fit are elided with
their whole text in a tooltip. Measured on the real widgets, in the light and the dark theme."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint
from explorer.qt import theme
from explorer_helpers import make_window

LONG_TEXT = " ".join(["lily saw the big red ball and she was happy ."] * 4)  # more than 32 tokens


@pytest.fixture(params=["light", "dark"])
def palette_name(request, qapp):
    """Runs a test in the light and in the dark theme (the application's palette), then restores it."""
    before = QApplication.palette()
    if request.param == "dark":
        QApplication.setPalette(theme.dark_palette())
    yield request.param
    QApplication.setPalette(before)


def _formula_window(qtbot, tmp_path, tiny_tokenizer, size, text):
    ckpt = make_tiny_checkpoint(tiny_tokenizer, context_length=32, d_model=64, n_heads=2)  # d_head 32, as shipped
    window = make_window(qtbot, tmp_path, ckpt)
    window.resize(*size)
    window.docks["formula"].raise_()
    window.session.set_text(text)
    panel = window.panels["formula"]
    qtbot.waitUntil(lambda: panel.isVisible() and panel.steps is not None)
    QApplication.processEvents()
    return window, panel


@pytest.mark.parametrize("size", [(1400, 900), (1300, 820)])
def test_every_formula_strip_has_room_for_its_rows(qtbot, tmp_path, tiny_tokenizer, dialogs, palette_name, size):
    from explorer.qt.panels.lessons.formula import MIN_ROW_PX, ROW_PX

    window, panel = _formula_window(qtbot, tmp_path, tiny_tokenizer, size, "lily saw the big red ball")
    assert theme.is_dark(panel) == (palette_name == "dark")
    query_rows = panel.q_map.data.shape[0]
    keys = panel.k_map.data.shape[0]
    assert panel.q_map.plot.getViewBox().height() >= MIN_ROW_PX * query_rows - 1  # was 0.5 px
    assert panel.out_map.plot.getViewBox().height() >= MIN_ROW_PX * 2 - 1  # was 14 px for two rows
    for hm in (panel.k_map, panel.v_map, panel.av_map):
        assert hm.plot.getViewBox().height() >= ROW_PX * keys - 1
    # the two rows' labels of out_i do not overlap: each row is taller than a line of its labels
    axis = panel.out_map.plot.getAxis("left")
    assert panel.out_map.plot.getViewBox().height() / 2 >= axis.line_height()


def test_the_formula_lesson_fits_1400_by_900_without_scrolling(qtbot, tmp_path, tiny_tokenizer, dialogs,
                                                               palette_name):
    window, panel = _formula_window(qtbot, tmp_path, tiny_tokenizer, (1400, 900), LONG_TEXT)
    assert panel.k_map.data.shape[0] == 32  # the whole context: the most keys a query has
    qtbot.waitUntil(lambda: panel.scroll.viewport().height() > 0)
    assert not panel.scroll.verticalScrollBar().isVisible()
    assert not panel.scroll.horizontalScrollBar().isVisible()
    assert panel.scroll.widget().height() <= panel.scroll.viewport().height()
    for hm in (panel.q_map, panel.k_map, panel.v_map, panel.av_map, panel.out_map):
        bottom = hm.mapTo(panel, hm.rect().bottomRight())
        assert bottom.y() <= panel.height() and bottom.x() <= panel.width()  # in view, not below the fold
    t = panel.table
    assert t.horizontalHeader().length() <= t.viewport().width()  # every column of the table in view


@pytest.mark.parametrize("size", [(960, 540), (1400, 900)])
def test_the_formula_strips_go_below_the_table_only_when_they_have_no_room_beside_it(qtbot, tmp_path, tiny_tokenizer,
                                                                                   dialogs, size):
    from explorer.qt.panels.lessons.formula import STACKED_TABLE_ROWS, STRIP_MIN_PX
    from explorer.qt.screens.checks import check_plot_titles, check_scroll

    window, panel = _formula_window(qtbot, tmp_path, tiny_tokenizer, size, LONG_TEXT)
    stacked = size[0] < 1000
    want = Qt.Orientation.Vertical if stacked else Qt.Orientation.Horizontal
    qtbot.waitUntil(lambda: panel.k_map.plot.getViewBox().height() > 1)  # laid out (the split is set as it draws)
    QApplication.processEvents()
    assert panel.split.orientation() == want
    strips = (panel.k_map, panel.v_map, panel.av_map)
    t = panel.table
    if stacked:  # below the table, the whole width each third: at 960 x 540 they were 85 px beside it
        assert all(hm.width() >= panel.split.width() // 3 - 10 for hm in strips)
        assert panel.k_map.mapTo(panel, panel.k_map.rect().topLeft()).y() > t.mapTo(panel, t.rect().bottomLeft()).y()
        assert t.height() >= STACKED_TABLE_ROWS * t.verticalHeader().defaultSectionSize()  # ten rows in view
    else:  # beside it, as before
        assert all(hm.width() >= STRIP_MIN_PX for hm in strips) and t.minimumHeight() == 0
        assert panel.k_map.mapTo(panel, panel.k_map.rect().topLeft()).x() > t.mapTo(panel, t.rect().topRight()).x()
    assert t.horizontalHeader().length() <= t.viewport().width()  # every column of the table in view
    assert check_scroll(window.docks["formula"]) == [] and check_plot_titles(panel) == []


def test_a_plot_title_that_does_not_fit_is_elided_with_its_text_in_the_tooltip(qtbot, palette_name):
    from PySide6.QtGui import QFontMetricsF

    from explorer.qt.plots.heatmap import Heatmap
    from explorer.qt.plots.plot_items import title_font

    long = "scores q·k (this model does not divide by √d_head)"
    hm = Heatmap(long)
    qtbot.addWidget(hm)
    hm.resize(220, 200)
    hm.show()
    qtbot.waitExposed(hm)
    title = hm.plot.titleLabel
    drawn = title.item.toPlainText()
    fm = QFontMetricsF(title_font(title.item.font(), title.opts))
    assert fm.horizontalAdvance(drawn) <= title.rect().width()  # was 344 px of text in 220 px
    assert drawn.endswith("…") and title.toolTip() == long and title.text == long
    hm.resize(800, 200)
    qtbot.waitUntil(lambda: title.item.toPlainText() == long)  # wide enough again: the whole title
    assert title.toolTip() == ""


@pytest.mark.parametrize("title", ["a_ij v_j (weighted values)", "k_j (keys, after RoPE's rotation R(j))"])
def test_an_elided_plot_title_stays_inside_its_plot_at_every_width(qtbot, palette_name, title):
    """The screen check's measure: the title's drawn item (its text and the document's margins)
    within the plot and its view, at widths around where the title starts to need eliding."""
    from explorer.qt.plots.heatmap import Heatmap
    from explorer.qt.screens.checks import check_plot_titles

    hm = Heatmap(title)
    qtbot.addWidget(hm)
    hm.show()
    qtbot.waitExposed(hm)
    label = hm.plot.titleLabel
    cut = []
    for width in range(150, 240, 4):  # the formula's strips were 144 and 155 px wide at 1,400 x 900
        hm.resize(width, 220)
        qtbot.waitUntil(lambda width=width: hm.graphics.width() == width and label.rect().width() > 0
                        and hm.plot.geometry().right() < width)
        hm.plot.layout.activate()
        item, plot = label.item.sceneBoundingRect(), hm.plot.sceneBoundingRect()
        if item.left() < plot.left() - 1 or item.right() > plot.right() + 1 or check_plot_titles(hm):
            cut.append((width, round(item.width()), round(plot.width())))
    assert cut == []  # was 158 px of title in a 155 px plot: elided for its text, not for its margins
    assert label.text == title


def _dock_scrolls(window):
    """(dock name, its scroll area) of every dock whose panel sits in a scroll area (panel_scroll)."""
    from PySide6.QtWidgets import QScrollArea

    for name, dock in window.docks.items():
        if isinstance(dock.widget(), QScrollArea):
            yield name, dock.widget()


def test_no_dock_scrolls_sideways_with_a_long_text_and_an_earlier_position(qtbot, tmp_path, tiny_tokenizer,
                                                                           dialogs, palette_name):
    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    s = window.session
    s.set_text(LONG_TEXT)  # more tokens than the context: "showing the last 32 of 40 tokens"
    s.set_position(3)  # an earlier position: the next-token line says "insert after 'the'"
    window.panels["variants"].set_source("book")  # the book's view: its title and its inputs line
    tokens = window.panels["tokens"]
    qtbot.waitUntil(lambda: "showing the last" in tokens.note.text())
    QApplication.processEvents()
    sideways = []
    for name, scroll in _dock_scrolls(window):  # each dock in front in turn (tabbed ones too)
        window.docks[name].raise_()
        qtbot.waitUntil(lambda scroll=scroll: scroll.isVisible() and scroll.viewport().width() > 200)
        QApplication.processEvents()
        if scroll.horizontalScrollBar().isVisible():
            sideways.append((name, scroll.widget().minimumSizeHint().width(), scroll.viewport().width()))
    assert sideways == []  # the Text dock scrolled sideways (its note was wider than the dock)
    for label in (tokens.note, window.panels["next-token"].click_note):
        assert label.width() >= label.fontMetrics().horizontalAdvance(label.text()) or label.wordWrap()
        assert label.mapTo(window, label.rect().topRight()).x() <= label.parentWidget().mapTo(
            window, label.parentWidget().rect().topRight()).x()
    box = tokens.causal_box  # not cut: its whole text is in view
    assert box.width() >= box.sizeHint().width()


def test_the_generate_panel_s_alternatives_are_reachable_in_sampled_mode(qtbot, tmp_path, tiny_tokenizer,
                                                                          dialogs, palette_name):
    from explorer.qt.generation import Generator
    from model.generate import Sampling

    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    panel = window.panels["generate"]
    panel.mode.setCurrentText("sample")  # the sampling controls take two more lines of the dock
    s, g = window.session, Generator.of(window.session)
    s.set_text("the cat")
    g.start(4, Sampling(temperature=1.0, seed=3))
    qtbot.waitUntil(lambda: not g.running, timeout=10000)
    s.set_position(3)  # a generated token: its alternatives, each a fork link
    qtbot.waitUntil(lambda: "fork:" in panel.detail.text())
    QApplication.processEvents()
    scroll = window.docks["generate"].widget()
    bottom = panel.detail.mapTo(scroll.widget(), panel.detail.rect().bottomLeft()).y()
    # the whole of the alternatives is in the scrolled area, and what is below the view can be scrolled to
    assert panel.detail.height() >= panel.detail.heightForWidth(panel.detail.width())
    assert bottom <= scroll.widget().height()
    assert bottom <= scroll.viewport().height() or scroll.verticalScrollBar().isVisible()
    scroll.ensureWidgetVisible(panel.detail)
    QApplication.processEvents()
    assert panel.detail.visibleRegion().boundingRect().height() > 0


def _positional_window(qtbot, tmp_path, tiny_tokenizer, size):
    """The window at ``size`` with the positional lesson in front, on 32 tokens, its comparison drawn."""
    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    window.resize(*size)
    window.session.set_text(LONG_TEXT)
    window.docks["positional"].raise_()
    panel = window.panels["positional"]
    qtbot.waitUntil(lambda: panel.isVisible() and panel.comparison is not None and panel.table.rowCount() == 32)
    scroll = window.docks["positional"].widget()
    qtbot.waitUntil(lambda: all(hm.plot.getViewBox().height() > 1 for hm in panel.maps.values()))
    qtbot.waitUntil(lambda: not panel.layout().geometry().isEmpty() and panel.sentence.height() > 20)  # laid out
    return window, panel, scroll


@pytest.mark.parametrize("size", [(1400, 900), (1280, 720)])
def test_the_positional_maps_have_room_for_their_rows_and_the_dock_scrolls_down_only(qtbot, tmp_path, tiny_tokenizer,
                                                                                   dialogs, size):
    from explorer.qt.plots.heatmap import readable_px

    window, panel, scroll = _positional_window(qtbot, tmp_path, tiny_tokenizer, size)
    need = readable_px(32)
    qtbot.waitUntil(lambda: all(hm.plot.getViewBox().height() >= need - 0.5 for hm in panel.maps.values()))
    for hm in panel.maps.values():  # was 73 px for 21 rows at 1,400 x 900 (a splitter squeezed them)
        assert hm.plot.getViewBox().height() >= need - 0.5
    assert scroll.horizontalScrollBar().maximum() == 0
    for label in (panel.sentence, panel.shift_view.label, panel.tv_label):  # every line of the sentences
        assert label.height() >= label.heightForWidth(label.width()), label.text()[:40]
    t = panel.table  # below the sentences, reached by scrolling down, with rows of its own in view
    assert t.mapTo(scroll.widget(), t.rect().bottomLeft()).y() <= scroll.widget().height()
    assert t.viewport().height() >= 2 * t.verticalHeader().defaultSectionSize()


def test_the_order_chips_wrap_instead_of_scrolling_sideways(qtbot, tmp_path, tiny_tokenizer, dialogs):
    from explorer.qt.panels.lessons.positional.order_chips import MAX_LINES

    window, panel, _ = _positional_window(qtbot, tmp_path, tiny_tokenizer, (1400, 900))
    chips = panel.chips
    assert chips.count() == 32
    qtbot.waitUntil(lambda: chips.visualItemRect(chips.item(31)).isValid())  # laid out
    assert not chips.horizontalScrollBar().isVisible()  # was one line, 7 px to scroll in a 999 px view
    rects = [chips.visualItemRect(chips.item(r)) for r in range(chips.count())]
    assert max(r.right() for r in rects) < chips.viewport().width()
    lines = len({r.top() for r in rects})
    assert 1 < lines <= MAX_LINES  # wrapped, every chip in view: the list is as high as its lines
    assert all(r.bottom() < chips.viewport().height() for r in rects)
    window.resize(1000, 900)  # narrower: more lines, still none sideways
    qtbot.waitUntil(lambda: len({chips.visualItemRect(chips.item(r)).top() for r in range(32)}) > lines)
    assert not chips.horizontalScrollBar().isVisible()


def test_the_positional_lesson_does_not_scroll_sideways_in_a_narrow_dock(qtbot, tmp_path, tiny_tokenizer, dialogs):
    window, panel, scroll = _positional_window(qtbot, tmp_path, tiny_tokenizer, (1400, 900))
    dock = window.docks["positional"]
    window.resizeDocks([dock], [660], Qt.Orientation.Horizontal)  # the dock of a 960 x 540 window
    qtbot.waitUntil(lambda: scroll.viewport().width() < 700)
    QApplication.processEvents()
    assert scroll.widget().minimumSizeHint().width() <= scroll.viewport().width()  # was 130 px wider
    assert scroll.horizontalScrollBar().maximum() == 0


@pytest.mark.parametrize("size", [(1400, 900), (1280, 720)])
def test_the_training_panel_s_no_snapshots_sentence_wraps_in_its_dock(qtbot, tmp_path, tiny_tokenizer, dialogs, size):
    from explorer.qt.screens.checks import check_cut

    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    window.resize(*size)
    window.docks["training"].raise_()
    panel = window.panels["training"]
    label = panel.folder_label
    qtbot.waitUntil(lambda: label.isVisible() and "No training snapshots found" in label.text())
    qtbot.waitUntil(lambda: label.width() > 40)
    QApplication.processEvents()
    assert label.fontMetrics().horizontalAdvance(label.text()) > label.width()  # too long for one line here
    assert [f for f in check_cut(window.docks["training"]) if f.widget.startswith("QLabel")] == []  # was cut
    assert label.height() >= label.heightForWidth(label.width())  # every line of it shows
    assert window.docks["training"].widget().horizontalScrollBar().maximum() == 0


def test_the_logit_lens_table_never_scrolls_sideways(qtbot):
    from explorer.qt.panels.why.views import LensTable

    stage = [(i, f"token{i}", 0.5 / (i + 1)) for i in range(5)]
    stages = [("embed", 1.234, stage, 0.1)] + [(f"{kind} {n}", 0.5, stage, 0.2) for n in range(4)
                                               for kind in ("attn", "mlp")]  # a 4-layer model's 9 stages
    table = LensTable()
    qtbot.addWidget(table)
    table.resize(830, 300)  # the Why dock's width at 1,280 x 720
    table.show()
    qtbot.waitExposed(table)
    table.show_stages(stages, target=2)
    qtbot.waitUntil(lambda: table.horizontalHeader().length() > 0)
    assert table.horizontalHeader().length() <= table.viewport().width()  # was 93 px wider: it scrolled
    assert table.horizontalScrollBar().maximum() == 0
    table.show_stages(stages[:3], target=2)  # few stages: each column as wide as its contents
    qtbot.waitUntil(lambda: table.columnCount() == 3)
    for c in range(3):
        assert table.columnWidth(c) >= table.sizeHintForColumn(c)
    assert table.horizontalHeader().length() < table.viewport().width()


@pytest.mark.slow
def test_the_variants_and_score_terms_maps_have_room_for_their_rows(qapp, tmp_path):
    """At 960 x 540 and a device pixel ratio of 2 (a child process, as the screen check walks it) the
    variants' scores and weights and the Why panel's score terms were 23-60 px high for 20-odd rows."""
    from explorer.qt.screens.walk import walk_elsewhere

    results = walk_elsewhere(["builtin:tinystories-4L4H"], ["light"], "960x540@2", tmp_path, images=False,
                             panels=["variants", "why"])
    assert {r.screen.panel for r in results} >= {"variants", "why"}
    assert {r.screen.tab for r in results if r.screen.panel == "why"} >= {"Score terms"}
    assert [f.line(r.screen) for r in results for f in r.findings if f.kind in ("height", "scroll")] == []


@pytest.mark.slow
def test_the_next_token_bars_have_room_at_960_by_540(qapp, tmp_path):
    """At 960 x 540 and a device pixel ratio of 2 the next-token bars' view was 22 px high."""
    from explorer.qt.screens.walk import walk_elsewhere

    results = walk_elsewhere(["builtin:tinystories-1L1H"], ["light"], "960x540@2", tmp_path, images=False,
                             panels=["next-token"])
    assert {r.screen.panel for r in results} >= {"next-token"}
    assert [f.line(r.screen) for r in results for f in r.findings if f.kind in ("height", "scroll")] == []
