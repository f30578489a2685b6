"""Head scores: the patterns, the scores on hand-built attention, the probe, and `--head-scores`."""

import json
from pathlib import Path

import numpy as np
import pytest

from explain_models import family_model
from model.checkpoint import load_checkpoint
from model.explain.heads import (
    duplicate_token_pattern, head_scores, induction_pattern, pattern_score, previous_token_pattern, probe_ids,
    text_head_scores,
)
from model.trace import main

ROOT = Path(__file__).resolve().parents[1]
IDS = [5, 7, 9, 5, 7, 2, 5]  # 5 at 0, 3, 6; 7 at 1, 4


def _by_definition(a: np.ndarray, ids, kind: str) -> float:
    """The score written out query by query, straight from the definitions in model/explain/heads.py."""
    per_query = []
    for i in range(len(ids)):
        if kind == "previous":
            keys = [i - 1] if i - 1 >= 1 else []
        elif kind == "duplicate":
            keys = [j for j in range(1, i) if ids[j] == ids[i]]
        else:
            keys = [k + 1 for k in range(i) if ids[k] == ids[i]]
        if keys:
            per_query.append(sum(a[i, j] for j in keys))
    return float(np.mean(per_query)) if per_query else float("nan")


def _hand_built(T: int) -> np.ndarray:
    """A causal attention pattern with distinct weights in every row (rows sum to 1)."""
    a = np.tril(np.arange(1, T * T + 1, dtype=np.float64).reshape(T, T) % 7 + 1)
    return a / a.sum(-1, keepdims=True)


def test_the_patterns_on_a_small_sequence():
    prev, dup, ind = previous_token_pattern(7), duplicate_token_pattern(IDS), induction_pattern(IDS)
    assert sorted(zip(*np.nonzero(prev))) == [(i, i - 1) for i in range(2, 7)]  # key 0 never counts
    assert sorted(zip(*np.nonzero(dup))) == [(4, 1), (6, 3)]  # 5 at 6 sees 5 at 3 (not key 0); 7 at 4 sees 1
    assert sorted(zip(*np.nonzero(ind))) == [(3, 1), (4, 2), (6, 1), (6, 4)]


@pytest.mark.parametrize("kind, pattern", [("previous", previous_token_pattern(7)),
                                           ("duplicate", duplicate_token_pattern(IDS)),
                                           ("induction", induction_pattern(IDS))])
def test_scores_on_a_hand_built_pattern_equal_their_definition(kind, pattern):
    a = _hand_built(7)
    assert pattern_score(a, pattern) == pytest.approx(_by_definition(a, IDS, kind), abs=1e-15)
    stacked = np.stack([a, np.eye(7)])  # a head on itself: 0 on every pattern here
    np.testing.assert_allclose(pattern_score(stacked, pattern), [_by_definition(a, IDS, kind), 0.0], atol=1e-15)


def test_a_perfect_induction_head_scores_1_and_a_sink_scores_0():
    R = 6
    ids = np.concatenate([np.arange(10, 10 + R)] * 2)
    T = ids.size
    induction = np.zeros((T, T))
    induction[np.arange(T), np.arange(T)] = 1.0  # first copy: itself
    induction[np.arange(R, T), np.arange(1, R + 1)] = 1.0  # second copy: the token after its earlier copy
    induction[np.arange(R, T), np.arange(R, T)] = 0.0
    sink = np.zeros((T, T))
    sink[:, 0] = 1.0
    assert pattern_score(induction, induction_pattern(ids)) == 1.0
    assert pattern_score(sink, induction_pattern(ids)) == 0.0
    assert pattern_score(sink, previous_token_pattern(T)) == 0.0  # the sink's key 0 is never i - 1 here
    assert np.isnan(pattern_score(sink, duplicate_token_pattern(np.arange(T))))  # no duplicates: no query


def test_the_probe_is_seeded_distinct_and_repeated():
    ck = load_checkpoint(ROOT / "assets" / "tinystories-1L1H.safetensors")
    ids = probe_ids(ck.config.vocab_size, ck.tokenizer, context_length=64)
    np.testing.assert_array_equal(ids, probe_ids(ck.config.vocab_size, ck.tokenizer, context_length=64))
    assert ids.size == 40 and (ids[:20] == ids[20:]).all() and len(set(ids[:20])) == 20
    special = set(ck.tokenizer.hf.get_added_tokens_decoder())
    assert special and not special & set(ids.tolist())
    assert probe_ids(ck.config.vocab_size, ck.tokenizer, context_length=32).size == 32  # R = 16 fits a 32 context


def test_head_scores_read_the_models_own_attention():
    model = family_model("gpt2")
    hs = head_scores(model, repeat=3)
    assert hs.token_ids.size == 6 and hs.repeat == 3 and hs.n_bos == 0
    tr = model.trace(hs.token_ids.tolist())
    a = tr.blocks[1].attn_weights[0].astype(np.float64)
    assert hs.induction[1, 0] == pytest.approx(_by_definition(a, hs.token_ids.tolist(), "induction"), abs=1e-12)
    text = text_head_scores(tr)
    np.testing.assert_allclose(text.previous_token, hs.previous_token, atol=0)
    logits = np.asarray(tr.logits, dtype=np.float64)
    nll = [np.log(np.exp(logits[i]).sum()) - logits[i, hs.token_ids[i + 1]] for i in range(5)]
    assert hs.first_half_loss == pytest.approx(np.mean(nll[0:2])) and hs.second_half_loss == pytest.approx(np.mean(nll[3:5]))


def test_the_command_line_prints_head_scores(capsys):
    path = ROOT / "assets" / "tinystories-4L4H.safetensors"
    assert main([str(path), "--head-scores", "--json"]) == 0
    h = json.loads(capsys.readouterr().out)["head_scores"]
    assert {"probe_ids", "previous_token", "duplicate_token", "induction"} <= set(h)
    assert np.array(h["induction"]).shape == (4, 4) and len(h["probe_ids"]) == 32
    ck = load_checkpoint(path)
    expected = head_scores(ck.model, ck.tokenizer)
    np.testing.assert_allclose(h["induction"], expected.induction, atol=1e-12)
    assert main([str(path), "--head-scores"]) == 0
    assert "best induction: L" in capsys.readouterr().out


def _curves(induction_l1h0, steps=(0, 100, 200, 300)):
    from model.training.heads_over_training import HeadTypeCurves

    S = len(steps)
    prev = np.full((S, 2, 2), 0.1)
    prev[:, 0, 1] = [0.2, 0.5, 0.8, 0.9]  # L0H1 becomes a previous-token head
    ind = np.full((S, 2, 2), 0.02)
    ind[:, 1, 0] = induction_l1h0
    return HeadTypeCurves(np.array(steps), np.arange(6), 0, 3, prev, np.full((S, 2, 2), 0.03), ind,
                          np.array([8.0, 8.0, 8.0, 8.1]), np.array([8.1, 7.9, 5.0, 3.0]))


def test_the_formation_step_is_the_steepest_rise_of_the_best_induction_head():
    from explorer.core.head_types import formation_paragraph
    from model.training.heads_over_training import induction_formation

    c = _curves([0.02, 0.05, 0.6, 0.7])
    f = induction_formation(c)
    assert (f.layer, f.head, f.before_step, f.after_step) == (1, 0, 100, 200)
    assert f.induction == (0.05, 0.6) and f.gain == pytest.approx((0.1, 3.0))
    text = formation_paragraph(c)
    assert "between step 100 and step 200" in text and "from 0.05 to 0.60" in text
    assert "from 0.10 to 3.00 nats" in text and "L0H1, whose previous-token score goes from 0.50 to 0.80" in text
    weak = _curves([0.02, 0.05, 0.1, 0.2])
    assert induction_formation(weak) is None and "No induction head forms" in formation_paragraph(weak)
