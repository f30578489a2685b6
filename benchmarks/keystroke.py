"""Keystroke to painted window with the default model, split into tokenize / model / views / paint.

An edit is a real key press sent to the text editor (QTest.keyClick): alternately a letter added to
the last word and a Backspace, so that the token count stays at T. The time of one edit runs from
before the key press until the events it caused, paints included, have all been processed.
"""

from __future__ import annotations

import time

from benchmarks.common import settle, stats

WORDS = ("once upon a time there was a little girl named lily . she liked to play in the park "
         "with her big red ball . one day a small dog came to").split()


def text_of(n_tokens: int) -> str:
    """A text of exactly ``n_tokens`` word tokens (for the word-level default tokenizer)."""
    words = (WORDS * (n_tokens // len(WORDS) + 1))[:n_tokens]
    return " ".join(words)


def _type_at_end(app, window, text: str, edits: int) -> dict[str, list[float]]:
    """Put ``text`` in the editor, then time ``edits`` key presses at its end (ms, by part)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    session = window.session
    editor = window.panels["tokens"].editor
    editor.setPlainText(text)
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    settle(app)
    parts = {"total": [], "tokenize": [], "model": [], "views": [], "paint": []}
    for i in range(edits):
        key = Qt.Key.Key_S if i % 2 == 0 else Qt.Key.Key_Backspace
        t0 = time.perf_counter()
        QTest.keyClick(editor, key)
        t1 = time.perf_counter()
        settle(app)
        t2 = time.perf_counter()
        parts["total"].append((t2 - t0) * 1e3)
        parts["paint"].append((t2 - t1) * 1e3)
        parts["model"].append(session.last_model_ms)
        parts["views"].append(session.last_draw_ms)
        parts["tokenize"].append(session.last_tokenize_ms)
    return parts


def after_paste(app, window, n_words: int = 200_000, edits: int = 20) -> dict[str, float]:
    """Median ms of a key press at the end of a pasted text of ``n_words`` words (about 1 MB, in
    lines of 50 words, like pasted stories), and the median tokenize part of it."""
    words = text_of(n_words).split(" ")
    text = "\n".join(" ".join(words[i:i + 50]) for i in range(0, len(words), 50))
    parts = _type_at_end(app, window, text, edits)
    window.panels["tokens"].editor.setPlainText("")  # later sections start from a short text
    settle(app)
    return {"keystroke_ms_median_after_1mb_paste": stats(parts["total"])[0],
            "keystroke_tokenize_ms_median_after_1mb_paste": stats(parts["tokenize"])[0]}


def measure(app, window, n_tokens: int, edits: int) -> dict[str, float]:
    """Median and p95 ms of ``edits`` key presses at T = ``n_tokens``, with the parts' medians."""
    parts = _type_at_end(app, window, text_of(n_tokens), edits)
    session = window.session
    assert session.trace is not None and session.trace.n_tokens == n_tokens, "the edits changed T"
    out = {}
    median, p95 = stats(parts["total"])
    out[f"keystroke_ms_median_t{n_tokens}"] = median
    out[f"keystroke_ms_p95_t{n_tokens}"] = p95
    for part in ("tokenize", "model", "views", "paint"):
        out[f"keystroke_{part}_ms_median_t{n_tokens}"] = stats(parts[part])[0]
    return out
