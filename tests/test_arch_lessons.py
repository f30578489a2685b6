"""The lessons tell the truth about the architecture that is loaded (Qt-free part).

For each family (the fixtures of tests/fixtures/arch, written by transformers and llama2.c, and
seeded tiny configs): the formula recomputes the trace, its norm and its RoPE rotation; RoPE's
scores are unchanged by a shift of every position (float32 noise) while a learned table's change;
the position switch, the Model panel's words and the embeddings panel's titles say what the
model has.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.core import architecture, views
from explorer.core.lessons import formula
from explorer.core.lessons import formula_text
from explorer.core.lessons import rope
from explorer.core.lessons import variants
from model import GPT, GPTConfig
from model.checkpoint import load_any

ARCH = Path(__file__).parent / "fixtures" / "arch"
FIXTURES = ("hf-gpt2", "hf-gpt-neo", "hf-llama", "llama2c-v0")
ROPE_FIXTURES = ("hf-llama", "llama2c-v0")
IDS = [3, 7, 9, 11, 4, 5, 8, 2, 7, 3]
TINY = {  # seeded tiny configs: every positional scheme and pair layout, with and without grouping
    "learned": dict(n_heads=2),
    "none": dict(n_heads=2, positional="none"),
    "rope-halves-gqa": dict(n_heads=4, n_kv_heads=2, positional="rope", norm="rmsnorm", norm_bias=False),
    "rope-interleaved-mqa": dict(n_heads=4, n_kv_heads=1, positional="rope", rope_pairs="interleaved",
                                 rope_theta=500.0, mlp="swiglu", attn_windows=(0, 4)),
}


@pytest.fixture(scope="module")
def fixtures() -> dict:
    return {name: load_any(ARCH / name) for name in FIXTURES}


def tiny(name: str, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=40, context_length=24, d_model=32, n_layers=2, d_mlp=64, **TINY[name])
    return GPT(cfg).eval()


def _reference_ids(name: str) -> np.ndarray:
    return np.load(ARCH / name / "reference.npz")["token_ids"]


# --- the shift test ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ROPE_FIXTURES)
def test_rope_scores_do_not_change_when_every_position_moves(fixtures, name):
    model = fixtures[name].model
    ids = _reference_ids(name)[:20]
    for s in (1, 7, 44):  # positions up to 63, the fixtures' last
        c = rope.shift_check(model, ids, s)
        assert c.positional == "rope" and c.shift == s and c.unchanged, (s, c.max_abs_delta)
        assert c.max_abs_delta < 1e-5 and c.max_abs_score > 1  # a real score, unchanged to float32 noise
        assert "depends only on the offset i − j" in c.sentence
    own = model.trace(ids).blocks[0]  # the scores at positions 0.. are the model's own trace's
    np.testing.assert_array_equal(c.scores, np.where(own.attn_mask, own.attn_scores, np.nan))
    moved = rope.layer0_scores(model, ids, 7)
    np.testing.assert_allclose(moved, c.scores, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("name", ["hf-gpt2", "hf-gpt-neo"])
def test_a_learned_table_s_scores_change_when_every_position_moves(fixtures, name):
    c = rope.shift_check(fixtures[name].model, _reference_ids(name)[:20], 5)
    assert c.positional == "learned" and not c.unchanged and c.max_abs_delta > 0.1
    assert "p_(i+s) instead of p_i" in c.sentence


def test_the_shift_test_on_seeded_tiny_configs():
    for name in TINY:
        model = tiny(name)
        c = rope.shift_check(model, IDS, 9, causal=name != "none")
        if name.startswith("rope"):
            assert c.max_abs_delta < 1e-5 and c.unchanged, name
        elif name == "none":
            assert c.max_abs_delta == 0.0 and "no positional encoding" in c.sentence
        else:
            assert c.max_abs_delta > 1e-3 and not c.unchanged
    full = rope.shift_check(tiny("rope-halves-gqa"), list(range(24)), 5)  # no room left in the context
    assert full.shift == 0 and "no room" in full.sentence


# --- the formula --------------------------------------------------------------------------------------

def _check_family(model, ids, pe: bool = True) -> None:
    tr = model.trace(ids, positional_encoding=pe)
    cfg = model.config
    for layer in range(cfg.n_layers):
        facts = formula.layer_facts(model, layer)
        attn = model.blocks[layer].attn
        for head in range(cfg.n_heads):
            for i in (0, len(ids) // 2, len(ids) - 1):
                st = formula.attention_steps(tr, layer, head, i, facts)
                assert st.max_abs_diff < 1e-5 and st.input_norm.max_abs_diff < 1e-5
                assert st.input_norm.kind == cfg.norm and st.scale == attn.scale and st.window == attn.window
                assert st.kv_head == attn.kv_head(head) and head in st.kv_group
                assert all(attn.kv_head(h) == st.kv_head for h in st.kv_group)
                if cfg.positional == "rope" and pe:
                    r = st.rotation
                    assert r.max_abs_diff < 1e-5 and r.pairs == cfg.rope_pairs
                    np.testing.assert_allclose(r.q_angles, model.rope_angles(len(ids))[i], rtol=1e-6)
                    assert abs(np.linalg.norm(r.q) - np.linalg.norm(r.q_pre)) < 1e-5  # a rotation keeps lengths
                else:
                    assert st.rotation is None


@pytest.mark.parametrize("name", FIXTURES)
def test_the_formula_recomputes_each_fixture(fixtures, name):
    model = fixtures[name].model
    ids = _reference_ids(name)[:16]
    _check_family(model, ids)
    if model.config.positional == "rope":
        _check_family(model, ids, pe=False)  # rotation off: q and k as projected


def test_the_formula_recomputes_seeded_tiny_configs():
    for name in TINY:
        _check_family(tiny(name), IDS)


def test_the_written_formula_is_the_model_s_own(fixtures):
    def lines(name, layer=0, head=0, i=-1, pe=True):
        model = fixtures[name].model
        facts = formula.layer_facts(model, layer)
        ids = _reference_ids(name)[:16]
        st = formula.attention_steps(model.trace(ids, positional_encoding=pe), layer, head, i, facts)
        return st, "\n".join(formula_text.formula_lines(st, facts))

    _, text = lines("hf-llama", head=3)
    assert "RMSNorm(x_i)" in text and "LayerNorm" not in text and "R(i)" in text and "(p, p + d_head/2)" in text
    assert "key/value head 1, shared by query heads 2–3" in text and "√d_head = √8" in text
    assert "query 15: pair 0 by 15 rad" in text
    _, text = lines("llama2c-v0")
    assert "(2p, 2p + 1)" in text
    _, text = lines("hf-llama", pe=False)
    assert "rotation is switched off" in text and "R(i)" not in text
    st, text = lines("hf-gpt-neo", layer=1, i=14)  # a local layer: a window of 8
    assert "LayerNorm(x_i)" in text and "+ b," in text and "does not divide by √d_head" in text
    assert st.window == 8 and st.keys.tolist() == list(range(7, 15))
    assert formula_text.hidden_keys(st, 16) == list(range(7))
    assert formula_text.window_text(st, 16) == "keys 7..14 (causal mask and a local window of 8)"
    _, text = lines("hf-gpt2")
    assert "RoPE" not in text and "shared" not in text and "q_i = h_i W_Q + b_Q" in text


def test_the_rotation_is_the_model_s_for_both_pair_layouts():
    for name in ("rope-halves-gqa", "rope-interleaved-mqa"):
        model = tiny(name)
        x = torch.randn(1, 2, 12, model.config.d_head)
        ours = rope.rotate(x.numpy(), model.rope_angles(12), model.config.rope_pairs)
        np.testing.assert_allclose(ours, model.blocks[0].attn.rope(x).numpy(), atol=1e-5)


# --- what the panels say --------------------------------------------------------------------------------

def test_the_rope_angle_view_is_the_model_s_angles_folded():
    model = tiny("rope-interleaved-mqa")
    angles = model.rope_angles(20)
    view = rope.angle_view(angles)
    assert view.shape == (20, model.config.d_head // 2) and view.min() >= 0 and view.max() < 2 * math.pi
    np.testing.assert_allclose(np.cos(view), np.cos(angles), atol=1e-5)
    freqs = rope.pair_frequencies(angles)
    d = model.config.d_head
    np.testing.assert_allclose(freqs, 500.0 ** (-np.arange(0, d, 2) / d), rtol=1e-6)
    assert rope.pair_labels(freqs)[:2] == ["0: 1", "1: 0.21"]  # 500^(−2/8)


def test_the_position_switch_says_what_it_switches():
    learned, rope_, none = (tiny(n).config for n in ("learned", "rope-halves-gqa", "none"))
    assert architecture.position_switch(learned).enabled
    assert "x_i = e_i + p_i" in architecture.position_switch(learned, formula=True).label
    r = architecture.position_switch(rope_)
    assert r.enabled and r.label == "RoPE rotation" and "inside attention" in r.tooltip
    n = architecture.position_switch(none)
    assert not n.enabled and "none" in n.label and "no positional encoding" in n.tooltip
    assert "nothing to switch" in n.tooltip
    t = architecture.embedding_titles(rope_)
    assert "RoPE angle" in t.position and t.x.startswith("x_i = e_i") and "inside attention" in t.note
    assert architecture.embedding_titles(none).note.startswith("This model has no positional encoding")
    assert architecture.embedding_titles(learned, False).x == "x_i = e_i (positional encoding off)"


@pytest.mark.parametrize("name", FIXTURES)
def test_the_architecture_in_words_names_every_field_once(fixtures, name):
    cfg = fixtures[name].config
    rows = architecture.describe_architecture(cfg)
    fields = [f.strip() for _, _, names in rows for f in names.split(",")]
    expected = set(cfg.to_dict()) | {"d_head"}
    if cfg.positional != "rope":
        expected -= {"rope_theta", "rope_pairs", "rotary_dims", "rope_thetas", "nope_layers"}
    if cfg.mlp == "swiglu":
        expected -= {"gelu"}
    assert sorted(fields) == sorted(expected)  # each field in exactly one row
    text = " ".join(words for _, words, _ in rows)
    assert text.count(f"width {cfg.d_head}") == 1 and f"{cfg.context_length:,} tokens" in text
    if name == "hf-llama":
        assert "sharing 2 key/value heads" in text and "RMSNorm" in text and "θ = 10,000" in text
        assert "rotate_half" in text and "SwiGLU" in text and "its own matrix" in text
    if name == "llama2c-v0":
        assert "interleaved pairs (2j, 2j + 1)" in text and "tied" in text
    if name == "hf-gpt-neo":
        assert "not divided by √d_head" in text and "blocks 1, 3: local, the last 8 keys; blocks 0, 2: global" in text


def test_grouped_query_attention_is_named_in_the_views_and_variants(fixtures):
    model = fixtures["llama2c-v0"].model
    tr = model.trace(_reference_ids("llama2c-v0")[:12])
    assert views.head_names(tr) == [f"H{h} kv{h // 2}" for h in range(8)]
    assert views.head_names(tiny("learned").trace(IDS)) == ["H0", "H1"]
    cfg = model.config
    assert architecture.qkv_caption(cfg, 1, 5, 2).startswith("layer 1, head 5 · k and v of key/value head 2, "
                                                              "shared by query heads 4–5")
    *_, multi = variants.all_variants(model, tr, 1, 5, 11)
    assert multi.output_delta < 1e-5 and "sharing 4 key/value heads" in multi.difference
    assert "g(h) = h // 2" in multi.formula
    concat = np.concatenate([multi.outputs[h] for h in range(8)], axis=1)  # heads side by side, in order
    np.testing.assert_array_equal(multi.combined, concat)
    simple, self_, *_ = variants.all_variants(model, tr, 0, 0, 3)
    assert "RoPE adds it inside attention" in simple.difference and "R(i)" in self_.formula
