"""Tours in the main window: every step of the shipped tours shows its panel, model and text, and
every number it says equals the trace's (computed again here, independently, with Python's own
evaluation over the trace's arrays); questions, a bad tour, Next / Back and the worksheet."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from explorer.core.tours.files import shipped_file
from explorer.core.tours.templates import Placeholder, split
from explorer.qt.plots.heatmap import Heatmap
from explorer_helpers import make_window
from model.checkpoint import load_any
from model.explain.core import explain
from model.tokens.names import token_name

pytestmark = pytest.mark.slow  # each test makes a main window with every panel (about 10 s here)

CHAPTER, WHY = shipped_file("tours", "chapter.toml"), shipped_file("tours", "why.toml")
DECIMAL = re.compile(r"-?\d+\.\d+")


@pytest.fixture(scope="module")
def default_checkpoint():
    return load_any(shipped_file("tinystories-1L1H.safetensors"))


@pytest.fixture
def window(qtbot, tmp_path, default_checkpoint, dialogs):
    return make_window(qtbot, tmp_path, default_checkpoint)


def reference(window) -> dict:
    """The names a tour expression may use, built here from the session's trace and model alone."""
    s = window.session
    trace, ckpt = s.trace, s.checkpoint
    blocks = [SimpleNamespace(attn=SimpleNamespace(), mlp=SimpleNamespace()) for _ in trace.blocks]
    ns = {}
    for name, array in trace.named():
        parts = name.split(".")
        if parts[0] != "blocks":
            ns[name] = array
            continue
        owner = blocks[int(parts[1])]
        for part in parts[2:-1]:
            owner = getattr(owner, part)
        setattr(owner, parts[-1], array)
    n = trace.n_tokens
    explained = []  # the Why panel's explanation, made when a step asks (the model before attention has none)

    def ex():
        explained or explained.append(explain(ckpt.model, trace, s.position))
        return explained[0]

    ns.update(blocks=blocks, T=n, last=n - 1, pos=n - 1 if s.position is None else s.position, layer=s.layer,
              head=s.head, **{"d_head": getattr(s.config, "d_head", None), **vars(s.config)})
    ns.update(max=np.nanmax, min=np.nanmin, sum=np.nansum, abs=np.abs, sqrt=np.sqrt, exp=np.exp, argmax=np.nanargmax,
              norm=np.linalg.norm, token=lambda i: s.tokens[i], word=lambda i: token_name(ckpt.tokenizer, int(i)),
              cosine=lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)),
              params=lambda prefix="": sum(p.numel() for name, p in ckpt.model.named_parameters()
                                           if not prefix or name.startswith(prefix + ".")),
              val_loss=lambda: ckpt.training["val_loss"], leave_one_out=lambda: ex().leave_one_out,
              direct=lambda: ex().dla.sources, logit_part=lambda name: ex().dla.components[name],
              target_logit=lambda: ex().logit)
    return ns


def check_numbers(template: str, rendered, label_text: str, ns: dict) -> int:
    """Every placeholder's value equals the reference's, and the label shows every number rendered."""
    sources = [p.source for p in split(template) if isinstance(p, Placeholder)]
    assert [sh.source for sh in rendered.shown] == sources and rendered.errors == ()
    for shown in rendered.shown:
        expected = eval(shown.source, {"__builtins__": {}}, ns)  # noqa: S307 - our own shipped tour, in a test
        if isinstance(expected, str):
            assert shown.value == expected, shown.source
        else:
            assert float(shown.value) == pytest.approx(float(expected), rel=1e-6, abs=1e-9), shown.source
        assert shown.text in label_text
    written = {m for sh in rendered.shown for m in DECIMAL.findall(sh.text)}
    assert set(DECIMAL.findall(label_text)) <= written  # no number on screen that the trace did not give
    return len(sources)


@pytest.mark.parametrize("tour", [CHAPTER, WHY], ids=["chapter", "why"])
def test_every_step_shows_its_panel_and_the_traces_numbers(window, tour, qtbot):
    tours = window.tours
    assert tours.open(tour)
    c, view = tours.controller, tours.view
    assert tours.dock.isVisible()
    checked = 0
    for k, step in enumerate(c.tour.steps):
        c.go(k)
        s = window.session
        qtbot.waitUntil(lambda name=step.panel: not window.docks[name].visibleRegion().isEmpty())
        assert s.text == step.text and s.checkpoint.path == (step.model or c.tour.model).path
        assert view.say.text() == c.say.text and view.counter.text() == f"step {k + 1} of {len(c.tour.steps)}"
        ns = reference(window)
        for key, value in step.highlight:  # what the step points at is shown
            if key == "box":
                assert window.panels["map"].canvas.highlight == value
            elif key in ("token", "row"):
                assert s.position == (eval(value, {"__builtins__": {}}, ns) if isinstance(value, str) else value)  # noqa: S307
        checked += check_numbers(step.say, c.say, view.say.text(), ns)
        if step.question is not None:
            checked += check_numbers(step.question.ask, c.ask, view.ask.text(), ns)
    assert checked >= 2 * len(c.tour.steps)


def shown(v: float) -> str:
    """A number as a reveal writes it: thousands separated, else 4 significant digits."""
    return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:.4g}"


def test_questions_reveal_the_models_value_and_how_far_the_guess_was(window, qtbot):
    tours = window.tours
    tours.open(CHAPTER)
    c, view, s = tours.controller, tours.view, window.session
    numbers = [k for k, st in enumerate(c.tour.steps) if st.question and st.question.kind == "number"]
    assert len(numbers) >= 2  # a count of parameters (an integer) and a probability
    for number in numbers:
        c.go(number)
        value = float(eval(c.step.question.answer, {"__builtins__": {}}, reference(window)))  # noqa: S307
        view.number.setText("0.2")
        view.reveal_button.click()
        answer = c.answer()
        assert answer.revealed is not None and f"value: {shown(value)}." in view.revealed.text()
        assert f"{shown(abs(0.2 - value))} away" in view.revealed.text() and not view.reveal_button.isEnabled()
        check_numbers(c.step.question.explain, c.explain, view.explain.text(), reference(window))
    token = next(k for k, st in enumerate(c.tour.steps) if st.question and st.question.kind == "token")
    c.go(token)
    assert view.number.text() == ""  # a new step's own answer field
    weights = s.trace.blocks[0].attn_weights[0, -1]
    s.toggle_pin(0)  # a click on the first chip
    assert "token 0" in view.choice.text()
    c.reveal()
    best = int(np.argmax(weights))
    assert c.answer().revealed.answer == best and f"{weights[best]:.4g}" in view.revealed.text()
    c.back()
    assert c.index == token - 1
    c.go(number)
    assert c.answers[number].revealed is not None and view.number.text() == "0.2"  # answered, it stays so


def test_a_cell_question_takes_a_click_on_a_map(window, tmp_path):
    path = tmp_path / "cell.toml"
    path.write_text('''title = "cells"
[[step]]
title = "the largest score"
panel = "attention"
text = "once upon a time"
highlight = { cell = [3, "T - 3"] }
say = "Scores of {T} tokens."
[step.question]
ask = "Click the largest score."
kind = "cell"
values = "blocks[0].attn.attn_scores[0]"
''', encoding="utf-8")
    tours = window.tours
    assert tours.open(path)
    heatmap = window.panels["attention"].findChildren(Heatmap)[0]
    assert heatmap.marked_cell == (3, 1) and window.session.position == 3  # the step's cell, its row pinned
    heatmap.sig_cell_clicked.emit(2, 1)
    assert tours.controller.answer().guess == (2, 1)
    tours.controller.reveal()
    scores = window.session.trace.blocks[0].attn_scores[0]
    best = np.unravel_index(np.argmax(np.where(np.isfinite(scores), scores, -np.inf)), scores.shape)
    assert tours.controller.answer().revealed.answer == tuple(int(i) for i in best)


def test_a_bad_tour_says_so_once_and_keeps_the_open_tour(window, tmp_path, dialogs):
    tours = window.tours
    assert tours.open(CHAPTER)
    tours.controller.go(2)
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "bad"\n[[step]]\ntitle = "x"\npanel = "nope"\nsay = "0.5"\n', encoding="utf-8")
    text_before = window.session.text
    assert not tours.open(bad)
    assert len(dialogs.errors) == 1
    title, message = dialogs.errors[0]
    assert title == "Could not open the tour" and "unknown panel 'nope'" in message and "'0.5' is written" in message
    assert tours.controller.tour.path == Path(CHAPTER) and tours.controller.index == 2
    assert window.session.text == text_before


def test_a_step_whose_model_cannot_open_says_so_and_keeps_the_model(window, tmp_path, dialogs):
    (tmp_path / "broken.safetensors").write_bytes(b"not a checkpoint")
    path = tmp_path / "t.toml"
    path.write_text('title = "t"\n[[step]]\ntitle = "x"\npanel = "map"\nmodel = "broken.safetensors"\n'
                    'text = "once upon"\nsay = "{T} tokens"\n', encoding="utf-8")
    before = window.session.checkpoint
    assert window.tours.open(path)
    assert window.session.checkpoint is before and dialogs.errors
    assert "could not be opened" in window.tours.view.problems.text()


def test_next_and_back_from_the_menu_and_the_step_list(window):
    tours = window.tours
    tours.open(CHAPTER)
    tours.next_action.trigger()
    assert tours.controller.index == 1
    tours.back_action.trigger()
    assert tours.controller.index == 0
    tours.view.steps.setCurrentRow(4)
    assert tours.controller.index == 4 and window.session.text == tours.controller.step.text
    tours.controller.close()
    assert not tours.dock.isVisible() and tours.controller.step is None


def test_the_worksheet_has_every_step_with_its_figure_and_numbers(window, tmp_path, dialogs):
    tours = window.tours
    tours.open(CHAPTER)
    tours.controller.go(3)
    out = tmp_path / "sheet.html"
    dialogs.files.append(str(out))
    tours.on_export_worksheet()
    html = out.read_text(encoding="utf-8")
    steps = tours.controller.tour.steps
    assert html.count("<section>") == len(steps) and html.count('src="data:image/png;base64,') == len(steps)
    assert tours.controller.index == 3  # the learner's step is shown again
    for k in range(len(steps)):
        tours.controller.go(k)
        assert tours.controller.say.shown[0].text in html
    assert "<script" not in html and 'src="http' not in html


def test_the_worksheet_of_the_current_view_without_a_tour(window, tmp_path, dialogs):
    window.session.set_text("once upon a time")
    out = tmp_path / "view.html"
    dialogs.files.append(str(out))
    window.tours.on_export_worksheet()
    html = out.read_text(encoding="utf-8")
    probs = window.session.trace.probs[-1]
    assert html.count("<section>") == 1 and f"{probs.max():.3f}" in html and "once upon a time" in html
