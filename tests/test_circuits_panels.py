"""The circuits views in the app: the Why panel's Patching tab, the attention panel's head types, and
the Training panel's head-type curves with the lesson on the step where an induction head forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint
from explorer.core import patching_view
from explorer.core.head_types import formation_paragraph, head_tooltip
from explorer_helpers import make_window
from model import load_checkpoint
from model.core.interventions import Interventions
from model.explain.heads import head_scores, text_head_scores
from model.explain.patching import activation_patching
from model.training.heads_over_training import head_types_over_training, induction_formation
from model.training.snapshots import load_snapshots

CLEAN, CORRUPTED = "the cat sat on the mat .", "the dog sat on the mat ."


@pytest.fixture
def window(qtbot, tmp_path, tiny_tokenizer, dialogs):
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=16))
    w.session.set_text(CLEAN)
    return w


def _front(window, name):
    window.docks[name].raise_()
    QApplication.processEvents()
    return window.panels[name]


def test_the_patching_tab_draws_the_sweep_of_the_two_texts(window, qtbot):
    why = _front(window, "why")
    why.tabs.setCurrentIndex(3)
    view = why.patching
    view.corrupted.setText(CORRUPTED)
    view.corrupted.returnPressed.emit()
    qtbot.waitUntil(lambda: view.result is not None, timeout=10000)
    s = window.session
    expected = activation_patching(s.model, s.trace.token_ids.tolist(), s.tokenizer.encode(CORRUPTED).ids)
    for key, hm in view.maps.items():
        np.testing.assert_allclose(hm.data, expected.maps[key], atol=1e-6)
    assert "Identity check passed" in view.status.text() and "cat/dog" in view.maps["resid_pre"].col_labels[1]
    # Heads switched off: the sweep runs again with them off in every run.
    off = Interventions(ablate=[(1, 0)])
    ablated = activation_patching(s.model, s.trace.token_ids.tolist(), s.tokenizer.encode(CORRUPTED).ids, base=off)
    assert not np.isclose(ablated.clean, expected.clean)
    s.set_interventions(off)
    qtbot.waitUntil(lambda: view.result is not None and np.isclose(view.result.clean, ablated.clean), timeout=10000)


def test_the_patching_tab_says_why_it_cannot_draw(window, qtbot, monkeypatch):
    why = _front(window, "why")
    why.tabs.setCurrentIndex(3)
    view = why.patching
    view.corrupted.setText("the dog sat on a red mat .")
    view.corrupted.returnPressed.emit()
    qtbot.waitUntil(lambda: "same number of tokens" in view.status.text(), timeout=10000)
    assert view.result is None and view.maps["resid_pre"].data.size == 0
    real = patching_view.activation_patching

    def broken(*args, **kwargs):  # a forward whose rows differ: the identity check must catch it
        r = real(*args, **kwargs)
        return type(r)(**{**r.__dict__, "identity_error": 3e-4})

    monkeypatch.setattr(patching_view, "activation_patching", broken)
    view.corrupted.setText(CORRUPTED)
    view.corrupted.returnPressed.emit()
    qtbot.waitUntil(lambda: "identity check failed" in view.status.text(), timeout=10000)
    assert view.result is None and view.maps["head_out"].data.size == 0


def test_the_head_types_grid_shows_the_probe_scores_and_picks_a_head(window, qtbot):
    panel = _front(window, "attention")
    panel.all_heads.setChecked(True)
    panel.all_heads_tabs.setCurrentIndex(1)
    view = panel.head_types
    qtbot.waitUntil(lambda: view.probe is not None, timeout=10000)
    s = window.session
    expected = head_scores(s.model, s.tokenizer)
    np.testing.assert_allclose(view.grid.data, expected.induction, atol=1e-6)
    assert view.grid.describe_cell(1, 0) == head_tooltip(expected.by_type, 1, 0, "on the probe")
    view.kind_box.setCurrentIndex(view.kind_box.findData("previous_token"))
    np.testing.assert_allclose(view.grid.data, expected.previous_token, atol=1e-6)
    view.source_box.setCurrentIndex(view.source_box.findData("text"))
    qtbot.waitUntil(lambda: view.text_scores is not None, timeout=10000)
    np.testing.assert_allclose(view.grid.data, text_head_scores(s.trace).previous_token, atol=1e-6)
    view.grid.sig_cell_clicked.emit(1, 1)
    assert (s.layer, s.head) == (1, 1)
    probe = s.model.trace(expected.token_ids.tolist())
    np.testing.assert_allclose(view.pattern.data, probe.blocks[1].attn_weights[1], atol=1e-6)


def test_a_head_type_is_named_only_when_its_score_is_high():
    scores = {"previous_token": np.array([[0.9, 0.1]]), "duplicate_token": np.array([[0.0, 0.2]]),
              "induction": np.array([[0.05, np.nan]])}
    assert head_tooltip(scores, 0, 0, "on the probe").startswith("L0H0 on the probe: a previous-token head")
    assert "no clear type" in head_tooltip(scores, 0, 1, "on this text") and "induction n/a" in head_tooltip(
        scores, 0, 1, "x")


def test_the_training_panel_draws_every_heads_type_over_the_snapshots(qtbot, tmp_path, tiny_tokenizer, dialogs):
    from model import save_checkpoint

    folder = tmp_path / "run-snapshots"
    folder.mkdir()
    for i, step in enumerate((0, 5, 20)):
        ck = make_tiny_checkpoint(tiny_tokenizer, seed=50 + i, context_length=16)
        save_checkpoint(folder / f"step-{step:06d}.safetensors", ck.model, ck.tokenizer, training={"steps": step})
    final = make_tiny_checkpoint(tiny_tokenizer, seed=53, context_length=16)
    save_checkpoint(tmp_path / "run.safetensors", final.model, final.tokenizer,
                    training={"steps": 20, "snapshot_dir": "run-snapshots"})
    w = make_window(qtbot, tmp_path, load_checkpoint(tmp_path / "run.safetensors"))
    w.session.set_text(CLEAN)
    panel = _front(w, "training")
    qtbot.waitUntil(lambda: panel.head_curves.curves is not None, timeout=20000)
    got = panel.head_curves
    assert got.drawn is None and got.second.yData is None  # behind the curves' tab: drawn once shown
    panel.tabs.setCurrentWidget(got)
    assert got.drawn is got.curves
    expected = head_types_over_training(load_snapshots(folder).snapshots)
    np.testing.assert_array_equal(got.curves.steps, [0, 5, 20])
    np.testing.assert_allclose(got.curves.induction, expected.induction, atol=1e-6)
    layer, head = expected.best_head("induction")
    np.testing.assert_allclose(got.best["induction"].yData, expected.induction[:, layer, head], atol=1e-6)
    np.testing.assert_allclose(got.second.yData, expected.second_half_loss, atol=1e-6)
    assert got.lesson.text() == formation_paragraph(expected)
    panel.slider.setValue(1)
    assert got.lines[0].value() == pytest.approx(np.log10(6))


SHIPPED_2L = Path(__file__).resolve().parents[1] / "assets" / "tinystories-2L4H-induction.safetensors"


@pytest.mark.skipif(not SHIPPED_2L.exists(), reason="the 2-layer model is not shipped")
def test_the_shipped_2_layer_model_forms_an_induction_head():
    """Best induction score below 0.1 early, above 0.4 at the end; second copy >= 1 nat better at the end."""
    snaps = load_snapshots(SHIPPED_2L.parent / load_checkpoint(SHIPPED_2L).training["snapshot_dir"])
    c = head_types_over_training(snaps.snapshots)
    assert np.nanmax(c.induction[0]) < 0.1 and np.nanmax(c.induction[1]) < 0.1
    assert np.nanmax(c.induction[-1]) > 0.4
    assert c.first_half_loss[-1] - c.second_half_loss[-1] >= 1.0
    f = induction_formation(c)
    assert f is not None and f.induction[1] - f.induction[0] > 0.1
    assert f"step {f.after_step:,}" in formation_paragraph(c)


def test_the_screenshot_option_tab_brings_a_panels_tab_forward(window):
    from explorer.app import _show_tab

    panel = window.panels["training"]
    assert _show_tab(panel, "Head types") and panel.tabs.currentWidget() is panel.head_curves
    assert not _show_tab(panel, "No such tab") and panel.tabs.currentWidget() is panel.head_curves
