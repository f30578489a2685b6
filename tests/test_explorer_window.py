"""The main window: opening checkpoints, recent files, exports, drag and drop, settings, threads."""

import csv
import threading

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage

from conftest import make_tiny_checkpoint
from explorer.core.defaults import DEFAULT_CHECKPOINT
from explorer.core.export import CSV_HEADER
from explorer.qt.session import Session
from explorer_helpers import fake_clock, make_window
from model import save_checkpoint
from model.tokens.tokenizer import Tokenizer


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


@pytest.fixture
def good_file(tmp_path, tiny_tokenizer):
    path = tmp_path / "tiny-2L2H.safetensors"
    ckpt = make_tiny_checkpoint(tiny_tokenizer, seed=7, n_layers=1, n_heads=1)
    save_checkpoint(path, ckpt.model, ckpt.tokenizer, training={"steps": 12, "val_loss": 3.5})
    return path


@pytest.mark.slow
def test_open_good_checkpoint(window, good_file, dialogs):
    window.session.set_text("the cat")
    assert window.files.open_checkpoint(good_file)
    s = window.session
    assert s.checkpoint.path == good_file and s.config.n_layers == 1 and not dialogs.errors
    assert s.trace.n_tokens == 2 and "tiny-2L2H" in window.windowTitle()
    assert window.files.recent_files() == [str(good_file.resolve())]
    assert "3.5 nats/token" in window.panels["model"].browser.toPlainText()
    assert window.panels["attention"].layer_box.maximum() == 0


def test_bad_checkpoint_shows_the_loader_message_and_keeps_the_model(window, tmp_path, dialogs):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"this is not a checkpoint at all")
    before = window.session.checkpoint
    window.session.set_text("the dog")
    trace_before = window.session.trace
    assert not window.files.open_checkpoint(bad)
    assert len(dialogs.errors) == 1 and "broken.safetensors" in dialogs.errors[0][1]
    assert window.session.checkpoint is before and window.session.trace is trace_before
    assert window.files.recent_files() == []


def test_open_dialog_reload_and_vanished_recent_file(window, good_file, dialogs):
    dialogs.files.append(str(good_file))
    window.files.on_open()
    assert window.session.checkpoint.path == good_file
    first = window.session.checkpoint
    window.files.reload()
    assert window.session.checkpoint is not first and window.session.checkpoint.path == good_file
    window.files.fill_recent_menu(window.recent_menu)
    assert [a.text() for a in window.recent_menu.actions()] == [str(good_file.resolve())]
    good_file.unlink()
    assert not window.files.open_recent(str(good_file.resolve()))
    assert "no longer exists" in dialogs.errors[-1][1]
    assert window.files.recent_files() == [] and window.settings.value("recent_files") in ([], None)
    window.files.fill_recent_menu(window.recent_menu)
    assert not window.recent_menu.isEnabled()


def test_dropping_a_file_opens_it(window, good_file):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(good_file))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    assert window.session.checkpoint.path == good_file


@pytest.mark.slow
def test_exports_write_files_that_load(window, tmp_path, dialogs):
    s = window.session
    s.set_text("the cat sat")
    window.set_current_panel("attention")
    out = {ext: tmp_path / f"out.{ext}" for ext in ("png", "svg", "npz", "csv")}
    dialogs.files.extend(str(out[e]) for e in ("png", "svg", "npz", "csv"))
    menu = window.export_menu
    menu._on_png()
    image = QImage(str(out["png"]))
    panel = window.panels["attention"]
    assert (image.width(), image.height()) == (panel.width(), panel.height())
    menu._on_svg(), menu._on_npz(), menu._on_csv()  # the last two run the event loop while they write
    assert not dialogs.errors and all(p.is_file() for p in out.values())
    assert out["svg"].read_text(encoding="utf-8").lstrip().startswith("<?xml") and "<svg" in out["svg"].read_text()
    with np.load(out["npz"]) as f:
        np.testing.assert_array_equal(f["blocks.1.attn.attn_weights"], s.trace.blocks[1].attn_weights)
        assert f["tokens"].tolist() == ["the", "cat", "sat"]
    rows = list(csv.reader(out["csv"].open(encoding="utf-8")))
    assert tuple(rows[0]) == CSV_HEADER and len(rows) == 1 + 2 * 2 * 9


@pytest.mark.slow
def test_export_with_empty_trace_says_so(window, dialogs):
    window.session.set_text("")
    window.export_menu._on_npz()
    assert dialogs.infos and "empty" in dialogs.infos[0][1]


@pytest.mark.slow
def test_layout_and_settings_are_remembered(qtbot, tmp_path, tiny_checkpoint, dialogs, good_file):
    first = make_window(qtbot, tmp_path, tiny_checkpoint)
    first.files.open_checkpoint(good_file)
    first.docks["qkv"].close()
    first.panels["next-token"].k_box.setValue(4)
    first.close()
    second = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert not second.docks["qkv"].isVisible() and second.docks["attention"].isVisible()
    assert second.panels["next-token"].k_box.value() == 4
    assert second.files.recent_files() == [str(good_file.resolve())]
    second.docks["qkv"].toggleViewAction().trigger()  # View menu restores a closed dock
    assert second.docks["qkv"].isVisible()


@pytest.mark.slow
def test_damaged_settings_file_does_not_stop_the_app(qtbot, tmp_path, tiny_checkpoint, dialogs):
    """Unreadable values (hand-edited or damaged file) raised ValueError/TypeError in MainWindow(): no start."""
    from PySide6.QtCore import QSettings

    damaged = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    for key, value in (("next_token/k", "abc"), ("next_token/temperature", "nan"),
                       ("window/geometry", "junk"), ("window/state", "garbage")):
        damaged.setValue(key, value)
    damaged.sync()
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    panel = window.panels["next-token"]
    assert panel.k_box.value() == 10 and panel.temperature_box.value() == 1.0
    assert window.docks["attention"].isVisible() and window.session.trace is not None


def test_async_session_coalesces_and_never_shows_an_older_text_over_a_newer(qtbot, tiny_checkpoint):
    s = Session(compute_mode="async")
    s.set_checkpoint(tiny_checkpoint)
    shown = []
    s.sig_trace_changed.connect(lambda: shown.append((s.text, list(s.trace.token_ids))))
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None)
    shown.clear()
    texts = ["the", "the cat", "the cat sat", "the cat sat on", "the cat sat on the"]
    for t in texts:
        s.set_text(t)
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None and s.trace.n_tokens == 5, timeout=5000)
    final_ids = list(tiny_checkpoint.tokenizer.encode(texts[-1]).ids)
    assert shown[-1] == (texts[-1], final_ids)
    assert len(shown) < len(texts)  # coalesced: intermediate texts were skipped
    typed = [list(tiny_checkpoint.tokenizer.encode(t).ids) for t in texts]
    order = [typed.index(ids) for _, ids in shown]  # each trace shown is of a typed text (the first one
    assert order == sorted(set(order))  # finished while newer text waited), each newer than the one before
    s.shutdown()


@pytest.mark.slow
def test_closing_while_computing_closes_at_once_and_exits_cleanly(qtbot, tmp_path, tiny_checkpoint, dialogs,
                                                                   monkeypatch):
    """Closing waited for a running GPT-2-sized trace (the window froze 9-30 s): now the window
    goes at once, and the trace ends in the background before the process does."""
    window = make_window(qtbot, tmp_path, tiny_checkpoint, compute_mode="async")
    qtbot.waitUntil(lambda: not window.session.busy)
    release = threading.Event()
    real = tiny_checkpoint.model.trace

    def slow(*args, **kwargs):  # a trace that takes until the test releases it
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny_checkpoint.model, "trace", slow)
    window.session.set_text("the cat sat")
    window.session.set_text("the cat sat on")  # queued behind it
    assert window.session.busy
    window.close()
    assert not window.isVisible() and window.session.worker.active_threads() == 1  # closed, still tracing
    release.set()
    window.session.shutdown()  # what the app does once its event loop has ended
    assert window.session.worker.active_threads() == 0 and window.session.text == "the cat sat on"


def test_status_bar_names_the_random_model_when_no_default(window, monkeypatch, tmp_path):
    monkeypatch.setattr("explorer.core.defaults.DEFAULT_CHECKPOINT", tmp_path / "missing.safetensors")
    window.files.open_default()
    assert window.session.checkpoint.path is None and "seeded random model" in window.windowTitle()
    assert "random model" in window.status.text()


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.exists(), reason="the default checkpoint has not been trained yet")
def test_window_on_the_shipped_default_checkpoint(window, dialogs):
    window.files.open_default()
    s = window.session
    assert window.model_note == "" and s.checkpoint.path == DEFAULT_CHECKPOINT and not dialogs.errors
    s.set_text("once upon a time there was a little girl")
    expected = s.model.trace(s.tokenizer.encode(s.text).ids)
    np.testing.assert_array_equal(window.panels["attention"].weights.image.image, expected.blocks[0].attn_weights[0])
    assert window.panels["next-token"].top.ids[0] == int(np.argmax(expected.logits[-1]))


@pytest.mark.slow
def test_a_slow_model_s_result_reaches_the_panels_one_per_event_loop_turn(qtbot, tmp_path, tiny_checkpoint):
    from explorer.qt.scheduling.pacing import Pacer

    window = make_window(qtbot, tmp_path, tiny_checkpoint, compute_mode="async")
    s, pacer = window.session, Pacer.of(window.session)
    qtbot.waitUntil(lambda: not s.busy and pacer.pending == 0)
    attention, next_token = window.panels["attention"], window.panels["next-token"]
    at_trace = []  # connected after the panels: runs once they have had the signal
    s.sig_trace_changed.connect(lambda: at_trace.append((pacer.pending, attention.weights.data.shape[0])))
    s.set_text("the cat sat on the mat")
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None and s.trace.n_tokens == 6)
    assert pacer.active
    pending, rows_drawn = at_trace[-1]
    assert pending >= 2 and rows_drawn != 6  # queued, not drawn in the trace's own turn
    qtbot.waitUntil(lambda: pacer.pending == 0)
    ids = list(tiny_checkpoint.tokenizer.encode(s.text).ids)
    assert list(s.trace.token_ids) == ids
    np.testing.assert_array_equal(attention.weights.image.image, s.trace.blocks[0].attn_weights[0])
    assert next_token.top.ids[0] == int(np.argmax(s.trace.logits[-1]))
    assert s.last_draw_ms > 0  # the paced panels' drawing is counted


@pytest.mark.slow
def test_a_fast_model_draws_every_panel_in_the_keystroke_s_turn(window):
    from explorer.qt.scheduling.pacing import Pacer

    s = window.session
    s.set_text("the cat sat")
    assert not Pacer.of(s).active and Pacer.of(s).pending == 0
    np.testing.assert_array_equal(window.panels["attention"].weights.data, s.trace.blocks[0].attn_weights[0])
    assert window.panels["next-token"].top.ids[0] == int(np.argmax(s.trace.logits[-1]))


def test_a_fast_model_just_opened_reaches_the_panels_one_per_turn_and_typing_is_not_paced(
        qtbot, tmp_path, tiny_checkpoint, tiny_tokenizer, monkeypatch):
    """Opening a model (a snapshot of another run adopted by the Training panel too) redrew every
    shown panel in one turn: now its first update goes through the pacer, as a slow model's does;
    every panel ends up drawn for the new model, and the next keystroke is drawn in its own turn."""
    from explorer.qt.scheduling.pacing import Pacer

    fake_clock(monkeypatch, tiny_checkpoint, ms_per_token=0.01)  # fast: traced on the GUI thread
    window = make_window(qtbot, tmp_path, tiny_checkpoint, compute_mode="auto")
    s, pacer = window.session, Pacer.of(window.session)
    s.set_text("the cat sat on the mat")
    qtbot.waitUntil(lambda: not s.busy and pacer.pending == 0)
    attention, next_token = window.panels["attention"], window.panels["next-token"]
    other = make_tiny_checkpoint(tiny_tokenizer, seed=11, n_layers=1, n_heads=1)
    fake_clock(monkeypatch, other, ms_per_token=0.01)
    s.set_checkpoint(other)
    assert not s.traces_off_gui_thread and s.trace is not None and not s.pacing_new_model
    assert pacer.pending >= 2  # queued, not drawn yet: the old model's weights are still on screen
    assert not np.array_equal(attention.weights.data, s.trace.blocks[0].attn_weights[0])
    qtbot.waitUntil(lambda: pacer.pending == 0)
    np.testing.assert_array_equal(attention.weights.data, s.trace.blocks[0].attn_weights[0])
    assert next_token.top.ids[0] == int(np.argmax(s.trace.logits[-1]))
    s.set_text("the cat sat on the")  # a keystroke: every panel in its own turn
    assert not pacer.active and pacer.pending == 0
    np.testing.assert_array_equal(attention.weights.data, s.trace.blocks[0].attn_weights[0])
    assert next_token.top.ids[0] == int(np.argmax(s.trace.logits[-1]))
    s.shutdown()


def test_auto_mode_moves_a_slow_model_off_the_gui_thread(qtbot, tiny_tokenizer, monkeypatch):
    big = make_tiny_checkpoint(tiny_tokenizer, context_length=1024)
    fake_clock(monkeypatch, big, ms_per_token=0.1)  # the warm-up's 32 tokens: 3.2 ms; 1,024 tokens: 102 ms
    s = Session(compute_mode="auto")
    s.set_checkpoint(big)
    assert not s.traces_off_gui_thread
    s.set_text("the cat sat on the mat . " * 150)  # ~1,000 tokens: computed here, and measured
    assert s.trace is not None and s.trace.n_tokens == 1024 and not s.busy
    assert s.last_model_ms == pytest.approx(102.4)  # slower than the GUI-thread budget ...
    s.set_text("the dog sat on the log . " * 150)
    assert s.busy  # ... so the next edit runs on the worker thread
    qtbot.waitUntil(lambda: not s.busy, timeout=10000)
    assert list(s.trace.token_ids) == list(big.tokenizer.encode(s.text).ids[-1024:])
    s.shutdown()


def test_a_model_slow_at_warm_up_runs_off_the_gui_thread_from_the_first_key(qtbot, tiny_tokenizer, monkeypatch):
    import explorer.qt.scheduling.scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "ASYNC_MS", 0.0)  # every trace counts as slow
    s = Session(compute_mode="auto")
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))  # its empty-text trace must not undo that
    s.set_text("the cat")
    assert s.busy  # the very first edit already goes to the worker thread
    qtbot.waitUntil(lambda: not s.busy, timeout=10000)
    assert s.trace.n_tokens == 2
    s.shutdown()


@pytest.mark.slow
def test_typing_after_a_long_paste_re_tokenizes_only_the_end(window, monkeypatch):
    s = window.session
    tok = s.tokenizer
    pasted = "the cat sat on the mat .\n" * 2000  # 48,000 characters
    s.set_text(pasted)
    whole = []
    reference = Tokenizer.from_json(tok.to_json())  # the same tokenizer, not watched
    encode = tok._encode
    monkeypatch.setattr(tok, "_encode", lambda text, *a, **k: whole.append(len(text)) or encode(text, *a, **k))
    for typed in (" the", " the d", " the do", " the dog"):
        s.set_text(pasted + typed)
        assert s.encoding == reference.encode(s.text)
        assert list(s.trace.token_ids) == list(s.encoding.ids[-s.config.context_length:])
    assert whole and max(whole) < 200  # never the whole text again


def test_paced_drawing_time_is_one_update_s_not_a_running_total(qtbot, tiny_checkpoint):
    s = Session(compute_mode="sync")
    s.set_checkpoint(tiny_checkpoint)
    s.set_text("the cat")
    immediate = s.last_draw_ms  # drawn while the trace was announced (no panels here)
    s.set_paced_draw_ms(5.0)  # the panels paced after that trace
    assert s.last_draw_ms == pytest.approx(immediate + 5.0)
    s.set_paced_draw_ms(3.0)  # a later batch (a selection change) alone
    assert s.last_draw_ms == pytest.approx(3.0)
    s.set_paced_draw_ms(3.0)
    assert s.last_draw_ms == pytest.approx(3.0)


def test_a_paced_piece_that_raises_does_not_stop_the_pieces_after_it(qtbot, tiny_checkpoint):
    """Qt reports what a paced piece raised; the queue goes on (it stalled until the next piece was
    queued, leaving the panels queued after it undrawn)."""
    from PySide6.QtCore import QObject

    from explorer.qt.scheduling.pacing import Pacer

    s = Session(compute_mode="sync")
    pacer, owner, ran = Pacer.of(s), QObject(), []

    def fails():
        ran.append("fails")
        raise RuntimeError("a piece that raises")

    pacer.call_later(owner, fails)
    pacer.call_later(owner, lambda: ran.append("after"))
    with qtbot.captureExceptions() as raised:
        qtbot.waitUntil(lambda: pacer.pending == 0 and ran == ["fails", "after"])
    assert [str(e[1]) for e in raised] == ["a piece that raises"]


@pytest.mark.slow
def test_queued_panels_of_a_closed_window_are_skipped(qtbot, tmp_path, tiny_checkpoint):
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from explorer.qt.scheduling.pacing import Pacer

    window = make_window(None, tmp_path, tiny_checkpoint, compute_mode="async")  # its session outlives it
    s, pacer = window.session, Pacer.of(window.session)
    qtbot.waitUntil(lambda: not s.busy and pacer.pending == 0)
    closed = []

    def close_while_queued():  # connected after the panels: they have queued themselves by now
        if not closed and pacer.pending > 0:
            closed.append(pacer.pending)
            window.close()
            window.deleteLater()
            QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)

    s.sig_trace_changed.connect(close_while_queued)
    s.set_text("the cat sat")
    qtbot.waitUntil(lambda: bool(closed))
    qtbot.waitUntil(lambda: pacer.pending == 0)  # pytest-qt fails the test on an exception in a slot
    s.shutdown()


@pytest.mark.slow
def test_the_session_holds_the_text_as_the_editor_stores_it(window):
    s, editor = window.session, window.panels["tokens"].editor
    s.set_text("a\u00a0b\u2028c\u2029d\r\ne")
    assert s.text == editor.toPlainText() == "a b\nc\nd\ne"


@pytest.mark.slow
@pytest.mark.parametrize("text, stored", [
    ("the a\ud800b\udfff cat", "the ab cat"),  # lone surrogates: left out
    ("the \ud83d\ude00 cat", "the \U0001F600 cat"),  # a pair: its character
    ("\udcff cat", " cat"),  # --text with a byte that is not UTF-8 (surrogateescape)
])
def test_surrogates_are_stored_as_the_editor_stores_them_and_hovering_their_chips_works(window, text, stored):
    """Hovering a chip of a text with a lone surrogate raised UnicodeEncodeError in a Qt slot."""
    s, panel = window.session, window.panels["tokens"]
    s.set_text(text)
    assert s.text == panel.editor.toPlainText() == stored
    for i in range(len(panel.chip_data)):
        panel._on_chip_hovered(i)
        chip = panel.chip_data[i]
        assert panel.editor.extraSelections()[0].cursor.selectedText() == stored[chip.start:chip.end]
