"""The lessons' Qt-free logic: reorderings and their sentence, the formula steps, the four variants.

Every claim of issue 5 at its tolerance, on seeded tiny models and on the shipped checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.lessons import formula
from explorer.core.lessons import positional
from explorer.core.lessons import variants
from explorer.core.lessons.positional_sentence import predict_unchanged
from model import GPT, GPTConfig, load_checkpoint

ASSETS = Path(__file__).resolve().parents[1] / "assets"
SHIPPED = sorted(ASSETS.glob("tinystories-1L1H*.safetensors"))
IDS = [3, 7, 9, 11, 4, 5, 8, 2]


def _tiny(n_layers: int = 1, n_heads: int = 2, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=40, context_length=12, d_model=32, n_heads=n_heads,
                    n_layers=n_layers, d_mlp=64)
    return GPT(cfg).eval()


@pytest.fixture(scope="module")
def tiny() -> GPT:
    return _tiny()


@pytest.fixture(scope="module")
def tiny2() -> GPT:
    return _tiny(n_layers=2)


@pytest.fixture(scope="module", params=SHIPPED or [None], ids=lambda p: p.name if p else "absent")
def shipped(request):
    if request.param is None:
        pytest.skip("no assets/tinystories-1L1H*.safetensors yet")
    ckpt = load_checkpoint(request.param)
    ids = ckpt.tokenizer.encode("once upon a time there was a little girl named lily . she").ids
    return ckpt.model.eval(), ids


# --- reorderings -------------------------------------------------------------------------------

def test_reorderings_are_the_named_permutations():
    assert positional.reverse(4).tolist() == [3, 2, 1, 0]
    assert positional.reverse(4, keep_last=True).tolist() == [2, 1, 0, 3]
    assert positional.rotate(4, 1).tolist() == [1, 2, 3, 0]
    assert positional.rotate(5, 2, keep_last=True).tolist() == [2, 3, 0, 1, 4]
    assert positional.swap(5, 1, 3).tolist() == [0, 3, 2, 1, 4]
    a, b = positional.shuffle(9, seed=1), positional.shuffle(9, seed=2)
    assert sorted(a.tolist()) == list(range(9)) and not np.array_equal(a, np.arange(9))
    assert not np.array_equal(a, b) and np.array_equal(a, positional.shuffle(9, seed=1))
    assert positional.shuffle(6, seed=3, keep_last=True)[-1] == 5
    assert positional.reverse(0).tolist() == [] and positional.shuffle(1, 0).tolist() == [0]


def test_bad_orders_are_refused_with_a_message():
    with pytest.raises(ValueError, match="not a rearrangement"):
        positional.check_permutation([0, 0, 1], 3)
    with pytest.raises(ValueError, match="needs 3 positions"):
        positional.check_permutation([0, 1], 3)
    with pytest.raises(ValueError, match="outside the 3 tokens"):
        positional.swap(3, 0, 3)


CAUSAL_3 = [np.tril(np.ones((3, 3), bool))]  # True = may attend


def test_attending_to_a_repeated_token_is_attending_to_it_once():
    # [a, a, b] -> [a, b, a]: the first a sees {a} then {a}; the second sees {a, a} then {a, b, a}.
    same = predict_unchanged([5, 5, 6], [0, 2, 1], pe=False, masks=CAUSAL_3, n_levels=1)
    assert same.tolist() == [True, False, False]
    same = predict_unchanged([5, 5, 6], [1, 0, 2], pe=False, masks=CAUSAL_3, n_levels=1)
    assert same.tolist() == [True, True, True]


def test_a_local_window_limits_what_a_token_sees():
    # [a, b, c, d] -> [b, a, c, d] with a window of 2: c sees {b, c} before and {a, c} after; d sees {c, d} both times.
    window = np.tril(np.ones((4, 4), bool)) & ~np.tril(np.ones((4, 4), bool), -2)
    same = predict_unchanged([1, 2, 3, 4], [1, 0, 2, 3], pe=False, masks=[window], n_levels=1)
    assert same.tolist() == [False, False, False, True]
    # Any mask that is not a band (here: every other key) is counted exactly too.
    odd = np.tril(np.ones((4, 4), bool)) & (np.arange(4)[None, :] % 2 == 0) | np.eye(4, dtype=bool)
    same = predict_unchanged([1, 2, 3, 4], [0, 3, 2, 1], pe=False, masks=[odd], n_levels=1)
    assert same.tolist() == [True, False, True, False]


# --- the positional-encoding claims ------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.permutations(list(range(len(IDS)))))
def test_without_pe_and_mask_no_token_changes_under_any_order(perm):
    c = positional.compare_orders(_TINY, IDS, perm, layer=0, head=1, causal=False)
    assert c.attn_delta[0].max() < 1e-5 and c.block_delta[0].max() < 1e-5
    if not c.is_identity:
        assert c.sentence(False).startswith("No token's contextual embedding changed")
        assert "treats the input as a set" in c.sentence(False)


_TINY = _tiny()


@settings(max_examples=25, deadline=None)
@given(st.permutations(list(range(len(IDS) - 1))))
def test_without_pe_permuting_the_tokens_before_the_last_keeps_its_prediction(head):
    c = positional.compare_orders(_TINY, IDS, list(head) + [len(IDS) - 1], causal=True)
    assert c.last_tv[0] < 1e-6 and c.attn_delta[0][-1] < 1e-5


def test_a_model_without_positional_table_says_on_and_off_are_the_same():
    torch.manual_seed(0)
    nope = GPT(GPTConfig(vocab_size=40, context_length=12, d_model=32, n_heads=2, n_layers=1, d_mlp=64,
                         positional="none")).eval()
    c = positional.compare_orders(nope, IDS, positional.reverse(len(IDS), keep_last=True), causal=True)
    np.testing.assert_array_equal(c.attn_delta[0], c.attn_delta[1])
    assert c.sentence(True).startswith("This model has no positional encoding, so switching it on changes nothing.")
    assert "did not change" in c.sentence(True)


def test_without_pe_with_mask_keeping_the_last_keeps_its_prediction(tiny):
    perm = positional.shuffle(len(IDS), seed=4, keep_last=True)
    c = positional.compare_orders(tiny, IDS, perm, causal=True)
    assert c.last_tv[0] < 1e-6
    assert c.last_tv[1] > 1e-5 and c.last_tv[1] > 1000 * c.last_tv[0]  # PE on: clearly larger
    assert c.attn_delta[1].max() > 1e-2
    off = c.sentence(False)
    assert "did not change" in off and "sees the same set of tokens" in off
    assert "does not explain" not in off
    assert "positional encoding x_i = e_i + p_i" in c.sentence(True)
    assert "The next-token distribution at the last position changed" in c.sentence(True)


def test_moving_the_last_token_changes_the_prediction(tiny):
    c = positional.compare_orders(tiny, IDS, positional.reverse(len(IDS)), causal=True,
                                  tokens=[f"w{i}" for i in IDS])
    assert c.last_moved and c.last_tv[0] > 1e-3
    assert "a different token ('w3') now stands last" in c.sentence(False)


def test_with_the_mask_only_tokens_with_a_new_prefix_change(tiny):
    c = positional.compare_orders(tiny, IDS, positional.swap(len(IDS), 3, 5), causal=True)
    changed = c.attn_delta[0] > 1e-5
    assert changed.tolist() == [False, False, False, True, True, True, False, False]
    assert changed.tolist() == (~c.prefix_same).tolist()
    assert c.sentence(False).startswith("3 of 8 tokens' contextual embeddings changed")
    assert "depends only on which tokens stand at or before it" in c.sentence(False)


def test_several_layers_leak_order_through_the_mask(tiny2):
    c = positional.compare_orders(tiny2, IDS, positional.reverse(len(IDS), keep_last=True),
                                  layer=1, causal=True)
    assert c.prefix_same[-1] and c.last_tv[0] > 1e-5
    assert c.block_delta[0][-1] > 1e-3
    off = c.sentence(False)
    assert "the mask leaks order" in off and "with 2 layers the causal mask leaks" in off
    # In the first block the last token is still untouched.
    c0 = positional.compare_orders(tiny2, IDS, positional.reverse(len(IDS), keep_last=True),
                                   layer=0, causal=True)
    assert c0.attn_delta[0][-1] < 1e-5


def test_identity_and_empty_orders_say_so(tiny):
    c = positional.compare_orders(tiny, IDS, np.arange(len(IDS)))
    assert "nothing can change" in c.sentence(True) and c.attn_delta.max() == 0
    e = positional.compare_orders(tiny, [], [])
    assert e.sentence(False) == "There are no tokens to reorder." and e.run(True, True).attn_weights.shape == (0, 0)


def test_pe_switch_is_inference_only_and_bitwise_reversible(tiny):
    on1 = tiny.trace(IDS).logits
    off = tiny.trace(IDS, positional_encoding=False).logits
    on2 = tiny.trace(IDS).logits
    assert np.array_equal(on1, on2) and not np.array_equal(on1, off)


def test_one_token_with_pe_is_exactly_e0_plus_p0(tiny):
    tr = tiny.trace([7])
    expected = (tiny.tok_emb.weight[7] + tiny.pos_emb.weight[0]).detach().numpy()
    assert np.array_equal(tr.x[0], expected)
    assert tr.blocks[0].attn_weights.shape == (2, 1, 1) and np.all(tr.blocks[0].attn_weights == 1.0)


def test_shipped_models_at_the_issue_tolerances(shipped):
    model, ids = shipped
    T = len(ids)
    rng = np.random.default_rng(0)
    for _ in range(3):
        c = positional.compare_orders(model, ids, rng.permutation(T), causal=False)
        assert c.attn_delta[0].max() < 1e-5 and c.block_delta[0].max() < 1e-5
    kept = positional.compare_orders(model, ids, positional.shuffle(T, 0, keep_last=True))
    assert kept.last_tv[0] < 1e-6
    if model.config.uses_position:
        assert kept.last_tv[1] > 1e-3
    for pe in (False, True):
        assert "does not explain" not in kept.sentence(pe)
    # The switch is inference-only, the formula agrees, the simplified variant is softmax(x xᵀ) x.
    on1, off, on2 = (model.trace(ids, positional_encoding=pe).logits for pe in (True, False, True))
    assert np.array_equal(on1, on2)
    tr = model.trace(ids)
    for i in range(T):
        s = formula.attention_steps(tr, 0, 0, i)
        assert s.max_abs_diff < 1e-6 and abs(s.weights.sum() - 1) < 1e-12
    x = torch.tensor(tr.x, dtype=torch.float64)
    simple = variants.all_variants(model, tr, 0, 0, T - 1)[0]
    np.testing.assert_allclose(simple.outputs[0], (torch.softmax(x @ x.T, -1) @ x).numpy(), atol=1e-10)
    one = model.trace(ids[:1])
    pos = model.pos_emb.weight[0] if model.pos_emb is not None else 0
    assert np.array_equal(one.x[0], (model.tok_emb.weight[ids[0]] + pos).detach().numpy())


# --- the formula -------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [True, False])
def test_formula_recomputes_the_trace(tiny, causal):
    tr = tiny.trace(IDS, causal=causal)
    for i in (0, 3, len(IDS) - 1):
        s = formula.attention_steps(tr, 0, 1, i)
        assert s.max_abs_diff < 1e-6 and abs(s.weights.sum() - 1) < 1e-12
        assert len(s.keys) == (i + 1 if causal else len(IDS))
        np.testing.assert_allclose(s.scores, tr.blocks[0].attn_scores[1, i, s.keys], atol=1e-6)
        np.testing.assert_allclose(s.dots / s.sqrt_d_head, s.scores)
        np.testing.assert_allclose(s.exps / s.norm, s.weights)
        np.testing.assert_allclose(s.weighted_v.sum(0), s.out)


def test_formula_refuses_bad_indices(tiny):
    with pytest.raises(ValueError, match="no tokens"):
        formula.attention_steps(tiny.trace([]), 0, 0, 0)
    with pytest.raises(ValueError, match="head 5"):
        formula.attention_steps(tiny.trace(IDS), 0, 5, 0)
    assert formula.attention_steps(tiny.trace(IDS), 0, 0, -1).position == len(IDS) - 1


# --- the four variants -------------------------------------------------------------------------

def test_simplified_variant_is_softmax_of_x_xT_times_x(tiny):
    tr = tiny.trace(IDS)
    v = variants.all_variants(tiny, tr, 0, 0, 2)[0]
    x = torch.tensor(tr.x, dtype=torch.float64)
    expected = torch.softmax(x @ x.T, dim=-1) @ x
    np.testing.assert_allclose(v.outputs[0], expected.numpy(), atol=1e-12)
    np.testing.assert_allclose(v.output_row, expected[2].numpy(), atol=1e-12)


def test_variants_agree_with_the_model_where_they_should(tiny2):
    tr = tiny2.trace(IDS)
    simple, self_, causal, multi = variants.all_variants(tiny2, tr, 1, 1, 4)
    assert [v.key for v in (simple, self_, causal, multi)] == list(variants.KEYS)
    assert causal.weights_delta < 1e-6 and causal.output_delta < 1e-6
    assert "equal to the trace" in causal.difference
    assert multi.output_delta < 1e-5 and multi.mixed.shape == (len(IDS), 32)
    np.testing.assert_allclose(multi.weights, tr.blocks[1].attn_weights, atol=1e-6)
    assert "equal to the trace's attention output" in multi.difference
    # Without the mask the weights above the diagonal are not zero any more.
    assert self_.weights_delta > 1e-3 and np.triu(self_.weights[0], 1).sum() > 0
    assert "different from the trace's" in self_.difference
    bidirectional = tiny2.trace(IDS, causal=False)
    self_b = variants.all_variants(tiny2, bidirectional, 1, 1, 4)[1]
    assert self_b.weights_delta < 1e-6 and "equal to the trace's" in self_b.difference


@pytest.mark.parametrize("causal", [True, False])
def test_exchanging_two_equal_tokens_changes_nothing(tiny, causal):
    # [3, 7, 3, 5] -> [3, 7, 3, 5]: the two 3s changed places, and the sequence is the same.
    c = positional.compare_orders(tiny, [3, 7, 3, 5], [2, 1, 0, 3], causal=causal)
    assert c.is_identity and c.perm.tolist() == [0, 1, 2, 3]
    assert c.last_tv.max() == 0 and c.attn_delta.max() == 0 and c.block_delta.max() == 0
    for pe in (False, True):
        assert "nothing can change" in c.sentence(pe) and "changed" not in c.sentence(pe)


def test_equal_tokens_are_matched_in_order():
    # [a, b, a, c] reversed is [c, a, b, a]: the first a stays the first a (now at 1), the second the second.
    assert positional.canonical_order([5, 6, 5, 7], [3, 2, 1, 0]).tolist() == [3, 0, 1, 2]
    assert positional.canonical_order([5, 5, 5], [2, 0, 1]).tolist() == [0, 1, 2]
    assert positional.canonical_order([1, 2, 3], [2, 0, 1]).tolist() == [2, 0, 1]  # distinct: as asked
