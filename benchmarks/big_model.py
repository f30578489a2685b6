"""A GPT-2-small-sized checkpoint (random weights, written in our format here): open time, model
time per update, prefix reuse (:mod:`benchmarks.prefix_reuse`), keystroke to painted window at the
end of a 512-token text, and the longest stall of the GUI event loop while typing and on a long
paste."""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import big_typing, explain, prefix_reuse
from benchmarks.common import settle
from benchmarks.keystroke import WORDS, text_of
from model import GPT, GPTConfig, save_checkpoint
from model.tokens.tokenizer import UNK, EOT, word_tokenizer_from_vocab

GPT2_SMALL = GPTConfig(vocab_size=50257, context_length=1024, d_model=768, n_heads=12, n_layers=12,
                       d_mlp=3072, qkv_bias=True)


def benchmark_tokenizer():
    """A word tokenizer of 50,257 words: the benchmarks' words and every prefix of them (so that
    each key typed inside a word changes the last token, as with a subword tokenizer), then fillers."""
    typed = [*WORDS, *prefix_reuse.TYPED.split()]
    words = [UNK, EOT, *dict.fromkeys([w[:i] for w in typed for i in range(len(w), 0, -1)])]
    words += [f"w{i}" for i in range(GPT2_SMALL.vocab_size - len(words))]
    return word_tokenizer_from_vocab(words)


def write_checkpoint(folder: Path) -> Path:
    """Write a seeded random GPT-2-small-sized model with :func:`benchmark_tokenizer`; return its path."""
    torch.manual_seed(0)
    model = GPT(GPT2_SMALL)
    path = folder / "gpt2-small-random.safetensors"
    save_checkpoint(path, model, benchmark_tokenizer(), training={"note": "random weights, written by benchmarks"})
    return path


def model_ms(model, n_tokens: int, reps: int) -> float:
    """Median ms of one trace at T = n_tokens."""
    ids = np.arange(2, 2 + n_tokens) % model.config.vocab_size
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model.trace(ids)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def typing_stall(app, window, text: str, interval_ms: int = 20, heartbeat_ms: int = 5) -> dict:
    """Type ``text`` into the editor one character every ``interval_ms`` and record the longest gap
    between ticks of a ``heartbeat_ms`` timer; then wait until the shown trace is the final text's."""
    from PySide6.QtCore import QTimer
    from PySide6.QtTest import QTest

    editor = window.panels["tokens"].editor
    editor.setPlainText("")
    editor.setFocus()
    session = window.session
    settle(app)
    while session.busy:
        settle(app)
    beats: list[float] = []
    heartbeat = QTimer()
    heartbeat.setInterval(heartbeat_ms)
    heartbeat.timeout.connect(lambda: beats.append(time.perf_counter()))
    chars = list(text)
    typer = QTimer()
    typer.setInterval(interval_ms)

    def type_one() -> None:
        if chars:
            QTest.keyClicks(editor, chars.pop(0))
        else:
            typer.stop()

    typer.timeout.connect(type_one)
    heartbeat.start()
    typer.start()
    t_end = time.perf_counter() + 120
    while (typer.isActive() or session.busy or not _shows(session, text)) and time.perf_counter() < t_end:
        app.processEvents()
        time.sleep(0.0005)
    settle(app)
    heartbeat.stop()
    gaps = np.diff(beats) * 1e3
    return {
        "big_model_max_stall_ms": float(gaps.max()) if gaps.size else float("nan"),
        "big_model_final_matches_text": float(_shows(session, text)),
    }


def paste_stall(app, window, n_words: int = 1100, heartbeat_ms: int = 5) -> dict:
    """Paste ``n_words`` words (more than the 1,024-token context) into the empty editor, as Ctrl+V
    does, and record the longest gap between ticks of a ``heartbeat_ms`` timer until every panel
    shows the pasted text (the trace runs on the worker thread; chips and panels follow)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from explorer.qt.scheduling.pacing import Pacer

    tokens_panel = window.panels["tokens"]
    session = window.session
    tokens_panel.editor.setPlainText("")
    settle(app)
    while session.busy:
        settle(app)
    text = " ".join((WORDS * (n_words // len(WORDS) + 1))[:n_words])
    QApplication.clipboard().setText(text)
    tokens_panel.editor.setFocus()
    beats: list[float] = []
    heartbeat = QTimer()
    heartbeat.setInterval(heartbeat_ms)
    heartbeat.timeout.connect(lambda: beats.append(time.perf_counter()))
    heartbeat.start()
    settle(app)
    t0 = time.perf_counter()
    tokens_panel.editor.paste()
    pacer = Pacer.of(session)
    t_end = t0 + 180
    expected = _expected(session, text)  # encoded once: encoding 1,100 words in the loop is a stall of its own
    while (session.busy or not _shows(session, text, expected) or tokens_panel.chips_pending or pacer.pending) \
            and time.perf_counter() < t_end:
        app.processEvents()
        time.sleep(0.0005)
    shown_s = time.perf_counter() - t0
    settle(app)
    heartbeat.stop()
    gaps = np.diff(beats) * 1e3
    return {
        "big_model_paste_max_stall_ms": float(gaps.max()) if gaps.size else float("nan"),
        "big_model_paste_shown_s": shown_s,
    }


def keystroke_t512(app, window, edits: int = 30, warmup: int = 4, heartbeat_ms: int = 5) -> dict:
    """Keystroke to painted window at the end of a 512-token text: median and 95th percentile ms
    of ``edits`` key presses (a letter added to the last word, then Backspace, so that T stays
    512), each timed from the key press until the trace of the new text is shown, every paced
    panel and token chip is drawn and the paints are done; and the longest gap between ticks of a
    ``heartbeat_ms`` timer meanwhile (the GUI's longest stall). The first ``warmup`` edits are not
    counted (the first edit of a shown row allocates the second row buffer, :mod:`model.tracing.reuse`)."""
    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    from explorer.qt.scheduling.pacing import Pacer

    session, tokens_panel = window.session, window.panels["tokens"]
    pacer = Pacer.of(session)
    editor = tokens_panel.editor
    editor.setPlainText(text_of(512))
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()

    def drawn(serial) -> bool:
        return (session.trace_serial != serial and not session.busy and not pacer.pending
                and not tokens_panel.chips_pending)

    _wait(app, lambda: drawn(None), 300)
    beats: list[float] = []
    heartbeat = QTimer()
    heartbeat.setInterval(heartbeat_ms)
    heartbeat.timeout.connect(lambda: beats.append(time.perf_counter()))
    times = []
    for i in range(warmup + edits):
        if i == warmup:
            heartbeat.start()
            beats.clear()
        serial = session.trace_serial
        t0 = time.perf_counter()
        QTest.keyClick(editor, Qt.Key.Key_S if i % 2 == 0 else Qt.Key.Key_Backspace)
        _wait(app, lambda s=serial: drawn(s), 120)
        settle(app)
        times.append((time.perf_counter() - t0) * 1e3)
    heartbeat.stop()
    assert session.trace.n_tokens == 512, "the edits changed T"
    gaps = np.diff(beats) * 1e3
    ms = np.asarray(times[warmup:])
    return {"big_model_keystroke_ms_t512": float(np.median(ms)),
            "big_model_keystroke_ms_p95_t512": float(np.percentile(ms, 95)),
            "big_model_keystroke_max_stall_ms_t512": float(gaps.max()) if gaps.size else float("nan")}


def _wait(app, done, limit_s: float) -> None:
    """Process events until ``done()`` (or ``limit_s`` seconds)."""
    t_end = time.perf_counter() + limit_s
    while not done() and time.perf_counter() < t_end:
        app.processEvents()
        time.sleep(0.0005)


def _expected(session, text: str) -> tuple[list[int], list[str]]:
    enc = session.tokenizer.encode(text)
    return list(enc.ids), list(enc.tokens)


def _shows(session, text: str, expected: tuple[list[int], list[str]] | None = None) -> bool:
    """Whether the session shows the trace of ``text`` (ids and tokens as ``expected``, else encoded)."""
    trace = session.trace
    if trace is None or session.text != text:
        return False
    ids, tokens = expected or _expected(session, text)
    return list(trace.token_ids) == ids[trace.dropped:] and session.tokens == tokens[trace.dropped:]


def measure(app, window, quick: bool) -> dict[str, float]:
    """Open time and the first keystroke after it (:mod:`benchmarks.big_typing`), model ms at
    32/256/512/1024 tokens, prefix reuse, the Why panel's job at T = 512, keystroke at T = 512, the
    typing and paste stalls, and typing steadily for the GPT-2-small-sized model."""
    with tempfile.TemporaryDirectory() as tmp:
        out = big_typing.open_on_long_text(app, window, write_checkpoint(Path(tmp)))
    model = window.session.model
    for n in (32, 256, 1024):
        out[f"big_model_ms_t{n}"] = model_ms(model, n, reps=1 if quick or n == 1024 else 3)
    out["big_model_full_ms_t512"] = model_ms(model, 512, reps=1 if quick else 3)
    out.update(prefix_reuse.measure(model, window.session.tokenizer, quick))
    out.update(explain.why_job_t512(model, window.session.tokenizer, text_of(512), reps=1 if quick else 3))
    gc.collect()
    out.update(keystroke_t512(app, window, edits=10 if quick else 30))
    text = "once upon a time there was a little girl named lily"[:50]
    out.update(typing_stall(app, window, text))
    out.update(big_typing.typing_steadily(app, window, seconds=3.0 if quick else 5.0))
    out.update(paste_stall(app, window))
    return out
