"""Opening in one pass: the file is inspected (read and checked once), every question is asked before
anything is loaded, the model is built once, and its first runs are pieces of its first trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import model.formats.base as base
from conftest import make_tiny_checkpoint
from explorer_helpers import Questions, make_window
from model.checkpoint import NeedsInput, OpenOptions, inspect, load_any
from model.core.transformer import GPT
from model.formats.opening import N_HEADS, VOCAB

FIX = Path(__file__).parent / "fixtures" / "interop"
WORDS = FIX / "raschka_word_vocab.json"


class Events:
    """What happened, in order: the file read (torch.load), models built, forward passes (positions)."""

    def __init__(self, monkeypatch) -> None:
        self.log: list[str] = []
        self.positions = 0
        load, init, run = base.torch_load, GPT.__init__, GPT._run

        def counted_load(*args, **kwargs):
            self.log.append("read")
            return load(*args, **kwargs)

        def counted_init(model, *args, **kwargs):
            self.log.append("build")
            init(model, *args, **kwargs)

        def counted_run(model, ids, *args, **kwargs):
            self.log.append("run")
            self.positions += int(ids.shape[-1])
            return run(model, ids, *args, **kwargs)

        monkeypatch.setattr(base, "torch_load", counted_load)
        monkeypatch.setattr(GPT, "__init__", counted_init)
        monkeypatch.setattr(GPT, "_run", counted_run)

    def count(self, what: str) -> int:
        return self.log.count(what)


@pytest.fixture
def bare_raschka(tmp_path) -> Path:
    """The book's model.pth alone: no sidecar config (n_heads unknown), no vocabulary beside it."""
    path = tmp_path / "model.pth"
    shutil.copyfile(FIX / "ckpt_raschka.pth", path)
    return path


def test_inspect_says_every_question_and_the_load_reads_nothing_again(bare_raschka, monkeypatch):
    events = Events(monkeypatch)
    opening = inspect(bare_raschka)
    assert opening.source_format == "llms-from-scratch" and [q.kind for q in opening.questions] == [N_HEADS, VOCAB]
    heads, vocab = opening.questions
    assert heads.proposed == 1 and heads.choices == (1, 2, 4, 8, 16, 32, 64)
    assert "the number of attention heads cannot be read" in heads.message
    assert "no vocabulary was found" in vocab.message and events.log == ["read"]
    with pytest.raises(NeedsInput) as asked:  # a caller with nobody to ask gets the first question
        opening.load(OpenOptions(vocab_path=WORDS))
    assert asked.value.kind == N_HEADS and str(asked.value) == heads.message
    checkpoint = opening.load(OpenOptions(n_heads=2, vocab_path=WORDS))
    assert checkpoint.config.n_heads == checkpoint.config.n_kv_heads == 2 and checkpoint.tokenizer.vocab_size == 500
    assert events.log == ["read", "build"]  # the file read once, the model built once, never run
    assert [q.kind for q in inspect(bare_raschka, OpenOptions(n_heads=2)).questions] == [VOCAB]


def test_load_any_still_raises_the_questions_one_by_one_with_their_messages(bare_raschka):
    with pytest.raises(NeedsInput) as first:
        load_any(bare_raschka)
    with pytest.raises(NeedsInput) as second:
        load_any(bare_raschka, n_heads=2)
    assert (first.value.kind, second.value.kind) == (N_HEADS, VOCAB)
    assert str(second.value).startswith("model.pth: no vocabulary was found for this model (500 tokens)")
    assert load_any(bare_raschka, n_heads=2, vocab_path=WORDS).config.n_heads == 2


@pytest.fixture
def window(qtbot, tmp_path, tiny_tokenizer, monkeypatch):
    questions = Questions().install(monkeypatch)
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer))
    w.questions = questions
    return w


def _long_text() -> str:
    return json.loads((FIX / "raschka_input.json").read_text())["text"]  # 32 tokens of the book's vocabulary


@pytest.mark.slow
def test_file_open_asks_everything_first_then_loads_once_and_traces_once(window, bare_raschka, monkeypatch):
    from explorer.qt import dialogs

    questions = window.questions
    window.session.set_text(_long_text())
    events = Events(monkeypatch)
    for name in ("ask_int", "ask_choice", "open_file"):  # each question, in the same log
        answer = getattr(dialogs, name)  # the recorder's
        monkeypatch.setattr(dialogs, name, lambda *a, answer=answer: events.log.append("ask") or answer(*a))
    questions.ints.append(2)
    questions.choices.append(0)
    questions.files.append(str(WORDS))
    assert window.files.open_checkpoint(bare_raschka)
    assert [q.split(":")[0] for q in questions.asked] == ["ask_int", "ask_choice", "open_file"]
    # Read once, every question before anything is loaded, built once; then from the open to the
    # first trace two runs: one token to pay torch's one-off costs, then the text's 32 positions once
    # (the speed is measured on them, and the first trace reuses them all).
    assert events.log == ["read", "ask", "ask", "ask", "build", "run", "run"] and not questions.errors
    s = window.session
    assert s.trace is not None and s.trace.n_tokens == 32 == s.config.context_length
    assert events.positions == 1 + 32 and s.trace.reused_rows == 32 and s.trace.logits.shape == (32, 500)


@pytest.mark.slow
def test_a_vocabulary_that_does_not_fit_is_asked_again_without_building_the_model_again(window, tmp_path,
                                                                                      monkeypatch):
    nano = tmp_path / "ckpt.pt"
    shutil.copyfile(FIX / "ckpt_nanogpt.pt", nano)
    questions = window.questions
    questions.choices += [0, 0]
    questions.files += [str(WORDS), str(FIX / "nanogpt_shakespeare_char_meta.pkl")]  # 500 words: not its 65
    events = Events(monkeypatch)
    assert window.files.open_checkpoint(nano)
    assert [q.split(":")[0] for q in questions.asked] == ["ask_choice", "open_file", "ask_choice", "open_file"]
    assert len(questions.errors) == 1 and questions.errors[0][0] == "Not this model's vocabulary"
    assert events.count("read") == 1 and events.count("build") == 1 and window.session.tokenizer.vocab_size == 65


@pytest.mark.slow
def test_a_model_that_does_not_run_on_its_first_trace_is_not_taken(window, tiny_tokenizer):
    s = window.session
    s.set_text("the cat sat")
    before, trace = s.checkpoint, s.trace
    broken = make_tiny_checkpoint(tiny_tokenizer, seed=3)

    def fails(*_args, **_kwargs):
        raise RuntimeError("no kernel for this")

    broken.model.trace = fails
    assert not window.files.make_current(broken)
    assert s.checkpoint is before and s.trace is trace and s.text == "the cat sat"
    assert window.questions.errors == [("Could not open checkpoint", "the model: the model was read but does not "
                                                                     "run (RuntimeError: no kernel for this)")]
