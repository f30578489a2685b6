"""The Why panel (pytest-qt, offscreen): its numbers are explain()'s, the target is chosen from the
next-token panel, heads switched off here or in the all-heads grid change every trace exactly as
Interventions(ablate=...) does, the what-if knobs and the score terms, every architecture, and no
model work on the GUI thread while the model is slow."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint
from explorer.core import why
from explorer.qt.widgets.explain_target import ExplainTarget
from explorer.qt.panels.why.panel import WhyPanel
from explorer.qt.session import Session
from explorer_helpers import fake_clock, make_window, shown, sync_session
from model.checkpoint import load_any
from model.explain import explain, what_if
from model.core.interventions import Interventions

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat"


@pytest.fixture
def session(qtbot, tiny_checkpoint):
    return sync_session(tiny_checkpoint, TEXT)


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    w = make_window(qtbot, tmp_path, tiny_checkpoint)
    w.session.set_text(TEXT)
    return w


def show(window, name):
    window.docks[name].raise_()
    QApplication.processEvents()
    return window.panels[name]


def click_view(qtbot, graphics, plot, x, y, button=Qt.MouseButton.LeftButton, modifier=Qt.KeyboardModifier.NoModifier):
    """A real mouse click at view coordinates (x, y) of ``plot`` in ``graphics``."""
    pos = graphics.mapFromScene(plot.getViewBox().mapViewToScene(QPointF(x, y)))
    qtbot.mouseClick(graphics.viewport(), button, modifier, pos)


def test_the_panel_shows_the_numbers_of_explain(qtbot, session):
    panel = shown(qtbot, WhyPanel(session))
    ex = explain(session.model, session.trace, top_k=5)
    got = panel.result.explanation
    assert got.target_id == ex.target_id and got.position == session.trace.n_tokens - 1
    np.testing.assert_allclose(panel.bars.values, np.stack([ex.attention.mean(axis=(0, 1)), ex.dla.sources,
                                                            ex.leave_one_out]), equal_nan=True)
    assert panel.lens.columnCount() == 5  # embeddings, then attention and MLP of 2 layers
    for c, stage in enumerate(ex.logit_lens):
        assert f"KL {stage.kl_to_final:.3f}" in panel.lens.horizontalHeaderItem(c).text()
        assert f"{stage.kl_to_final:.3f} nats" in panel.lens.horizontalHeaderItem(c).toolTip()
        assert panel.lens.item(5, c).text() == f"p = {stage.target_prob:.3f}"
    top = session.tokenizer.display(ex.logit_lens[-1].top_k[0][0])
    assert panel.lens.item(0, 4).text().startswith(top)
    assert f"(logit {ex.logit:.3f})" in panel.summary.text()
    assert f"the model's logit is {ex.logit:.4f}" in panel.sums.text()
    assert "attention a_ij, mean over 2 layers × 2 heads" in panel.attention_label.text()
    session.set_position(2)  # a selected query: explained there
    assert panel.result.explanation.position == 2 and panel.bars.values.shape == (3, 3)


def test_one_token_no_tokens_and_no_causal_mask(qtbot, session):
    panel = shown(qtbot, WhyPanel(session))
    session.set_text("the")
    ex = panel.result.explanation
    assert ex.n_sources == 1 and "can only attend to itself" in panel.sink.text()
    assert "Too few earlier tokens" in panel.disagree.text() and panel.bars.values.shape == (3, 1)
    session.set_text("")
    assert panel.result is None and "type some text" in panel.summary.text()
    session.set_text(TEXT)
    session.set_causal(False)
    session.set_position(1)  # every key is a source; leave-one-out for the later ones too
    ref = explain(session.model, session.trace, 1)
    assert panel.result.explanation.n_sources == 6 and not ref.causal
    np.testing.assert_allclose(panel.bars.values[2], ref.leave_one_out, equal_nan=True)
    assert np.isnan(panel.bars.values[2, 1]) and "(query)" in panel.bars.rows[1]


def test_the_target_is_chosen_in_the_panel_and_kept_while_typing(qtbot, session):
    panel = shown(qtbot, WhyPanel(session))
    top = panel.result.explanation.logit_lens[-1].top_k
    panel.target_box.activated.emit(3)  # item 0 is "most likely", then the top 5
    assert panel.result.explanation.target_id == top[2][0]
    session.set_text(TEXT + " on")
    assert panel.result.explanation.target_id == top[2][0]  # kept
    panel.target_box.setEditText("dog")
    panel.target_box.lineEdit().returnPressed.emit()
    assert panel.result.explanation.target_id == session.tokenizer.token_to_id("dog")
    panel.target_box.setEditText("zebra")
    panel.target_box.lineEdit().returnPressed.emit()
    assert "not one token" in panel.status.text()
    panel.top1_button.click()
    assert ExplainTarget.of(session).target is None
    assert panel.result.explanation.target_id == int(np.argmax(session.trace.logits[-1]))


@pytest.mark.slow
def test_the_next_token_panel_chooses_the_target(qtbot, window):
    s, target = window.session, ExplainTarget.of(window.session)
    bars = show(window, "next-token")
    chosen, p = int(bars.top.ids[2]), float(bars.top.probs[2])
    click_view(qtbot, bars.graphics, bars.plot, p / 2, 2, modifier=Qt.KeyboardModifier.ShiftModifier)
    assert target.target == chosen and s.text == TEXT  # explained, not appended
    panel = window.panels["why"]
    QApplication.processEvents()
    assert panel.is_shown() and panel.result.explanation.target_id == chosen  # brought forward
    show(window, "next-token")
    click_view(qtbot, bars.graphics, bars.plot, float(bars.top.probs[1]) / 2, 1, button=Qt.MouseButton.RightButton)
    append, explain_it = bars.bar_menu.actions()
    assert "Explain" in explain_it.text() and "Append" in append.text()
    other = int(bars.top.ids[1])
    explain_it.trigger()
    assert target.target == other
    bars.bar_menu.close()
    show(window, "next-token")
    click_view(qtbot, bars.graphics, bars.plot, float(bars.top.probs[0]) / 2, 0)  # a plain click still appends
    assert s.text != TEXT and s.trace.n_tokens == 7


@pytest.mark.slow
def test_switching_a_head_off_in_the_panel_changes_every_trace(qtbot, window):
    s, model = window.session, window.session.model
    panel = show(window, "why")
    panel.tabs.setCurrentIndex(1)
    panel.heads.buttons[1, 0].click()
    off = Interventions(ablate=[(1, 0)])
    assert s.interventions == off and s.trace.interventions == off
    np.testing.assert_array_equal(s.trace.logits, model.trace(s.trace.token_ids.tolist(), interventions=off).logits)
    assert window.interventions_status.isVisible() and window.interventions_status.label.text() == "heads off: L1H0"
    assert panel.heads.buttons[1, 0].isChecked() and "off" in panel.heads.buttons[1, 0].text()
    assert panel.result.plain is not None and "With every head on" in panel.ablation.text()
    qtbot.keyClicks(window.panels["tokens"].editor, " on")  # typing keeps it
    assert s.trace.n_tokens == 7 and s.trace.interventions == off
    np.testing.assert_array_equal(s.trace.logits, model.trace(s.trace.token_ids.tolist(), interventions=off).logits)
    s.set_layer(1)
    s.set_head(0)
    assert "switched off" in show(window, "formula").agreement.text()
    assert "L1H0 is switched off" in show(window, "attention").off_note.text()
    window.interventions_status.restore_button.click()  # one click restores
    assert s.interventions.changes_nothing and s.trace.interventions is None
    np.testing.assert_array_equal(s.trace.logits, model.trace(s.trace.token_ids.tolist()).logits)
    assert not window.interventions_status.isVisible()


def _tile(grid, layer, head):
    side = grid.tile - grid.GAP
    return head * grid.tile + side / 2, layer * grid.tile + side / 2


@pytest.mark.slow
def test_the_all_heads_grid_switches_heads_off(qtbot, window):
    s, model = window.session, window.session.model
    attention = show(window, "attention")
    attention.all_heads.setChecked(True)
    grid = attention.grid
    click_view(qtbot, grid, grid.plot, *_tile(grid, 1, 1), modifier=Qt.KeyboardModifier.ControlModifier)
    assert s.interventions.ablate == ((1, 1),) and grid.off == ((1, 1),) and len(grid._shades) == 1
    np.testing.assert_array_equal(s.trace.logits,
                                  model.trace(s.trace.token_ids.tolist(), interventions=Interventions(ablate=[(1, 1)])).logits)
    assert (s.layer, s.head) == (0, 0)  # Ctrl+click does not select
    click_view(qtbot, grid, grid.plot, *_tile(grid, 0, 1), button=Qt.MouseButton.RightButton)
    switch, restore = grid.menu.actions()
    assert switch.text() == "Switch L0H1 off" and restore.isEnabled()
    switch.trigger()
    assert s.interventions.ablate == ((0, 1), (1, 1))
    grid.menu.close()
    restore.trigger()
    assert s.interventions.changes_nothing and grid.off == ()
    click_view(qtbot, grid, grid.plot, *_tile(grid, 1, 0))  # a plain click selects, as before
    assert (s.layer, s.head) == (1, 0) and s.interventions.changes_nothing


def test_what_if_knobs_re_run_the_model_in_the_panel_only(qtbot, session):
    panel = shown(qtbot, WhyPanel(session))
    panel.tabs.setCurrentIndex(1)
    panel.tau_box.setValue(0.5)
    ex, tr = panel.result.explanation, session.trace
    ref = what_if(session.model, tr, ex.position, ex.target_id, temperature=0.5)
    rows = [panel.what_ifs.table.item(r, 0).text() for r in range(4)]
    assert rows == ["baseline", "no 1/√d_head", "τ = 0.5", "causal mask off"]
    assert panel.what_ifs.table.item(2, 3).text() == f"{ref.target_prob:.3f}"
    off = what_if(session.model, tr, ex.position, ex.target_id, causal=False)
    assert panel.what_ifs.table.item(3, 1).text() == f"{off.mean_entropy:.3f}"
    np.testing.assert_allclose(panel.what_ifs.curves[2].yData, ref.attn_entropy[0, 0])
    assert session.trace is tr and tr.interventions is None  # the session's model is unchanged


def test_the_score_terms_add_up_to_the_scores(qtbot, session):
    session.set_head(1)
    panel = shown(qtbot, WhyPanel(session))
    assert panel.terms.maps["rest"].data.size == 0  # a hidden tab is drawn when shown
    panel.tabs.setCurrentIndex(2)
    maps = panel.terms.maps
    total = sum(maps[name].data.astype(np.float64) for name in ("token_token", "token_pos", "pos_token",
                                                                  "pos_pos", "rest"))
    scores = session.trace.blocks[0].attn_scores[1]
    allowed = session.trace.blocks[0].attn_mask
    np.testing.assert_allclose(total[allowed], scores[allowed], atol=1e-5)
    assert np.isnan(maps["scores"].data[~allowed]).all() and np.isnan(total[~allowed]).all()
    shares = panel.result.explanation.score_terms.shares
    assert f"{100 * shares['pos_pos']:.1f} %" in maps["pos_pos"].plot.titleLabel.text
    assert not panel.terms.holder.isHidden() and "head 1" in panel.terms.note.text()
    # the map shows attn_scores, q·k/√d_head: its title said "scores q·k"
    scale, d_head = session.trace.blocks[0].attn_scale, session.trace.blocks[0].q.shape[-1]
    assert scale == pytest.approx(1 / np.sqrt(d_head))
    assert maps["scores"].plot.titleLabel.text == "scores q_i·k_j/√d_head (layer 0)"
    assert "every score q_i·k_j/√d_head is the sum" in panel.terms.note.text()


@pytest.mark.parametrize("positional, words", [("rope", "does not apply to RoPE"), ("none", "no positional")])
def test_models_without_a_learned_table_get_the_note(qtbot, tiny_tokenizer, positional, words):
    s = Session(compute_mode="sync")
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, positional=positional))
    s.set_text(TEXT)
    panel = shown(qtbot, WhyPanel(s))
    panel.tabs.setCurrentIndex(2)
    assert panel.terms.holder.isHidden() and words in panel.terms.note.text()
    assert panel.lens.horizontalHeaderItem(0).text().startswith("embeddings e\n")  # no p_i in the input


ARCHITECTURES = [ROOT / "tests/fixtures/arch" / name for name in ("hf-gpt2", "hf-gpt-neo", "hf-llama", "llama2c-v0")]
ARCHITECTURES += [ROOT / "assets" / f"tinystories-{name}.safetensors" for name in ("1L1H", "1L1H-nope", "4L4H")]


@pytest.fixture(scope="module")
def arch_panel(qapp):
    s = Session(compute_mode="sync")
    panel = WhyPanel(s)
    panel.resize(1200, 900)
    panel.show()
    yield panel
    panel.close()
    panel.deleteLater()


@pytest.mark.parametrize("path", ARCHITECTURES, ids=lambda p: p.stem)
def test_every_architecture_is_explained_or_says_what_does_not_apply(arch_panel, path):
    s, panel = arch_panel.session, arch_panel
    s.set_text("")
    s.set_checkpoint(load_any(path))
    s.set_text("once upon a time there was a girl")
    ex = panel.result.explanation
    assert panel.status.styleSheet() == "" and ex.position == s.trace.n_tokens - 1
    assert ex.dla.other + ex.dla.sources.sum() == pytest.approx(ex.logit, abs=1e-3)
    assert panel.lens.columnCount() == 1 + 2 * s.config.n_layers
    assert len(panel.heads.buttons) == s.config.n_layers * s.config.n_heads
    panel.tabs.setCurrentIndex(1)  # the what-ifs: asked for when their tab is shown
    assert len(panel.result.what_ifs) == 4 and panel.what_ifs.table.rowCount() == 4
    panel.tabs.setCurrentIndex(2)
    note = panel.terms.note.text()
    panel.tabs.setCurrentIndex(0)
    if s.config.positional == "learned":
        assert not panel.terms.holder.isHidden() and "sum of these five maps" in note
        title = panel.terms.maps["scores"].plot.titleLabel.text  # as this model computes its scores
        unscaled = s.trace.blocks[0].attn_scale == 1  # GPT-Neo does not divide by √d_head
        assert ("not divided by √d_head" in title) == unscaled == (path.stem == "hf-gpt-neo")
        assert title.startswith("scores q_i·k_j" + ("" if unscaled else "/√d_head"))
    else:
        assert panel.terms.holder.isHidden() and "does not apply" in note


def _record_threads(monkeypatch, model) -> list[int]:
    calls: list[int] = []
    traced, forward = model.trace, model.forward

    def trace(*args, **kwargs):
        calls.append(threading.get_ident())
        return traced(*args, **kwargs)

    def run(*args, **kwargs):
        calls.append(threading.get_ident())
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "trace", trace)
    monkeypatch.setattr(model, "forward", run)
    return calls


@pytest.mark.slow
def test_a_slow_model_is_explained_off_the_gui_thread(qtbot, tiny_checkpoint, monkeypatch):
    fake_clock(monkeypatch, tiny_checkpoint, ms_per_token=5.0)  # the warm-up's 8 tokens: 40 ms, slow
    s = Session(compute_mode="auto")
    s.set_checkpoint(tiny_checkpoint)
    panel = shown(qtbot, WhyPanel(s))
    calls = _record_threads(monkeypatch, tiny_checkpoint.model)
    s.set_text(TEXT)
    qtbot.waitUntil(lambda: s.trace is not None and panel.drawn_trace is s.trace, timeout=10000)
    assert calls and threading.get_ident() not in calls  # every model run on the worker thread
    assert panel.result.explanation.logit == pytest.approx(float(s.trace.logits[-1].max()))
    s.shutdown()


def test_a_fast_model_is_traced_here_but_explained_on_the_worker(qtbot, tiny_checkpoint, monkeypatch):
    fake_clock(monkeypatch, tiny_checkpoint, ms_per_token=0.2)  # a trace of 6 tokens: 1.2 ms
    s = Session(compute_mode="auto")
    s.set_checkpoint(tiny_checkpoint)
    panel = shown(qtbot, WhyPanel(s))
    s.set_text(TEXT)
    assert not s.traces_off_gui_thread and s.trace.n_tokens == 6  # the trace: at once, on the GUI thread
    assert panel.waiting  # the job: 3 passes, off the GUI thread,
    assert panel.status.text() != "computing…"  # too short to be worth a note (it would only flash)
    # 3 passes at 0.2 ms a token over at least the warm-up's 8 tokens (a pass has a fixed cost too)
    assert s.expected_ms(why.job_passes(s.config, 6, 6, False, what_ifs=False)) == pytest.approx(3 * 0.2 * 8)
    qtbot.waitUntil(lambda: panel.drawn_trace is s.trace, timeout=10000)
    assert not panel.waiting and panel.result.explanation.position == 5
    s.shutdown()
