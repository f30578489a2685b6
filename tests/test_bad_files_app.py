"""The app on damaged files: one dialog naming the file and the cause, and the model that was loaded
stays; Save As of a model whose tensors share memory works, and a write error is one dialog."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from damaged_files import CORPUS, META, NANO, RASCHKA_SIDECAR, raschka_file, word_level_tokenizer_json
from explorer.qt.files.opening import ERROR_TITLE, SAVE_ERROR_TITLE
from model.checkpoint import OpenOptions, Opening
from explorer_helpers import DialogRecorder, make_window

# The inputs of issue 12 §1 (and a name that is not UTF-8), opened as a user would.
IN_THE_APP = [
    "config JSON nested 100,000 levels",
    "vocab_padding '²' (str.isdigit passes, int() fails)",
    "meta.pkl whose stoi maps a character to a list",
    "nanoGPT wte 1-D",
    "pickle header then garbage",
    "meta.pkl of 0.5 kB lists sharing sub-lists (10^17 values)",
    "torch pickle whose dict key would take 2^64 steps to hash",
    "Hugging Face tokenizer.json whose unknown-word token is not in its vocabulary",
    "a damaged file whose name is not UTF-8",
    "GGUF cut inside the tensor data",
]


@pytest.fixture
def recorder(monkeypatch):
    return DialogRecorder().install(monkeypatch)


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, recorder):
    w = make_window(qtbot, tmp_path, tiny_checkpoint)
    w.session.set_text("the cat sat")
    return w


def _answers(options: dict) -> OpenOptions:
    vocab = options.get("vocab_path")
    return OpenOptions(options.get("n_heads"), Path(vocab) if vocab else None, bool(options.get("allow_no_tokenizer")))


def test_each_damaged_file_shows_one_dialog_and_the_model_stays(window, recorder, tmp_path):
    """One window for all the inputs (a window costs a second to make)."""
    before, logits, title = window.session.checkpoint, window.session.trace.logits.copy(), window.windowTitle()
    for i, kind in enumerate(IN_THE_APP):
        files = tmp_path / f"files{i}"  # beside the window's settings file
        files.mkdir()
        case = CORPUS[kind](files)
        recorder.errors.clear()
        assert not window.files.open_checkpoint(case.path, _answers(case.options)), kind
        assert len(recorder.errors) == 1, (kind, recorder.errors)
        dialog_title, text = recorder.errors[0]
        assert dialog_title == ERROR_TITLE and text.startswith(case.name + ":") and re.search(case.cause, text), text
        assert "Please file an issue" not in text
        assert window.session.checkpoint is before and window.windowTitle() == title, kind
        np.testing.assert_array_equal(window.session.trace.logits, logits)


def test_a_tokenizer_json_that_fails_on_unknown_words_is_explained_and_asked_again(window, recorder, tmp_path, monkeypatch):
    """Chosen as the vocabulary, it was accepted, then every unknown word raised while typing.
    And a nanoGPT checkpoint named .safetensors (torch.load picks a reader by the name) opens."""
    from explorer.qt import dialogs

    shutil.copy(NANO, tmp_path / "ckpt.pt")
    (tmp_path / "tokenizer.json").write_text(word_level_tokenizer_json("<missing>"))
    choices = [0, None]  # choose a file, then cancel when asked again
    monkeypatch.setattr(dialogs, "ask_choice", lambda *a: choices.pop(0))
    recorder.files.append(str(tmp_path / "tokenizer.json"))
    before = window.session.checkpoint
    assert not window.files.open_checkpoint(tmp_path / "ckpt.pt")
    assert [t for t, _ in recorder.errors] == ["Not this model's vocabulary"]
    assert recorder.errors[0][1].startswith("tokenizer.json:") and "'<missing>' is not in its vocabulary" in recorder.errors[0][1]
    assert window.session.checkpoint is before and choices == []
    shutil.copy(NANO, tmp_path / "ckpt.safetensors")
    assert window.files.open_checkpoint(tmp_path / "ckpt.safetensors", OpenOptions(vocab_path=META))
    assert len(recorder.errors) == 1 and window.session.checkpoint.source_format == "nanogpt"


@pytest.mark.slow
def test_save_as_of_a_model_whose_tensors_share_memory_and_any_write_error(window, recorder, tmp_path, monkeypatch):
    def tie(state):
        state["out_head.weight"] = state["tok_emb.weight"]  # one storage: the book's weight tying

    path = raschka_file(tmp_path, tie)
    shutil.copy(RASCHKA_SIDECAR, tmp_path / "model_config.json")
    assert window.files.open_checkpoint(path, OpenOptions(allow_no_tokenizer=True))
    window.session.set_text("3, 17, 5")
    logits = window.session.trace.logits.copy()
    assert window.files.save_checkpoint_as(tmp_path / "saved.safetensors")
    assert recorder.errors == [] and window.session.checkpoint.path == tmp_path / "saved.safetensors"
    np.testing.assert_array_equal(window.session.trace.logits, logits)

    def refuse(*_a, **_k):
        raise RuntimeError("Some tensors share memory, this will lead to duplicate memory on disk")

    before = window.session.checkpoint
    monkeypatch.setattr("safetensors.torch.save_file", refuse)
    assert not window.files.save_checkpoint_as(tmp_path / "again.safetensors")
    assert len(recorder.errors) == 1 and recorder.errors[0][0] == SAVE_ERROR_TITLE
    assert "again.safetensors" in recorder.errors[0][1] and "RuntimeError: Some tensors share memory" in recorder.errors[0][1]
    assert window.session.checkpoint is before and not (tmp_path / "again.safetensors").exists()


def test_what_no_check_foresaw_is_one_dialog_and_a_model_that_cannot_run_is_not_taken(window, recorder, tmp_path, monkeypatch, tiny_tokenizer):
    from conftest import make_tiny_checkpoint
    from explorer.qt.files import opening

    before = window.session.checkpoint
    broken = make_tiny_checkpoint(tiny_tokenizer)
    broken.path = tmp_path / "broken.safetensors"

    def fails(*_a, **_k):
        raise RuntimeError("the model's own failure")

    broken.model.trace = fails  # loads, then cannot run
    monkeypatch.setattr(opening, "inspect", lambda *a, **k: Opening.ready(broken.path, "transformer-explorer",
                                                                          lambda: broken))
    assert not window.files.open_checkpoint(tmp_path / "broken.safetensors")
    assert recorder.errors == [(ERROR_TITLE, "broken.safetensors: the model was read but does not run "
                                             "(RuntimeError: the model's own failure)")]

    def mistake(*_a, **_k):
        raise KeyError("a bug outside the loader")

    monkeypatch.setattr(opening, "inspect", mistake)
    recorder.errors.clear()
    assert not window.files.open_checkpoint(tmp_path / "other.pt")
    assert recorder.errors == [(ERROR_TITLE, "other.pt: cannot be opened (KeyError: 'a bug outside the loader')")]
    assert window.session.checkpoint is before
