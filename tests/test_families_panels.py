"""Every panel on the 2025-26 families (tests/fixtures/arch3: GPT-NeoX, Qwen2, Qwen3, Gemma 2 and 3, Phi,
OLMo-2, SmolLM3) draws, and says what that family computes (pytest-qt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer_helpers import make_window

ARCH3 = Path(__file__).parent / "fixtures" / "arch3"
TEXT = "once upon a time there was a little cat named zoé"
#: What the Model panel, the formula panel (at the layer given) and the shift test must say for each family.
SAYS = {
    "hf-gpt-neox": (1, ["side by side from the block's input", "only the first 4 of each head's 16 dimensions turn"],
                    ["partial rotary: only dimensions 0–3 of 16 turn", "parallel block"],
                    "the first 4 of each head's 16 dimensions (25 %"),
    "hf-qwen2": (1, ["W_Q, W_K, W_V: yes; W_O: no", "θ = 1,000,000"], ["q_i = h_i W_Q + b_Q"], "all 16 dimensions"),
    "hf-qwen3": (1, ["4 query heads of width 16", "normalised per head (RMSNorm over d_head = 16, QK-norm)"],
                 ["QK-norm (before RoPE)"], "all 16 dimensions"),
    "hf-gemma2": (0, ["soft-capped to 8·tanh(s/8)", "logits soft-capped to 5·tanh(z/5)", "(1 + w)", "× 8 = √d_model"],
                  ["soft cap before the mask: s_ij ← 8·tanh(s_ij / 8)", "x_i = e_i × 8", "norms before and after"],
                  "all 16 dimensions"),
    "hf-gemma3": (0, ["blocks 0–1: θ = 10,000; block 2: θ = 1,000,000", "QK-norm", "blocks 0–1: local, the last 8 keys"],
                  ["QK-norm (before RoPE)", "θ = 10,000"], "all 16 dimensions"),
    "hf-phi": (1, ["side by side from one norm", "plus a bias per token", "only the first 8 of each head's 16"],
               ["parallel block from one norm", "partial rotary: only dimensions 0–7 of 16 turn"],
               "the first 8 of each head's 16 dimensions (50 %"),
    "hf-olmo2": (1, ["norms after each part, none before", "over the whole projection"],
                 ["no norm before attention", "QK-norm (before RoPE)"], "all 16 dimensions"),
    "hf-smollm3": (3, ["block 3: no RoPE (NoPE"], ["no RoPE in this layer (a NoPE layer)"],
                   "has no RoPE (a NoPE layer)"),
}


def _catch_up(window) -> None:
    for panel in window.panels.values():  # panels in tabs behind others draw too
        if hasattr(panel, "catch_up"):
            panel.catch_up()


@pytest.mark.parametrize("name", sorted(SAYS))
def test_every_panel_tells_each_new_family_s_truth(qtbot, tmp_path, tiny_checkpoint, dialogs, name):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(ARCH3 / name)
    s = window.session
    layer, model_says, formula_says, shift_says = SAYS[name]
    s.set_text(TEXT)
    s.set_layer(layer)
    s.set_head(s.config.n_heads - 1)
    s.set_position(9)
    window.panels["attention"].all_heads.setChecked(True)
    window.panels["qkv"].show_weights.setChecked(True)
    _catch_up(window)
    info = window.panels["model"].browser.toPlainText()
    for phrase in model_says:
        assert phrase in " ".join(info.split()), (phrase, info)
    formula = window.panels["formula"]
    steps = formula.steps
    assert steps is not None and steps.max_abs_diff < 1e-5
    text = formula.formula.text()
    for phrase in formula_says:
        assert phrase in text, (phrase, text)
    shift = window.panels["positional"].shift_view.check
    assert shift is not None and shift.layer == layer and shift.unchanged and shift_says in shift.sentence
    variants = window.panels["variants"].results
    assert variants and variants[3].output_delta < 1e-5 and variants[2].weights_delta < 1e-5
    why = window.panels["why"]
    if hasattr(why, "catch_up"):
        why.catch_up()
    assert not dialogs.errors and s.error == ""
