"""GGUF files in the window: File ▸ Open's filter and drag and drop take them, the Model panel says how
each kind of tensor was stored and what dequantising cost, and its comparison with another file of the
same model gives the largest |Δ logit|, where it is, and the top-1 agreement on the current text."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from explorer.qt.panels.model_info import COMPARE_TITLE
from explorer_helpers import make_window
from gguf_files import KQUANT_FILE, LLAMA, QWEN2, gguf_file, reference

TEXT = str(reference(LLAMA, "Q8_0")["text"])


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


def _drop(window, path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                Qt.KeyboardModifier.NoModifier))


@pytest.mark.slow
def test_file_open_offers_gguf_files(window, monkeypatch, dialogs):
    from explorer.qt import dialogs as seam

    asked = []
    monkeypatch.setattr(seam, "open_file", lambda _parent, _title, _start="", filter=seam.CHECKPOINT_FILTER:
                        asked.append(filter) or str(gguf_file(LLAMA, "Q4_0")))
    window.files.on_open()
    assert "*.gguf" in asked[0].split(";;")[0] and "GGUF (*.gguf)" in asked[0]
    assert window.session.checkpoint.source_format == "gguf-llama" and not dialogs.errors


@pytest.mark.slow
def test_a_dropped_gguf_file_opens_and_the_model_panel_says_how_it_was_stored(window, dialogs):
    _drop(window, KQUANT_FILE)
    s = window.session
    assert s.checkpoint.path == KQUANT_FILE and not dialogs.errors
    s.set_text(TEXT)
    assert list(s.encoding.ids) == reference(LLAMA, "Q8_0")["token_ids"].tolist()
    info = window.panels["model"].browser.toPlainText()
    assert "Weights in the GGUF file" in info
    assert ("attention\nQ4_K (blocks of 256, 4.5 bits per weight) × 6, Q6_K (blocks of 256, 6.56 bits per weight) × 2"
            in info)
    assert "token embedding\nQ6_K (blocks of 256, 6.56 bits per weight)" in info and "norms\nF32" in info
    assert "dequantised\nto float32 when opened: 3.68 MB" in info and "file type\nQ4_K_M" in info


def _expected(a, b, ids):
    with torch.inference_mode():
        la, lb = a.model(torch.tensor(ids)).numpy(), b.model(torch.tensor(ids)).numpy()
    delta = np.abs(lb.astype(np.float64) - la)
    position, token = np.unravel_index(np.argmax(delta), delta.shape)
    return delta.max(), position, token, int((la.argmax(-1) == lb.argmax(-1)).sum())


@pytest.mark.slow
def test_the_comparison_with_another_file_follows_the_text(window, dialogs):
    from model.checkpoint import load_any

    assert window.files.open_checkpoint(gguf_file(LLAMA, "Q8_0"))
    s, panel = window.session, window.panels["model"]
    s.set_text(TEXT)
    dialogs.files.append(str(gguf_file(LLAMA, "F16")))
    panel.compare_box.setChecked(True)
    assert panel.other is not None and not dialogs.errors
    worst, position, token, same = _expected(s.checkpoint, load_any(gguf_file(LLAMA, "F16")), list(s.encoding.ids))
    assert 0.1 < worst < 1 and same < 32  # Q8_0 against F16 of one model: close, not equal
    text = panel.compare_label.text()
    assert text.startswith(f"Against model-F16 on these 32 tokens: the largest |Δ logit| is {worst:.4g}, "
                           f"at position {position} (after “{s.tokenizer.display(s.encoding.ids[position])}”), "
                           f"on the logit of “{s.tokenizer.display(int(token))}”")
    assert text.endswith(f"The same top-1 token at {same} of 32 positions ({100 * same / 32:.1f} %).")
    s.set_text("once upon a time")
    assert "on these 5 tokens" in panel.compare_label.text()
    panel.compare_box.setChecked(False)
    assert panel.other is None and panel.compare_label.text() == ""
    s.set_text("once upon a time, a robot")
    assert panel.compare_label.text() == ""


@pytest.mark.slow
def test_a_file_of_another_model_is_refused_and_the_box_unchecks(window, dialogs):
    assert window.files.open_checkpoint(gguf_file(LLAMA, "Q8_0"))
    panel = window.panels["model"]
    dialogs.files.append(str(gguf_file(QWEN2, "F16")))
    panel.compare_box.setChecked(True)
    assert not panel.compare_box.isChecked() and panel.other is None
    assert dialogs.errors == [(COMPARE_TITLE, "model-F16.gguf: not a file of this model (vocab_size 512 here, 640 there)")]
    panel.compare_box.setChecked(True)  # cancelling the file chooser (no answer queued) leaves it off too
    assert not panel.compare_box.isChecked() and len(dialogs.errors) == 1


@pytest.mark.slow
def test_opening_another_model_stops_a_comparison_that_no_longer_fits(window, dialogs):
    assert window.files.open_checkpoint(gguf_file(LLAMA, "Q8_0"))
    panel = window.panels["model"]
    dialogs.files.append(str(gguf_file(LLAMA, "F32")))
    panel.compare_box.setChecked(True)
    window.session.set_text("once upon a time")
    assert panel.compare_label.text().startswith("Against model-F32")
    assert window.files.open_checkpoint(gguf_file(LLAMA, "Q4_0"))  # the same model: the comparison goes on
    assert panel.compare_box.isChecked() and panel.compare_label.text().startswith("Against model-F32")
    assert window.files.open_checkpoint(gguf_file(QWEN2, "Q8_0"))
    assert not panel.compare_box.isChecked() and "not a file of this model" in panel.compare_label.text()
