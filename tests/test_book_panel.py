"""The variants panel's source switch and its "book's example" page (pytest-qt, offscreen)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from explorer.core.lessons import book_views
from explorer.core.lessons import variants
from explorer.core.lessons.book import chapter3
from explorer.qt.panels.lessons.variants.panel import VariantsPanel
from explorer.qt.session import Session
from conftest import SAFETY_NET_S


@pytest.fixture
def panel(qtbot, tiny_checkpoint):
    s = Session(compute_mode="sync")
    s.set_checkpoint(tiny_checkpoint)
    s.set_text("the cat sat on the mat .")
    p = VariantsPanel(s)
    qtbot.addWidget(p)
    p.resize(1200, 800)
    p.show()
    return p


def _card(p: VariantsPanel, key: str):
    return next(c for c in p.book.cards if c.isVisible() and c.card.key == key)


def _row(card, r: int) -> list[str]:
    return [card.table.item(r, c).text() for c in range(card.table.columnCount())]


def test_the_loaded_model_is_the_default_and_the_book_is_one_switch_away(panel):
    assert panel.source_key() == "model" and panel.pages.currentIndex() == 0
    assert panel.selector.itemText(0) == variants.TITLES["simplified"]
    panel.set_source("book")
    assert panel.pages.currentIndex() == 1 and panel.book.isVisible()
    assert [panel.selector.itemText(i) for i in range(4)] == [book_views.TITLES[k] for k in variants.KEYS]
    assert panel.book.query.currentText().endswith("journey")  # the chapter's query
    assert not panel.book.dropout.isChecked()  # dropout is off by default
    panel.set_source("model")
    assert panel.pages.currentIndex() == 0 and not panel.book.dropout.isVisible()
    assert panel.current() is not None and panel.weights.data.shape == (panel.session.trace.n_tokens,) * 2


def test_book_page_shows_the_printed_numbers_with_the_exact_value_on_hover(panel):
    panel.set_source("book")
    scores = _card(panel, "attn_scores_2")
    assert _row(scores, 0) == ["0.9544", "1.4950", "1.4754", "0.8434", "0.7070", "1.0865"]
    exact = float(chapter3()["attn_scores_2"][1])
    assert scores.table.item(0, 1).toolTip().startswith(f"attn_scores_2[1] = {exact!r}")
    assert "0.9544, 1.4950" in panel.book.line.text() and "3.3.1" in panel.book.line.text()
    matrix = _card(panel, "attn_weights")
    assert matrix.table.item(1, 0).font().bold() and not matrix.table.item(0, 0).font().bold()
    assert matrix.table.verticalHeaderItem(1).text().startswith("▸ journey")


def test_clicking_a_token_row_makes_it_the_query(panel, qtbot):
    panel.set_source("book")
    matrix = _card(panel, "attn_scores")
    rect = matrix.table.visualItemRect(matrix.table.item(4, 2))
    qtbot.mouseClick(matrix.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.book.query.currentIndex() == 4
    assert _row(_card(panel, "attn_scores_5"), 0) == _row(_card(panel, "attn_scores"), 4)
    assert "Query x⁽⁵⁾ “one”" in panel.book.line.text()


def test_each_variant_names_its_section_and_dropout_is_a_switch(panel):
    panel.set_source("book")
    for key, section in zip(variants.KEYS, ("3.3", "3.4", "3.5", "3.6")):
        panel.select(key)
        assert panel.book.current().key == key and f"({section}." in panel.book.line.text()
        assert all(c.caption.text().endswith("]") for c in panel.book.cards if c.isVisible())
    panel.select("causal")
    assert "dropout_attn_weights" not in {c.card.key for c in panel.book.cards if c.isVisible()}
    panel.book.dropout.setChecked(True)
    dropped = _card(panel, "dropout_attn_weights")
    assert _row(dropped, 2) == ["0.7599", "0.6194", "0.6206", "0.0000", "0.0000", "0.0000"]
    assert _row(_card(panel, "dropout_example"), 0) == ["2.0000", "2.0000", "0.0000", "2.0000", "2.0000", "0.0000"]
    assert _card(panel, "masked").table.item(0, 1).text() == "-inf"


@pytest.mark.slow
def test_screenshot_of_the_book_mode(tmp_path):
    out = tmp_path / "book.png"
    cmd = [sys.executable, "-m", "explorer", "--screenshot", str(out), "--panel", "variants", "--book",
           "--size", "900x600"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert run.returncode == 0, run.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (900, 600)
    assert len({image.pixel(x, y) for x in range(0, 900, 9) for y in range(0, 600, 9)}) > 20


@pytest.mark.slow
def test_book_option_brings_the_variants_dock_forward_in_book_mode(qtbot, tmp_path, tiny_checkpoint, dialogs):
    from explorer.app import _show_book, parse_args
    from explorer_helpers import make_window

    assert parse_args(["--book"], ["variants"]).book
    with pytest.raises(SystemExit):
        parse_args(["--book", "--screenshot", "x.png", "--panel", "attention"], ["attention", "variants"])
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    panel = window.panels["variants"]
    assert not panel.is_shown()  # tabbed behind another dock in the default layout
    _show_book(window)
    assert panel.source_key() == "book"
    qtbot.waitUntil(panel.is_shown, timeout=2000)  # raised from behind its tab
