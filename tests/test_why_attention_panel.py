"""The Why attention? panel (pytest-qt): it shows the two shipped models' numbers on the session's text,
follows the user's token, places and phrase, and names its parts for a tour."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from explorer.core.defaults import BEFORE_ATTENTION
from explorer.core.lessons.why_attention import TRANSFORMER, WINDOW
from explorer.qt.panels import PANELS
from explorer.qt.panels.lessons.why_attention import panel as why_panel
from explorer.qt.panels.lessons.why_attention.panel import WhyAttentionPanel
from explorer_helpers import shown, sync_session
from model.checkpoint import load_any

TEXT = "once upon a time there was a little girl named lily. she liked to play in the park with her"


def _panel(qtbot, checkpoint, text: str = TEXT) -> WhyAttentionPanel:
    session = sync_session(checkpoint, text)
    panel = shown(qtbot, WhyAttentionPanel(session))
    qtbot.waitUntil(lambda: panel.lesson is not None, timeout=20000)
    return panel


def test_the_panel_shows_the_models_numbers(qtbot, tiny_checkpoint):
    assert {name: (title, factory.resolve()) for name, title, factory in PANELS}["why-attention"] == (
        "Why attention?", WhyAttentionPanel)
    panel = _panel(qtbot, tiny_checkpoint)  # the session's own model does not matter: the lesson runs the pair
    pair, result = panel.pair, panel.lesson
    ids = pair.encode(TEXT)
    assert panel.token_box.currentData() == ids[-1] == pair.transformer.tokenizer.token_to_id("her")
    assert (panel.place_a.value(), panel.place_b.value()) == (31, 15)  # its place, and half a window away
    np.testing.assert_array_equal(panel.blocks.block_a.data, pair.window.model.slot_weights(31))
    np.testing.assert_array_equal(panel.blocks.block_b.data, pair.window.model.slot_weights(15))
    np.testing.assert_array_equal(panel.blocks.shared["W_Q"].data,
                                  pair.transformer.model.blocks[0].attn.head_weights()["W_Q"][0])
    for row, key in enumerate((TRANSFORMER, WINDOW)):
        p = result.shift.predictions[key]
        assert panel.phrase.item(row, 3).text() == f"{p.tv:.3f}"
        assert panel.phrase.item(row, 2).text().endswith(f"{float(p.late[p.top_late]):.3f}")
        assert panel.val.item(row, 1).text() == f"{[pair.transformer, pair.window][row].model.n_params():,}"
    np.testing.assert_array_equal(p.late, pair.window.model.trace(list(ids)).probs[-1])  # late: the text itself
    assert panel.sentences["val"].text().startswith("Validation loss in nats per token, on the same validation text")
    x, y = panel.params.marks[WINDOW].getData()  # drawn on log axes: log10 of the values
    np.testing.assert_allclose(10 ** np.array([x[0], y[0]]), [32, 727_472], rtol=1e-9)
    assert set(panel.parts) == {"blocks", "window-blocks", "shared", "phrase", "params", "val-loss"}
    assert panel.parts["params"].objectName() == "why-attention-params"


def test_it_follows_the_token_places_and_phrase(qtbot, tiny_checkpoint):
    panel = _panel(qtbot, tiny_checkpoint)
    lily = panel.pair.transformer.tokenizer.token_to_id("lily")
    index = panel.token_box.findData(lily)
    panel.token_box.setCurrentIndex(index)
    panel.token_box.activated.emit(index)
    qtbot.waitUntil(lambda: panel.lesson.blocks.token_id == lily, timeout=20000)
    place = 32 - len(panel.pair.encode(TEXT)) + 10  # "lily" is token 10 of 21
    assert panel.lesson.blocks.places == (place, place - 16)  # 21 and half a window before it
    panel.place_b.setValue(3)
    qtbot.waitUntil(lambda: panel.lesson.blocks.places == (place, 3), timeout=20000)
    panel.phrase_length.setValue(5)
    qtbot.waitUntil(lambda: len(panel.lesson.shift.phrase) == 5, timeout=20000)
    panel.session.set_text("the dog and lily")
    qtbot.waitUntil(lambda: len(panel.lesson.shift.phrase) == 4, timeout=20000)  # the phrase fits the text
    assert panel.lesson.blocks.token_id == lily  # still in the text: still chosen
    panel.session.set_text("")
    assert panel.message.text().startswith("Type a text")


def test_without_its_files_it_says_why(qtbot, tiny_checkpoint, monkeypatch, tmp_path):
    monkeypatch.setattr(why_panel, "BEFORE_ATTENTION", tmp_path / "missing.safetensors")
    session = sync_session(tiny_checkpoint, TEXT)
    panel = shown(qtbot, WhyAttentionPanel(session))
    assert panel.pair is None and "missing.safetensors" in panel.message.text()
    assert panel.message.text().startswith("The lesson needs the two shipped models")


def test_it_works_with_the_model_before_attention_loaded(qtbot):
    panel = _panel(qtbot, load_any(Path(BEFORE_ATTENTION)))
    assert panel.lesson.shift.predictions[WINDOW].tv >= 0 and panel.message.text() == ""


def test_a_tour_can_choose_what_it_shows(qtbot, tiny_checkpoint):
    panel = _panel(qtbot, tiny_checkpoint)
    girl = panel.pair.transformer.tokenizer.token_to_id("girl")
    panel.choose(girl, (2, 30), 4)
    qtbot.waitUntil(lambda: panel.lesson.blocks.places == (2, 30), timeout=20000)
    assert panel.lesson.blocks.token_id == girl and len(panel.lesson.shift.phrase) == 4
    assert panel.token_box.currentData() == girl
    panel.choose(places=(5, 6))
    qtbot.waitUntil(lambda: panel.lesson.blocks.places == (5, 6), timeout=20000)
    assert panel.lesson.blocks.token_id == girl
