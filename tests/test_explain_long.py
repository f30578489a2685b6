"""Leave-one-out at long contexts: batches within a memory budget equal one batch, a cap hides the
first token and those with the most attention or direct effect (NaN elsewhere), and what reads
leave-one-out (disagreements, the report, the Why panel's sentences) says what was not computed."""

import numpy as np
import pytest
import torch

from explain_models import FAMILIES, IDS, family_model
from explorer.core import why
from model import GPT, GPTConfig
from model.explain import explain, leave_one_out, leave_one_out_sources, loo
from model.explain.report import explanation_json, format_explanation
from model.core.interventions import Interventions, leave_one_out_masks

GPT2_SMALL = GPTConfig(vocab_size=50257, context_length=1024, d_model=768, n_heads=12, n_layers=12, d_mlp=3072)
D8 = GPTConfig(vocab_size=64, context_length=1024, d_model=8, n_heads=2, n_layers=2, d_mlp=16)  # test_big_view's


def one_batch(model, tr, position, target):
    """The reference: one forward of all S tokens with one masked copy per source (copy 0 unmasked)."""
    S = position + 1 if tr.causal else tr.n_tokens
    keys = [j for j in range(S) if j != position]
    masks = torch.cat([torch.ones(1, S, S, dtype=torch.bool), leave_one_out_masks(S, keys)])  # (S, S, S)
    base = tr.interventions or Interventions()
    if base.key_mask is not None:
        masks = masks & base.key_mask[..., :S, :S]
    with torch.no_grad():
        logits = model(torch.tensor(tr.token_ids[:S]).unsqueeze(0), causal=tr.causal, positions=[position],
                       interventions=base.with_key_mask(masks))[:, 0, target].double().numpy()  # (S,)
    out = np.full(S, np.nan)
    out[keys] = logits[0] - logits[1:]
    return out


@pytest.fixture(scope="module")
def long_model():
    """A seeded model of context 32 and a 30-token trace (rows enough for a cap to leave some out)."""
    torch.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=23, context_length=32, d_model=16, n_heads=2, n_layers=2, d_mlp=24)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model, model.trace([(7 * i + 3) % 23 for i in range(30)])


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("causal", [True, False])
def test_batches_of_one_copy_equal_one_batch(name, causal, monkeypatch):
    model = family_model(name)
    hidden = torch.ones(7, 7, dtype=torch.bool)
    hidden[4, 1] = False  # the trace's own key mask and ablation stay in every copy
    tr = model.trace(IDS, causal=causal, interventions=Interventions(ablate=[(1, 0)], key_mask=hidden))
    want = one_batch(model, tr, 6, 2)
    np.testing.assert_allclose(leave_one_out(model, tr, 6, 2, 7), want, atol=1e-5)
    monkeypatch.setattr(loo, "BATCH_BYTES", 1)
    rows = []
    handle = model.tok_emb.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[1]))
    try:
        got = leave_one_out(model, tr, 6, 2, 7)
    finally:
        handle.remove()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.isnan(got[6]) and np.abs(got[:6]).max() > 1e-3
    # one copy a batch; with the causal mask hiding key j runs positions j+1..6 only
    assert rows == ([1, 2, 3, 4, 5, 6] if causal else [7] * 6)


def test_sources_hides_only_those_asked_for(long_model):
    model, tr = long_model
    full = leave_one_out(model, tr, 29, 4, 30)
    some = leave_one_out(model, tr, 29, 4, 30, sources=[0, 12, 28, 29])
    np.testing.assert_allclose(some[[0, 12, 28]], full[[0, 12, 28]], atol=1e-5)
    assert np.isnan(np.delete(some, [0, 12, 28])).all()
    with pytest.raises(ValueError, match="0..29"):
        leave_one_out(model, tr, 29, 4, 30, sources=[30])


def test_the_cap_takes_the_first_token_then_attention_and_direct_effect_in_turn():
    attention = np.array([0.30, 0.02, 0.20, 0.01, 0.15, 0.02, 0.05, 0.25])
    direct = np.array([0.0, 0.9, 0.0, -0.8, 0.0, 0.1, 0.0, 0.5])
    # by attention 0, 2, 4, 6, ...; by |direct| 1, 3, 5, ...; 7 is the query
    assert leave_one_out_sources(attention, direct, 7, 1).tolist() == [0]
    assert leave_one_out_sources(attention, direct, 7, 3).tolist() == [0, 1, 2]
    assert leave_one_out_sources(attention, direct, 7, 5).tolist() == [0, 1, 2, 3, 4]
    assert leave_one_out_sources(attention, direct, 7, None).tolist() == list(range(7))
    assert leave_one_out_sources(attention, direct, 3, 99).tolist() == [0, 1, 2, 4, 5, 6, 7]
    with pytest.raises(ValueError, match="at least 1"):
        leave_one_out_sources(attention, direct, 7, 0)


def test_explain_with_a_cap_leaves_the_others_not_computed(long_model):
    model, tr = long_model
    full = explain(model, tr, 29, 4)
    ex = explain(model, tr, 29, 4, max_leave_one_out=6)
    att = ex.attention.mean(axis=(0, 1))
    done = np.flatnonzero(ex.leave_one_out_computed)
    assert done.tolist() == leave_one_out_sources(att, ex.dla.sources, 29, 6).tolist()
    assert ex.n_leave_one_out == 6 and ex.leave_one_out_capped and not full.leave_one_out_capped
    top_att = int(np.argmax(att[:29]))
    top_dla = int(np.argmax(np.abs(ex.dla.sources[:29])))
    assert {0, top_att, top_dla} <= set(done.tolist())
    np.testing.assert_allclose(ex.leave_one_out[done], full.leave_one_out[done], atol=1e-5)
    assert np.isnan(np.delete(ex.leave_one_out, done)).all()
    assert set(ex.disagreements()) <= set(done.tolist())
    with pytest.raises(ValueError, match="max_leave_one_out"):
        explain(model, tr, max_leave_one_out=0)


def test_the_report_and_the_sentences_say_what_was_not_computed(long_model):
    model, tr = long_model
    ex = explain(model, tr, 29, 4, max_leave_one_out=6)
    done = np.flatnonzero(ex.leave_one_out_computed).tolist()
    out = explanation_json(ex, [], str)
    assert out["leave_one_out_computed"] == done and len(out["leave_one_out"]) == 29
    assert [j for j, v in enumerate(out["leave_one_out"]) if v is not None] == done
    tokens = [f"t{j}" for j in range(30)]
    text = format_explanation(ex, [], tokens, str)
    assert "leave-one-out for 6 of 29 sources" in text and text.count(" —\n") == 29 - 6
    assert why.leave_one_out_scope(ex).startswith("Leave-one-out for 6 of 29 earlier tokens (those with most")
    assert why.leave_one_out_scope(explain(model, tr, 29, 4)) == ""
    assert "(the most of the 6 hidden)" in why.summary(ex, tokens, str)
    assert "of the leave-one-out effects of the 6 tokens hidden" in why.sink_paragraph(ex, tokens, str)
    assert "(shares among the 6 tokens hidden)" in why.disagreement_note(ex, tokens)
    rows = why.shown_sources(ex, limit=8)
    assert {0, 29, *done} <= set(rows.tolist()) and rows.size < 30 and (np.diff(rows) > 0).all()
    rest = np.setdiff1d(np.arange(30), rows)
    note = why.rows_note(ex, rows)
    assert f"show {rows.size} of the 30 tokens" in note and f"hold {ex.attention.mean(axis=(0, 1))[rest].sum():.3f}" in note
    assert why.rows_note(ex, why.shown_sources(ex)) == ""  # 30 sources: all shown


def test_the_cap_and_the_cost_follow_the_models_size():
    assert why.leave_one_out_cap(D8, 32) is None  # every source while they fit
    assert why.leave_one_out_cap(GPT2_SMALL, 512) == why.LOO_MIN_SOURCES
    caps = [why.leave_one_out_cap(D8, T) for T in (256, 512, 1024)]  # fewer as each costs more
    assert caps == sorted(caps, reverse=True) and why.LOO_MIN_SOURCES < caps[-1] < why.LOO_MAX_SOURCES
    assert loo.copies_per_batch(GPT2_SMALL, 1024, 1024) == 1  # one copy's maps alone exceed the budget
    assert loo.copies_per_batch(D8, 32, 32) > 32
    # the job at T = 512 for GPT-2 small: lens and DLA, three copies of up to one pass each
    assert 3 <= why.job_passes(GPT2_SMALL, 512, 512, False, what_ifs=False) <= 5


def test_should_stop_is_asked_before_each_batch_and_stops_the_work(long_model, monkeypatch):
    model, tr = long_model
    monkeypatch.setattr(loo, "BATCH_BYTES", 1)  # a batch per hidden key
    asked = []

    def stop_at_third() -> bool:
        asked.append(1)
        return len(asked) == 3

    with pytest.raises(loo.Interrupted):
        leave_one_out(model, tr, 29, 5, 30, should_stop=stop_at_third)
    assert len(asked) == 3  # two batches ran, the third was not started
    full = leave_one_out(model, tr, 29, 5, 30)
    np.testing.assert_array_equal(leave_one_out(model, tr, 29, 5, 30, should_stop=lambda: False), full)
    with pytest.raises(loo.Interrupted):
        explain(model, tr, 29, 5, should_stop=lambda: True)
