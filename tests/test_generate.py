"""Generation: greedy equals step-by-step argmax, seeded sampling repeats, top-k and top-p keep
exactly what they promise."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from model.generate import Sampling, generate, sampling_distribution

CONFIG = GPTConfig(vocab_size=31, context_length=6, d_model=16, n_heads=2, n_layers=2, d_mlp=32)


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(3)
    m = GPT(CONFIG).eval()
    with torch.no_grad():  # sharper distributions than the init's near-uniform ones
        m.tok_emb.weight.mul_(20)
    return m


def test_greedy_equals_repeated_argmax_of_the_traces_last_logits(model):
    ids = [3, 1, 4]
    steps = generate(model, ids, 9)  # longer than the context: the window slides
    expected = list(ids)
    for _ in range(9):
        expected.append(int(np.argmax(model.trace(expected).logits[-1])))
    assert [s.token_id for s in steps] == expected[3:]
    assert all(s.prob == 1.0 for s in steps)


def test_seeded_sampling_is_reproducible_and_seeds_differ(model):
    sampling = Sampling(temperature=1.5, seed=7)
    a = [s.token_id for s in generate(model, [2], 12, sampling)]
    b = [s.token_id for s in generate(model, [2], 12, sampling)]
    c = [s.token_id for s in generate(model, [2], 12, Sampling(temperature=1.5, seed=8))]
    assert a == b and a != c


def test_top_p_keeps_the_smallest_set_whose_probability_reaches_p():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    for p, kept in ((0.5, [0]), (0.51, [0, 1]), (0.8, [0, 1]), (0.81, [0, 1, 2]), (1.0, [0, 1, 2, 3])):
        dist = sampling_distribution(logits, Sampling(temperature=1.0, top_p=p))
        assert np.flatnonzero(dist).tolist() == kept, p
        np.testing.assert_allclose(dist.sum(), 1.0)


def test_top_k_and_temperature():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    dist = sampling_distribution(logits, Sampling(temperature=1.0, top_k=2))
    np.testing.assert_allclose(dist, [np.e / (np.e + 1), 1 / (np.e + 1), 0, 0])
    hot = sampling_distribution(logits, Sampling(temperature=100.0))
    assert np.ptp(hot) < 0.02  # a high temperature flattens the distribution
    assert sampling_distribution(logits, Sampling()).tolist() == [1.0, 0.0, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a temperature near 0 overflowed with a RuntimeWarning
        tied = sampling_distribution(np.array([3.0, 3.0, 1.0]), Sampling(temperature=1e-320))
    assert tied.tolist() == [0.5, 0.5, 0.0]


def test_sampled_tokens_come_from_the_kept_set(model):
    steps = generate(model, [5], 30, Sampling(temperature=1.0, top_k=3, seed=1))
    for s in steps:
        assert s.token_id in s.top_ids[:3].tolist()


def test_stop_and_stream(model):
    seen = []
    steps = generate(model, [1], 10, on_step=seen.append, should_stop=lambda: len(seen) >= 4)
    assert len(steps) == 4 and seen == steps


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-2),
                                    dict(seed=-1), dict(seed=1.5)])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        Sampling(**kwargs)


def test_bad_input_is_refused(model):
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match="0..30"):
        generate(model, [99], 3)


def test_steps_one_at_a_time_repeat_generate_exactly(model):
    from model.generate import next_token

    sampling = Sampling(temperature=1.2, top_k=8, top_p=0.95, seed=11)
    whole = generate(model, [4, 2], 10, sampling)
    rng, ids, steps = np.random.default_rng(11), [4, 2], []
    for _ in range(10):
        steps.append(next_token(model, ids, sampling, rng))
        ids.append(steps[-1].token_id)
    assert [s.token_id for s in steps] == [s.token_id for s in whole]
    assert [s.prob for s in steps] == [s.prob for s in whole]


def test_a_step_keeps_the_sampling_and_the_model_probability_apart(model):
    """prob is the chance under the sampling distribution; model_prob and top_probs the model's softmax."""
    ids = [3, 1, 4]
    probs = model.trace(ids).probs[-1]
    greedy = generate(model, ids, 1)[0]
    assert greedy.prob == 1.0 and greedy.model_prob == pytest.approx(float(probs.max()), rel=1e-5)
    assert greedy.model_prob < 0.99  # the model itself was not sure: the two must not be confused
    np.testing.assert_allclose(greedy.top_probs, np.sort(probs)[::-1][:5], rtol=1e-5)
    hot = Sampling(temperature=3.0, top_k=3, seed=2)
    step = generate(model, ids, 1, hot)[0]
    dist = sampling_distribution(model.trace(ids).logits[-1], hot)
    assert step.prob == pytest.approx(dist[step.token_id]) and np.count_nonzero(dist) == 3
    assert step.model_prob == pytest.approx(float(probs[step.token_id]), rel=1e-5)
    assert step.prob != pytest.approx(step.model_prob)


def test_logits_that_are_not_numbers_give_no_distribution():
    with pytest.raises(ValueError, match="not numbers"):
        sampling_distribution(np.array([0.0, np.nan, 1.0]), Sampling(temperature=1.0))


def _readme_stories(heading: str) -> list[tuple[str, str]]:
    """The README's bullets under ``heading``: (prompt, the text generated after it)."""
    lines = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 2
    bullets = lines[start:lines.index("", start)]
    return [re.fullmatch(r"- \*(.+?)\*(.*)", line).groups() for line in bullets]


def test_the_readme_stories_are_what_model_generate_gives_for_their_seeds():
    """The README's sampled stories came from tools/model_report.py's own torch sampler: seed 0 there was
    not seed 0 of the app, of model.generate or of python -m model.trace --seed."""
    import importlib.util

    from explorer.core.defaults import DEFAULT_CHECKPOINT
    from model import load_checkpoint

    ck = load_checkpoint(DEFAULT_CHECKPOINT)
    spec = importlib.util.spec_from_file_location("model_report", Path(__file__).parent.parent / "tools" / "model_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    sampled = _readme_stories("Sampled from the softmax at temperature 1 (seeds 0, 1, 2):")
    greedy = _readme_stories("Greedy (always the most probable token):")
    assert [prompt for prompt, _ in sampled] == [report.SAMPLE_PROMPT] * 3
    assert [prompt for prompt, _ in greedy] == list(report.GREEDY_PROMPTS)
    for seed, (prompt, text) in [*enumerate(sampled), *((None, story) for story in greedy)]:
        sampling = Sampling() if seed is None else Sampling(temperature=1.0, seed=seed)
        steps = generate(ck.model, ck.tokenizer.encode(prompt).ids, 30, sampling)
        assert text == ck.tokenizer.render([s.token_id for s in steps], prompt)[0]
        assert report.story_line(prompt, report.continuation(ck, prompt, 30, seed)) == f"- *{prompt}*{text}"
