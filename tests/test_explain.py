"""model/explain: direct logit attribution sums to the logit, leave-one-out equals masked re-runs,
the logit lens ends at the model's output, the score terms sum to the scores, on every family and
on the shipped checkpoints."""

from pathlib import Path

import numpy as np
import pytest
import torch

from explain_models import FAMILIES, IDS, LEARNED, family_model
from model import load_checkpoint
from model.explain import attention_entropy, explain, standard_what_ifs, what_if
from model.explain.dla import frozen_norm_direction
from model.core.interventions import Interventions

ASSETS = Path(__file__).resolve().parents[1] / "assets"
SHIPPED = ["tinystories-1L1H.safetensors", "tinystories-4L4H.safetensors"]
TEXT = "once upon a time there was a little girl . she saw a big"


def masked_rerun_effect(model, tr, position, target, j):
    """The target's logit minus its logit in a fresh trace where key j is hidden from every other query."""
    T = tr.n_tokens
    mask = torch.ones(T, T, dtype=torch.bool)
    mask[:, j] = False
    mask[j, j] = True
    hidden = model.trace(tr.token_ids.tolist(), causal=tr.causal, interventions=Interventions(key_mask=mask))
    return float(tr.logits[position, target]) - float(hidden.logits[position, target])


def check_dla(ex):
    assert ex.dla.other + ex.dla.sources.sum() == pytest.approx(ex.logit, abs=1e-4)
    assert ex.dla.other == pytest.approx(sum(ex.dla.components.values()), abs=1e-9)
    np.testing.assert_allclose(ex.dla.per_head.sum(axis=(0, 1)), ex.dla.sources)


@pytest.fixture(params=list(FAMILIES))
def family(request):
    return request.param, family_model(request.param)


def test_direct_attribution_sums_to_the_logit(family):
    name, model = family
    tr = model.trace(IDS)
    for position in (0, 3, 6):
        for target in (None, 5):
            ex = explain(model, tr, position, target, leave_one_out=False)
            check_dla(ex)
            assert ex.dla.sources.shape == (position + 1,) and ex.n_sources == position + 1
            assert abs(ex.dla.sources).max() > 1e-3  # the sources carry something: the test can fail
    cfg = model.config
    assert ("pos_emb" in ex.dla.components) == (cfg.positional == "learned")
    assert ("ln_f.bias" in ex.dla.components) == (cfg.norm == "layernorm" and cfg.norm_bias)
    assert ("blocks.1.attn.b_V" in ex.dla.components) == cfg.qkv_bias


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_each_heads_sources_add_up_to_that_heads_output(name):
    model = family_model(name)
    tr = model.trace(IDS)
    ex = explain(model, tr, 5, 2, leave_one_out=False)
    d, _ = frozen_norm_direction(model, tr.blocks[-1].resid_post[5], 2)
    for li, layer in enumerate(tr.blocks):
        W_O = model.blocks[li].attn.head_weights()["W_O"]  # (n_heads, d_head, d_model)
        for h in range(model.config.n_heads):
            direct = layer.head_out[h, 5].astype(np.float64) @ W_O[h].astype(np.float64) @ d
            assert ex.dla.per_head[li, h].sum() == pytest.approx(direct, abs=1e-5)


def test_leave_one_out_equals_a_rerun_with_the_key_masked(family):
    name, model = family
    tr = model.trace(IDS)
    ex = explain(model, tr, 5)
    assert np.isnan(ex.leave_one_out[5]) and ex.leave_one_out.shape == (6,)
    for j in range(5):
        want = masked_rerun_effect(model, tr, 5, ex.target_id, j)
        assert ex.leave_one_out[j] == pytest.approx(want, abs=2e-5)
    assert np.abs(ex.leave_one_out[:5]).max() > 1e-3


def test_without_the_causal_mask_every_token_is_a_source():
    model = family_model("gpt2")
    tr = model.trace(IDS, causal=False)
    ex = explain(model, tr, 2)
    assert ex.n_sources == len(IDS) and not ex.causal
    check_dla(ex)
    for j in (0, 4, 6):
        assert ex.leave_one_out[j] == pytest.approx(masked_rerun_effect(model, tr, 2, ex.target_id, j), abs=2e-5)


def test_an_ablated_head_contributes_nothing_and_the_sum_still_holds():
    model = family_model("gpt2")
    tr = model.trace(IDS, interventions=Interventions(ablate=[(0, 1)]))
    ex = explain(model, tr, 6)
    check_dla(ex)
    assert (ex.dla.per_head[0, 1] == 0).all() and (ex.dla.per_head[0, 0] != 0).any()
    # Leave-one-out keeps the ablation in its re-runs.
    hidden = torch.ones(7, 7, dtype=torch.bool)
    hidden[:, 2], hidden[2, 2] = False, True
    rerun = model.trace(IDS, interventions=Interventions(ablate=[(0, 1)], key_mask=hidden))
    want = tr.logits[6, ex.target_id] - rerun.logits[6, ex.target_id]
    assert ex.leave_one_out[2] == pytest.approx(want, abs=2e-5)


def test_the_logit_lens_ends_at_the_models_output(family):
    name, model = family
    tr = model.trace(IDS)
    ex = explain(model, tr, 4, top_k=3, leave_one_out=False)
    stages = [s.stage for s in ex.logit_lens]
    assert stages == ["x", "blocks.0.resid_mid", "blocks.0.resid_post", "blocks.1.resid_mid",
                      "blocks.1.resid_post"]
    last = ex.logit_lens[-1]
    order = np.argsort(-tr.probs[4], kind="stable")[:3]
    assert [t for t, _ in last.top_k] == order.tolist()
    np.testing.assert_allclose([p for _, p in last.top_k], tr.probs[4, order], atol=1e-6)
    assert last.kl_to_final == pytest.approx(0, abs=1e-6) and last.target_prob == pytest.approx(ex.prob, abs=1e-6)
    assert all(s.kl_to_final > 1e-4 for s in ex.logit_lens[:-1])
    # The first stage: the embeddings alone through the final norm and the unembedding.
    with torch.no_grad():
        w = model.tok_emb.weight if model.unembed is None else model.unembed.weight
        p0 = torch.softmax(model.ln_f(torch.from_numpy(tr.x[4].copy())) @ w.T, -1).numpy()
    assert ex.logit_lens[0].top_k[0][1] == pytest.approx(p0.max(), abs=1e-6)


@pytest.mark.parametrize("name, iv", [(n, None) for n in LEARNED] + [
    ("gpt2", Interventions(temperature=3.0, ablate=[(0, 0)])), ("neo", Interventions(scale_scores=True))])
def test_the_five_score_terms_sum_to_the_scores(name, iv):
    model = family_model(name)
    tr = model.trace(IDS, interventions=iv)
    for head in range(model.config.n_heads):
        st = explain(model, tr, head=head, leave_one_out=False).score_terms
        total = sum(st.maps.values())
        ok = tr.blocks[0].attn_mask
        np.testing.assert_allclose(total[ok], tr.blocks[0].attn_scores[head][ok], atol=1e-4)
        assert np.isnan(total[~ok]).all()
        assert sum(st.shares.values()) == pytest.approx(1) and min(st.shares.values()) > 0.01


def test_score_terms_say_why_they_do_not_apply():
    for name, words in (("llama", "RoPE"), ("rope-layernorm", "RoPE"), ("nope", "no positional encoding")):
        model = family_model(name)
        ex = explain(model, model.trace(IDS), leave_one_out=False)
        assert ex.score_terms is None and words in ex.score_terms_note
    model = family_model("gpt2")
    ex = explain(model, model.trace(IDS, positional_encoding=False), leave_one_out=False)
    assert ex.score_terms is None and "switched off" in ex.score_terms_note


def test_first_token_attention_is_the_weight_on_key_zero():
    model = family_model("gpt2")
    tr = model.trace(IDS)
    ex = explain(model, tr, 4, leave_one_out=False)
    want = np.stack([layer.attn_weights[:, 4, 0] for layer in tr.blocks])
    np.testing.assert_allclose(ex.first_token_attention, want)
    assert ex.first_token_mean == pytest.approx(np.mean([b.attn_weights[:, 1:, 0].mean() for b in tr.blocks]))
    np.testing.assert_allclose(ex.attention[:, :, 0], want)


def test_disagreements_compare_attention_share_with_effect_share():
    model = family_model("gpt2")
    ex = explain(model, model.trace(IDS), 6)
    att = ex.attention.mean(axis=(0, 1))[:6]
    eff = np.abs(ex.leave_one_out[:6])
    gaps = np.abs(att / att.sum() - eff / eff.sum())
    assert ex.disagreements(gap=0.0) == list(range(6))
    assert ex.disagreements(gap=float(np.sort(gaps)[-1])) == [int(np.argmax(gaps))]


def test_bad_requests_raise_clear_errors():
    model = family_model("gpt2")
    tr = model.trace(IDS)
    for kwargs, words in ((dict(position=7), "position 7"), (dict(target=23), "target id 23"),
                          (dict(head=2), "head 2")):
        with pytest.raises(ValueError, match=words):
            explain(model, tr, **kwargs)
    with pytest.raises(ValueError, match="no tokens"):
        explain(model, model.trace([]))
    assert explain(model, tr, -1, leave_one_out=False).position == 6


def test_what_if_knobs_report_entropy_in_bits_and_the_prediction():
    model = family_model("gpt2")
    tr = model.trace(IDS)
    runs = standard_what_ifs(model, tr, 6, 5, top_k=3)
    assert [r.knob for r in runs] == ["baseline", "no 1/√d_head", "τ = 0.5", "τ = 2", "causal mask off"]
    np.testing.assert_array_equal(runs[0].trace.logits, tr.logits)
    ent = attention_entropy(tr)
    assert ent.shape == (2, 2, 7) and (ent[:, :, 0] == 0).all()
    assert (ent <= np.log2(np.arange(1, 8)) + 1e-6).all()
    assert runs[2].mean_entropy < runs[0].mean_entropy < runs[3].mean_entropy
    assert not runs[4].trace.causal and runs[4].target_prob == pytest.approx(runs[4].trace.probs[6, 5])
    flat = what_if(model, tr, 6, 5, temperature=1e6)
    np.testing.assert_allclose(flat.attn_entropy[0], np.broadcast_to(np.log2(np.arange(1, 8)), (2, 7)), atol=1e-4)


@pytest.mark.parametrize("asset", SHIPPED)
def test_shipped_checkpoints(asset):
    ckpt = load_checkpoint(ASSETS / asset)
    model = ckpt.model
    tr = model.trace(ckpt.tokenizer.encode(TEXT).ids)
    ex = explain(model, tr)
    check_dla(ex)
    for j in (0, 9, 12):
        want = masked_rerun_effect(model, tr, tr.n_tokens - 1, ex.target_id, j)
        assert ex.leave_one_out[j] == pytest.approx(want, abs=5e-5)
    assert ex.logit_lens[-1].top_k[0][1] == pytest.approx(float(tr.probs[-1].max()), abs=1e-6)
    st = ex.score_terms
    ok = tr.blocks[0].attn_mask
    np.testing.assert_allclose(sum(st.maps.values())[ok], tr.blocks[0].attn_scores[0][ok], atol=1e-4)
