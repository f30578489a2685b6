"""Hugging Face model folders in the window: File ▸ Open Folder…, recent folders, readable token names
in every panel, and a folder that is not a model leaving the loaded one in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from explorer_helpers import make_window
from model.tokens.names import CONTINUATION

ARCH = Path(__file__).parent / "fixtures" / "arch"


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


def _ticks(axis) -> list[str]:
    return [label for _, label in axis._tickLevels[0]]


@pytest.mark.slow
def test_open_folder_action_and_recent_folders(window, tmp_path, dialogs, monkeypatch):
    folder = Path(shutil.copytree(ARCH / "hf-gpt2", tmp_path / "hf-gpt2"))
    from explorer.qt import dialogs as dialog_seam

    monkeypatch.setattr(dialog_seam, "open_folder", lambda _parent, _title, _start="": str(folder))
    window.files.on_open_folder()
    s = window.session
    assert s.checkpoint.path == folder and s.checkpoint.source_format == "hf-gpt2" and not dialogs.errors
    assert window.files.recent_files() == [str(folder.resolve())] and "hf-gpt2" in window.windowTitle()
    info = window.panels["model"].browser.toPlainText()
    assert "6,001 tokens, byte-level BPE" in info and "GPT2LMHeadModel" in info
    window.files.reload()
    assert s.checkpoint.path == folder and not dialogs.errors
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(ARCH / "hf-llama"))])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                Qt.KeyboardModifier.NoModifier))
    assert s.checkpoint.path == ARCH / "hf-llama" and s.checkpoint.source_format == "hf-llama"


@pytest.mark.slow
def test_gpt2_names_are_the_same_readable_text_in_every_panel(window, dialogs):
    assert window.files.open_checkpoint(ARCH / "hf-gpt2")
    s = window.session
    s.set_text("once upon a time there was a little robot named zoé")
    assert s.tokens[:4] == ["on", "ce", " upon", " a"] and s.encoding.tokens[2] == "Ġupon"
    next_token, positional = window.panels["next-token"], window.panels["positional"]
    next_token.refresh()
    positional.refresh()
    bars = _ticks(next_token.plot.getAxis("left")) + [t for plot in positional.bar_plots.values()
                                                     for t in _ticks(plot.getAxis("left"))]
    assert bars and not any("Ġ" in label or "Ċ" in label for label in bars)
    ids = [int(i) for i in next_token.top.ids]
    assert [positional._token_name(i) for i in ids] == [next_token.token_name(i) for i in ids]
    assert [next_token.token_name(i) for i in ids] == [s.tokenizer.display(i) for i in ids]
    chips = " ".join(chip.text() for chip in window.panels["tokens"].chips if chip.isVisible())
    assert "Ġ" not in chips and "zoé" not in chips and "é" in chips


@pytest.mark.slow
def test_llama_text_starts_with_bos_and_shows_split_characters_once(window, dialogs):
    assert window.files.open_checkpoint(ARCH / "hf-llama")
    s = window.session
    s.set_text("zoé lived")
    assert s.encoding.ids[0] == 1 and s.encoding.spans[0] == (0, 0)
    assert s.tokens[0] == "<s>" and s.tokens[-4:] == ["é", CONTINUATION, " li", "ved"]
    window.panels["next-token"].append(0)  # a predicted token goes after the text, the <s> stays first
    assert s.encoding.ids[0] == 1 and s.text.startswith("zoé lived") and len(s.text) > len("zoé lived")
    assert "every text starts with <s>" in window.panels["model"].browser.toPlainText()


@pytest.mark.slow
def test_a_folder_that_is_not_a_model_we_open_keeps_the_loaded_one(window, tmp_path, dialogs):
    folder = Path(shutil.copytree(ARCH / "hf-gpt2", tmp_path / "bert"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert", "architectures": []}))
    before = window.session.checkpoint
    assert not window.files.open_checkpoint(folder)
    assert window.session.checkpoint is before
    assert dialogs.errors and "model_type 'bert' is not a model family this app opens" in dialogs.errors[0][1]
