"""The transformer and its trace: shapes, attention invariants, exact agreement, cropping."""

import copy
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig

TINY = GPTConfig(vocab_size=23, context_length=8, d_model=16, n_heads=2, n_layers=2, d_mlp=32)


def make_model(config: GPTConfig = TINY, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(config).eval()


@pytest.fixture
def model() -> GPT:
    return make_model()


def test_default_config_is_the_course_model():
    config = GPTConfig()
    assert (config.context_length, config.n_layers, config.n_heads, config.vocab_size) == (32, 1, 1, 4096)
    assert make_model(config).n_params() == 726_528


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(d_model=10, n_heads=3), "n_heads"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(n_layers=True), "n_layers"),
        (dict(gelu="relu"), "gelu"),
        (dict(norm_eps=-1.0), "norm_eps"),
        (dict(positional="yes"), "positional"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        GPTConfig(**kwargs)


def test_config_round_trips_and_rejects_unknown_keys():
    assert GPTConfig.from_dict(TINY.to_dict()) == TINY
    with pytest.raises(ValueError, match="unknown config keys: n_embd"):
        GPTConfig.from_dict({**TINY.to_dict(), "n_embd": 3})


def test_trace_shapes(model):
    T, c = 5, TINY
    tr = model.trace([1, 2, 3, 4, 5])
    assert tr.token_ids.tolist() == [1, 2, 3, 4, 5] and tr.dropped == 0
    for name in ("tok", "pos", "x", "ln_final"):
        assert getattr(tr, name).shape == (T, c.d_model)
    assert len(tr.blocks) == c.n_layers
    for layer in tr.blocks:
        for name in ("q", "k", "v", "head_out"):
            assert getattr(layer, name).shape == (c.n_heads, T, c.d_head)
        for name in ("attn_scores", "attn_weights"):
            assert getattr(layer, name).shape == (c.n_heads, T, T)
        for name in ("ln1", "attn_out", "resid_mid", "ln2", "mlp_out", "resid_post"):
            assert getattr(layer, name).shape == (T, c.d_model)
    assert tr.logits.shape == tr.probs.shape == (T, c.vocab_size)
    assert tr.n_tokens == T


def test_trace_is_immutable(model):
    tr = model.trace([1, 2, 3])
    with pytest.raises(ValueError):
        tr.logits[0, 0] = 1.0
    with pytest.raises(AttributeError):
        tr.dropped = 3  # type: ignore[misc]


def test_dotted_names_reach_every_tensor(model):
    tr = model.trace([3, 1, 4])
    names = tr.names()
    assert names[:3] == ["tok_emb", "pos_emb", "x"]
    assert "blocks.1.attn.attn_weights" in names and names[-2:] == ["logits", "probs"]
    assert tr["blocks.1.attn.q"] is tr.blocks[1].q
    assert tr["blocks.0.mlp.fc_out"] is tr.blocks[0].mlp_out
    assert tr["blocks.0.attn.W_O"] is tr.blocks[0].attn_out
    assert tr["x"] is tr.x and tr["ln_f"] is tr.ln_final
    assert set(tr.as_dict()) == set(names)
    with pytest.raises(KeyError, match="no tensor named"):
        tr["blocks.9.attn.q"]


def test_dotted_names_are_module_paths_and_a_module_s_name_is_its_output(model):
    modules = dict(model.named_modules())
    outputs = {}
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: outputs.__setitem__(name, out))
             for name, m in modules.items() if name]
    tr = model.trace([3, 1, 4])
    for h in hooks:
        h.remove()
    for name in tr.names():
        owner = name.rpartition(".")[0]
        assert owner == "" or owner in modules, name  # a value computed inside a real module
        if name in modules:  # a module's own name: exactly what that module returned
            out = outputs[name].detach()
            out = out[0] if out.dim() == tr[name].ndim + 1 else out  # batch axis removed
            np.testing.assert_array_equal(tr[name], out.numpy(), err_msg=name)
    assert {"tok_emb", "pos_emb", "blocks.1.attn.W_O", "blocks.1.mlp.fc_out", "ln_f"} <= set(tr.names()) & set(modules)


def test_embedding_sum_is_e_plus_p(model):
    tr = model.trace([7, 2, 9])
    np.testing.assert_array_equal(tr.tok, model.tok_emb.weight[[7, 2, 9]].detach().numpy())
    np.testing.assert_array_equal(tr.pos, model.pos_emb.weight[:3].detach().numpy())
    np.testing.assert_array_equal(tr.x, tr.tok + tr.pos)


def test_attention_rows_are_causal_probability_distributions(model):
    tr = model.trace([5, 3, 8, 8, 1, 0, 2])
    for layer in tr.blocks:
        w = layer.attn_weights
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
        upper = np.triu(np.ones(w.shape[-2:], dtype=bool), k=1)
        assert (w[:, upper] == 0.0).all()
        assert np.isneginf(layer.attn_scores[:, upper]).all()
        np.testing.assert_array_equal(w[:, 0], np.eye(1, w.shape[-1])[0][None].repeat(w.shape[0], 0))
    np.testing.assert_allclose(tr.probs.sum(-1), 1.0, atol=1e-6)


def test_scores_are_scaled_dot_products(model):
    tr = model.trace([4, 6, 1, 3])
    layer = tr.blocks[0]
    expected = layer.q @ layer.k.transpose(0, 2, 1) / np.sqrt(TINY.d_head)
    lower = np.tril(np.ones((4, 4), dtype=bool))
    np.testing.assert_allclose(layer.attn_scores[:, lower], expected[:, lower], rtol=1e-5, atol=1e-6)


def test_trace_logits_equal_forward_logits_exactly(model):
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    with torch.no_grad():
        logits = model(torch.tensor(ids)).numpy()
    np.testing.assert_array_equal(model.trace(ids).logits, logits)


def test_explicit_attention_agrees_with_fused_sdpa(model):
    tr = model.trace([3, 1, 4, 1, 5, 9, 2, 6])
    for layer in tr.blocks:
        q, k, v = (torch.from_numpy(a.copy()) for a in (layer.q, layer.k, layer.v))
        fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        np.testing.assert_allclose(layer.head_out, fused.numpy(), atol=1e-5)


def test_pe_off_mask_off_is_permutation_equivariant():
    model = make_model()
    ids = np.array([3, 1, 4, 15, 9, 2, 6])
    base = model.trace(ids, positional_encoding=False, causal=False)
    for perm in [np.random.default_rng(s).permutation(len(ids)) for s in range(5)]:
        tr = model.trace(ids[perm], positional_encoding=False, causal=False)
        for a, b in zip(base.named(), tr.named()):
            name, arr = a
            if arr.ndim == 2 and arr.shape[0] == len(ids):
                np.testing.assert_allclose(b[1], arr[perm], atol=1e-5, err_msg=name)
        np.testing.assert_allclose(
            tr.blocks[1].attn_weights, base.blocks[1].attn_weights[:, perm][:, :, perm], atol=1e-5
        )


def test_pe_off_mask_on_last_prediction_ignores_order_before_it():
    # One block: the last query sees the multiset of earlier tokens, whatever their order.
    model = make_model(GPTConfig(**{**TINY.to_dict(), "n_layers": 1}))
    ids = [3, 1, 4, 15, 9, 2, 6]
    last_off = model.trace(ids, positional_encoding=False).probs[-1]
    last_on = model.trace(ids).probs[-1]
    for perm in itertools.islice(itertools.permutations(range(6)), 1, 30, 7):
        reordered = [ids[p] for p in perm] + [ids[-1]]
        np.testing.assert_allclose(
            model.trace(reordered, positional_encoding=False).probs[-1], last_off, atol=1e-6
        )
        assert np.abs(model.trace(reordered).probs[-1] - last_on).max() > 1e-5


def test_with_several_blocks_the_causal_mask_leaks_order():
    # Block 1's keys are block 0's outputs, which depend on the tokens before each position.
    model = make_model()
    ids = [3, 1, 4, 15, 9, 2, 6]
    last = model.trace(ids, positional_encoding=False).probs[-1]
    reordered = ids[:-1][::-1] + [ids[-1]]
    assert np.abs(model.trace(reordered, positional_encoding=False).probs[-1] - last).max() > 1e-6


def test_pe_switch_never_touches_the_weights(model):
    ids = [5, 3, 2]
    before = model.trace(ids).logits
    model.trace(ids, positional_encoding=False)
    np.testing.assert_array_equal(model.trace(ids).logits, before)


def test_cropping_keeps_the_last_context_length_tokens(model):
    ids = list(range(20))
    tr = model.trace(ids)
    assert tr.dropped == 12 and tr.token_ids.tolist() == ids[-8:]
    np.testing.assert_array_equal(tr.logits, model.trace(ids[-8:]).logits)
    for given in (tuple(ids), np.array(ids), torch.tensor(ids)):  # cropped before or after converting
        same = model.trace(given)
        assert same.dropped == 12 and same.token_ids.tolist() == ids[-8:]
    with pytest.raises(ValueError, match="token id 99"):  # a bad id among those run is refused
        model.trace(ids[:7] + [99])


def test_zero_tokens_give_a_defined_empty_trace(model):
    tr = model.trace([])
    assert tr.n_tokens == 0 and tr.dropped == 0
    assert tr.logits.shape == (0, TINY.vocab_size)
    assert tr.blocks[0].attn_weights.shape == (TINY.n_heads, 0, 0)


def test_one_token_attends_to_itself(model):
    tr = model.trace([4])
    for layer in tr.blocks:
        np.testing.assert_array_equal(layer.attn_weights, np.ones((TINY.n_heads, 1, 1), np.float32))


def test_out_of_vocabulary_ids_are_refused(model):
    with pytest.raises(ValueError, match="token id 23 is outside the vocabulary"):
        model.trace([1, 23])
    with pytest.raises(ValueError, match="token id -1 is outside the vocabulary"):
        model.trace(np.array([3, -1, 2]))


def test_trace_takes_lists_numpy_and_torch_ids_alike(model):
    ids = [2, 7, 1, 5]
    ref = model.trace(ids)
    for given in (np.array(ids, np.int32), torch.tensor(ids), torch.tensor([ids])[0, :]):
        tr = model.trace(given)
        np.testing.assert_array_equal(tr.token_ids, ids)
        np.testing.assert_array_equal(tr.logits, ref.logits)
    assert not ref.token_ids.flags.writeable and not ref.blocks[0].q.flags.writeable


def test_forward_refuses_more_than_the_context(model):
    with pytest.raises(ValueError, match="exceed the context length of 8"):
        model(torch.zeros(9, dtype=torch.long))


def test_head_weights_reproduce_q_k_v(model):
    tr = model.trace([2, 7, 1])
    w = model.blocks[0].attn.head_weights()
    assert w["W_Q"].shape == (TINY.n_heads, TINY.d_model, TINY.d_head)
    assert w["W_O"].shape == (TINY.n_heads, TINY.d_head, TINY.d_model)
    h = tr.blocks[0].ln1
    for name, got in (("W_Q", tr.blocks[0].q), ("W_K", tr.blocks[0].k), ("W_V", tr.blocks[0].v)):
        np.testing.assert_allclose(np.einsum("td,hde->hte", h, w[name]), got, atol=1e-6)
    z = tr.blocks[0].head_out
    bias = model.blocks[0].attn.W_O.bias.detach().numpy()
    np.testing.assert_allclose(np.einsum("hte,hed->td", z, w["W_O"]) + bias, tr.blocks[0].attn_out, atol=1e-6)


@pytest.mark.parametrize(
    "config",
    [
        GPTConfig(vocab_size=11, context_length=4, d_model=8, n_heads=2, n_layers=1, d_mlp=8,
                  positional="none", tied_unembed=False, gelu="tanh", qkv_bias=True,
                  o_bias=False, mlp_bias=False, norm_bias=False),
    ],
)
def test_variants_build_and_trace(config):
    model = make_model(config)
    tr = model.trace([1, 2, 3])
    assert model.pos_emb is None and not tr.positional_encoding
    assert (tr.pos == 0).all()
    np.testing.assert_array_equal(tr.x, tr.tok)
    assert "unembed.weight" in model.state_dict()


@pytest.mark.parametrize("overrides", [
    {}, {"positional": "none"}, {"tied_unembed": False}, {"qkv_bias": True, "o_bias": False, "mlp_bias": False},
    {"norm_bias": False, "n_layers": 3},
    {"positional": "rope", "qk_norm": "head", "d_head": 12, "norm_placement": "sandwich", "mlp": "geglu"},
    {"positional": "rope", "qk_norm": "full", "norm_placement": "post", "n_kv_heads": 1},
    {"block_layout": "parallel_one_norm", "tied_unembed": False, "unembed_bias": True},
    {"block_layout": "parallel", "positional": "rope", "rotary_dims": 4},
])
def test_state_dict_shapes_match_a_built_model(overrides):
    config = GPTConfig(**{**TINY.to_dict(), **overrides})
    built = {k: tuple(v.shape) for k, v in GPT(config).state_dict().items()}
    assert GPT.state_dict_shapes(config) == built


@pytest.mark.parametrize("norm", [dict(), dict(norm_bias=False), dict(norm="rmsnorm", norm_bias=False)])
def test_a_frozen_norm_is_the_norm_at_its_input_and_linear_elsewhere(norm):
    model = make_model(GPTConfig(**{**TINY.to_dict(), **norm}), seed=3)
    ln = model.blocks[1].ln1
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
    x = np.random.default_rng(0).normal(size=(5, 16)) * 3 + 1  # (T, d_model), float64
    frozen = ln.frozen(x)
    with torch.no_grad():
        want = copy.deepcopy(ln).double()(torch.from_numpy(x)).numpy()
    shift = 0 if frozen.shift is None else frozen.shift
    np.testing.assert_allclose(frozen.linear(x) + shift, want, atol=1e-12)
    a, b = x[::-1].copy(), np.ones_like(x)  # other inputs: parts add up, with x's scale
    np.testing.assert_allclose(frozen.linear(a) + frozen.linear(b), frozen.linear(a + b), atol=1e-12)
    u = np.arange(16.0)
    np.testing.assert_allclose((frozen.linear(a) * u).sum(-1), (a * frozen.direction(u)).sum(-1), atol=1e-10)
    assert frozen.centred == ("norm" not in norm) and (frozen.shift is None) == bool(norm)


def test_final_logits_are_what_follows_the_last_block(model):
    tr = model.trace([3, 1, 4, 1])
    with torch.no_grad():
        got = model.final_logits(torch.from_numpy(tr.blocks[-1].resid_post.copy()))
    np.testing.assert_allclose(got.numpy(), tr.logits, atol=1e-6)
    assert model.unembed_weight is model.tok_emb.weight


def test_head_weights_of_some_projections_are_those_of_all():
    attn = make_model(GPTConfig(**{**TINY.to_dict(), "n_kv_heads": 1, "qkv_bias": True})).blocks[0].attn
    every, some = attn.head_weights(), attn.head_weights(["W_O", "b_V"])
    assert set(some) == {"W_O", "b_V"} and set(every) == {f"{p}_{x}" for p in "Wb" for x in "QKVO"}
    for name, a in some.items():
        np.testing.assert_array_equal(a, every[name])
    assert every["W_K"].shape == (1, 16, 8) and every["W_O"].shape == (2, 8, 16)
    np.testing.assert_array_equal(every["W_O"][1], attn.W_O.weight.detach().numpy()[:, 8:].T)  # head 1's rows of z
    every["W_Q"][0, 0, 0] += 1  # a copy: the model is untouched
    assert attn.head_weights()["W_Q"][0, 0, 0] != every["W_Q"][0, 0, 0]
    with pytest.raises(ValueError, match="W_X"):
        attn.head_weights(["W_X"])


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_a_trace_can_start_at_a_later_position(positional):
    model = make_model(GPTConfig(**{**TINY.to_dict(), "positional": positional}))
    ids = [5, 3, 8]
    late = model.trace(ids, start_position=4)
    assert late.start_position == 4 and late.n_tokens == 3 and late._reuse is None
    base = model.trace(ids)
    if positional == "learned":  # x_i = e_i + p_(4+i)
        np.testing.assert_array_equal(late.pos, model.pos_emb.weight[4:7].detach().numpy())
        assert np.abs(late.logits - base.logits).max() > 1e-3
    else:  # RoPE: the scores depend on i - j only; q and k turned by (4 + i) θ
        for a, b in zip(late.blocks, base.blocks):
            np.testing.assert_allclose(a.attn_scores, b.attn_scores, atol=1e-5)
            np.testing.assert_array_equal(a.q_pre_rope, b.q_pre_rope)
        assert np.abs(late.blocks[0].q - base.blocks[0].q).max() > 1e-3
    cropped = model.trace(list(range(1, 10)), start_position=6)  # 8 positions: 2 left
    assert cropped.token_ids.tolist() == [8, 9] and cropped.dropped == 7
    assert model.trace(ids, start_position=4, reuse=base).reused_rows == 0
    for bad in (-1, 8, 1.5):
        with pytest.raises(ValueError, match="start_position"):
            model.trace(ids, start_position=bad)
