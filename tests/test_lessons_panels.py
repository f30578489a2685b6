"""The lessons' panels (pytest-qt, offscreen): they show part 1's numbers for the session's state,
follow its changes both ways, and render through ``--screenshot --panel NAME``."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from PySide6.QtCore import QModelIndex
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint

from explorer.core.lessons import formula
from explorer.core.lessons import positional
from explorer.core.lessons import variants
from explorer.qt.panels import panel_names
from explorer.qt.panels.lessons.formula import FormulaPanel
from explorer.qt.panels.lessons.positional.panel import PositionalPanel
from explorer.qt.panels.lessons.variants.panel import VariantsPanel, side_by_side
from explorer.qt.session import Session
from explorer_helpers import shown, sync_session
from conftest import SAFETY_NET_S

TEXT = "the cat sat on the mat ."


@pytest.fixture
def session(qtbot, tiny_checkpoint):
    return sync_session(tiny_checkpoint, TEXT)


def _show(qtbot, panel):
    return shown(qtbot, panel, 1200, 800, exposed=False)


def test_panels_are_registered():
    assert {"positional", "formula", "variants"} <= set(panel_names())


# --- positional --------------------------------------------------------------------------------

def _order(session, perm):
    """The order as the panel runs it: equal tokens (TEXT has two "the") matched in order."""
    return positional.canonical_order(session.trace.token_ids, perm)


def test_positional_panel_shows_the_comparison(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    T = session.trace.n_tokens
    assert panel.keep_last.isChecked()  # the default: reverse all but the last token
    panel.keep_last.setChecked(False)
    expected = positional.compare_orders(session.model, session.trace.token_ids, positional.reverse(T),
                                         layer=0, head=0, causal=True, tokens=session.tokens)
    c = panel.comparison
    np.testing.assert_array_equal(c.perm, _order(session, positional.reverse(T)))
    np.testing.assert_array_equal(c.attn_delta, expected.attn_delta)
    np.testing.assert_array_equal(panel.maps[True, True].data, expected.run(True, True).attn_weights)
    assert panel.maps[False, True].row_labels[0].endswith(session.tokens[-1].strip())
    assert panel.table.rowCount() == T
    assert panel.table.item(2, 2).text() == f"{expected.attn_delta[0][2]:.2e}"
    assert expected.sentence(True) in panel.sentence.text().replace("&#x27;", "'")
    assert panel.chips.order() == c.perm.tolist()


def test_positional_controls_follow_and_drive_the_session(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    panel.pe_box.setChecked(False)
    assert session.positional_encoding is False
    assert panel.warning.text().startswith("Positional encoding is off, but this model was trained with it")
    session.set_positional_encoding(True)
    assert panel.pe_box.isChecked() and panel.warning.text().startswith("This model was trained with")
    panel.causal_box.setChecked(False)
    assert session.causal is False and panel.comparison.causal is False
    assert panel.comparison.attn_delta[0].max() < 1e-5  # PE off + mask off: a set
    session.set_causal(True)
    assert panel.causal_box.isChecked() and panel.comparison.causal


def test_positional_reorderings_and_keep_last(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    T = session.trace.n_tokens
    assert panel.comparison.perm.tolist() == _order(session, positional.reverse(T, keep_last=True)).tolist()
    # The tiny model has 2 layers: with the mask the order leaks into the last prediction.
    assert panel.comparison.last_tv[0] > 1e-6 and "leaks" in panel.comparison.sentence(False)
    panel.buttons["shuffle"].click()
    first = panel.comparison.perm.copy()
    panel.buttons["again"].click()
    assert not np.array_equal(first, panel.comparison.perm) and panel.comparison.perm[-1] == T - 1
    panel.i_box.setValue(1)
    panel.j_box.setValue(4)
    panel.buttons["swap"].click()
    assert panel.comparison.perm.tolist() == positional.swap(T, 1, 4).tolist()
    panel.buttons["rotate"].click()
    assert panel.comparison.perm.tolist() == _order(session, positional.rotate(T, 1, keep_last=True)).tolist()


def test_dragging_a_chip_reorders(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    panel.buttons["swap"].click()  # swap 0 with 0: the identity
    assert "nothing can change" in panel.comparison.sentence(True)
    panel.chips.model().moveRows(QModelIndex(), 0, 1, QModelIndex(), 3)  # what a drop does
    assert panel.mode[0] == "custom"
    assert panel.comparison.perm.tolist()[:3] == [1, 2, 0]
    assert panel.chips.order() == panel.comparison.perm.tolist()


def test_positional_follows_text_and_selection(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    session.set_layer(1)
    session.set_head(1)
    assert (panel.comparison.layer, panel.comparison.head) == (1, 1)
    session.set_text("the dog")
    assert panel.table.rowCount() == 2 and len(panel.comparison.perm) == 2
    session.set_text("")
    assert panel.comparison is None and panel.table.rowCount() == 0


def test_chips_show_the_current_token_texts(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))
    session.set_text("the cat sat")
    assert [panel.chips.item(r).text().split()[0] for r in range(3)] == ["cat", "the", "sat"]  # reversed, last kept
    session.set_text("the dog sat")  # the same count and order, another token in the middle
    assert [panel.chips.item(r).text().split()[0] for r in range(3)] == ["dog", "the", "sat"]
    panel.buttons["rotate"].click()
    session.set_text("a dog sat")
    assert [panel.chips.item(r).text().split()[0] for r in range(3)] == ["dog", "a", "sat"]


def test_swapping_two_equal_tokens_changes_nothing(qtbot, session):
    panel = _show(qtbot, PositionalPanel(session))  # "the cat sat on the mat ."
    panel.i_box.setValue(0)
    panel.j_box.setValue(4)
    panel.buttons["swap"].click()
    c = panel.comparison
    assert c.is_identity and c.attn_delta.max() == 0 and c.last_tv.max() == 0
    assert "nothing can change" in panel.sentence.text() and "changed" not in panel.sentence.text()


def test_a_reversal_with_repeated_tokens_says_equal_tokens_keep_their_order(qtbot, session):
    """Reversing "the cat sat on the mat ." keeps the two "the" in their order (canonical_order), and
    nothing on screen said so: the reversed map showed them uncrossed with no word why."""
    panel = _show(qtbot, PositionalPanel(session))  # reversed, the last token kept, by default
    ids, T = session.trace.token_ids, session.trace.n_tokens
    asked = positional.reverse(T, keep_last=True)
    c = panel.comparison
    assert [int(i) for i in ids[asked]] == [int(i) for i in ids[c.perm]]  # the same sequence ...
    assert not np.array_equal(asked, c.perm)  # ... with the two "the" matched in order, not crossed
    the = [p for p, t in enumerate(session.tokens) if t.strip() == "the"]
    assert the == [0, 4] and c.perm.tolist().index(0) < c.perm.tolist().index(4)
    text = panel.sentence.text()
    assert "Repeated tokens: &#x27;the&#x27; at 0 and 4" in text and "keeps them in their order" in text
    session.set_text("the cat sat on a mat .")  # no token twice: nothing to say
    assert panel.comparison.repeats == "" and "Repeated" not in panel.sentence.text()


@pytest.mark.slow
def test_a_slow_comparison_runs_on_the_worker_and_waits_for_update(qtbot, tiny_checkpoint, monkeypatch):
    from explorer.qt.panels.lessons.positional import panel as panel_module

    monkeypatch.setattr(panel_module, "SLOW_MS", -1.0)  # every comparison counts as too slow to follow edits
    threads = []
    job = positional.compare_job
    monkeypatch.setattr(positional, "compare_job", lambda ck, r: threads.append(threading.current_thread()) or
                        job(ck, r))
    s = Session(compute_mode="async")
    s.set_checkpoint(tiny_checkpoint)
    s.set_text(TEXT)
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None)
    panel = _show(qtbot, PositionalPanel(s))  # a new panel asks once
    qtbot.waitUntil(lambda: panel.comparison is not None and not s.busy)
    assert not panel.update_button.isHidden()
    s.set_text("the dog sat")
    qtbot.waitUntil(lambda: not s.busy and s.trace.n_tokens == 3)
    assert len(panel.comparison.perm) != 3 and "out of date" in panel.update_button.text()
    assert panel.chips.count() == 3  # the chips show the current tokens at once
    panel.update_button.click()
    qtbot.waitUntil(lambda: len(panel.comparison.perm) == 3)
    assert panel.update_button.text() == "Update"
    panel.buttons["rotate"].click()  # reordering is always computed
    qtbot.waitUntil(lambda: panel.comparison.perm.tolist() == [1, 0, 2])
    assert threads and threading.main_thread() not in threads
    s.shutdown()


def test_switching_to_a_slow_model_keeps_the_comparison_off_the_gui_thread(qtbot, tiny_tokenizer, monkeypatch):
    from explorer_helpers import fake_clock

    slow = make_tiny_checkpoint(tiny_tokenizer, seed=5)
    fake_clock(monkeypatch, slow, ms_per_token=20.0)  # the session's clock: the first model takes no time
    s = Session(compute_mode="auto")
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))
    s.set_text(TEXT)
    panel = _show(qtbot, PositionalPanel(s))
    assert panel.comparison is not None and not s.busy and panel.update_button.isHidden()  # fast: at once
    threads = []
    job = positional.compare_job
    monkeypatch.setattr(positional, "compare_job", lambda ck, r: threads.append(threading.current_thread()) or
                        job(ck, r))
    s.set_checkpoint(slow)
    assert not panel.update_button.isHidden()  # the slow flag is the new model's, at once
    assert "out of date" in panel.update_button.text()
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None)
    assert threading.main_thread() not in threads
    panel.update_button.click()
    qtbot.waitUntil(lambda: bool(threads) and not s.busy
                    and panel.comparison.token_ids.tolist() == s.trace.token_ids.tolist())
    assert threading.main_thread() not in threads
    s.shutdown()


@pytest.mark.slow
def test_open_twin_goes_through_the_window_s_open_path(qtbot, tmp_path, tiny_checkpoint, dialogs, monkeypatch):
    from explorer_helpers import make_window
    from explorer.qt.panels.lessons.positional import panel as panel_module

    monkeypatch.setattr(panel_module, "TWIN", tmp_path / "missing-nope.safetensors")
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    before = window.session.checkpoint
    window.panels["positional"].open_twin()
    assert dialogs.errors and "missing-nope.safetensors" in dialogs.errors[0][1]
    assert window.session.checkpoint is before


@pytest.mark.slow
def test_open_twin_loads_the_model_without_positional_encoding(qtbot, tmp_path, tiny_checkpoint, dialogs,
                                                               monkeypatch, tiny_tokenizer):
    from explorer_helpers import make_window
    from explorer.qt.panels.lessons.positional import panel as panel_module
    from model import save_checkpoint

    twin = tmp_path / "tinystories-1L1H-nope.safetensors"
    nope = make_tiny_checkpoint(tiny_tokenizer, positional="none")
    save_checkpoint(twin, nope.model, tiny_tokenizer, training={"note": "test twin"})
    monkeypatch.setattr(panel_module, "TWIN", twin)
    tiny_checkpoint.path = tmp_path / "tinystories-1L1H.safetensors"  # the twin is offered beside this model only
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    window.session.set_text(TEXT)
    window.docks["positional"].raise_()
    panel = window.panels["positional"]
    qtbot.waitUntil(panel.twin_button.isVisible)
    panel.twin_button.click()
    s = window.session
    assert s.config.positional == "none" and s.checkpoint.path == twin and not panel.twin_button.isVisible()
    assert str(twin.resolve()) in window.files.recent_files()  # opened as a file is, through the one path
    assert "trained without positional encoding" in panel.warning.text()
    assert panel.comparison.sentence(True).startswith("This model has no positional encoding")
    assert not dialogs.errors


# --- formula -----------------------------------------------------------------------------------

def test_formula_panel_shows_the_steps_and_follows_selection(qtbot, session):
    panel = _show(qtbot, FormulaPanel(session))
    T = session.trace.n_tokens
    assert panel.steps.position == T - 1
    session.set_layer(1)
    session.set_head(1)
    session.set_position(3)
    st = formula.attention_steps(session.trace, 1, 1, 3)
    assert (panel.steps.layer, panel.steps.head, panel.steps.position) == (1, 1, 3)
    assert panel.table.rowCount() == 4
    assert [panel.table.item(r, 5).text() for r in range(4)] == [f"{w:.6f}" for w in st.weights]
    np.testing.assert_array_equal(panel.k_map.data, st.k.astype(np.float32))
    np.testing.assert_array_equal(panel.out_map.data[1], st.trace_out)
    assert "they agree" in panel.agreement.text()
    assert panel.table.columnCount() == 6  # d_head = 8: vectors as strips, and in each row's tooltip
    assert panel.table.item(0, 2).toolTip().startswith("k_0 = [")
    panel.position_box.setValue(1)
    assert session.position == 1 and panel.table.rowCount() == 2
    session.set_causal(False)
    assert panel.table.rowCount() == T and "mask off" in panel.header.text()
    session.set_text("")
    assert panel.steps is None and panel.table.rowCount() == 0


def test_formula_table_is_filled_again_after_an_empty_text(qtbot, session):
    """The table keeps what its cells show, to set only new ones; emptied, it makes and sets them all again."""
    panel = _show(qtbot, FormulaPanel(session))
    T = session.trace.n_tokens
    session.set_text("")
    assert panel.table.rowCount() == 0
    session.set_text(TEXT)  # the same rows, columns and query as before the empty text
    assert panel.steps.position == T - 1 and panel.table.rowCount() == T
    assert [panel.table.item(r, 0).text() for r in range(T)] == [str(j) for j in range(T)]
    assert [panel.table.item(r, 5).text() for r in range(T)] == [f"{w:.6f}" for w in panel.steps.weights]


def test_formula_strips_keep_their_rows_in_a_short_panel(qtbot, session):
    from explorer.qt.panels.lessons.formula import ROW_PX

    panel = _show(qtbot, FormulaPanel(session))
    panel.resize(880, 350)  # about its size tabbed in the main window's right-hand dock area
    session.set_text(TEXT + " " + TEXT)  # cropped to context_length = 8 keys for the last query
    QApplication.processEvents()
    rows = panel.k_map.data.shape[0]
    assert rows == session.trace.n_tokens == 8
    for hm in (panel.k_map, panel.v_map, panel.av_map):
        assert hm.plot.getViewBox().height() >= 0.75 * ROW_PX * rows  # the view gets most of the strip
    assert panel.scroll.verticalScrollBar().maximum() > 0  # the panel scrolls instead of squashing
    left, right = panel.split.sizes()
    assert left >= panel.table.horizontalHeader().length() - 2  # every table column is in view
    assert not panel.table.horizontalScrollBar().isVisible()


# --- variants ----------------------------------------------------------------------------------

def test_variants_panel_shows_each_variant(qtbot, session):
    panel = _show(qtbot, VariantsPanel(session))
    session.set_position(2)
    expected = variants.all_variants(session.model, session.trace, 0, 0, 2)
    for key, v in zip(variants.KEYS, expected):
        panel.select(key)
        assert panel.current().key == key and panel.difference.text() == v.difference
        if key == "multihead":
            np.testing.assert_allclose(panel.weights.data, side_by_side(v.weights), atol=1e-7)
            assert panel.mixed.isVisible()
            np.testing.assert_allclose(panel.mixed.data, v.mixed, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_allclose(panel.weights.data, v.weights[0], atol=1e-7)
            assert not panel.mixed.isVisible()
    session.set_head(1)
    assert "all 2 heads" in panel.header.text()
    panel.select("causal")
    np.testing.assert_allclose(panel.weights.data, session.trace.blocks[0].attn_weights[1], atol=1e-6)
    session.set_text("")
    assert panel.current() is None


def test_each_variant_s_output_axis_says_the_space_its_vectors_live_in(qtbot, session, tiny_tokenizer):
    """Variant 1's z_i = Σ_j a_ij x_j are input vectors (width d_model) but its axis said "dimension
    (d_head)"; variant 4's header said "all 1 heads" for a one-head model."""
    panel = _show(qtbot, VariantsPanel(session))
    cfg = session.config
    assert cfg.d_model != cfg.d_head  # the tiny model tells the two apart
    width = {}
    for key in variants.KEYS:
        panel.select(key)
        width[key] = panel.outputs.data.shape[1]
        title = panel.outputs.titles["col"]
        assert title == f"dimension ({variants.output_space(key, cfg.n_heads)})"
    assert (width["simplified"], width["self"], width["causal"], width["multihead"]) == (
        cfg.d_model, cfg.d_head, cfg.d_head, cfg.n_heads * cfg.d_head)
    panel.select("simplified")
    assert panel.outputs.titles["col"] == "dimension (d_model)" and "input space" in panel.difference.text()
    panel.select("self")
    assert panel.outputs.titles["col"] == "dimension (d_head)"
    one = sync_session(make_tiny_checkpoint(tiny_tokenizer, n_heads=1, n_layers=1), TEXT)
    panel = _show(qtbot, VariantsPanel(one))
    panel.select("multihead")
    assert "the 1 head " in panel.header.text() and "heads" not in panel.header.text()
    assert panel.outputs.titles["col"] == "dimension (d_head)"
    assert variants.heads_phrase(4) == "all 4 heads"


# --- screenshots -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["positional", "formula", "variants"])
def test_screenshot_of_each_lesson_panel(tmp_path, name):
    out = tmp_path / f"{name}.png"
    cmd = [sys.executable, "-m", "explorer", "--screenshot", str(out), "--panel", name,
           "--size", "900x600", "--text", "once upon a time there was a little girl"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert run.returncode == 0, run.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (900, 600)
    colours = {image.pixel(x, y) for x in range(0, 900, 15) for y in range(0, 600, 15)}
    assert len(colours) > 20  # not blank
