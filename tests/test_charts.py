"""Charts a learner reads right the first time: axis titles on every heatmap, every key labelled at
T = 32 in the default window, the pin, the attention sink, the next-token list, the positional
lesson in a 1,400 x 900 window, and a dark theme that keeps everything readable."""

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QFont, QWheelEvent
from PySide6.QtWidgets import QApplication, QLabel

from conftest import make_tiny_checkpoint
from explorer.core.attention_sink import sink_facts, sink_line, sink_paragraph
from explorer.qt import theme
from explorer.qt.plots.heatmap import KEY_TITLE, QUERY_TITLE, Heatmap
from explorer.qt.plots.ticks import thinned_ticks
from explorer_helpers import click_cell, make_window
from model.explain import first_token_mean

WORDS = "the cat sat on the mat . the dog sat on the log . a cat and a dog played in the sun ."
T32 = " ".join((WORDS.split() * 2)[:32])


@pytest.fixture
def window(qtbot, tmp_path, tiny_tokenizer, dialogs):
    """The default window (1400 x 900, default layout) on a tiny model with a context of 32."""
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    qtbot.waitUntil(lambda: w.docks["attention"].widget().viewport().height() > 500)  # the default sizes
    return w


def drawn_labels(axis) -> list[str]:
    """The labels a LabelAxis paints now (those that fit), after a paint."""
    axis.scene().views()[0].grab()
    _, labels = axis._placed(axis.mapRectFromParent(axis.geometry()), axis.style["tickFont"] or QFont())
    return [st.text() for _, st in labels]


def all_heatmaps(window):
    for name, panel in window.panels.items():
        window.docks[name].raise_()
        QApplication.processEvents()
        for hm in panel.findChildren(Heatmap):
            yield name, hm


@pytest.mark.slow
def test_every_heatmap_has_axis_titles_and_its_colour_bar_says_what_it_shows(qtbot, window):
    window.session.set_text("the cat sat on the mat")
    seen = 0
    for name, hm in all_heatmaps(window):
        seen += 1
        left, cols = hm.plot.getAxis("left"), hm.col_axis
        assert left.label.isVisible() and left.labelText.strip(), (name, hm.plot.titleLabel.text)
        assert cols.label.isVisible() and cols.labelText.strip(), (name, hm.plot.titleLabel.text)
        if hm.bar is not None:
            assert hm.bar.axis.label.isVisible() and hm.bar.axis.labelText.strip()
    assert seen >= 15
    att = window.panels["attention"]
    assert att.scores.titles == {"row": QUERY_TITLE, "col": KEY_TITLE, "bar": "score, before softmax"}
    assert att.weights.titles["bar"] == "weight 0..1"
    assert QUERY_TITLE == "query i (the token that looks)" and KEY_TITLE == "key j (the token looked at)"
    qkv = window.panels["qkv"]
    assert qkv.heatmaps["q"].titles["col"] == "dimension (d_head)"
    assert window.panels["embeddings"].heatmaps["x"].titles["col"] == "dimension (d_model)"
    window.docks["qkv"].raise_()
    qkv.show_weights.setChecked(True)
    assert (qkv.heatmaps["k"].titles["row"], qkv.heatmaps["k"].titles["col"]) == ("d_model in", "→ d_head out")


@pytest.mark.slow
def test_every_key_is_labelled_at_t32_in_the_default_window(qtbot, window):
    s = window.session
    s.set_text(T32)
    assert s.trace.n_tokens == 32
    window.docks["attention"].raise_()
    QApplication.processEvents()
    att = window.panels["attention"]
    for hm in (att.scores, att.weights):
        keys = drawn_labels(hm.col_axis)
        assert keys == hm.col_labels and len(keys) == 32  # every key, in order
        assert hm.col_axis.vertical  # turned upright: they do not fit flat
        assert drawn_labels(hm.plot.getAxis("left")) == hm.row_labels  # and every query


def test_labels_turn_before_they_thin_and_a_thinned_axis_keeps_the_pinned_and_the_last(qtbot):
    hm = Heatmap("narrow", col_axis="top")
    qtbot.addWidget(hm)
    labels = [f"{i} word{i}" for i in range(32)]
    hm.resize(700, 600)
    hm.show()
    hm.set_data(np.zeros((32, 32), np.float32), (0, 1), labels, labels)
    QApplication.processEvents()
    assert hm.col_axis.vertical and len(drawn_labels(hm.col_axis)) == 32  # upright, all of them
    hm.resize(260, 260)  # too narrow even upright: thinned
    QApplication.processEvents()
    hm.set_selected_row(13)
    QApplication.processEvents()
    shown = drawn_labels(hm.col_axis)
    assert 2 < len(shown) < 32 and {"13 word13", "31 word31", "0 word0"} <= set(shown)
    assert "13 word13" in drawn_labels(hm.plot.getAxis("left"))
    hm.set_selected_row(None, hover=20)  # a hovered row is kept too
    assert "20 word20" in drawn_labels(hm.col_axis)
    hm.resize(2600, 400)  # wide: flat again
    QApplication.processEvents()
    assert not hm.col_axis.vertical


def test_thinned_ticks_keep_what_is_asked():
    def shown(n, step, keep=()):
        return [int(pos) for pos, _ in thinned_ticks([str(i) for i in range(n)], step, keep)[0]]

    assert shown(32, 4, keep=(13,)) == [0, 4, 8, 13, 17, 21, 25, 31]
    assert shown(32, 1, keep=(13,)) == list(range(32))


@pytest.mark.slow
def test_pinning_survives_typing_and_model_reload_when_the_position_still_exists(qtbot, window, tiny_tokenizer,
                                                                                  tmp_path):
    from model import save_checkpoint

    s = window.session
    path = tmp_path / "m.safetensors"
    ckpt = make_tiny_checkpoint(tiny_tokenizer, context_length=8)
    save_checkpoint(path, ckpt.model, ckpt.tokenizer)
    assert window.files.open_checkpoint(path)
    s.set_text("the cat sat on the mat")
    att = window.panels["attention"]
    click_cell(qtbot, att.weights, 2, 0)  # a click pins query 2
    assert s.position == 2 and att.weights._selection.isVisible()
    assert window.panels["tokens"].pin_note.text() == "pinned: 'sat' · Esc to release"
    s.set_text("the cat sat on the mat and the")  # typing: the pin stays on 'sat'
    assert s.trace.dropped == 0 and s.position == 2 and s.tokens[2] == "sat"
    s.set_text("the cat sat on the mat and the dog")  # one token drops out: 'sat' is now row 1
    assert s.trace.dropped == 1 and s.position == 1 and s.tokens[1] == "sat"
    window.files.reload()  # F5
    assert s.position == 1 and s.tokens[1] == "sat"
    s.set_text("the cat sat on the mat and the dog sat on")  # 'sat' left the 8-token window: released
    assert s.trace.dropped == 3 and s.position is None
    assert s.position is None and not att.weights._selection.isVisible()


@pytest.mark.slow
def test_a_second_click_or_esc_releases_and_hover_shows_without_pinning(qtbot, window):
    s = window.session
    s.set_text("the cat sat on the mat")
    att, nt = window.panels["attention"], window.panels["next-token"]
    click_cell(qtbot, att.weights, 3, 1)
    assert s.position == 3
    click_cell(qtbot, att.weights, 3, 2)  # the same row again
    assert s.position is None
    chips = window.panels["tokens"].chips
    qtbot.mouseClick(chips[1], __import__("PySide6.QtCore").QtCore.Qt.MouseButton.LeftButton)  # a chip pins too
    assert s.position == 1 and chips[1].selected
    esc = next(a for m in window.menuBar().actions() if m.menu() for a in m.menu().actions()
               if a.shortcut().toString() == "Esc")
    esc.trigger()
    assert s.position is None and not window.panels["tokens"].pin_note.isVisible()
    att.weights.sig_row_hovered.emit(4)  # the mouse over row 4: shown everywhere, not pinned
    assert s.position is None and s.selected_position() == 4 and att.weights._hover.isVisible()
    assert nt.info.text().startswith("after position 4 'the'") and chips[4].hovered
    assert nt.click_note.text().startswith("click a bar: insert after 'the' · ")
    att.weights.sig_row_hovered.emit(None)
    assert s.selected_position() == 5 and nt.click_note.text().startswith("click a bar: append · ")


@pytest.mark.slow
def test_the_attention_map_states_the_mean_weight_on_the_first_token(qtbot, window):
    s = window.session
    s.set_text("the cat sat on the mat")
    tr = s.trace
    att = window.panels["attention"]
    mean = float(tr.blocks[0].attn_weights[0, 1:, 0].mean())
    assert f"mean weight on the first token 'the': {mean:.2f}" in att.sink.text()
    even = float(np.mean([1 / (i + 1) for i in range(1, 6)]))
    assert f"an even spread would give {even:.2f}" in att.sink.text()
    att._on_sink_link("sink")
    assert att.sink_text.isVisible() and "Layer 0, head 0" in att.sink_text.text()
    att._on_sink_link("sink")
    assert not att.sink_text.isVisible()


def test_sink_facts_are_the_trace_s_numbers(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=1, context_length=16)
    tr = ckpt.model.trace(tiny_tokenizer.encode("the cat sat on the mat . the dog").ids)
    f = sink_facts(tr, 0, 0)
    w, v = tr.blocks[0].attn_weights[0].astype(np.float64), tr.blocks[0].v[0].astype(np.float64)
    assert f.mean_weight == pytest.approx(first_token_mean(tr))  # the Why panel's number, for one head
    assert f.even_weight == pytest.approx(np.mean([1 / (i + 1) for i in range(1, tr.n_tokens)]))
    parts = w[1:] * np.linalg.norm(v, axis=1)[None, :]
    assert f.output_share == pytest.approx(float(np.mean(parts[:, 0] / parts.sum(1))))
    assert f.over_half == int((w[1:, 0] > 0.5).sum()) and f.n_queries == tr.n_tokens - 1
    assert sink_facts(ckpt.model.trace([3]), 0, 0) is None and "needs two tokens" in sink_line(None, "x")
    text = sink_paragraph(f, "the")
    assert f"{f.mean_weight:.2f}" in text and f"{f.even_weight:.2f}" in text


@pytest.mark.parametrize("causal", [True, False])
def test_sink_facts_match_the_formulas_written_out_whole(tiny_tokenizer, causal):
    """The first-token facts, read in place from the trace's arrays, equal the formulas computed
    on (T, T) float64 copies with every mask cell written out (without the causal mask too)."""
    ckpt = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=2, context_length=16)
    tr = ckpt.model.trace(tiny_tokenizer.encode("the cat sat on the mat . the dog").ids, causal=causal)
    lt = tr.blocks[0]
    for head in range(2):
        f = sink_facts(tr, 0, head)
        w = lt.attn_weights[head].astype(np.float64)[1:]
        scores = lt.head_attn_scores(head).astype(np.float64)[1:]
        allowed = np.asarray(lt.attn_mask, bool)[1:]
        others = allowed.copy()
        others[:, 0] = False
        mean_others = np.where(others, scores, 0.0).sum(1) / np.maximum(others.sum(1), 1)
        rows = allowed[:, 0] & (others.sum(1) > 0)
        norms = np.linalg.norm(lt.v[lt.kv_head(head)].astype(np.float64), axis=1)
        parts = w * norms[None, :]
        assert f.score_gap == pytest.approx(float((scores[:, 0] - mean_others)[rows].mean()), abs=1e-5)
        assert f.output_share == pytest.approx(float(np.mean(parts[:, 0] / parts.sum(1))), rel=1e-5)
        assert f.even_weight == pytest.approx(float(np.mean(allowed[:, 0] / allowed.sum(1))))
        assert f.mean_weight == pytest.approx(float(w[:, 0].mean()))


def test_a_sink_is_explained_with_how_much_reaches_the_output(tiny_tokenizer):
    """A head made to attend to the first token: the paragraph names the sink and the value norms."""
    import torch

    ckpt = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=1, context_length=16)
    ids = tiny_tokenizer.encode("the cat sat on the mat . the dog").ids
    with torch.no_grad():
        ckpt.model.blocks[0].attn.W_K.weight.zero_()  # every score 0 ...
    tr = ckpt.model.trace(ids)
    f = sink_facts(tr, 0, 0)
    assert f.mean_weight == pytest.approx(f.even_weight) and not f.is_sink  # ... an even spread: no sink
    assert "no more than an even spread" in sink_paragraph(f, "the")


@pytest.mark.slow
def test_next_token_k_up_to_the_vocabulary_scrolls_instead_of_squeezing(qtbot, window):
    s = window.session
    s.set_text("the cat sat")
    nt = window.panels["next-token"]
    nt.k_box.setValue(10**6)
    vocab = s.config.vocab_size
    assert nt.k_box.value() == vocab and len(nt.top.ids) == vocab
    rows = nt.rows_in_view()
    assert rows < vocab and nt.scroll.isVisible() and nt.scroll.maximum() == vocab - rows
    assert len(nt.bars.opts["width"]) == rows  # only the bars in view are drawn
    labels = [t for _, t in nt.plot.getAxis("left")._tickLevels[0]]
    assert len(labels) == rows and labels[0].startswith("1. ")
    nt.scroll.setValue(5)
    assert nt.first == 5 and [t for _, t in nt.plot.getAxis("left")._tickLevels[0]][0].startswith("6. ")
    for notch, first in ((-120, 8), (120, 5)):  # a wheel notch down, then up: three rows each
        nt.wheelEvent(QWheelEvent(QPointF(5, 5), QPointF(5, 5), QPoint(), QPoint(0, notch), Qt.MouseButton.NoButton,
                                  Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False))
        assert nt.first == first
    rank = 6  # a click on the bar of rank 6 (in view) appends that token
    token = nt.token_name(int(nt.top.ids[rank]))
    scene = nt.plot.getViewBox().mapViewToScene(QPointF(0.001, rank))
    qtbot.mouseClick(nt.graphics.viewport(), __import__("PySide6.QtCore").QtCore.Qt.MouseButton.LeftButton,
                     pos=nt.graphics.mapFromScene(scene))
    assert s.text.endswith(token)
    nt.k_box.setValue(3)
    assert not nt.scroll.isVisible() and len(nt.bars.opts["width"]) == 3


def test_the_model_panel_shows_each_number_once():
    from explorer.core.model_facts import describe_training

    training = {"steps": 2000, "val_loss": 3.106498314597146, "val_curve": [[0, 8.34961], [2000, 3.1065]]}
    rows = dict(describe_training(training)[0][1])
    assert rows["val loss"].startswith("3.106 ") and rows["val loss curve"].endswith("2,000: 3.106  (nats/token)")


@pytest.mark.slow
def test_the_positional_lesson_keeps_its_maps_readable_in_the_default_window(qtbot, window):
    """Built when its tab is first raised (start-up builds only the docks in view), the lesson gets the
    least height its layout needs: each map keeps :func:`readable_px` of its rows above its chrome
    (``keep_readable``), so the dock scrolls down rather than squash them, never sideways, and the
    whole sentence is inside the panel. (Built at start-up while hidden, the panel kept the dock's
    height and its 32-row maps were squeezed below that, which an earlier form of this test took for a fit.)"""
    from explorer.qt.plots.heatmap import readable_px

    window.session.set_text(T32)
    window.docks["positional"].raise_()
    qtbot.waitUntil(lambda: window.panels.is_built("positional"))
    panel, scroll = window.panels["positional"], window.docks["positional"].widget()
    qtbot.waitUntil(lambda: all(hm.data.shape[0] == 32 for hm in panel.maps.values()))
    QApplication.processEvents()
    assert scroll.horizontalScrollBar().maximum() == 0
    assert panel.height() >= scroll.viewport().height()
    assert scroll.verticalScrollBar().maximum() == panel.height() - scroll.viewport().height()
    for hm in panel.maps.values():
        top = hm.mapTo(panel, hm.rect().topLeft()).y()
        assert hm.isVisible() and hm.height() >= hm.chrome_height() + readable_px(32) and top + hm.height() <= panel.height()
    bottom = panel.sentence.mapTo(panel, panel.sentence.rect().bottomLeft()).y()
    assert panel.sentence.heightForWidth(panel.sentence.width()) <= panel.sentence.height()  # all of it shows
    assert bottom <= panel.height()


def _ink_contrast(widget) -> float:
    """Contrast between a widget's most common colour (its ground) and the colour that differs most
    from it (its text), from a picture of the widget."""
    from PySide6.QtGui import QImage

    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint32, image.bytesPerLine() // 4 * image.height()) & 0xFFFFFF
    values, counts = np.unique(pixels, return_counts=True)
    ground = QColor(int(values[np.argmax(counts)]))
    return max(theme.contrast_ratio(ground, QColor(int(v))) for v in values)


@pytest.mark.slow
def test_a_dark_palette_keeps_every_chip_and_label_readable(qtbot, tmp_path, tiny_tokenizer, dialogs):
    app = QApplication.instance()
    old = app.palette()
    app.setPalette(theme.dark_palette())
    try:
        w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
        w.session.set_text("the cat sat zebra")  # an <unk> chip too
        w.session.set_position(1)
        QApplication.processEvents()
        assert theme.is_dark(w)
        chips = [c for c in w.panels["tokens"].chips if c.isVisible()]
        assert {c.kind for c in chips} >= {"normal", "unk"}
        for chip in chips:
            assert _ink_contrast(chip) >= 4.5, chip.text()
        labels = [lb for lb in w.findChildren(QLabel) if lb.isVisible() and lb.text().strip()]
        w.docks["positional"].raise_()  # a lesson's sentence box and warning
        QApplication.processEvents()
        labels += [lb for lb in w.panels["positional"].findChildren(QLabel) if lb.isVisible() and lb.text().strip()]
        assert len(labels) > 15 and w.panels["positional"].sentence.label in labels
        for label in labels:
            assert _ink_contrast(label) >= 3.0, label.text()[:60]
        att = w.panels["attention"]
        assert att.weights.graphics.backgroundBrush().color() == theme.plot_background(w)
        ink = QColor(att.weights.plot.getAxis("left").labelStyle["color"])
        assert theme.contrast_ratio(ink, theme.plot_background(w)) >= 4.5
        # Every other plot too: the Why panel's bars and what-if curves, the training curves.
        why, training = w.panels["why"], w.panels["training"]
        views = [(why.bars, why.bars.plots), (why.what_ifs.graphics, [why.what_ifs.plot]),
                 (training.curves_view, training.curves_view.plots)]
        for view, plots in views:
            ground = view.backgroundBrush().color()
            assert theme.is_dark(w) and ground.lightness() < 100, type(view).__name__  # not a fixed white
            for plot in plots:
                for name in ("left", "bottom"):
                    ink = QColor(plot.getAxis(name).labelStyle["color"])
                    assert theme.contrast_ratio(ink, ground) >= 4.5, (type(view).__name__, name)
    finally:
        app.setPalette(old)


def test_plots_follow_a_palette_switched_while_the_app_runs(qtbot):
    from explorer.qt.panels.training.curves import CurvesView
    from explorer.qt.panels.why.bars import SourceBars

    for view in (SourceBars(), CurvesView()):
        qtbot.addWidget(view)
        assert view.backgroundBrush().color().lightness() > 200  # the light theme's white
        view.setPalette(theme.dark_palette())
        QApplication.processEvents()
        ground = view.backgroundBrush().color()
        assert ground == theme.dark_palette().color(theme.Role.Base)
        ink = QColor(view.plots[0].getAxis("left").labelStyle["color"])
        assert theme.contrast_ratio(ink, ground) >= 4.5


def test_the_sink_paragraph_writes_the_score_as_the_model_computes_it():
    """GPT-Neo does not scale its scores: the paragraph said "Its score q_i·k_0/√d_head" of the raw q·k."""
    from pathlib import Path

    from explorer.core.attention_sink import SinkFacts
    from model.checkpoint import load_any

    arch = Path(__file__).parent / "fixtures" / "arch"
    for name, score in (("hf-gpt-neo", "q_i·k_0"), ("hf-gpt2", "q_i·k_0/√d_head")):
        ckpt = load_any(arch / name)
        tr = ckpt.model.trace(ckpt.tokenizer.encode("Once upon a time there was a cat").ids)
        f = sink_facts(tr, 0, 0)
        assert f.score == score
        sink = SinkFacts(**{**f.__dict__, "mean_weight": 0.9, "over_half": 3, "score_gap": 1.5})  # a sink
        assert sink.is_sink and f"Its score {score} is on average +1.50 above" in sink_paragraph(sink, "Once")
