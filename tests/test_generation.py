"""Generation in the app: greedy equals step-by-step argmax, seeded sampling repeats (and equals
model.generate), each token's alternatives are what the model had, forking keeps both branches."""

import numpy as np
import torch
import pytest
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication

from conftest import make_tiny_checkpoint
from explorer.core.held_tokens import TokenText
from explorer.core.story import MAX_BRANCHES, Generated, Story, branch_text
from explorer.qt.generation import Generator
from explorer_helpers import make_window
from model import Encoding
from model.generate import Sampling, Step, generate

PROMPT = "the cat sat"


@pytest.fixture
def window(qtbot, tmp_path, tiny_tokenizer, dialogs):
    """The window on a tiny model with room for a story (context 32)."""
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32))
    w.session.set_text(PROMPT)
    return w


GREEDY = Sampling()


def run(qtbot, window, n, sampling=GREEDY):
    panel = window.panels["generate"]
    generator = Generator.of(window.session)
    generator.start(n, sampling)
    qtbot.waitUntil(lambda: not generator.running, timeout=10000)
    assert panel.button.text().startswith("Generate")
    return generator


@pytest.mark.slow
def test_greedy_generation_equals_step_by_step_argmax(qtbot, window):
    s = window.session
    g = run(qtbot, window, 6)
    ids = list(s.tokenizer.encode(PROMPT).ids)
    for _ in range(6):
        ids.append(int(np.argmax(s.model.trace(ids).logits[-1])))
    assert g.story.ids() == ids
    assert list(s.encoding.ids) == ids and s.text == branch_text(g.story, s.tokenizer)
    assert g.status == "generated 6 tokens"
    chips = window.panels["tokens"].chips
    assert [c.kind for c in chips[:9]] == ["normal"] * 3 + ["generated"] * 6  # each marked as generated
    assert "gen" in chips[5].text()


@pytest.mark.slow
def test_generation_runs_the_model_as_the_panels_do(qtbot, window):
    """With positional encoding switched off, the app generated with it on: greedy was not the
    argmax the next-token panel showed, and a token's probability was not the panel's."""
    s = window.session
    s.set_positional_encoding(False)
    g = run(qtbot, window, 4)
    ids = list(s.tokenizer.encode(PROMPT).ids)
    for _ in range(4):
        ids.append(int(np.argmax(s.model.trace(ids, positional_encoding=False).logits[-1])))
    assert g.story.ids() == ids
    for step, rec in enumerate(g.story.branch.steps):
        assert rec.model_prob == pytest.approx(float(s.trace.probs[2 + step][rec.token_id]), rel=1e-4)


@pytest.mark.slow
def test_seeded_sampling_repeats_and_equals_model_generate(qtbot, window):
    s = window.session
    sampling = Sampling(temperature=1.5, top_k=10, top_p=0.9, seed=42)
    first = run(qtbot, window, 8, sampling).story.ids()
    s.set_text(PROMPT)
    second = run(qtbot, window, 8, sampling).story.ids()
    prompt = list(s.tokenizer.encode(PROMPT).ids)
    expected = [st.token_id for st in generate(s.model, prompt, 8, sampling)]
    assert first == second == prompt + expected
    s.set_text(PROMPT)
    other = run(qtbot, window, 8, Sampling(temperature=1.5, top_k=10, top_p=0.9, seed=43)).story.ids()
    assert other != first


@pytest.mark.slow
def test_a_generated_token_shows_the_alternatives_from_the_trace_row_before_it(qtbot, window):
    """In a causal model the row before a token is exactly what the model saw when it chose it."""
    s = window.session
    g = run(qtbot, window, 5, Sampling(temperature=1.0, seed=3))
    probs = s.trace.probs
    for step, rec in enumerate(g.story.branch.steps):
        row = 3 + step - 1  # the token at 3 + step was chosen from the distribution at the row before
        np.testing.assert_allclose(rec.top_probs, probs[row][list(rec.top_ids)], rtol=1e-4, atol=1e-7)
        assert rec.model_prob == pytest.approx(float(probs[row][rec.token_id]), rel=1e-4)
        assert list(rec.top_ids) == list(np.argsort(-probs[row], kind="stable")[:len(rec.top_ids)])
    panel = window.panels["generate"]
    s.set_position(4)  # the second generated token
    text = panel.detail.text()
    rec = g.story.branch.steps[1]
    assert f"drawn with probability {rec.prob:.3f} from the sampling distribution" in text
    assert f"the model's own softmax gave it {rec.model_prob:.3f}" in text and "query row 3" in text
    assert f"fork:{rec.top_ids[1] if rec.top_ids[0] == rec.token_id else rec.top_ids[0]}" in text


@pytest.mark.slow
def test_forking_keeps_both_branches_and_switching_restores_each(qtbot, window):
    s = window.session
    g = run(qtbot, window, 6)
    first_text, first_ids = s.text, g.story.ids()
    step = 2
    alternative = next(i for i in g.story.branch.steps[step].top_ids if i != first_ids[3 + step])
    g.fork(step, alternative, 4, Sampling())
    qtbot.waitUntil(lambda: not g.running, timeout=10000)
    story = g.story
    assert len(story.branches) == 2 and story.current == 1
    second = story.ids()
    assert second[:3 + step] == first_ids[:3 + step] and second[3 + step] == alternative
    assert len(second) == 3 + step + 1 + 4 and story.branches[0].ids == first_ids[3:]  # the first branch kept
    assert story.branch.steps[step].forked and list(s.encoding.ids) == second
    assert g.status == "generated 4 tokens after the fork at token 3"
    panel = window.panels["generate"]
    assert panel.branches.count() == 2 and "fork at 3" in panel.branches.itemText(1)
    g.switch(0)
    assert s.text == first_text and list(s.encoding.ids) == first_ids
    assert panel.branches.currentIndex() == 0
    g.switch(1)
    assert list(s.encoding.ids) == second
    last = len(story.branch.steps) - 1  # a fork at the last token with nothing after it: that token alone
    g.fork(last, story.branch.steps[last].top_ids[-1], 0, Sampling())
    assert not g.running and story.ids() == second[:-1] + [int(story.branch.steps[last].top_ids[-1])]
    assert list(s.encoding.ids) == story.ids() and g.status == f"generated 0 tokens after the fork at token {last + 1}"


@pytest.mark.slow
def test_a_fork_from_the_panel_link(qtbot, window):
    s = window.session
    g = run(qtbot, window, 4)
    s.set_position(5)  # generated token 3 (step 2)
    panel = window.panels["generate"]
    rec = g.story.branch.steps[2]
    other = next(i for i in rec.top_ids if i != rec.token_id)
    panel._on_detail_link(f"fork:{other}")
    qtbot.waitUntil(lambda: not g.running, timeout=10000)
    assert len(g.story.branches) == 2 and g.story.ids()[5] == other
    panel._on_detail_link("row")  # the row the model read when it chose that token
    assert s.position == 4


@pytest.mark.slow
def test_stop_and_an_edit_end_a_run(qtbot, tmp_path, tiny_tokenizer, dialogs):
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=32), compute_mode="async")
    s, g = w.session, Generator.of(w.session)
    s.set_text(PROMPT)
    qtbot.waitUntil(lambda: not s.busy)
    g.start(500, Sampling())
    qtbot.waitUntil(lambda: len(g.story.branch.steps) >= 2, timeout=10000)
    w.panels["generate"].toggle()  # the same button stops
    assert not g.running and g.status.startswith("stopped after")
    done = len(g.story.branch.steps)
    qtbot.wait(50)
    assert len(g.story.branch.steps) == done  # nothing more arrives
    g.start(500, Sampling())
    qtbot.waitUntil(lambda: len(g.story.branch.steps) > done, timeout=10000)
    s.set_text(s.text + " dog")  # typing while it runs
    qtbot.waitUntil(lambda: not g.running, timeout=10000)
    assert "the text was edited" in g.status and s.text.endswith(" dog")
    s.shutdown()


@pytest.mark.slow
def test_ctrl_g_generates_and_settings_are_kept(qtbot, window, tmp_path):
    actions = [a for m in window.menuBar().actions() if m.menu() for a in m.menu().actions()]
    action = next(a for a in actions if a.shortcut() == QKeySequence("Ctrl+G"))
    window.panels["generate"].n_box.setValue(3)
    action.trigger()
    g = Generator.of(window.session)
    qtbot.waitUntil(lambda: not g.running, timeout=10000)
    assert len(g.story.branch.steps) == 3
    panel = window.panels["generate"]
    panel.mode.setCurrentIndex(1)
    panel.seed_box.setValue(77)
    assert panel.sampling() == Sampling(1.0, None, None, 77) and panel.temperature_box.isVisible()
    panel.top_k_box.setValue(12)
    window.save_settings()
    again = make_window(qtbot, tmp_path, make_tiny_checkpoint(window.session.tokenizer))
    kept = again.panels["generate"]
    assert kept.seed_box.value() == 77 and kept.n_box.value() == 3
    assert kept.top_k_box.value() == 12  # it was restored before a model was open, and clamped to 0 ("all")
    again.set_checkpoint(make_tiny_checkpoint(window.session.tokenizer, vocab_size=8))
    assert kept.top_k_box.value() == 8  # a smaller vocabulary clamps the box, ...
    again.set_checkpoint(make_tiny_checkpoint(window.session.tokenizer))
    assert kept.top_k_box.value() == 12  # ... not the choice


@pytest.mark.slow
def test_a_model_that_reads_the_prompt_alike_keeps_the_story(qtbot, window, tiny_tokenizer):
    g = run(qtbot, window, 3)
    window.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, context_length=32, seed=5))  # a reload
    assert g.story is not None and len(g.generated_indices()) == 3
    window.session.set_text("a dog")
    assert g.generated_indices() == frozenset()  # another text: nothing marked


# ---- the story, without Qt ------------------------------------------------------------------------
def _prompt(text, ids):
    """A prompt's text and tokens (spans made up: one character each)."""
    return TokenText(text, Encoding(ids, tuple(map(str, ids)), tuple((i, i + 1) for i in range(len(ids)))))


def _gen(token_id, top=(5, 6, 7)):
    return Generated(token_id, 1.0, 0.5, tuple(top), (0.5, 0.3, 0.2), Sampling())


def test_story_fork_keeps_the_parent_and_marks_what_the_text_still_holds():
    story = Story(_prompt("the cat", (3, 4)))
    for t in (5, 6, 7):
        story.extend(_gen(t))
    assert story.fork(1, 7) == 1
    assert story.branches[0].ids == [5, 6, 7] and story.branch.ids == [5, 7]
    assert story.branch.parent == 0 and story.branch.fork_at == 1 and story.branch.steps[1].model_prob == 0.2
    assert story.generated_indices([3, 4, 5, 7, 9]) == {2, 3}  # text typed after them keeps them
    assert story.generated_indices([3, 4, 5, 6]) == {2}  # the branch shown is the fork
    assert story.generated_indices([3, 9, 5, 7]) == frozenset()  # the prompt was edited
    with pytest.raises(IndexError):
        story.fork(5, 1)


def test_story_keeps_a_small_list_of_branches():
    story = Story(_prompt("x", (1,)))
    story.extend(_gen(5))
    for _ in range(MAX_BRANCHES + 3):
        story.current = len(story.branches) - 1
        story.fork(0, 6)
    assert len(story.branches) == MAX_BRANCHES and story.current == MAX_BRANCHES - 1
    assert all(b.parent is None or 0 <= b.parent < len(story.branches) for b in story.branches)


@pytest.mark.parametrize("folder, written", [("hf-llama", " é and"), ("hf-gpt2", " \U0001F600 and")])
def test_a_character_written_in_byte_tokens_is_that_character_in_the_text(folder, written):
    """Each byte token decoded alone is "\ufffd": the text held "\ufffd\ufffd" for "é", and the panels
    traced the replacement characters' tokens instead of what the model wrote."""
    from pathlib import Path

    from model.checkpoint import load_any

    tok = load_any(Path(__file__).parent / "fixtures" / "arch" / folder).tokenizer
    prompt = "Once upon a time"
    prompt_ids = tuple(tok.encode(prompt).ids)
    ids = list(tok.encode(prompt + written).ids)
    assert len(ids) - len(prompt_ids) > len(written.split())  # the character is several byte tokens
    story = Story(TokenText(prompt, tok.encode(prompt)))
    for token_id in ids[len(prompt_ids):]:
        story.extend(Generated(token_id, 1.0, 1.0, (token_id,), (1.0,), Sampling()))
    assert branch_text(story, tok) == prompt + written
    assert story.generated_indices(tok.encode(branch_text(story, tok)).ids) == frozenset(
        range(len(prompt_ids), len(ids)))


def test_generated_from_a_step_keeps_both_probabilities():
    step = Step(4, 0.7, np.array([4, 2]), np.array([0.6, 0.3], np.float32), 0.6)
    rec = Generated.from_step(step, Sampling(temperature=0.5, seed=1))
    assert (rec.prob, rec.model_prob, rec.top_ids) == (0.7, 0.6, (4, 2))
    assert rec.alternatives() == [(4, pytest.approx(0.6)), (2, pytest.approx(0.3))]


@pytest.mark.slow
def test_app_generation_is_ignored_without_text(qtbot, window):
    window.session.set_text("")
    g = Generator.of(window.session)
    g.start(5, Sampling())
    assert not g.running and "type a text first" in g.status
    QApplication.processEvents()
    assert window.panels["generate"].status.text() == g.status


@pytest.mark.slow
def test_the_command_line_fork_pins_the_token_where_the_branches_part_only_while_it_has_a_row(
        qtbot, tmp_path, tiny_tokenizer, dialogs):
    """--generate 300 --fork 300 on a 32-token context pinned row 0, another token."""
    from explorer.app import _generate

    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer))  # context 8
    s = w.session
    s.set_text("the cat")
    _generate(w, 2, 2, QApplication.instance())  # the fork's token: index 3 of 6, in the window
    assert len(s.encoding) == 6 and s.position == 3 and Generator.of(s).story.branch.steps[1].forked
    s.set_position(None)
    s.set_text("the cat")
    _generate(w, 10, 2, QApplication.instance())  # index 3 of 14: it has left the window of 8
    assert len(s.encoding) == 14 and s.trace.dropped == 6 and s.position is None


@pytest.mark.slow
def test_a_run_that_fails_at_its_first_token_leaves_no_empty_branch(qtbot, window):
    """Logits that are not numbers stop the run with the reason; nothing was generated, so no
    story with an empty branch is listed."""
    model = window.session.checkpoint.model
    with torch.no_grad():
        model.tok_emb.weight.fill_(float("nan"))  # every logit NaN
    window.session.forget_reuse()
    g = run(qtbot, window, 5)
    assert g.status.startswith("stopped: ") and g.story is None
    assert window.session.text == PROMPT


def test_the_branches_cleared_message_shows_only_after_the_switch_that_cleared_them(qtbot, window, tiny_tokenizer):
    """It stayed through every later model switch ("the branches were cleared" with no branches left)."""
    from pathlib import Path

    from model.checkpoint import load_any

    g, panel = run(qtbot, window, 3), window.panels["generate"]
    assert g.story is not None and g.status == "generated 3 tokens"
    window.set_checkpoint(load_any(Path(__file__).parent / "fixtures" / "arch" / "llama2c-v0"))  # reads it otherwise
    cleared = "the new model reads the text differently: the branches were cleared"
    assert g.story is None and g.status == cleared and panel.status.text() == cleared
    window.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, context_length=32, seed=5))  # a later open
    assert g.story is None and "cleared" not in g.status and "cleared" not in panel.status.text()
    run(qtbot, window, 2)
    window.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, context_length=32, seed=6))  # keeps the story
    assert g.story is not None and "cleared" not in panel.status.text()
