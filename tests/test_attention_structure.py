"""The lessons read attention's structure from the model and its trace, so other architectures work.

Seeded tiny models with grouped-query attention (n_kv_heads < n_heads), local attention windows,
no score scaling (GPT-Neo) and RoPE: the formula's and the variants' recomputations still agree with
the trace, the positional lesson's predictions still explain what it measures, and every panel
draws without an error.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.core import views
from explorer.core.lessons import formula
from explorer.core.lessons import positional
from explorer.core.lessons import variants
from model import GPT, Checkpoint, GPTConfig

IDS = [3, 7, 9, 11, 4, 5, 8, 2, 7, 3]
ARCHS = {
    "gqa": dict(n_heads=4, n_kv_heads=2),
    "mqa": dict(n_heads=4, n_kv_heads=1),
    "window": dict(n_heads=2, attn_windows=(3, 0)),
    "no-scale": dict(n_heads=2, scale_scores=False),
    "rope-gqa-window": dict(n_heads=4, n_kv_heads=2, positional="rope", attn_windows=(0, 4), norm="rmsnorm",
                            norm_bias=False, mlp="swiglu", o_bias=False, mlp_bias=False),
    # the 2025-26 families' features
    "neox": dict(n_heads=4, positional="rope", rotary_dims=2, block_layout="parallel", tied_unembed=False),
    "phi": dict(n_heads=2, positional="rope", rotary_dims=8, block_layout="parallel_one_norm", tied_unembed=False,
                unembed_bias=True),
    "qwen3": dict(n_heads=4, n_kv_heads=2, d_head=12, positional="rope", qk_norm="head", norm="rmsnorm",
                  norm_bias=False, mlp="swiglu", qkv_bias=True, o_bias=False),
    "gemma2": dict(n_heads=4, n_kv_heads=2, positional="rope", norm="rmsnorm", norm_bias=False, norm_unit_offset=True,
                   norm_placement="sandwich", mlp="geglu", gelu="tanh", embed_scale=32 ** 0.5, score_scale=0.3,
                   attn_softcap=1.5, final_softcap=4.0, attn_windows=(4, 0), o_bias=False, mlp_bias=False),
    "gemma3": dict(n_heads=2, positional="rope", norm="rmsnorm", norm_bias=False, norm_unit_offset=True,
                   norm_placement="sandwich", mlp="geglu", qk_norm="head", rope_thetas=(50.0, 10000.0),
                   attn_windows=(4, 0), embed_scale=4.0),
    "olmo2": dict(n_heads=4, n_kv_heads=2, positional="rope", norm="rmsnorm", norm_bias=False,
                  norm_placement="post", qk_norm="full", mlp="swiglu"),
    "smollm3": dict(n_heads=2, positional="rope", norm="rmsnorm", norm_bias=False, mlp="swiglu", nope_layers=(1,)),
}


def arch_model(name: str, seed: int = 0, vocab_size: int = 40) -> GPT:
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=vocab_size, context_length=12, d_model=32, n_layers=2, d_mlp=64, **ARCHS[name])
    return GPT(cfg).eval()


@pytest.fixture(scope="module", params=sorted(ARCHS))
def model(request) -> GPT:
    return arch_model(request.param)


@pytest.mark.parametrize("causal", [True, False])
def test_the_formula_recomputes_every_head_and_query(model, causal):
    tr = model.trace(IDS, causal=causal)
    for layer, blk in enumerate(tr.blocks):
        attn = model.blocks[layer].attn
        for head in range(model.config.n_heads):
            for i in range(len(IDS)):
                s = formula.attention_steps(tr, layer, head, i)
                assert s.max_abs_diff < 1e-6 and abs(s.weights.sum() - 1) < 1e-12
                assert s.kv_head == attn.kv_head(head) and s.scale == attn.scale
                np.testing.assert_array_equal(s.keys, np.flatnonzero(attn.allowed_keys(len(IDS), causal)[i]))
                np.testing.assert_allclose(s.scores, blk.attn_scores[head, i, s.keys], atol=1e-5)
                np.testing.assert_allclose(s.weights, blk.attn_weights[head, i, s.keys], atol=1e-6)


def test_a_window_and_no_scaling_show_in_the_steps():
    window = arch_model("window")
    s = formula.attention_steps(window.trace(IDS), 0, 1, 8)  # layer 0: a window of 3
    assert s.keys.tolist() == [6, 7, 8] and s.scaled_by_sqrt_d_head
    s = formula.attention_steps(window.trace(IDS), 1, 1, 8)  # layer 1: global
    assert s.keys.tolist() == list(range(9))
    plain = formula.attention_steps(arch_model("no-scale").trace(IDS), 0, 0, 5)
    assert plain.scale == 1.0 and not plain.scaled_by_sqrt_d_head
    np.testing.assert_allclose(plain.scores, plain.dots)


@pytest.mark.parametrize("causal", [True, False])
def test_the_variants_equal_the_trace_where_they_should(model, causal):
    tr = model.trace(IDS, causal=causal)
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            _, self_, causal_v, multi = variants.all_variants(model, tr, layer, head, 6)
            same = causal_v if causal else self_
            assert same.weights_delta < 1e-5 and same.output_delta < 1e-5, (layer, head)
            assert multi.output_delta < 1e-5 and "equal to the trace's attention output" in multi.difference
            np.testing.assert_allclose(multi.weights, tr.blocks[layer].attn_weights, atol=1e-6)


def test_no_scaling_is_written_in_the_variants_formulas():
    v = variants.all_variants(arch_model("no-scale"), arch_model("no-scale").trace(IDS), 0, 0, 3)
    assert "√d_head" not in v[3].formula and "√d_head" in variants.all_variants(
        arch_model("gqa"), arch_model("gqa").trace(IDS), 0, 0, 3)[3].formula


def test_qkv_views_give_each_query_head_its_key_value_head():
    model = arch_model("gqa")
    tr = model.trace(IDS)
    for head in range(4):
        qkv = views.qkv_views(tr, 1, head)
        kv = model.blocks[1].attn.kv_head(head)
        assert kv == head // 2
        np.testing.assert_array_equal(qkv["k"], tr.blocks[1].k[kv])
        w = views.head_weight_views(model.blocks[1].attn.head_weights(), head, kv)
        assert w["q"].shape == w["k"].shape == (32, 8)


@pytest.mark.parametrize("causal", [True, False])
def test_positional_predictions_explain_what_is_measured(model, causal):
    for seed in range(4):
        perm = positional.shuffle(len(IDS), seed, keep_last=seed % 2 == 0)
        c = positional.compare_orders(model, IDS, perm, layer=1, head=1, causal=causal)
        for pe in (False, True):
            assert "does not explain" not in c.sentence(pe), (seed, pe, c.sentence(pe))


def test_a_window_keeps_far_tokens_out_of_the_prediction():
    # Layer 0 sees the last 3 tokens. Without PE, swapping the first two keeps token 2's window
    # {0, 1, 2} the same set, gives token 3's window {1, 2, 3} another token, and leaves token 4's alone.
    c = positional.compare_orders(arch_model("window"), IDS, positional.swap(len(IDS), 0, 1), layer=0)
    assert (c.attn_delta[0] > 1e-5).tolist()[:5] == [True, True, False, True, False]
    assert c.predicted_same[0].tolist()[:5] == [False, False, True, False, True]


# --- every panel on these models -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mqa", "no-scale", "rope-gqa-window", "neox", "phi", "qwen3", "gemma2", "gemma3",
                                  "olmo2", "smollm3"])  # every option at least once
def test_every_panel_draws_these_architectures(qtbot, tmp_path, tiny_tokenizer, dialogs, name):
    from explorer_helpers import make_window

    ckpt = Checkpoint(model=arch_model(name, vocab_size=tiny_tokenizer.vocab_size), tokenizer=tiny_tokenizer,
                      path=None, training={})
    window = make_window(qtbot, tmp_path, ckpt)
    s = window.session
    s.set_text("the cat sat on the mat . the dog sat")
    s.set_layer(1)
    s.set_head(s.config.n_heads - 1)
    s.set_position(5)
    window.panels["qkv"].show_weights.setChecked(True)
    for panel in window.panels.values():  # panels in tabs behind others draw too
        if hasattr(panel, "catch_up"):
            panel.catch_up()
    steps = window.panels["formula"].steps
    assert steps is not None and steps.max_abs_diff < 1e-6
    assert window.panels["variants"].results and window.panels["positional"].comparison is not None
    qkv = window.panels["qkv"].heatmaps["k"].data
    kv = s.kv_head(1, s.head)
    np.testing.assert_array_equal(qkv, s.head_weights(1)["W_K"][kv])
    assert not dialogs.errors and s.error == ""


# --- the formula's extra steps for the 2025-26 families ---------------------------------------------

EXTRA_LINES = {  # arch: (layer, what the written formula must say there)
    "neox": (0, ["partial rotary: only dimensions 0–1 of 8 turn (r = 2, 25 %)", "parallel block: the residual gets"]),
    "phi": (1, ["partial rotary: only dimensions 0–7 of 16 turn", "parallel block from one norm"]),
    "qwen3": (1, ["QK-norm (before RoPE): q_i ← RMSNorm(q_i)", "over each head's 12 values", "before QK-norm: q_i"]),
    "gemma2": (0, ["x_i = e_i × 5.657 (√d_model, before block 0)", "soft cap before the mask: s_ij ← 1.5·tanh(s_ij / 1.5)",
                   "norms before and after each part", "⊙ (1 + w)", "q_i·k_j × 0.3"]),
    "gemma3": (0, ["QK-norm (before RoPE)", "θ = 50", "⊙ (1 + w)"]),
    "olmo2": (1, ["h_i = x_i, block 0's output: no norm before attention", "over the whole projection",
                  "norms after each part, none before"]),
    "smollm3": (1, ["no RoPE in this layer (a NoPE layer)"]),
}


@pytest.mark.parametrize("name", sorted(EXTRA_LINES))
def test_the_formula_recomputes_each_extra_step_of_the_new_families(name):
    from explorer.core.lessons.formula_text import formula_lines

    model = arch_model(name)
    tr = model.trace(IDS)
    for layer in range(model.config.n_layers):
        facts = formula.layer_facts(model, layer)
        for head in range(model.config.n_heads):
            for i in range(len(IDS)):
                st = formula.attention_steps(tr, layer, head, i, facts)
                parts = [st.input_norm, st.qk_norm, st.rotation, st.embedding, st.block]
                assert all(p.max_abs_diff < 1e-5 for p in parts if p is not None), (layer, head, i)
                assert st.max_abs_diff < 1e-6
                np.testing.assert_allclose(st.scores, tr.blocks[layer].attn_scores[head, i, st.keys], atol=1e-5)
    layer, wanted = EXTRA_LINES[name]
    text = "\n".join(formula_lines(formula.attention_steps(tr, layer, 0, len(IDS) - 1, formula.layer_facts(model, layer)),
                                   formula.layer_facts(model, layer)))
    for phrase in wanted:
        assert phrase in text, (phrase, text)
    if name == "gemma2":
        st = formula.attention_steps(tr, 0, 0, 6, formula.layer_facts(model, 0))
        np.testing.assert_allclose(st.scores, 1.5 * np.tanh(st.raw_scores / 1.5))
