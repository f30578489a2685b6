"""Views at T = 1,024 (issue 17): every panel draws a 1,024-token text of a 1,024-context model,
maps are coloured at the resolution they are seen at, an append redraws the new rows only, and a
heatmap zooms and pans with its labels appearing as soon as they fit."""

import numpy as np
import pytest
import torch
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint
from explorer.core import why
from explorer.core.head_maps import mosaic_image, pool_heads
from explorer.core.views import masked_as_nan
from explorer.qt.plots.heatmap import Heatmap
from explorer.qt.plots.plot_items import MatrixImage
from explorer_helpers import make_window
from model.explain import leave_one_out_sources
from model.core.interventions import Interventions

WORDS = "the cat sat on the mat . the dog sat on the log . a cat and a dog played in the sun .".split()


def text_of(n: int) -> str:
    return " ".join((WORDS * (n // len(WORDS) + 1))[:n])


@pytest.fixture(scope="module")
def big_window(qapp, tmp_path_factory, tiny_tokenizer):
    """One window on a small-d_model model with a 1,024-token context, showing ~1,000 tokens."""
    checkpoint = make_tiny_checkpoint(tiny_tokenizer, context_length=1024, d_model=8, n_heads=2, n_layers=2, d_mlp=16)
    window = make_window(None, tmp_path_factory.mktemp("big"), checkpoint)
    window.session.set_text(text_of(1000))
    QApplication.processEvents()
    yield window
    window.close()
    window.deleteLater()


@pytest.mark.slow
def test_every_panel_draws_a_1024_token_text(big_window):
    s = big_window.session
    s.set_text(text_of(1030))  # longer than the context: the last 1,024 tokens are run
    assert s.trace.n_tokens == 1024 and s.trace.dropped == 6
    for name, dock in big_window.docks.items():
        dock.raise_()
        QApplication.processEvents()
        panel = big_window.panels[name]
        assert not panel.grab().isNull(), name
    weights = big_window.panels["attention"].weights
    np.testing.assert_allclose(weights.image.image, s.trace.blocks[0].attn_weights[0], atol=1e-6)
    s.set_text(text_of(1000))


def test_a_big_map_is_coloured_at_the_resolution_it_is_seen_at(big_window):
    att = big_window.panels["attention"]
    big_window.docks["attention"].raise_()
    QApplication.processEvents()
    image = att.weights.image
    att.weights.graphics.grab()
    r0, r1, c0, c1, out_rows, out_cols = image.part
    vb = att.weights.plot.getViewBox()
    assert (r0, r1, c0, c1) == (0, 1000, 0, 1000)  # the whole map in view
    assert out_rows <= vb.height() + 1 and out_cols <= vb.width() + 1 and out_rows < 1000
    assert (image.qimage.height(), image.qimage.width()) == (out_rows, out_cols)
    whole = MatrixImage()  # every cell coloured: each pixel shows the cell under its centre
    whole.setLookupTable(image.lut)
    whole.setImage(image.image, levels=image.levels, autoLevels=False)
    whole.render()
    for py, px in ((0, 0), (out_rows // 2, out_cols // 3), (out_rows - 1, out_cols - 1)):
        row, col = int((py + 0.5) * 1000 / out_rows), int((px + 0.5) * 1000 / out_cols)
        assert image.qimage.pixel(px, py) == whole.qimage.pixel(col, row)


def test_an_append_redraws_the_new_rows_and_shows_what_a_full_trace_shows(big_window):
    s = big_window.session
    att = big_window.panels["attention"]
    big_window.docks["attention"].raise_()
    att.all_heads.setChecked(True)
    QApplication.processEvents()
    seen = []
    handle = s.model.tok_emb.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[1]))
    try:
        s.set_text(text_of(1000) + " the")
    finally:
        handle.remove()
    assert seen == [1]  # one position run
    full = s.model.trace(list(s.encoding.ids))
    np.testing.assert_allclose(masked_as_nan(att.scores.data), masked_as_nan(full.blocks[0].attn_scores[0]),
                               atol=1e-5)
    mosaic = att.grid.image.image
    np.testing.assert_allclose(mosaic, mosaic_image(pool_heads(full, att.grid.CELL), att.grid.GAP), atol=1e-6)
    att.all_heads.setChecked(False)


@pytest.mark.slow
def test_the_why_panel_hides_a_few_sources_at_1024_tokens_and_shows_those_that_matter(big_window):
    s = big_window.session
    s.set_text(text_of(1030))
    big_window.docks["why"].raise_()
    QApplication.processEvents()
    panel = big_window.panels["why"]
    ex = panel.result.explanation
    assert ex.n_sources == 1024 and ex.position == 1023
    cap = why.leave_one_out_cap(s.config, 1024)
    assert why.LOO_MIN_SOURCES < cap < why.LOO_MAX_SOURCES and ex.n_leave_one_out == cap
    attention = ex.attention.mean(axis=(0, 1))
    done = np.flatnonzero(ex.leave_one_out_computed)
    assert done.tolist() == leave_one_out_sources(attention, ex.dla.sources, 1023, cap).tolist()
    j = int(np.argmax(attention[:1023]))  # the most attended source: hidden, and its effect a re-run's
    hide = torch.ones(1024, 1024, dtype=torch.bool)
    hide[:, j], hide[j, j] = False, True
    rerun = s.model.trace(list(s.trace.token_ids), interventions=Interventions(key_mask=hide))
    want = s.trace.logits[1023, ex.target_id] - rerun.logits[1023, ex.target_id]
    assert ex.leave_one_out[j] == pytest.approx(want, abs=1e-5)
    assert panel.scope.text().startswith(f"Leave-one-out for {cap} of 1,023 earlier tokens")
    rows = why.shown_sources(ex)
    bars = panel.bars
    assert bars.values.shape == (3, rows.size) and rows.size <= why.SHOWN_SOURCES + 2
    assert len(bars.bars[2].opts["y"]) == cap  # no leave-one-out bar for the sources not computed
    assert bars.rows[-1].startswith("1023 ") and bars.rows[-1].endswith("(query)")
    missing = int(np.flatnonzero(~ex.leave_one_out_computed[rows])[0])
    assert f"not computed: only the {cap} sources with most attention" in bars.describe_row(missing)
    assert bars.scroll.isVisible() == (rows.size > bars.rows_in_view())
    bars.scroll.setValue(bars.scroll.maximum())
    assert bars.plots[2].viewRange()[1][1] == pytest.approx(rows.size - 0.5)  # the query's row is in view
    panel.tabs.setCurrentIndex(1)  # the what-ifs: entropy curves over 1,024 queries, labelled where they fit
    QApplication.processEvents()
    labels = [label for _, label in panel.what_ifs.plot.getAxis("bottom")._tickLevels[0]]
    assert 5 < len(labels) < 100 and labels[0].startswith("0 ") and labels[-1].startswith("1023 ")
    panel.tabs.setCurrentIndex(0)
    s.set_text(text_of(1000))


# ---- zoom and pan -------------------------------------------------------------------------------

N = 1024


@pytest.fixture
def big_heatmap(qtbot):
    hm = Heatmap("weights", col_axis="top")
    qtbot.addWidget(hm)
    hm.resize(420, 420)
    hm.show()
    qtbot.waitExposed(hm)
    labels = [f"{i} w{i}" for i in range(N)]
    hm.set_data(np.random.default_rng(0).random((N, N), np.float32), (0, 1), labels, labels)
    QApplication.processEvents()
    return hm


def _view_point(hm, x: float, y: float) -> QPoint:
    """The viewport pixel showing data point (x = column, y = row)."""
    scene = hm.plot.getViewBox().mapViewToScene(QPointF(x, y))
    return hm.graphics.mapFromScene(scene)


def _wheel(hm, at: QPoint, notches: int) -> None:
    event = QWheelEvent(QPointF(at), QPointF(hm.graphics.viewport().mapToGlobal(at)), QPoint(0, 0),
                        QPoint(0, 120 * notches), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(hm.graphics.viewport(), event)
    QApplication.processEvents()


def _drag(hm, start: QPoint, end: QPoint) -> None:
    viewport = hm.graphics.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    steps = [start + (end - start) * (i / 8) for i in range(9)]
    events = [(QEvent.Type.MouseButtonPress, start, left, left)]
    events += [(QEvent.Type.MouseMove, p, none, left) for p in steps[1:]]
    events += [(QEvent.Type.MouseButtonRelease, end, left, none)]
    for kind, pos, button, buttons in events:
        QApplication.sendEvent(viewport, QMouseEvent(kind, QPointF(pos), QPointF(viewport.mapToGlobal(pos)), button,
                                                     buttons, Qt.KeyboardModifier.NoModifier))
    QApplication.processEvents()


def _double_click(hm, at: QPoint) -> None:
    viewport = hm.graphics.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, buttons in ((QEvent.Type.MouseButtonPress, left), (QEvent.Type.MouseButtonRelease, none),
                          (QEvent.Type.MouseButtonDblClick, left), (QEvent.Type.MouseButtonRelease, none)):
        QApplication.sendEvent(viewport, QMouseEvent(kind, QPointF(at), QPointF(viewport.mapToGlobal(at)), left,
                                                     buttons, Qt.KeyboardModifier.NoModifier))
    QApplication.processEvents()


def _labels_drawn(axis) -> list[str]:
    from PySide6.QtGui import QFont

    _, drawn = axis._placed(axis.mapRectFromParent(axis.geometry()), axis.style["tickFont"] or QFont())
    return [st.text() for _, st in drawn]


def test_the_wheel_zooms_around_the_pointer_and_labels_appear_as_they_fit(big_heatmap):
    hm = big_heatmap
    left = hm.plot.getAxis("left")
    assert len(left._tickLevels[0]) < 100  # 1,024 rows in ~400 px: a label for one row in many
    at = _view_point(hm, 700.5, 300.5)
    for _ in range(30):
        _wheel(hm, at, 1)  # zoom in around row 300, column 700
    y0, y1, x0, x1 = hm.zoom.view()
    assert y1 - y0 < 40 and x1 - x0 < 40  # a few dozen cells in view
    # Around the pointer: within a cell or two, as the column labels lie flat once they fit across
    # their columns (the top axis gets lower and the view taller: the plot moves a few pixels).
    assert y0 - 2 <= 300.5 <= y1 + 2 and x0 - 2 <= 700.5 <= x1 + 2
    assert len(left._tickLevels[0]) == N  # every row labelled, ...
    drawn = _labels_drawn(left)
    in_view = [f"{i} w{i}" for i in range(int(np.ceil(y0)), int(y1))]
    assert set(in_view) <= set(drawn) and "0 w0" not in drawn  # ... and those in view are drawn
    cols = _labels_drawn(hm.col_axis)
    assert f"{int(x0) + 1} w{int(x0) + 1}" in cols  # the keys along the top too
    cell = hm.cell_at(hm.plot.getViewBox().mapViewToScene(QPointF(700.5, 300.5)))
    assert cell == (300, 700)  # hover and clicks read the zoomed view


def test_a_drag_pans_within_the_map_and_a_double_click_shows_it_all(qtbot, big_heatmap):
    hm = big_heatmap
    centre = _view_point(hm, 512, 512)
    for _ in range(8):
        _wheel(hm, centre, 1)  # about 100 cells in view
    y0, y1, x0, x1 = hm.zoom.view()
    start = _view_point(hm, (x0 + x1) / 2, (y0 + y1) / 2)
    _drag(hm, start, start + QPoint(-60, -60))  # the map moves up-left: the view goes down-right
    ny0, ny1, nx0, nx1 = hm.zoom.view()
    assert nx0 > x0 + 1 and ny0 > y0 + 1 and nx1 - nx0 == pytest.approx(x1 - x0, rel=1e-3)
    hm.zoom.viewbox.translateBy(x=5000, y=5000)  # far past the corner, as a long drag would go
    ny0, ny1, nx0, nx1 = hm.zoom.view()
    assert ny1 == pytest.approx(N) and nx1 == pytest.approx(N)  # at the corner, never beyond the matrix
    clicked = []
    hm.sig_row_clicked.connect(clicked.append)
    _double_click(hm, _view_point(hm, 1000.5, 1000.5))
    assert hm.zoom.view() == pytest.approx((0, N, 0, N), abs=1e-6) and not hm.zoom.zoomed()
    assert len(hm.plot.getAxis("left")._tickLevels[0]) < 100  # thinned again
    assert clicked == [1000]  # its first click is a click on row 1,000


def test_a_zoomed_view_keeps_its_place_and_follows_the_newest_rows(big_heatmap):
    hm = big_heatmap
    hm.zoom.viewbox.setRange(xRange=(1000, 1024), yRange=(1000, 1024), padding=0)
    labels = [f"{i} w{i}" for i in range(N + 1)]
    hm.set_data(np.zeros((N + 1, N + 1), np.float32), (0, 1), labels, labels)  # a token typed
    assert hm.zoom.view() == pytest.approx((1001, N + 1, 1001, N + 1), abs=1e-6)  # it moved with the end
    hm.zoom.viewbox.setRange(xRange=(10, 30), yRange=(10, 30), padding=0)
    hm.set_data(np.zeros((N, N), np.float32), (0, 1), labels[:N], labels[:N])
    assert hm.zoom.view() == pytest.approx((10, 30, 10, 30), abs=1e-6)  # kept
    hm.zoom.reset()
    hm.set_data(np.zeros((N - 1, N - 1), np.float32), (0, 1), labels[:N - 1], labels[:N - 1])
    assert hm.zoom.view() == pytest.approx((0, N - 1, 0, N - 1), abs=1e-6)  # whole: follows the matrix


@pytest.mark.slow
def test_rows_a_longer_text_adds_and_a_zoomed_view_are_coloured(qtbot, tmp_path, tiny_tokenizer, dialogs):
    """pyqtgraph's ImageItem kept the first view rectangle it computed: a map that grew showed its
    new rows and columns blank (grey) for good, and a zoom went on drawing the old cells."""
    from explorer.qt.plots.heatmap import MASKED_COLOUR
    from explorer_helpers import pixel_at_cell

    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=16))
    s, hm = window.session, window.panels["attention"].weights
    for text in ("the cat", "the", "the cat sat on the"):
        s.set_text(text)
        QApplication.processEvents()
    weights = s.trace.blocks[0].attn_weights[0]
    cmap = hm.bar.colorMap()
    for i in range(5):
        for j in range(i + 1):  # each cell a key the query sees: its weight's colour
            got, want = pixel_at_cell(hm, i, j), cmap.map(np.array([weights[i, j]]), mode="qcolor")[0]
            assert got.name() != MASKED_COLOUR
            assert max(abs(got.red() - want.red()), abs(got.green() - want.green()), abs(got.blue() - want.blue())) <= 8
    s.set_text(text_of(16))
    QApplication.processEvents()
    for _ in range(6):
        _wheel(hm, _view_point(hm, 10.5, 10.5), 1)
    hm.graphics.grab()
    y0, y1, x0, x1 = hm.zoom.view()
    r0, r1, c0, c1 = hm.image.part[:4]
    assert y1 - y0 < 12 and (r0, r1, c0, c1) == (int(y0), int(np.ceil(y1)), int(x0), int(np.ceil(x1)))
