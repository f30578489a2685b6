"""The panels in the real window on the seeded tiny model: what they hold equals the trace."""

import warnings

import numpy as np
import pyqtgraph as pg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from explorer.core.nexttoken import top_k
from explorer.core.views import axis_labels
from explorer.qt.panels import PANELS
from conftest import make_tiny_checkpoint
from explorer_helpers import click_cell, lut_colour, make_window, pixel_at_cell


@pytest.fixture(scope="module")
def shared_window(qapp, tmp_path_factory, tiny_tokenizer):
    """One window for the module (building one takes ~1 s); each test resets it."""
    w = make_window(None, tmp_path_factory.mktemp("settings"), make_tiny_checkpoint(tiny_tokenizer))
    yield w
    w.close()
    w.deleteLater()


@pytest.fixture
def window(shared_window, tiny_checkpoint, dialogs):
    """The shared window reset to a fresh tiny model, empty text and default options."""
    w = shared_window
    w.panels["qkv"].show_weights.setChecked(False)
    w.panels["attention"].all_heads.setChecked(False)
    w.panels["next-token"].k_box.setValue(10)
    w.panels["next-token"].temperature_box.setValue(1.0)
    w.session.set_positional_encoding(True)
    w.session.set_causal(True)
    w.session.set_text("")
    w.set_checkpoint(tiny_checkpoint)
    show_panel(w, "attention")  # in front of its tab group, as in the default layout
    return w


def type_text(qtbot, window, text):
    editor = window.panels["tokens"].editor
    editor.clear()
    if text.isascii() and len(text) <= 16:
        qtbot.keyClicks(editor, text)  # real keystrokes: the panels update on each one
    else:  # QTest cannot type characters outside the BMP (emoji); long texts are pasted
        editor.insertPlainText(text)
    return window.session


def show_panel(window, name):
    """Bring a (possibly tabbed) dock to the front, as a click on its tab does."""
    window.docks[name].raise_()
    QApplication.processEvents()
    return window.panels[name]


def close(a, b, tol=1e-6):
    return np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), atol=tol, equal_nan=True)


def test_every_registered_panel_has_a_dock(window):
    assert [n for n, _, _ in PANELS][:6] == ["tokens", "embeddings", "qkv", "attention", "next-token", "model"]
    assert set(window.docks) == {n for n, _, _ in PANELS}
    view_menu = [a for a in window.menuBar().actions() if a.text() == "&View"][0].menu()
    titles = [a.text() for a in view_menu.actions()]
    assert all(dock.windowTitle() in titles for dock in window.docks.values())


def test_typing_updates_every_panel_with_the_trace(qtbot, window, tiny_checkpoint):
    s = type_text(qtbot, window, "the cat sat on")
    expected = tiny_checkpoint.model.trace(tiny_checkpoint.tokenizer.encode("the cat sat on").ids)
    assert s.tokens == ["the", "cat", "sat", "on"]
    # typed key by key: each trace reused the rows of the one before (equal up to float rounding)
    np.testing.assert_allclose(s.trace.logits, expected.logits, rtol=0, atol=1e-5)
    labels = axis_labels(s.tokens)
    emb = show_panel(window, "embeddings").heatmaps
    for key, arr in (("e", expected.tok), ("p", expected.pos), ("x", expected.x)):
        assert close(emb[key].image.image, arr) and emb[key].row_labels == labels
    qkv = show_panel(window, "qkv").heatmaps
    assert close(qkv["q"].image.image, expected.blocks[0].q[0]) and qkv["v"].row_labels == labels
    att = show_panel(window, "attention")
    assert close(att.weights.image.image, expected.blocks[0].attn_weights[0])
    scores = expected.blocks[0].attn_scores[0].copy()
    scores[~np.isfinite(scores)] = np.nan
    assert close(att.scores.image.image, scores) and np.isnan(att.scores.image.image[0, 1])
    assert att.weights.row_labels == labels and att.weights.col_labels == labels  # keys: "j token" too
    nt = window.panels["next-token"]
    want = top_k(expected.logits[-1], nt.k_box.value(), 1.0)
    assert close(nt.bars.opts["width"], want.probs) and list(nt.top.ids) == list(want.ids)
    chips = window.panels["tokens"].chips
    assert [c.text().split("<b>")[1].split("</b>")[0] for c in chips if c.isVisible()] == s.tokens


def test_layer_head_selectors_and_all_heads_grid(qtbot, window):
    s = type_text(qtbot, window, "a dog played")
    show_panel(window, "qkv")
    att = window.panels["attention"]
    att.layer_box.setValue(1)
    att.head_box.setValue(1)
    assert (s.layer, s.head) == (1, 1)
    assert close(window.panels["qkv"].heatmaps["k"].image.image, s.trace.blocks[1].k[1])
    show_panel(window, "attention")  # tabbed with Q/K/V: it catches up when shown
    assert close(att.weights.image.image, s.trace.blocks[1].attn_weights[1])
    s.set_layer(0)
    assert att.layer_box.value() == 0
    att.all_heads.setChecked(True)
    grid = att.grid
    assert grid.isVisible() and grid.shape == (2, 2)
    T, step = s.trace.n_tokens, grid.tile
    mosaic = grid.image.image
    assert close(mosaic[step:step + T, 0:T], s.trace.blocks[1].attn_weights[0])  # layer 1, head 0
    assert close(mosaic[0:T, step:step + T], s.trace.blocks[0].attn_weights[1])  # layer 0, head 1
    assert np.isnan(mosaic[T:step, :]).all()  # the gap between layers is blank
    centre = grid.plot.getViewBox().mapViewToScene(pg.Point(step * 0.5, step * 1.5))
    assert grid.tile_at(centre) == (1, 0)  # row 1 of tiles (down), column 0 (across)
    with qtbot.waitSignal(grid.sig_head_picked):  # a real click on the tile
        qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.mapFromScene(centre))
    assert (s.layer, s.head) == (1, 0)


def test_qkv_weights_toggle(qtbot, window, tiny_checkpoint):
    type_text(qtbot, window, "the sun")
    panel = show_panel(window, "qkv")
    panel.show_weights.setChecked(True)
    w = tiny_checkpoint.model.blocks[0].attn.head_weights()
    assert panel.heatmaps["q"].image.image.shape == (16, 8)  # (d_model, d_head)
    assert close(panel.heatmaps["v"].image.image, w["W_V"][0])


def test_attention_image_is_not_transposed_or_flipped(window):
    """The known matrix: 1 in the top-left, zeros in the upper-right triangle, row 0 on top."""
    m = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], dtype=np.float32)
    hm = window.panels["attention"].weights
    hm.set_data(m, (0.0, 1.0), ["a", "b", "c"], ["a", "b", "c"])
    QApplication.processEvents()
    np.testing.assert_array_equal(hm.image.image, m)
    assert hm.image.axisOrder == "row-major" and hm.plot.getViewBox().yInverted()
    vb = hm.plot.getViewBox()
    top_left = vb.mapViewToScene(hm.image.mapToView(hm.image.boundingRect().topLeft()))
    assert top_left.y() < vb.mapViewToScene(hm.image.mapToView(hm.image.boundingRect().bottomLeft())).y()
    top, bottom = lut_colour(hm, 1.0), lut_colour(hm, 0.0)
    assert pixel_at_cell(hm, 0, 0) == top  # [0, 0] = 1 drawn top-left in the top colour
    for r, c in ((0, 1), (0, 2), (1, 2)):
        assert pixel_at_cell(hm, r, c) == bottom
    assert pixel_at_cell(hm, 2, 2) != bottom
    assert hm.describe_cell(2, 1).endswith("0.300000")


def test_selection_syncs_both_ways(qtbot, window):
    s = type_text(qtbot, window, "the cat sat on the mat")
    att = window.panels["attention"]
    click_cell(qtbot, att.weights, 2, 0)
    assert s.position == 2 and s.selected_position() == 2
    assert window.panels["next-token"].info.text().startswith("after position 2 'sat'")
    tokens = window.panels["tokens"]
    qtbot.mouseClick(tokens.chips[4], __import__("PySide6.QtCore").QtCore.Qt.MouseButton.LeftButton)
    assert s.position == 4 and att.weights._selection.isVisible()
    assert tokens.chips[4].selected and not tokens.chips[3].selected
    s.set_position(None)
    assert s.selected_position() == 5 and not att.weights._selection.isVisible()


def test_chip_hover_highlights_text(qtbot, window):
    type_text(qtbot, window, "the 🙂 cat")
    tokens = window.panels["tokens"]
    tokens._on_chip_hovered(2)  # 'cat' after an emoji: two UTF-16 units
    selections = tokens.editor.extraSelections()
    cursor = selections[0].cursor
    assert cursor.selectedText() == "cat"
    tokens._on_chip_hovered(-1)
    assert tokens.editor.extraSelections() == []


def test_next_token_controls_and_click_appends(qtbot, window):
    s = type_text(qtbot, window, "the cat")
    nt = window.panels["next-token"]
    nt.k_box.setValue(10**6)
    assert nt.k_box.value() == s.config.vocab_size and len(nt.top.ids) == s.config.vocab_size
    nt.k_box.setValue(3)
    nt.temperature_box.setValue(-1.0)
    assert nt.temperature_box.value() == 0.0
    assert nt.top.probs.tolist() == [1.0, 0.0, 0.0] and "entropy 0.000 bits" in nt.info.text()
    nt.temperature_box.setValue(1.0)
    first = nt.token_name(int(nt.top.ids[0]))
    scene = nt.plot.getViewBox().mapViewToScene(__import__("PySide6.QtCore").QtCore.QPointF(0.001, 0.0))
    qtbot.mouseClick(nt.graphics.viewport(), __import__("PySide6.QtCore").QtCore.Qt.MouseButton.LeftButton,
                     pos=nt.graphics.mapFromScene(scene))
    expected = "the cat" + ("" if not first[0].isalnum() else " ") + first
    assert s.text == expected and window.panels["tokens"].editor.toPlainText() == expected


def test_clicking_a_bar_for_an_earlier_position_inserts_there(qtbot, window):
    s = type_text(qtbot, window, "the cat sat")
    s.set_position(1)  # the bars now predict what follows "cat"
    nt = window.panels["next-token"]
    first = nt.token_name(int(nt.top.ids[0]))
    nt.append(0)
    joined = "the cat" + ("" if not first[0].isalnum() else " ") + first
    assert s.text == joined + " sat" and s.position == 2 and s.tokens[2] == first


def test_empty_and_whitespace_clear_every_panel(qtbot, window):
    type_text(qtbot, window, "the cat")
    for text in ("", "   \n\t "):
        window.session.set_text(text)
        assert window.session.trace.n_tokens == 0
        for name in ("embeddings", "qkv"):
            heatmaps = show_panel(window, name).heatmaps.values()
            assert all(hm.image.image is None and hm.data.size == 0 for hm in heatmaps)
        att = window.panels["attention"]
        assert att.weights.data.size == 0 and att.scores.data.size == 0
        assert window.panels["next-token"].top is None and len(window.panels["next-token"].bars.opts["width"]) == 0
        assert not any(c.isVisible() for c in window.panels["tokens"].chips)


def test_one_token_is_a_one_by_one_map_in_the_top_colour(qtbot, window):
    s = type_text(qtbot, window, "cat")
    hm = window.panels["attention"].weights
    np.testing.assert_array_equal(hm.image.image, [[1.0]])
    QApplication.processEvents()
    assert pixel_at_cell(hm, 0, 0) == lut_colour(hm, 1.0)
    assert s.trace.n_tokens == 1


def test_more_tokens_than_context(qtbot, window):
    text = "the cat sat on the mat . the dog sat on the log ."  # 14 tokens, context 8
    s = type_text(qtbot, window, text)
    tokens = window.panels["tokens"]
    assert s.trace.n_tokens == 8 and s.trace.dropped == 6
    assert tokens.note.text() == "showing the last 8 of 14 tokens"
    kinds = [c.kind for c in tokens.chips if c.isVisible()]
    assert kinds == ["dropped"] * 6 + ["normal"] * 8
    assert s.tokens == list(s.encoding.tokens[6:])
    assert window.panels["attention"].weights.image.image.shape == (8, 8)


def test_unknown_words_and_emoji(qtbot, window):
    s = type_text(qtbot, window, "the zebra 🙂 sat")
    chips = [c for c in window.panels["tokens"].chips if c.isVisible()]
    assert [c.kind for c in chips] == ["normal", "unk", "unk", "normal"]
    assert "'zebra'" in chips[1].toolTip() and "'🙂'" in chips[2].toolTip()
    assert s.trace.n_tokens == 4


def test_big_paste_makes_chips_only_for_the_shown_tokens(qtbot, window, monkeypatch):
    """Chips were built for every token of the text (a pasted megabyte: a second per keystroke)."""
    from explorer.qt.panels import tokens as tokens_module

    sizes = []
    real = tokens_module.token_chips
    monkeypatch.setattr(tokens_module, "token_chips", lambda t, enc, *a: sizes.append(len(enc)) or real(t, enc, *a))
    s = type_text(qtbot, window, "the cat sat on the mat . " * 100)  # 700 tokens, context 8
    n, panel = len(s.encoding), window.panels["tokens"]
    assert n == 700 and sizes and max(sizes) == 8 + tokens_module.MAX_DROPPED_CHIPS
    chips = panel.chip_data
    assert [c.index for c in chips] == list(range(n - 40, n)) and [c.position for c in chips[32:]] == list(range(8))
    assert all(c.dropped for c in chips[:32]) and [c.original for c in chips] == list(s.encoding.tokens[-40:])
    assert panel.summary.text() == "… 660 earlier tokens" and panel.note.text() == "showing the last 8 of 700 tokens"


@pytest.mark.filterwarnings("error")
def test_repeated_token_and_big_paste_without_warnings(qtbot, window):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = window.session
        s.set_text("the " * 20)
        assert s.trace.n_tokens == 8
        np.testing.assert_allclose(s.trace.blocks[0].attn_weights[0].sum(-1), 1.0, rtol=1e-5)
        window.panels["qkv"].show_weights.setChecked(False)
        pasted = ("the cat sat on the mat 🙂 zebra! " * 400)[:10_000]
        window.panels["tokens"].editor.setPlainText(pasted)
        assert len(s.text) == 10_000 and s.trace.n_tokens == 8
        assert len(s.encoding) > 2000
        visible = [c for c in window.panels["tokens"].chips if c.isVisible()]
        assert len(visible) == 8 + 32 and window.panels["tokens"].summary.isVisible()
        QApplication.processEvents()


def test_positional_encoding_and_causal_options(qtbot, window):
    s = type_text(qtbot, window, "the cat sat")
    tokens = window.panels["tokens"]
    tokens.pe_box.setChecked(False)
    assert not s.positional_encoding and not s.trace.positional_encoding
    assert not show_panel(window, "embeddings").heatmaps["p"].image.image.any()
    tokens.causal_box.setChecked(False)
    assert not np.isnan(show_panel(window, "attention").scores.image.image).any()
    s.set_causal(True)
    assert tokens.causal_box.isChecked()


def test_model_panel_and_status_bar(qtbot, window, tiny_checkpoint):
    type_text(qtbot, window, "the cat")
    html = window.panels["model"].browser.toPlainText()
    assert f"{tiny_checkpoint.model.n_params():,}" in html and "context_length" in html and "tiny test model" in html
    status = window.status.text()
    assert "2/8 tokens" in status and "model" in status and "drawing" in status and " ms" in status


@pytest.mark.parametrize("name", ["qkv", "positional", "formula", "variants"])
def test_hidden_panels_skip_work_and_catch_up_when_shown(qtbot, window, name):
    show_panel(window, "embeddings")
    panel = window.panels[name]
    assert not panel.is_shown()  # tabbed behind the embeddings
    calls = []
    original = panel.refresh
    panel.refresh = lambda *a: (calls.append(1), original(*a))[1]
    s = type_text(qtbot, window, "the dog sat")
    assert panel._stale and calls == []  # no work per keystroke while hidden
    show_panel(window, name)
    assert panel.is_shown() and not panel._stale and len(calls) == 1
    if name == "qkv":
        assert close(panel.heatmaps["q"].image.image, s.trace.blocks[0].q[0])
    if name == "formula":
        assert panel.steps.position == s.trace.n_tokens - 1
        assert close(panel.steps.out, s.trace.blocks[0].head_out[0, -1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_any_text_updates_without_errors(window, text):
    """Any string (control characters, surrogates, emoji, RTL) gives a consistent trace and panels."""
    s = window.session
    s.set_text(text)
    n = s.trace.n_tokens
    assert n == min(len(s.encoding), s.config.context_length) and len(s.tokens) == n
    assert window.panels["attention"].weights.data.shape == ((n, n) if n else (0, 0))
    assert (window.panels["next-token"].top is None) == (n == 0)


def test_carriage_returns_are_stored_as_the_editor_stores_them(qtbot, window):
    s = window.session
    s.set_text("the cat\r\nsat\ron")
    assert s.text == "the cat\nsat\non" == window.panels["tokens"].editor.toPlainText()
    chip_texts = [s.text[a:b] for a, b in s.encoding.spans]
    assert chip_texts == ["the", "cat", "sat", "on"]


def test_all_heads_grid_outlines_the_selected_head_at_once(qtbot, window):
    from PySide6.QtCore import QRectF

    s = type_text(qtbot, window, "a dog played")
    att = show_panel(window, "attention")
    s.set_layer(1)
    s.set_head(0)
    grid = att.grid
    assert not grid.marker.isVisible()
    att.all_heads.setChecked(True)  # no click on a tile: the selection is outlined already
    QApplication.processEvents()
    side = grid.tile - grid.GAP
    assert grid.marker.isVisible() and grid.marker.rect() == QRectF(0, grid.tile, side, side)
    s.set_head(1)  # the outline follows the session's selection
    assert grid.marker.rect() == QRectF(grid.tile, grid.tile, side, side)
    # square tiles, anchored at the top-left corner next to the L/H labels (not centred)
    vb = grid.plot.getViewBox()
    (x0, x1), (y0, y1) = vb.viewRange()
    assert x0 == pytest.approx(0) and y0 == pytest.approx(0)
    assert (x1 - x0) / vb.width() == pytest.approx((y1 - y0) / vb.height(), rel=1e-3)
    n = grid.shape[0] * grid.tile
    assert min(x1, y1) == pytest.approx(n, rel=1e-3)  # the mosaic fills one side
    att.all_heads.setChecked(False)
    assert not grid.isVisible()


@pytest.mark.parametrize("level", [0.00123, 12345.5])
def test_colour_bar_labels_fit_and_say_the_values_themselves(qtbot, level):
    """The colour bar lies under the map: its labels never overlap, stay inside the widget, and are
    the values themselves (no "x0.001" scale), for tiny and large levels alike."""
    from PySide6.QtGui import QImage, QPainter

    from explorer.qt.plots.heatmap import Heatmap

    hm = Heatmap("tiny values", bar_title="value of x")
    qtbot.addWidget(hm)
    hm.resize(300, 500)
    hm.show()
    hm.set_data(np.linspace(-level, level, 16).reshape(4, 4), (-level, level), None, None)
    QApplication.processEvents()
    axis = hm.bar.axis
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    rects = sorted((rect for rect, _, _ in texts), key=lambda r: r.left())
    assert len(rects) >= 3
    assert all(a.right() <= b.left() for a, b in zip(rects, rects[1:]))  # no two labels overlap
    width = hm.graphics.width()
    for rect in rects:
        scene = axis.mapRectToScene(rect)
        assert hm.graphics.mapFromScene(scene.topLeft()).x() >= 0
        assert hm.graphics.mapFromScene(scene.topRight()).x() <= width
    values = [float(t.replace("−", "-")) for _, _, t in texts]
    assert max(abs(v) for v in values) <= level * 1.0001 and max(abs(v) for v in values) >= level / 3
    assert axis.labelText == "value of x" and "x0.001" not in axis.labelString()


def test_chips_are_laid_out_again_when_their_text_changes(qtbot, window):
    """Chips wrap in reading order and never overlap, through edits that widen, narrow and add them."""
    tokens = window.panels["tokens"]

    def visible_chips():
        QApplication.processEvents()
        return [c for c in tokens.chips if c.isVisible()]

    texts = ("the cat sat", "the catttttttttttttttt sat on the mat . the dog", "a a a a a a a a a a a a a a", "the cat")
    for text in texts:
        window.session.set_text(text)
        chips = visible_chips()
        assert len(chips) == len(window.session.encoding)
        rects = [c.geometry() for c in chips]
        for a, b in zip(rects, rects[1:]):  # reading order: right of the last one, or on a lower line
            assert b.left() >= a.right() or b.top() > a.top()
        for i, a in enumerate(rects):
            assert a.width() >= chips[i].sizeHint().width()  # laid out for its current text
            assert all(not a.intersects(b) for b in rects[i + 1:])
            assert a.right() <= tokens.strip.width()



def test_new_chips_are_placed_before_the_event_loop_runs(window):
    """A new chip was a 640 x 480 widget at (0, 0) until the posted layout request came: a grab
    in between (--screenshot after --generate, Export) showed one giant chip over the strip."""
    tokens = window.panels["tokens"]
    window.session.set_text("the cat")
    window.session.set_text("the cat sat on the mat . the dog")  # new chips, no turn of the event loop
    rects = [c.geometry() for c in tokens.chips if c.isVisible()]
    assert len(rects) == 9 and all(r.size() == c.sizeHint() for r, c in zip(rects, tokens.chips))
    assert all(r.right() <= tokens.strip.width() and not r.intersects(o) for i, r in enumerate(rects)
               for o in rects[i + 1:])
