"""The app on llama2.c's files: File ▸ Open Folder, a dropped folder, the command line with a
folder, the vocabulary question answered with a tokenizer.bin, and Save As."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage

from explorer.qt.files.opening import recall
from explorer_helpers import make_window
from model.checkpoint import load_checkpoint
from test_explorer_cli import run_app
from test_explorer_interop import Questions

FIX = Path(__file__).parent / "fixtures" / "arch" / "llama2c-v0"
REF = np.load(FIX / "reference.npz")
TEXT = str(REF["text"])


@pytest.fixture
def questions(monkeypatch):
    return Questions().install(monkeypatch)


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, questions):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


def _assert_reference(session) -> None:
    """What the panels draw is llama2.c's: its token ids, logits within 1e-4, attention within 1e-5."""
    np.testing.assert_array_equal(session.trace.token_ids, REF["token_ids"])
    assert np.abs(session.trace.logits - REF["logits"]).max() <= 1e-4
    attn = np.stack([b.attn_weights for b in session.trace.blocks])
    assert np.abs(attn - REF["attn_weights"]).max() <= 1e-5


def test_open_folder_action(window, questions):
    questions.files.append(str(FIX))
    window.files.on_open_folder()
    assert [q.split(":")[0] for q in questions.asked] == ["open_folder"] and not questions.errors
    s = window.session
    assert s.checkpoint.path == FIX and s.checkpoint.source_format == "llama2.c"
    window.panels["tokens"].editor.setPlainText(TEXT)
    _assert_reference(s)
    assert s.tokens[:3] == ["<s>", " once", " upon"] and s.encoding.spans[0] == (0, 0)
    assert "llama2c-v0" in window.windowTitle()
    info = window.panels["model"].browser.toPlainText()
    assert "llama2.c" in info and "ckpt.pt" in info and "interleaved" in info
    assert window.files.recent_files() == [str(FIX.resolve())]
    first = s.checkpoint
    window.files.reload()
    assert s.checkpoint is not first and s.checkpoint.path == FIX
    assert window.files.open_recent(str(FIX.resolve())) and not questions.errors


def test_dropping_a_folder_opens_it(window):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(FIX) + "/")])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    assert window.session.checkpoint.path == FIX and window.session.checkpoint.source_format == "llama2.c"


def test_a_folder_without_a_model_or_a_cut_file_says_so_and_keeps_the_model(window, tmp_path, questions):
    before = window.session.checkpoint
    assert not window.files.open_checkpoint(tmp_path)
    assert questions.errors and "not a checkpoint format this app opens" in questions.errors[0][1]
    cut = tmp_path / "model.bin"
    cut.write_bytes((FIX / "model.bin").read_bytes()[:500_000])  # an interrupted download
    assert not window.files.open_checkpoint(cut)
    assert "model.bin: a llama2.c model.bin" in questions.errors[1][1] and "cut short" in questions.errors[1][1]
    assert window.session.checkpoint is before and questions.asked == []


def test_model_bin_asks_for_its_tokenizer_bin_once(window, tmp_path, questions):
    model = tmp_path / "stories.bin"
    shutil.copy(FIX / "model.bin", model)
    questions.choices.append(0)  # "Choose a vocabulary file…"
    questions.files.append(str(FIX / "tokenizer.bin"))
    assert window.files.open_checkpoint(model)
    assert "tokenizer.bin" in questions.asked[0] and not questions.errors
    window.session.set_text(TEXT)
    _assert_reference(window.session)
    assert recall(window.settings, model).vocab_path == (FIX / "tokenizer.bin").resolve()
    window.files.reload()
    assert len(questions.asked) == 2  # remembered: no question again


def test_save_as_writes_our_safetensors_that_reopen_identically(window, tmp_path, questions):
    assert window.files.open_checkpoint(FIX / "model.bin")
    window.session.set_text(TEXT)
    logits, tokens = window.session.trace.logits.copy(), list(window.session.tokens)
    questions.files.append(str(tmp_path / "stories"))
    window.files.on_save_as()
    saved = tmp_path / "stories.safetensors"
    s = window.session
    assert s.checkpoint.path == saved and s.checkpoint.source_format == "transformer-explorer"
    np.testing.assert_array_equal(s.trace.logits, logits)
    assert list(s.tokens) == tokens and not questions.errors
    assert load_checkpoint(saved).config.rope_pairs == "interleaved"


@pytest.mark.slow
def test_command_line_opens_a_folder(tmp_path):
    out = tmp_path / "tokens.png"
    r = run_app(str(FIX), "--text", "once upon a time", "--screenshot", str(out), "--panel", "tokens",
                "--size", "600x300")
    assert r.returncode == 0, r.stderr
    assert QImage(str(out)).width() == 600
