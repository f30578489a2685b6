"""The 2025-26 small-model families as Hugging Face folders (tests/fixtures/arch3, written by transformers
5.24's save_pretrained): GPT-NeoX / Pythia, Qwen2, Qwen3, Gemma 2 and 3, Phi, OLMo-2, SmolLM3 agree with
transformers' own outputs, each quirk is really built (switched off in a copy of the model, the logits
move), and the keys of transformers 4 read as those of 5."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from model import GPT
from model.checkpoint import CheckpointError, load_any
from hf_reference import assert_agrees
from test_hf_folders import _edit_config as edit_config  # None drops a key

ARCH3 = Path(__file__).parent / "fixtures" / "arch3"
FAMILIES = {"hf-gpt-neox": "gpt_neox", "hf-qwen2": "qwen2", "hf-qwen3": "qwen3", "hf-gemma2": "gemma2",
            "hf-gemma3": "gemma3_text", "hf-phi": "phi", "hf-olmo2": "olmo2", "hf-smollm3": "smollm3"}


def reference(name: str):
    return np.load(ARCH3 / name / "reference.npz")


@pytest.fixture(scope="module")
def opened():
    return {name: load_any(ARCH3 / name) for name in FAMILIES}


def copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(ARCH3 / name, tmp_path / name))


def logits_of(ckpt_or_model, name: str) -> np.ndarray:
    model = getattr(ckpt_or_model, "model", ckpt_or_model)
    return model.trace(reference(name)["token_ids"]).logits


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_agrees_with_transformers(opened, name):
    ckpt, ref = opened[name], reference(name)
    assert ckpt.source_format == name and ckpt.training["model_type"] == FAMILIES[name]
    trace = assert_agrees(ckpt, ref)  # ids, logits, attention, hidden states (Gemma's x already scaled)
    with torch.no_grad():  # forward and trace are the one path: the same numbers to the bit
        np.testing.assert_array_equal(ckpt.model(torch.tensor(trace.token_ids)).numpy(), trace.logits)


def test_the_configs_say_what_each_family_is(opened):
    neox, qwen2, qwen3, gemma2, gemma3, phi, olmo2, smol = (opened[n].config for n in FAMILIES)
    assert (neox.block_layout, neox.rotary_dims, neox.d_head, neox.norm, neox.tied_unembed) == (
        "parallel", 4, 16, "layernorm", False)
    assert (qwen2.qkv_bias, qwen2.o_bias, qwen2.n_kv_heads, qwen2.rope_theta, qwen2.tied_unembed) == (
        True, False, 2, 1e6, True)
    assert (qwen3.d_model, qwen3.n_heads, qwen3.d_head, qwen3.qk_norm) == (48, 4, 16, "head")
    assert (gemma2.attn_softcap, gemma2.final_softcap, gemma2.attn_windows) == (8.0, 5.0, (8, 0, 8))
    assert (gemma2.norm_placement, gemma2.norm_unit_offset, gemma2.embed_scale, gemma2.mlp) == (
        "sandwich", True, 8.0, "geglu")
    assert gemma2.score_scale == pytest.approx(24 ** -0.5) and gemma2.qk_norm == "none"
    assert (gemma3.rope_thetas, gemma3.attn_windows, gemma3.qk_norm, gemma3.attn_softcap) == (
        (1e4, 1e4, 1e6), (8, 8, 0), "head", 0.0)
    assert (phi.block_layout, phi.rotary_dims, phi.unembed_bias, phi.gelu) == ("parallel_one_norm", 8, True, "tanh")
    assert (olmo2.norm_placement, olmo2.qk_norm) == ("post", "full")
    assert (smol.nope_layers, smol.rope_theta, smol.tied_unembed) == ((3,), 2e6, True)


def switched_off(model: GPT, extra: dict | None = None, **changes) -> GPT:
    """A copy of ``model`` with config fields changed and the weights it still has (``extra``: tensors a
    changed layout needs, under our names)."""
    config = dataclasses.replace(model.config, **changes)
    copy = GPT(config).eval()
    state = {**model.state_dict(), **(extra or {})}
    copy.load_state_dict({k: v for k, v in state.items() if k in copy.state_dict()}, strict=True)
    return copy


def _same_norms(model: GPT, pairs: dict[str, str]) -> dict:
    """Our norm tensors renamed (ln1 -> ln2, ...), for a copy whose layout needs other norms."""
    state = model.state_dict()
    return {k.replace(f".{a}.", f".{b}."): v for k, v in state.items() for a, b in pairs.items() if f".{a}." in k}


QUIRKS = {  # family: {quirk: the change that switches it off}
    "hf-gpt-neox": {"partial rotary -> full": dict(rotary_dims=None),
                    "parallel -> sequential": dict(block_layout="sequential")},
    "hf-phi": {"partial rotary -> full": dict(rotary_dims=None),
               "one-norm parallel -> sequential": dict(block_layout="sequential", _extra={"ln1": "ln2"}),
               "lm_head bias -> none": dict(unembed_bias=False)},
    "hf-qwen2": {"q/k/v biases -> none": dict(qkv_bias=False), "theta 1e6 -> 1e4": dict(rope_theta=1e4)},
    "hf-qwen3": {"QK-norm -> none": dict(qk_norm="none")},
    "hf-gemma2": {"score soft cap -> none": dict(attn_softcap=0.0), "logit soft cap -> none": dict(final_softcap=0.0),
                  "window -> none": dict(attn_windows=()), "(1 + w) -> w": dict(norm_unit_offset=False),
                  "embedding × 8 -> × 1": dict(embed_scale=1.0), "query_pre_attn_scalar -> d_head": dict(score_scale=None)},
    "hf-gemma3": {"QK-norm -> none": dict(qk_norm="none"), "local θ -> global θ": dict(rope_thetas=()),
                  "window -> none": dict(attn_windows=()), "norms after -> none": dict(norm_placement="pre"),
                  "(1 + w) -> w": dict(norm_unit_offset=False)},
    "hf-olmo2": {"full-width QK-norm -> none": dict(qk_norm="none"),
                 "norms after -> before": dict(norm_placement="pre", _extra={"ln_attn_out": "ln1", "ln_mlp_out": "ln2"})},
    "hf-smollm3": {"NoPE layer -> RoPE": dict(nope_layers=())},
}


@pytest.mark.parametrize("name, quirk", [(n, q) for n, qs in QUIRKS.items() for q in qs])
def test_each_quirk_is_really_built(opened, name, quirk):
    """Switched off in a copy of the model with the same weights, the quirk moves the logits by more than
    0.1 (the fixture READMEs give transformers' own figures): it is implemented, not passed by accident."""
    model = opened[name].model
    changes = dict(QUIRKS[name][quirk])
    extra = _same_norms(model, changes.pop("_extra")) if "_extra" in changes else None
    moved = np.abs(logits_of(switched_off(model, extra, **changes), name) - logits_of(model, name)).max()
    assert moved > 0.1, (name, quirk, moved)


def test_neox_query_key_value_is_split_per_head(opened):
    """The fused rows are [q_0, k_0, v_0, q_1, ...], d_head each: W_Q's head h is rows 48h..48h+15."""
    fused = load_file(ARCH3 / "hf-gpt-neox" / "model.safetensors")["gpt_neox.layers.1.attention.query_key_value.weight"]
    attn = opened["hf-gpt-neox"].model.blocks[1].attn
    for h in range(4):
        for j, w in enumerate((attn.W_Q, attn.W_K, attn.W_V)):
            torch.testing.assert_close(w.weight[16 * h:16 * (h + 1)], fused[48 * h + 16 * j:48 * h + 16 * (j + 1)])


def test_transformers_4_keys_read_as_transformers_5(tmp_path, opened):
    """rotary_pct / rotary_emb_base (NeoX), partial_rotary_factor / rope_theta at the top level (Phi),
    rope_theta + rope_local_base_freq + sliding_window_pattern without layer_types (Gemma 3)."""
    cases = {
        "hf-gpt-neox": dict(rope_parameters=None, rotary_pct=0.25, rotary_emb_base=10000),
        "hf-phi": dict(rope_parameters=None, partial_rotary_factor=0.5, rope_theta=10000.0),
        "hf-gemma3": dict(rope_parameters=None, rope_theta=1e6, rope_local_base_freq=1e4, layer_types=None,
                          sliding_window_pattern=3, _sliding_window_pattern=None),
        "hf-qwen2": dict(rope_parameters=None, rope_theta=1e6, rope_scaling=None, layer_types=None),
        "hf-smollm3": dict(rope_parameters=None, rope_theta=2e6, layer_types=None, no_rope_layers=None),
    }
    for name, changes in cases.items():
        folder = copy(tmp_path, name)
        edit_config(folder, **changes)
        ckpt = load_any(folder)
        assert ckpt.config == opened[name].config, name
        np.testing.assert_allclose(logits_of(ckpt, name), reference(name)["logits"], atol=1e-4)


def test_defaults_for_absent_keys_are_transformers(tmp_path, opened):
    """A NeoX config without rotary settings turns a quarter of each head (transformers' default 0.25);
    SmolLM3 without no_rope_layers has no RoPE in every 4th layer; Qwen2's sliding window counts only with
    use_sliding_window."""
    folder = copy(tmp_path, "hf-gpt-neox")
    edit_config(folder, rope_parameters={"rope_type": "default"})
    assert load_any(folder).config.rotary_dims == 4 and load_any(folder).config.rope_theta == 10000
    folder = copy(tmp_path, "hf-qwen2")
    edit_config(folder, sliding_window=4, layer_types=["sliding_attention"] * 2)
    assert load_any(folder).config.attn_windows == ()  # use_sliding_window is false
    edit_config(folder, use_sliding_window=True)
    ckpt = load_any(folder)
    assert ckpt.config.attn_windows == (4, 4)
    assert np.abs(logits_of(ckpt, "hf-qwen2") - reference("hf-qwen2")["logits"]).max() > 0.1


def test_rope_types_other_than_default_are_refused_by_name(tmp_path):
    for name, changes, message in [
        ("hf-qwen3", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}},
         "rope_parameters.rope_type = 'yarn': only the default RoPE is built"),
        ("hf-gemma3", {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                           "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
         "rope_parameters.full_attention.rope_type = 'linear'"),
        ("hf-gpt-neox", {"rope_parameters": None, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
         "rope_scaling.rope_type = 'dynamic'"),
        ("hf-phi", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.2}},
         "partial_rotary_factor 0.2 of head_dim 16 turns 3 dimensions; RoPE turns pairs"),
    ]:
        folder = copy(tmp_path, name)
        edit_config(folder, **changes)
        with pytest.raises(CheckpointError, match=re.escape(message)) as info:
            load_any(folder)
        assert str(info.value).startswith(f"{name}: config.json: "), info.value
        shutil.rmtree(folder)


def test_older_files_buffers_are_dropped(tmp_path, opened):
    folder = copy(tmp_path, "hf-gpt-neox")
    tensors = load_file(folder / "model.safetensors")
    for i in range(2):
        tensors[f"gpt_neox.layers.{i}.attention.bias"] = torch.tril(torch.ones(1, 1, 128, 128, dtype=torch.bool))
        tensors[f"gpt_neox.layers.{i}.attention.masked_bias"] = torch.tensor(-1e9)
        tensors[f"gpt_neox.layers.{i}.attention.rotary_emb.inv_freq"] = torch.ones(2)
    save_file(tensors, folder / "model.safetensors")
    np.testing.assert_allclose(logits_of(load_any(folder), "hf-gpt-neox"), reference("hf-gpt-neox")["logits"], atol=1e-4)


def test_gemma3_attn_softcapping_is_not_applied_as_in_transformers(tmp_path, opened):
    folder = copy(tmp_path, "hf-gemma3")
    edit_config(folder, attn_logit_softcapping=1.0)
    ckpt = load_any(folder)
    assert ckpt.config.attn_softcap == 0 and "does not apply it" in ckpt.training["note"]
    np.testing.assert_allclose(logits_of(ckpt, "hf-gemma3"), reference("hf-gemma3")["logits"], atol=1e-4)


def test_save_as_keeps_every_quirk(tmp_path, opened):
    from model.checkpoint import load_checkpoint, save_as

    for name in FAMILIES:
        out = tmp_path / f"{name}.safetensors"
        save_as(opened[name], out)
        again = load_checkpoint(out)
        assert again.config == opened[name].config, name
        np.testing.assert_array_equal(logits_of(again, name), logits_of(opened[name], name))


@pytest.mark.parametrize("name", FAMILIES)
def test_the_why_panel_s_arithmetic_holds_for_each_family(opened, name):
    """Direct logit attribution sums to the logit it splits (before Gemma 2's soft cap; through Gemma's and
    OLMo-2's norms after attention; with Phi's unembedding bias), and the logit lens has a stage per residual
    the family really has (no resid_mid in a parallel block)."""
    from explorer.core import why
    from model.explain import explain

    model = opened[name].model
    tr = model.trace(reference(name)["token_ids"][:20])
    ex = explain(model, tr, position=15, leave_one_out=False)
    total = ex.dla.sources.sum() + ex.dla.other
    assert abs(total - ex.dla.logit) < 1e-4, (name, total, ex.dla.logit)
    cap = model.config.final_softcap
    want = cap * np.tanh(ex.dla.logit / cap) if cap else ex.dla.logit
    assert abs(want - ex.logit) < 1e-4
    parallel = model.config.block_layout != "sequential"
    assert len(ex.logit_lens) == 1 + model.config.n_layers * (1 if parallel else 2)
    np.testing.assert_allclose(ex.logit_lens[-1].kl_to_final, 0, atol=1e-6)
    if cap:
        assert "before its soft cap" in why.sum_check(ex)
    if name == "hf-phi":
        assert "unembed.bias" in ex.dla.components
    if parallel:
        assert why.stage_title(ex.logit_lens[1].stage, "rope", sequential=False) == "+ attention & MLP L0"
    assert ex.score_terms is None and "RoPE" in ex.score_terms_note


@pytest.mark.parametrize("name", FAMILIES)
def test_the_shift_test_holds_in_every_layer_of_every_rope_family(opened, name):
    """RoPE's scores depend on offsets only: moving every token by s changes no layer's scores beyond
    float32 noise (windows, QK-norm, soft caps and NoPE layers keep that); the sentence says how much of
    each head turns, and that a NoPE layer has no position signal of its own."""
    from explorer.core.lessons import rope

    model = opened[name].model
    ids = reference(name)["token_ids"][:24]
    for layer in range(model.config.n_layers):
        c = rope.shift_check(model, ids, 40, layer=layer)
        assert c.shift == 40 and c.layer == layer and c.unchanged, (name, layer, c.max_abs_delta)
        if model.config.layer_rope_theta(layer) is None:
            assert "has no RoPE (a NoPE layer)" in c.sentence and "no position signal enters in this layer" in c.sentence
        elif model.config.rotary_dims is not None:
            r, d = model.config.rotary_dims, model.config.d_head
            assert f"the first {r} of each head's {d} dimensions ({100 * r / d:g} %" in c.sentence
        else:
            assert f"all {model.config.d_head} dimensions of each head" in c.sentence


@pytest.mark.parametrize("name", FAMILIES)
def test_the_formula_panel_s_steps_agree_with_each_family(opened, name):
    """Every extra step the formula panel writes (embedding scale, (1 + w) norm or none, QK-norm, partial
    rotary, soft cap, the parallel block's sum) is recomputed from the trace and the weights and agrees."""
    from explorer.core.lessons import formula
    from explorer.core.lessons.formula_text import formula_lines

    model = opened[name].model
    tr = model.trace(reference(name)["token_ids"])
    for layer in range(model.config.n_layers):
        facts = formula.layer_facts(model, layer)
        for head in range(model.config.n_heads):
            st = formula.attention_steps(tr, layer, head, 20, facts)
            parts = [st.input_norm, st.qk_norm, st.rotation, st.embedding, st.block]
            assert all(p.max_abs_diff < 1e-4 for p in parts if p is not None), (name, layer, head)
            assert st.max_abs_diff < 1e-5
            np.testing.assert_allclose(st.scores, tr.blocks[layer].attn_scores[head, 20, st.keys], atol=1e-4)
        text = " ".join(formula_lines(st, facts))
        cfg = model.config
        assert ("QK-norm" in text) == (cfg.qk_norm != "none")
        assert ("partial rotary" in text) == (cfg.rotary_dims is not None)
        assert ("soft cap before the mask" in text) == bool(cfg.attn_softcap)
        assert ("parallel block" in text) == (cfg.block_layout != "sequential")
        assert ("NoPE" in text) == (layer in cfg.nope_layers)
        assert ("x_i = e_i × 8 (√d_model" in text) == (layer == 0 and cfg.embed_scale != 1)


def test_a_gemma3_with_its_vision_tower_opens_as_its_language_model(opened):
    """model_type gemma3 (Gemma3ForConditionalGeneration: 4B and up) wraps a gemma3_text config in
    text_config and keeps its language model under language_model.model.: the text model opens, equal to
    transformers' own on text alone, and the vision tower and projector are left out, saying so."""
    ckpt = load_any(ARCH3 / "hf-gemma3-mm")
    assert ckpt.source_format == "hf-gemma3" and ckpt.training["model_type"] == "gemma3"
    assert "vision tower and the multimodal projector (34 tensors) are left out" in ckpt.training["note"]
    assert_agrees(ckpt, reference("hf-gemma3-mm"))
    cfg = ckpt.config
    assert (cfg.n_layers, cfg.qk_norm, cfg.rope_thetas, cfg.attn_windows, cfg.tied_unembed) == (
        2, "head", (1e4, 1e6), (8, 0), True)
