"""The model before attention in the app: every panel shown, those that need attention say why in one
sentence, the others draw its numbers; nothing raises, and a transformer opened after it is whole again."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QWidget

from explorer.core.applicability import WITHOUT_ATTENTION, not_applicable
from explorer_helpers import make_window
from model import Checkpoint
from model.checkpoint import save_checkpoint
from model.core.interventions import Interventions
from model.core.window import WindowConfig, WindowMLP
from model.generate import Sampling, generate

TEXT = "the cat sat on the mat . the dog"


@pytest.fixture
def window_checkpoint(tiny_tokenizer, tmp_path) -> Checkpoint:
    """A seeded tiny window model with the tiny tokenizer, saved and opened as a user would."""
    torch.manual_seed(3)
    model = WindowMLP(WindowConfig(vocab_size=tiny_tokenizer.vocab_size, context_length=8, d_model=16, d_mlp=12))
    path = tmp_path / "window.safetensors"
    save_checkpoint(path, model.eval(), tiny_tokenizer, training={"val_loss": 3.0})
    return path


def _show_every_panel(qtbot, window) -> None:
    for name, dock in window.docks.items():
        dock.show()
        dock.raise_()
        qtbot.wait_exposed(dock) if dock.isVisible() else None
        panel = window.panels[name]
        if hasattr(panel, "catch_up"):
            panel.catch_up()


def test_every_panel_opens_the_model_before_attention(qtbot, tmp_path, tiny_checkpoint, window_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    s = window.session
    s.set_interventions(Interventions(ablate=[(0, 1)]))  # a head off: it cannot stay for this model
    assert window.files.open_checkpoint(window_checkpoint)
    assert isinstance(s.model, WindowMLP) and s.interventions.changes_nothing
    s.set_text(TEXT)
    s.set_layer(3)
    s.set_head(2)
    assert (s.layer, s.head) == (0, 0)
    _show_every_panel(qtbot, window)
    window.show()
    qtbot.wait_exposed(window)
    _show_every_panel(qtbot, window)
    for name in WITHOUT_ATTENTION.keys() & window.panels.keys():  # one sentence in place of the panel
        gate = window.panels[name].gate
        assert gate.closed and gate.text() == not_applicable(name, s.config) and "8" in gate.text()
    tr = s.trace
    assert tr.blocks == () and tr.n_tokens == 8
    np.testing.assert_array_equal(window.panels["embeddings"].heatmaps["e"].data, tr.tok)
    assert not window.panels["embeddings"].heatmaps["x"].isVisibleTo(window.panels["embeddings"])
    top = window.panels["next-token"].top  # the bars: the trace's own top tokens after the last one
    assert top.ids.tolist() == np.argsort(-tr.logits[-1], kind="stable")[:len(top.ids)].tolist()
    info = window.panels["model"].browser.toPlainText()
    assert "the model before attention" in info and f"{s.model.n_params():,}" in info and "W_in is 8 blocks" in info
    tokens = window.panels["tokens"]
    for box in (tokens.pe_box, tokens.causal_box):
        assert not box.isEnabled() and "model before attention" in box.toolTip()
    with pytest.raises(ValueError, match="no attention heads"):
        s.set_interventions(Interventions(ablate=[(0, 0)]))
    assert not dialogs.errors and s.error == ""


def test_generation_and_export_follow_it(qtbot, tmp_path, tiny_checkpoint, window_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(window_checkpoint)
    s = window.session
    s.set_text("the cat")
    ids = list(s.trace.token_ids)
    panel = window.panels["generate"]
    panel.n_box.setValue(4)
    panel.toggle()
    qtbot.waitUntil(lambda: not panel.generator.running, timeout=20000)
    made = list(s.encoding.ids[len(ids):])
    want = [step.token_id for step in generate(s.model, ids, 4, Sampling())]
    assert made == want
    window.export_menu._on_menu_about_to_show()
    assert not window.export_menu.actions["csv"].isEnabled()
    window.export_menu._on_csv()
    assert dialogs.infos and "no attention" in dialogs.infos[-1][-1]


def test_a_transformer_after_it_gets_its_panels_back(qtbot, tmp_path, tiny_checkpoint, window_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    window.show()
    qtbot.wait_exposed(window)
    attention = window.panels["attention"]
    shown_before = [w for w in attention.findChildren(QWidget) if w.isVisibleTo(attention)]
    assert window.files.open_checkpoint(window_checkpoint)
    window.session.set_text(TEXT)
    assert attention.gate.closed and not attention.scores.isVisibleTo(attention)
    window.set_checkpoint(tiny_checkpoint)
    assert not attention.gate.closed and attention.scores.isVisibleTo(attention)
    assert [w for w in shown_before if not w.isVisibleTo(attention)] == []
    window.session.set_text(TEXT)
    _show_every_panel(qtbot, window)
    assert attention.scores.data.shape == (8, 8)
    assert not dialogs.errors


def test_the_training_panel_scrubs_its_snapshots(qtbot, tmp_path, tiny_tokenizer, window_checkpoint, dialogs):
    from model.checkpoint import load_any

    folder = tmp_path / "snaps"
    folder.mkdir()
    for step in (0, 5):
        torch.manual_seed(step)
        snap = WindowMLP(WindowConfig(vocab_size=tiny_tokenizer.vocab_size, context_length=8, d_model=16, d_mlp=12))
        save_checkpoint(folder / f"step-{step}.safetensors", snap.eval(), tiny_tokenizer, training={"steps": step})
    window = make_window(qtbot, tmp_path, load_any(window_checkpoint))
    window.session.set_text(TEXT)
    window.docks["training"].raise_()
    panel = window.panels["training"]
    qtbot.waitUntil(panel.is_shown, timeout=3000)
    panel.open_folder(folder)
    qtbot.waitUntil(lambda: panel.curves is not None and panel.curves.position >= 0, timeout=20000)
    assert panel.curves.attn_entropy.shape[1:] == (0, 0)
    assert "no attention" in panel.curves_view.mass.titleLabel.text
    panel.show_stop(0)
    s = window.session
    assert s.snapshot_step == 0
    np.testing.assert_array_equal(s.trace.logits, load_any(folder / "step-0.safetensors").model.trace(
        s.trace.token_ids).logits)
    assert not dialogs.errors and s.error == ""


def test_the_session_says_why_it_has_no_head_weights(window_checkpoint):
    from explorer_helpers import sync_session
    from model.checkpoint import load_any

    s = sync_session(load_any(window_checkpoint), TEXT)
    for ask in (lambda: s.head_weights(0), lambda: s.kv_head(0, 0)):
        with pytest.raises(ValueError, match="no attention layers"):
            ask()
