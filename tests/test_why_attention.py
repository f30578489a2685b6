"""The Why attention? lesson's arithmetic (explorer/core/lessons/why_attention.py) and its sentences, on
seeded tiny models and on the two shipped models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import make_tiny_checkpoint
from explorer.core.defaults import BEFORE_ATTENTION, DEFAULT_CHECKPOINT
from explorer.core.lessons import why_attention as lesson
from explorer.core.lessons import why_attention_text as text
from explorer.core.lessons.why_attention import TRANSFORMER, WINDOW
from model import Checkpoint
from model.core.window import WindowConfig, WindowMLP

LABELS = {TRANSFORMER: "the transformer", WINDOW: "the model before attention"}


@pytest.fixture
def pair(tiny_tokenizer) -> lesson.Pair:
    """A tiny transformer (window 8, one head) and a tiny window model with one tokenizer."""
    torch.manual_seed(11)
    window = WindowMLP(WindowConfig(vocab_size=tiny_tokenizer.vocab_size, context_length=8, d_model=16, d_mlp=12))
    transformer = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=1)
    return lesson.Pair(transformer, Checkpoint(model=window.eval(), tokenizer=tiny_tokenizer))


def test_the_parameter_formula_is_the_models_own(pair):
    for ck in (pair.transformer, pair.window):
        assert lesson.n_params(ck.config) == ck.model.n_params()
    curve = lesson.parameter_curve({TRANSFORMER: pair.transformer.config, WINDOW: pair.window.config})
    assert curve.windows[0] == 2 and curve.windows[-1] == 1024 and curve.at == 8
    at = list(curve.windows).index(8)
    assert curve.totals[WINDOW][at] == pair.window.model.n_params()
    assert curve.totals[TRANSFORMER][at] == pair.transformer.model.n_params()
    n, d, h = curve.windows, 16, 12
    np.testing.assert_array_equal(curve.growing[WINDOW], n * d * h + h)  # W_in and b_in
    np.testing.assert_array_equal(curve.growing[TRANSFORMER], n * d)  # the positional table
    # Everything else is the same at every window: attention's weights do not grow.
    for key in (WINDOW, TRANSFORMER):
        assert len(set((curve.totals[key] - curve.growing[key]).tolist())) == 1


def test_the_shipped_models_counts_at_32():
    real = lesson.open_pair(DEFAULT_CHECKPOINT, BEFORE_ATTENTION)
    curve = lesson.parameter_curve({TRANSFORMER: real.transformer.config, WINDOW: real.window.config})
    at = list(curve.windows).index(32)
    assert curve.totals[TRANSFORMER][at] == real.transformer.model.n_params() == 726_528
    assert curve.totals[WINDOW][at] == real.window.model.n_params() == 727_472
    assert curve.totals[WINDOW][-1] == 727_472 + (1024 - 32) * 128 * 48
    assert curve.totals[TRANSFORMER][-1] == 726_528 + (1024 - 32) * 128
    assert real.transformer.tokenizer.to_json() == real.window.tokenizer.to_json()


def test_two_places_are_two_blocks_and_one_w_q(pair):
    token = pair.transformer.tokenizer.token_to_id("cat")
    b = lesson.blocks_for(pair.window.model, pair.transformer.model, token, 7, 2)
    np.testing.assert_array_equal(b.block_a, pair.window.model.slot_weights(7))
    np.testing.assert_array_equal(b.block_b, pair.window.model.slot_weights(2))
    assert b.difference == pytest.approx(np.linalg.norm(b.block_a - b.block_b) / np.linalg.norm(b.block_a))
    e = pair.window.model.tok_emb.weight.detach().numpy()[token]
    assert b.contribution_cosine == pytest.approx(lesson.cosine(e @ b.block_a, e @ b.block_b), abs=1e-6)
    heads = pair.transformer.model.blocks[0].attn.head_weights()
    np.testing.assert_array_equal(b.shared["W_Q"], heads["W_Q"][0])
    assert -1 <= b.q_cosine <= 1 and b.q_cosine < 1 - 1e-6  # the same W_Q, the input moved by p_i
    same = lesson.blocks_for(pair.window.model, pair.transformer.model, token, 4, 4)
    assert same.difference == 0 and same.contribution_cosine == pytest.approx(1.0)
    with pytest.raises(ValueError, match="window"):
        lesson.blocks_for(pair.window.model, pair.transformer.model, token, 8, 0)


def test_the_phrase_early_and_late(pair):
    ids = pair.encode("the cat sat on the mat . the dog")
    assert len(ids) == 8
    shift = lesson.phrase_shift(pair.models, ids[-3:], ids[:-3])
    for key, model in pair.models.items():
        p = shift.predictions[key]
        np.testing.assert_array_equal(p.early, model.trace(list(ids[-3:])).probs[-1])
        np.testing.assert_array_equal(p.late, model.trace(list(ids)).probs[-1])
        assert p.tv == pytest.approx(0.5 * np.abs(p.early.astype(np.float64) - p.late).sum())
        assert 0 < p.tv <= 1 and p.top_late == int(np.argmax(p.late))
    alone = lesson.phrase_shift(pair.models, ids[-3:], ())
    assert all(p.tv == 0 for p in alone.predictions.values())
    assert "cannot move later" in text.phrase_sentence(alone, pair.name, LABELS)
    sentence = text.phrase_sentence(shift, pair.name, LABELS)
    ranked = sorted(shift.predictions.values(), key=lambda p: -p.tv)
    assert f"{ranked[0].tv:.3f} against {ranked[1].tv:.3f}" in sentence or "about as much" in sentence
    with pytest.raises(ValueError, match="at least one"):
        lesson.phrase_shift(pair.models, (), ids)


def test_the_job_and_its_sentences(pair):
    ids = pair.encode("the cat sat on the mat . the dog")
    token = ids[1]
    result = lesson.lesson_job(None, lesson.LessonRequest(pair, ids, token, (7, 1), 3))
    assert result.shift.phrase == ids[-3:] and result.shift.lead == ids[:-3]
    b = result.blocks
    sentence = text.blocks_sentence(b, pair.name, 16, 12, 16)
    assert f"= {b.difference:.2f} ‖W_in[7]‖" in sentence and f"cosine {b.q_cosine:.2f}" in sentence
    assert f"“{pair.name(token)}”" in sentence and pair.name(token) == "sat"
    params = text.parameter_sentence(result.curve, LABELS, WINDOW, TRANSFORMER)
    assert f"{pair.window.model.n_params():,} parameters" in params and f"{16 * 12:,} per token" in params
    rows, val_text = result.validation
    assert val_text is None and "No validation loss" in text.validation_sentence(rows, val_text, LABELS)


def test_validation_rows_say_whether_the_text_is_one():
    real = lesson.open_pair(DEFAULT_CHECKPOINT, BEFORE_ATTENTION)
    rows, val_text = lesson.validation_rows({TRANSFORMER: real.transformer, WINDOW: real.window})
    assert val_text == "valid-sample.txt"
    assert rows[0][2] == pytest.approx(real.transformer.training["val_loss"]) and rows[0][2] < rows[1][2]
    sentence = text.validation_sentence(rows, val_text, LABELS)
    assert f"the transformer {rows[0][2]:.3f}" in sentence and "same validation text" in sentence
    assert math.isfinite(rows[1][2])


def test_a_pair_must_be_a_transformer_and_a_window_model():
    with pytest.raises(ValueError, match="model before attention"):
        lesson.open_pair(DEFAULT_CHECKPOINT, DEFAULT_CHECKPOINT)
