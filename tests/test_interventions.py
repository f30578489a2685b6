"""Interventions in the forward path: ablated heads, key masks (one or a batch), τ, the scale switch."""

import copy

import numpy as np
import pytest
import torch

from explain_models import FAMILIES, IDS, family_model
from model import GPT, GPTConfig
from model.core.interventions import Interventions, leave_one_out_masks


@pytest.mark.parametrize("family", ["gpt2", "llama", "neo"])
def test_ablating_a_head_equals_zeroing_its_W_O_columns(family):
    model = family_model(family)
    layer, head = 1, 1
    tr = model.trace(IDS, interventions=Interventions(ablate=[(layer, head)]))
    zeroed = copy.deepcopy(model)
    dh = model.config.d_head
    with torch.no_grad():
        zeroed.blocks[layer].attn.W_O.weight[:, head * dh:(head + 1) * dh] = 0
    ref = zeroed.trace(IDS)
    np.testing.assert_allclose(tr.logits, ref.logits, atol=1e-6)
    np.testing.assert_allclose(tr.blocks[layer].attn_out, ref.blocks[layer].attn_out, atol=1e-6)
    assert (tr.blocks[layer].head_out[head] == 0).all() and (tr.blocks[layer].head_out[1 - head] != 0).any()
    plain = model.trace(IDS)
    assert np.abs(plain.logits - tr.logits).max() > 1e-3  # the head mattered
    np.testing.assert_array_equal(tr.blocks[layer].attn_weights, plain.blocks[layer].attn_weights)
    assert tr.interventions.ablate == ((1, 1),) and plain.interventions is None


def test_the_scale_switch_equals_a_model_built_the_other_way():
    for family, flipped in (("gpt2", False), ("neo", True)):
        model = family_model(family)
        other = GPT(GPTConfig(**{**model.config.to_dict(), "scale_scores": flipped})).eval()
        other.load_state_dict(model.state_dict())
        tr = model.trace(IDS, interventions=Interventions(scale_scores=flipped))
        np.testing.assert_allclose(tr.logits, other.trace(IDS).logits, atol=1e-5)
        assert tr.blocks[0].attn_scale == other.blocks[0].attn.scale


def test_temperature_divides_the_scores_before_the_softmax():
    model = family_model("gpt2")
    plain, hot = model.trace(IDS), model.trace(IDS, interventions=Interventions(temperature=2.0))
    ok = plain.blocks[0].attn_mask
    np.testing.assert_allclose(hot.blocks[0].attn_scores[:, ok], plain.blocks[0].attn_scores[:, ok] / 2, rtol=1e-5)
    assert hot.blocks[0].attn_scale == pytest.approx(plain.blocks[0].attn_scale / 2)
    flat = model.trace(IDS, interventions=Interventions(temperature=1e6))
    np.testing.assert_allclose(flat.blocks[0].attn_weights[0, 4, :5], 0.2, atol=1e-5)  # uniform over 5 keys


def test_a_key_mask_hides_keys_and_is_recorded():
    model = family_model("llama")
    mask = torch.ones(len(IDS), len(IDS), dtype=torch.bool)
    mask[:, 2] = False
    tr = model.trace(IDS, interventions=Interventions(key_mask=mask))
    for layer in tr.blocks:
        assert (layer.attn_weights[:, 3:, 2] == 0).all()
        np.testing.assert_allclose(layer.attn_weights.sum(-1), 1, atol=1e-6)
        assert not layer.attn_mask[:, 2].any() and layer.attn_mask[3, 1]
    # Query 2 hidden from itself has nothing left to see... except keys 0 and 1: still a distribution.
    assert tr.blocks[0].attn_weights[0, 2, :2].sum() == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_batch_of_masks_on_one_sequence_equals_separate_runs(family):
    model = family_model(family)
    T = len(IDS)
    masks = leave_one_out_masks(T, [0, 2, 5])
    ids = torch.tensor(IDS)
    with torch.no_grad():
        batched = model(ids.unsqueeze(0), interventions=Interventions(key_mask=masks), positions=[6, 3])
        assert batched.shape == (3, 2, model.config.vocab_size)
        for b in range(3):
            one = model(ids, interventions=Interventions(key_mask=masks[b]))  # (T, vocab_size)
            np.testing.assert_allclose(batched[b].numpy(), one[[6, 3]].numpy(), atol=2e-5)


def test_leave_one_out_masks_hide_one_key_from_every_other_query():
    m = leave_one_out_masks(4, [1, 3])
    assert m.shape == (2, 4, 4)
    assert m[0, 1, 1] and not m[0, 0, 1] and not m[0, 2, 1] and m[0, 2, 0]
    assert m[1, 3, 3] and not m[1, 0, 3] and m[1].sum() == 16 - 3


def test_no_interventions_is_the_plain_path():
    model = family_model("gpt2")
    tr = model.trace(IDS, interventions=Interventions())
    assert tr.interventions is None
    np.testing.assert_array_equal(tr.logits, model.trace(IDS).logits)
    with torch.no_grad():
        np.testing.assert_array_equal(model(torch.tensor(IDS)).numpy(), tr.logits)


@pytest.mark.parametrize("kwargs, words", [
    (dict(temperature=0), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(ablate=[(0,)]), "pairs"), (dict(ablate=[(0, -1)]), ">= 0"), (dict(scale_scores="yes"), "scale_scores"),
    (dict(key_mask=torch.ones(3, 3)), "bool"),
])
def test_bad_interventions_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Interventions(**kwargs)


def test_interventions_that_do_not_fit_the_model_are_refused():
    model = family_model("gpt2")
    with pytest.raises(ValueError, match="layer 2 head 0"):
        model.trace(IDS, interventions=Interventions(ablate=[(2, 0)]))
    for shape in ((3, 3), (2, 7, 7)):
        with pytest.raises(ValueError, match="key_mask"):
            model.trace(IDS, interventions=Interventions(key_mask=torch.ones(*shape, dtype=torch.bool)))


def test_describe_lists_the_changes_for_a_status_bar():
    iv = Interventions(ablate=[(1, 0), (0, 1), (1, 0)], temperature=2.0, scale_scores=False)
    assert iv.ablate == ((0, 1), (1, 0))
    assert iv.describe() == "heads off: L0H1, L1H0; τ = 2; no 1/√d_head"
    assert Interventions().describe() == "" and Interventions().changes_nothing
    assert iv.with_ablated([(0, 0)]).ablate == ((0, 0), (0, 1), (1, 0))
    assert Interventions(ablate=[(np.int64(1), np.int64(0))]).ablate == ((1, 0),)


def test_a_new_model_starts_with_every_head_on(qtbot, tiny_tokenizer):
    """Heads switched off on one model stayed off on the next one opened whenever the indices existed."""
    from conftest import make_tiny_checkpoint
    from explorer.qt.session import Session

    s = Session(compute_mode="sync")
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))
    s.set_text("the cat sat")
    s.set_interventions(Interventions(ablate=[(0, 1)]))
    with qtbot.waitSignal(s.sig_interventions_changed, timeout=1000):
        s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, seed=5))
    assert s.interventions.changes_nothing
    assert s.trace.interventions is None or s.trace.interventions.changes_nothing
    s.shutdown()
