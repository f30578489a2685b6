"""A line of text that wraps instead of widening its panel."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


def wrapped_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    """A plain-text ``QLabel`` that wraps at word boundaries, so its least width is its longest word's.

    A one-line label asks for its whole text's width: "showing the last 32 of 35 tokens" beside
    two check boxes made the 340-px Text dock scroll sideways (its "causal mask" cut to "cau"), and
    the next-token panel's "insert after …" line did the same. Notes whose text changes with the
    text or the selection belong in one of these.
    """
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label
