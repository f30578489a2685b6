"""Tours without Qt: the expression language, the sentences, the tour file's checks, questions and
their reveal, the facts and the worksheet."""

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_checkpoint
from explorer.core.tours import facts
from explorer.core.tours.expressions import Env, ExpressionError, evaluate, parse
from explorer.core.tours.files import resolve_model, shipped_tours
from explorer.core.tours.questions import model_answer, reveal
from explorer.core.tours.templates import MISSING, TemplateError, check, render, split
from explorer.core.tours.tourfile import Question, TourError, load_tour
from explorer.core.tours.worksheet import Page, worksheet_html

PANELS = ("tokens", "attention", "map", "why", "next-token", "embeddings", "formula")
IDS = [2, 5, 7, 3, 9, 4]


@pytest.fixture
def env(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer)
    trace = ckpt.model.trace(IDS)
    tokens = [tiny_tokenizer.id_to_token(i) for i in IDS]
    return Env(trace, tokens, ckpt.config, ckpt, layer=1, head=1, position=None)


# ---- expressions ------------------------------------------------------------------------------------------
def test_expressions_read_the_traces_tensors_by_their_dotted_names(env):
    t = env.trace
    assert evaluate("blocks[1].attn.attn_weights[1, last, 0]", env) == t.blocks[1].attn_weights[1, 5, 0]
    assert evaluate("blocks[-1].attn.W_O[2, 3]", env) == t["blocks.1.attn.W_O"][2, 3]
    assert evaluate("blocks[layer].mlp.fc_out[pos, 0]", env) == t["blocks.1.mlp.fc_out"][5, 0]
    assert evaluate("max(probs[last])", env) == t.probs[5].max()
    assert evaluate("argmax(blocks[0].attn.attn_weights[head, 3])", env) == int(np.argmax(t.blocks[0].attn_weights[1, 3]))
    np.testing.assert_allclose(evaluate("norm(x[2] - tok_emb[2])", env), np.linalg.norm(t["pos_emb"][2]), rtol=1e-5)
    assert evaluate("T * (T + 1) // 2", env) == 21
    assert evaluate("d_head", env) == 8 and evaluate("n_layers", env) == 2
    assert evaluate("token(1)", env) == env.tokens[1]
    assert evaluate("word(argmax(probs[last]))", env) == env.checkpoint.tokenizer.id_to_token(int(t.probs[5].argmax()))
    p = t.probs[5].astype(np.float64)
    assert evaluate("entropy(probs[last])", env) == pytest.approx(-(p * np.log2(p)).sum())
    assert evaluate("rank(probs[last], argmax(probs[last]))", env) == 1
    # masked scores are -inf: max ignores nothing finite, and a NaN-aware max is used
    assert evaluate("max(blocks[0].attn.attn_scores[0, 0])", env) == t.blocks[0].attn_scores[0, 0, 0]


@pytest.mark.parametrize("source, message", [
    ("blocks[5].x", "has 2 blocks"),
    ("blocks[0].attn.nothing", "no tensor 'blocks.0.attn.nothing'"),
    ("__import__('os')", "unknown name '__import__'"),
    ("(lambda: 1)", "Lambda is not part"),
    ("(lambda: 1)()", "only the listed functions"),
    ("x.__class__", "only for the trace's dotted names"),
    ("probs[last, 99999]", "out of bounds"),
    ("token_id('zebra-unicorn')", "not a token"),
    ("1 +", "not an expression"),
    ("max(x, axis=0)", "without keywords"),
    ("9 ** 9 ** 9", "more than a tour needs"),
    ("'ab' * 10000000", "not words or lists"),
])
def test_bad_expressions_say_why(env, source, message):
    with pytest.raises(ExpressionError, match=re.escape(message)):
        evaluate(source, env)


def test_parse_checks_names_without_a_trace():
    parse("blocks[0].attn.q[0, 1, 2] + params()")
    with pytest.raises(ExpressionError, match="unknown name 'weights'"):
        parse("weights[0]")


# ---- templates --------------------------------------------------------------------------------------------
def test_templates_compute_and_format_every_number(env):
    w = env.trace.blocks[0].attn_weights[0, 5, 0]
    r = render("{token(0)} gets {blocks[0].attn.attn_weights[0, last, 0]:.3f}; T = {T}; {{braces}}; "
               "{params():,} parameters; slice {max(x[0, :3]):.2f}", env)
    assert r.text.startswith(f"{env.tokens[0]} gets {w:.3f}; T = 6; {{braces}}; ")
    assert f"{env.checkpoint.model.n_params():,} parameters" in r.text
    assert f"slice {env.trace.x[0, :3].max():.2f}" in r.text
    assert [s.text for s in r.shown][1] == f"{w:.3f}" and r.errors == ()
    assert render("{1 / 3}", env).text == "0.3333"  # the Model panel's way with numbers


def test_a_number_that_cannot_be_computed_on_this_text_is_marked(env):
    r = render("the tenth token is {token(9)} and x is {x}", env)
    assert r.text == f"the tenth token is {MISSING} and x is {MISSING}"
    assert "the text has 6 tokens" in r.errors[0] and "cannot be shown" in r.errors[1]


def test_numbers_written_in_the_prose_are_refused():
    assert check("the weight is 0.26") and check("about 40 % of it") and not check("layer 2 of {n_layers}")
    assert check("{blocks[0].nope}") == []  # names are checked against a trace when shown
    assert "unknown name" in check("{foo}")[0]
    with pytest.raises(TemplateError, match="never closed"):
        split("a {b")
    assert split("{x[0, :2]:.1f}")[0].spec == ".1f" and split("{x[0, :2]:.1f}")[0].source == "x[0, :2]"


# ---- tour files --------------------------------------------------------------------------------------------
def test_the_shipped_tours_load(tmp_path):
    from explorer.qt.panels import panel_names  # the registry is Qt's; the names are all the check needs

    tours = {p.stem: load_tour(p, panel_names()) for p in shipped_tours()}
    assert {"chapter", "why"} <= set(tours)
    assert len(tours["chapter"].steps) >= 8 and all(s.model is not None for s in tours["chapter"].steps)
    assert any(s.question is not None and s.question.kind == "token" for s in tours["chapter"].steps)


def _tour(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bad_tour_lists_every_problem_in_one_message(tmp_path):
    path = _tour(tmp_path, '''
title = "Bad"
colour = "red"
[[step]]
title = "one"
panel = "atention"
say = "the weight is 0.26 and {foo(1)}"
highlight = { box = "blocks.0.nope", cell = [1] }
[step.question]
ask = "?"
kind = "token"
[[step]]
panel = "map"
say = "fine"
model = "no-such-model"
''')
    with pytest.raises(TourError) as info:
        load_tour(path, PANELS)
    message = str(info.value)
    for part in ("t.toml is not a usable tour", "unknown key 'colour'", "step 1 ('one'): unknown panel 'atention'",
                 "the number '0.26' is written", "unknown name 'foo'", "highlight box 'blocks.0.nope'",
                 "highlight cell must be [row, column]", "a token question needs values",
                 "step 2: title must be a non-empty string", "model 'no-such-model' is neither a shipped model"):
        assert part in message, part


def test_a_tour_that_is_not_toml_names_the_place(tmp_path):
    with pytest.raises(TourError, match=r"not valid TOML: .*line 2"):
        load_tour(_tour(tmp_path, 'title = "x"\n[[step]\n'), PANELS)
    with pytest.raises(TourError, match="has no steps"):
        load_tour(_tour(tmp_path, 'title = "x"\n'), PANELS)
    with pytest.raises(TourError, match="cannot read"):
        load_tour(tmp_path / "missing.toml", PANELS)


def test_models_are_shipped_names_or_files_beside_the_tour(tmp_path):
    assert resolve_model("tinystories-1L1H", tmp_path).path.name == "tinystories-1L1H.safetensors"
    (tmp_path / "mine.safetensors").write_bytes(b"x")
    assert resolve_model("mine.safetensors", tmp_path).path == (tmp_path / "mine.safetensors").resolve()
    with pytest.raises(ValueError, match="neither a shipped model"):
        resolve_model("other.safetensors", tmp_path)


# ---- questions ---------------------------------------------------------------------------------------------
def test_a_number_question_says_how_far_the_guess_was(env):
    q = Question("?", "number", answer="max(probs[last])")
    value = float(env.trace.probs[5].max())
    assert model_answer(q, env) == pytest.approx(value)
    r = reveal(q, value + 0.1, env)
    assert not r.right and f"{abs(0.1):.4g}" in r.text and f"{0.1 / value:.0%}" in r.text
    assert reveal(q, value, env).right


def test_a_token_question_compares_the_chosen_token_with_the_models(env):
    q = Question("?", "token", values="blocks[0].attn.attn_weights[0, last]")
    row = env.trace.blocks[0].attn_weights[0, 5]
    best = int(np.argmax(row))
    assert model_answer(q, env) == best
    assert reveal(q, best, env).right
    other = (best + 1) % 6
    r = reveal(q, other, env)
    assert not r.right and r.answer == best
    assert f"{row[best]:.4g}" in r.text and f"{row[other]:.4g}" in r.text and f"{abs(row[best] - row[other]):.4g}" in r.text
    assert f"number {int((row > row[other]).sum()) + 1} of 6" in r.text
    low = Question("?", "token", values="blocks[0].attn.attn_weights[0, last]", pick="min")
    assert model_answer(low, env) == int(np.argmin(row))
    with pytest.raises(ExpressionError, match="outside the 6 tokens"):
        reveal(q, 9, env)


def test_a_cell_question_ignores_masked_scores(env):
    q = Question("?", "cell", values="blocks[0].attn.attn_scores[0]", pick="min")
    scores = env.trace.blocks[0].attn_scores[0]
    finite = np.where(np.isfinite(scores), scores, np.inf)
    assert model_answer(q, env) == np.unravel_index(np.argmin(finite), scores.shape)
    assert "masked" in reveal(q, (0, 5), env).text


def test_facts_are_computed_from_the_model(env):
    model = env.checkpoint.model
    assert facts.params(env) == model.n_params()
    assert facts.params(env, "blocks.0.attn") == sum(p.numel() for n, p in model.named_parameters()
                                                     if n.startswith("blocks.0.attn."))
    with pytest.raises(ValueError, match="no parameters under 'nope'"):
        facts.params(env, "nope")
    from model.explain.core import explain

    ex = explain(model, env.trace, 5)
    np.testing.assert_array_equal(facts.leave_one_out(env), ex.leave_one_out)
    assert facts.target_logit(env) == pytest.approx(ex.logit)


# ---- worksheet ---------------------------------------------------------------------------------------------
def test_the_worksheet_is_one_self_contained_html_file():
    png = b"\x89PNG\r\n\x1a\nfake"
    html = worksheet_html("A <tour>", "about it", [
        Page("Step & one", "tinystories", "once upon", ("weight 0.123",), png, "the map", "How much?", "0.2",
             "The model's value: 0.123."),
        Page("two", "tinystories", "", ("p = 0.5",), None, question="Which?"),
    ])
    assert html.count("<section>") == 2 and "A &lt;tour&gt;" in html and "Step &amp; one" in html
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in html
    assert "weight 0.123" in html and "Answer: 0.2" in html and 'class="answer-space"' in html
    assert "http" not in html.replace("Made by", "")  # nothing fetched from elsewhere


def test_the_readmes_example_tour_is_a_valid_tour(tmp_path):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- section:tours -->")[1].split("<!-- /section:tours -->")[0]
    example = section.split("```toml\n")[1].split("```")[0]
    tour = load_tour(_tour(tmp_path, example), PANELS)
    assert [s.panel for s in tour.steps] == ["attention", "next-token"]
    assert tour.steps[0].question.kind == "token" and tour.steps[1].question.answer == "max(probs[last])"
