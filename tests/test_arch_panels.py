"""Every panel on each family's fixture (GPT-2, GPT-Neo, Llama, llama2.c) and on models without
positional encoding: they draw, and what they draw is the loaded architecture's (pytest-qt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_checkpoint
from explorer.core.lessons import rope
from explorer_helpers import make_window
from model.checkpoint import load_any

ARCH = Path(__file__).parent / "fixtures" / "arch"
TEXT = "once upon a time there was a little cat"


def _catch_up(window) -> None:
    for panel in window.panels.values():  # panels in tabs behind others draw too
        if hasattr(panel, "catch_up"):
            panel.catch_up()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hf-gpt2", "hf-gpt-neo", "hf-llama", "llama2c-v0"])
def test_every_panel_tells_the_family_s_truth(qtbot, tmp_path, tiny_checkpoint, dialogs, name):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(ARCH / name)
    s = window.session
    s.set_text(TEXT)
    cfg = s.config
    s.set_layer(cfg.n_layers - 1)
    s.set_head(cfg.n_heads - 1)
    s.set_position(9)
    window.panels["attention"].all_heads.setChecked(True)
    _catch_up(window)
    T = s.trace.n_tokens
    steps = window.panels["formula"].steps
    assert steps is not None and steps.max_abs_diff < 1e-5 and steps.input_norm.max_abs_diff < 1e-5
    emb, tokens, pos = window.panels["embeddings"], window.panels["tokens"], window.panels["positional"]
    shift = pos.shift_view.check
    info = window.panels["model"].browser.toPlainText()
    variants = window.panels["variants"].results
    assert variants and variants[3].output_delta < 1e-5
    if cfg.positional == "rope":
        assert emb.middle.currentWidget() is emb.rope_map and emb.note.isVisibleTo(emb)
        np.testing.assert_array_equal(emb.rope_map.data, rope.angle_view(s.model.rope_angles(T)))
        assert "RoPE angle" in emb.rope_map.plot.titleLabel.text and emb.heatmaps["x"].plot.titleLabel.text.startswith(
            "x_i = e_i")
        assert steps.rotation is not None and steps.rotation.max_abs_diff < 1e-5
        assert tokens.pe_box.text() == "RoPE rotation" and tokens.pe_box.isEnabled()
        assert pos.pe_box.text() == "RoPE rotation of q and k" and "RoPE" in pos.table.horizontalHeaderItem(2).text()
        assert shift.layer == cfg.n_layers - 1 and shift.unchanged and "offset i − j" in pos.shift_view.label.text()
        assert shift.max_abs_delta < 1e-5 * max(1.0, shift.max_abs_score)  # float32 noise, after every layer
        assert "RoPE" in info and "θ = 10,000" in info
        np.testing.assert_array_equal(window.panels["attention"].grid.plot.getAxis("top")._tickLevels[0][1][1],
                                      "H1 kv0")
    else:
        assert emb.middle.currentWidget() is emb.heatmaps["p"] and not emb.note.isVisibleTo(emb)
        np.testing.assert_array_equal(emb.heatmaps["p"].data, s.trace.pos)
        assert tokens.pe_box.text() == "positional encoding" and steps.rotation is None
        assert not shift.unchanged and shift.max_abs_delta > 1e-3
    if name == "hf-gpt-neo":  # no scaling, local layers
        assert "does not divide by √d_head" in window.panels["formula"].formula.text()
        assert "does not divide" in window.panels["attention"].scores.plot.titleLabel.text
        assert steps.window == 8 and steps.keys.tolist() == list(range(2, 10))  # query 9 sees 2..9
        table = window.panels["formula"].table
        assert [table.item(r, 2).text() for r in range(3)] == ["not seen", "not seen", table.item(2, 2).text()]
        assert table.item(2, 0).text() == "2" and table.item(2, 2).text() != "not seen"
    assert not pos.twin_button.isVisible()  # the twin belongs to the course's model, not to these
    assert not dialogs.errors and s.error == ""


def test_a_model_without_positional_encoding_says_so(qtbot, tmp_path, tiny_tokenizer, dialogs):
    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, positional="none"))
    s = window.session
    s.set_text("the cat sat on the mat")
    _catch_up(window)
    emb = window.panels["embeddings"]
    assert not emb.middle.isVisibleTo(emb) and emb.note.isVisibleTo(emb)
    assert emb.note.text().startswith("This model has no positional encoding")
    assert emb.heatmaps["x"].plot.titleLabel.text == "x_i = e_i"
    for box in (window.panels["tokens"].pe_box, window.panels["positional"].pe_box):
        assert not box.isEnabled() and not box.isChecked() and "none)" in box.text()
        assert "no positional encoding" in box.toolTip() and "nothing to switch" in box.toolTip()
    shift = window.panels["positional"].shift_view.check
    assert shift.max_abs_delta == 0.0 and "no positional encoding" in shift.sentence


def test_the_rope_switch_turns_the_rotation_off_everywhere(qtbot, tmp_path, tiny_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(ARCH / "hf-llama")
    s = window.session
    s.set_text(TEXT)
    window.panels["tokens"].pe_box.setChecked(False)  # "RoPE rotation" off
    _catch_up(window)
    assert not s.positional_encoding and not s.trace.positional_encoding
    blk = s.trace.blocks[0]
    np.testing.assert_array_equal(blk.q, blk.q_pre_rope)  # nothing rotated
    formula, pos, emb = window.panels["formula"], window.panels["positional"], window.panels["embeddings"]
    assert formula.steps.rotation is None and "rotation is switched off" in formula.formula.text()
    assert "switched off" in emb.rope_map.plot.titleLabel.text
    assert pos.warning.text().startswith("RoPE's rotation is off") and not pos.pe_box.isChecked()
    c = pos.comparison
    assert c.positional == "rope" and c.sentence(True) and pos.sentence.text().startswith("<b>RoPE rotation off:")
    pos.shift_view.shift_box.setValue(3)
    assert pos.shift_view.check.shift == 3 and pos.shift_view.check.unchanged  # the model's rotation, measured


def test_the_shift_box_keeps_the_wanted_shift_within_the_room(qtbot, tmp_path, tiny_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, load_any(ARCH / "llama2c-v0"))
    s = window.session
    view = window.panels["positional"].shift_view
    s.set_text(TEXT)
    _catch_up(window)
    assert view.check.shift == 10 and view.shift_box.maximum() == 64 - s.trace.n_tokens
    s.set_text(" ".join(["the"] * 60))  # 61 tokens with <s>: room for 3
    _catch_up(window)
    assert view.check.shift == 3 and view.shift_box.value() == 3
    s.set_text(TEXT)
    _catch_up(window)
    assert view.check.shift == 10  # the wanted shift comes back
