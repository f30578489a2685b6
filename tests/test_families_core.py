"""The model core's features for the 2025-26 families, each a config field (model/core): partial rotary,
explicit d_head, QK-norm per head and over the whole projection, (1 + w) RMSNorm, norms after the
branches, scaled embeddings, gated GELU, per-layer RoPE bases and NoPE layers, an explicit score scale,
soft-capped scores and logits, parallel blocks and an unembedding bias."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from test_reuse import NEW_FAMILIES

BASE = dict(vocab_size=40, context_length=16, d_model=16, n_heads=2, n_layers=2, d_mlp=32)
IDS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]


def tiny(family: str, **overrides) -> GPT:
    torch.manual_seed(11)
    model = GPT(GPTConfig(**{**BASE, **NEW_FAMILIES[family], **overrides})).eval()
    with torch.no_grad():  # norms away from 1 (and Gemma's w away from 0), so that each one matters
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):  # the norms' gains
                p.add_(torch.randn(p.shape) * 0.3)
    return model


@pytest.mark.parametrize("family", sorted(NEW_FAMILIES))
def test_forward_and_trace_are_one_path_to_the_bit(family):
    model = tiny(family)
    tr = model.trace(IDS)
    with torch.no_grad():
        np.testing.assert_array_equal(model(torch.tensor(IDS)).numpy(), tr.logits)
        # positions= runs the last MLP and the unembedding on those rows alone: a matrix product of 2 rows
        # instead of 10, which a BLAS may sum in another order (last-bit differences, 6e-8 seen here)
        np.testing.assert_allclose(model(torch.tensor([IDS]), positions=[4, 9])[0].numpy(), tr.logits[[4, 9]],
                                   rtol=0, atol=1e-6)
        final = model.final_logits(torch.from_numpy(tr.blocks[-1].resid_post.copy())).numpy()
    np.testing.assert_allclose(final, tr.logits, atol=1e-5)
    for lt in tr.blocks:
        np.testing.assert_allclose(lt.attn_weights.sum(-1), 1, atol=1e-5)
        assert lt.attn_scores_ready


@pytest.mark.parametrize("family", sorted(NEW_FAMILIES))
def test_state_dict_shapes_are_the_built_model(family):
    model = tiny(family)
    assert GPT.state_dict_shapes(model.config) == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert GPTConfig.from_dict(model.config.to_dict()) == model.config


def test_partial_rotary_turns_the_first_dimensions_only():
    model = tiny("neox", d_model=16, n_heads=2)  # d_head 8, rotary_dims 2
    lt = model.trace(IDS).blocks[0]
    np.testing.assert_array_equal(lt.q[..., 2:], lt.q_pre_rope[..., 2:])  # the other 6 carry no position
    assert np.abs(lt.q[:, 1:, :2] - lt.q_pre_rope[:, 1:, :2]).max() > 1e-3
    assert model.rope_angles(4).shape == (4, 1)
    angles = model.rope_angles(5)[:, 0]
    np.testing.assert_allclose(angles, np.arange(5) * 1.0)  # pair 0 turns by i · θ^0


def test_explicit_d_head_need_not_divide_d_model():
    cfg = GPTConfig(**{**BASE, "d_model": 12, "n_heads": 4, "d_head": 8})
    model = GPT(cfg)
    assert model.blocks[0].attn.W_Q.weight.shape == (32, 12) and model.blocks[0].attn.W_O.weight.shape == (12, 32)
    assert "d_head" in cfg.to_dict() and "d_head" not in GPTConfig(**BASE).to_dict()
    with pytest.raises(ValueError, match="n_heads .4. must divide d_model .10., or give d_head"):
        GPTConfig(**{**BASE, "d_model": 10, "n_heads": 4})


def test_qk_norm_normalises_before_rope():
    model = tiny("qwen3")
    lt = model.trace(IDS).blocks[1]
    attn = model.blocks[1].attn
    with torch.no_grad():
        want = attn.q_norm(torch.from_numpy(lt.q_pre_norm.copy())).numpy()  # each head's vector, one weight
    np.testing.assert_allclose(lt.q_pre_rope, want, atol=1e-6)
    olmo = tiny("olmo2", n_heads=4)  # 2 key/value heads
    lt, attn = olmo.trace(IDS).blocks[0], olmo.blocks[0].attn
    assert attn.q_norm.weight.shape == (16,) and attn.k_norm.weight.shape == (8,)  # n_heads · d_head, n_kv · d_head
    whole = np.concatenate(list(lt.q_pre_norm), axis=-1)  # (T, n_heads · d_head): the projection
    rms = np.sqrt((whole ** 2).mean(-1, keepdims=True) + olmo.config.norm_eps)
    got = np.concatenate(list(lt.q_pre_rope), axis=-1)
    np.testing.assert_allclose(got, whole / rms * attn.q_norm.weight.detach().numpy(), atol=1e-5)


def test_soft_caps_bound_scores_and_logits():
    model = tiny("gemma2")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4)  # large scores and logits
    tr = model.trace(IDS)
    for lt in tr.blocks:
        finite = lt.attn_scores[np.isfinite(lt.attn_scores)]
        assert np.abs(finite).max() <= 2.0 + 1e-6  # attn_softcap 2
        raw = np.einsum("hid,hjd->hij", lt.q, np.repeat(lt.k, lt.n_heads // lt.k.shape[0], 0)) * lt.attn_scale
        want = 2.0 * np.tanh(raw / 2.0)
        np.testing.assert_allclose(lt.attn_scores[lt.attn_mask[None].repeat(lt.n_heads, 0)],
                                   want[lt.attn_mask[None].repeat(lt.n_heads, 0)], atol=1e-5)
        assert lt.attn_softcap == 2.0 and lt.attn_scale == 0.3
    assert np.abs(tr.logits).max() <= 3.0 + 1e-6


def test_per_layer_bases_and_nope_layers():
    gemma = tiny("gemma3")
    assert gemma.blocks[0].attn.rope.theta == 100.0 and gemma.blocks[1].attn.rope.theta == 10000.0
    np.testing.assert_allclose(gemma.rope_angles(3, layer=0)[2], 2 * 100.0 ** (-np.arange(0, 8, 2) / 8), rtol=1e-6)
    smol = tiny("smollm3")
    assert smol.blocks[1].attn.rope is None and smol.rope_angles(4, layer=1) is None
    tr = smol.trace(IDS)
    assert tr.blocks[1].q_pre_rope is tr.blocks[1].q and tr.blocks[0].q_pre_rope is not tr.blocks[0].q
    assert smol.blocks[0].attn.rope is not None


def test_norms_after_the_branches_and_scaled_embeddings():
    tr = tiny("gemma2").trace(IDS)
    np.testing.assert_allclose(tr.tok_scaled, tr.tok * 4.0, atol=1e-6)
    np.testing.assert_array_equal(tr.x, tr.tok_scaled)
    lt = tr.blocks[0]
    np.testing.assert_allclose(lt.resid_mid, tr.x + lt.ln_attn_out, atol=1e-5)
    np.testing.assert_allclose(lt.resid_post, lt.resid_mid + lt.ln_mlp_out, atol=1e-5)
    model = tiny("gemma2")
    gain, _ = model.blocks[0].ln_attn_out.affine()
    np.testing.assert_allclose(gain, 1 + model.blocks[0].ln_attn_out.weight.detach().double().numpy())


def test_a_geglu_mlp_is_gelu_of_the_gate_times_the_up_projection():
    model = tiny("gemma2")
    mlp, h = model.blocks[0].mlp, torch.randn(3, 16)
    with torch.no_grad():
        want = mlp.fc_out(torch.nn.functional.gelu(mlp.fc_gate(h), approximate="tanh") * mlp.fc_in(h))
        torch.testing.assert_close(mlp(h), want)


def test_an_unembedding_bias_is_added_to_the_logits():
    model = tiny("phi")
    tr = model.trace(IDS)
    w, b = model.unembed.weight.detach().numpy(), model.unembed.bias.detach().numpy()
    np.testing.assert_allclose(tr.logits, tr.ln_final @ w.T + b, atol=1e-5)


@pytest.mark.parametrize("kwargs, field", [
    (dict(rotary_dims=3, positional="rope"), "rotary_dims"),
    (dict(rotary_dims=10, positional="rope"), "rotary_dims .10. must be at most d_head .8."),
    (dict(rotary_dims=2), "need positional 'rope'"),
    (dict(qk_norm="layer"), "qk_norm"),
    (dict(norm_unit_offset=True), "norm_unit_offset"),
    (dict(block_layout="parallel", norm_placement="post"), "needs norm_placement 'pre'"),
    (dict(unembed_bias=True), "unembed_bias needs an untied"),
    (dict(attn_softcap=-1.0), "attn_softcap"),
    (dict(final_softcap=math.inf), "final_softcap"),
    (dict(score_scale=0.5, scale_scores=False), "score_scale needs scale_scores"),
    (dict(embed_scale=0), "embed_scale"),
    (dict(positional="rope", rope_thetas=(1e4,)), "rope_thetas has 1 entries for 2 layers"),
    (dict(positional="rope", nope_layers=(2,)), "nope_layers"),
    (dict(positional="rope", nope_layers=(1, 0)), "nope_layers"),
    (dict(d_head=0), "d_head"),
])
def test_new_fields_are_validated(kwargs, field):
    with pytest.raises(ValueError, match=field):
        GPTConfig(**{**BASE, **kwargs})


def test_a_full_rotary_width_is_stored_as_none():
    cfg = GPTConfig(**{**BASE, "positional": "rope", "rotary_dims": 8})
    assert cfg.rotary_dims is None and cfg.rotary_width == 8
    assert dataclasses.replace(cfg, rotary_dims=4).rotary_width == 4
