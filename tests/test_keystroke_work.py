"""What a keystroke does, and where (issue 28): typing into a slow model shows the newest text's
trace one trace after the last key, and a result at least every RESULT_EVERY_MS; the first edit after a model opened on a long text computes its new row and copies
nothing; the Training panel's snapshot traces never run on the GUI thread; a keystroke repaints
neither the window's ground nor the status bar, and each widget of the formula lesson in front
once. No timing is asserted: what is counted is work and paints, which do not depend on the
machine's speed."""

from __future__ import annotations

import threading

import pytest
import shiboken6
from PySide6.QtCore import QAbstractEventDispatcher, QEvent, QEventLoop, QObject, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QWidget

from conftest import TINY_SENTENCES, PositionCounter, make_tiny_checkpoint
from explorer.qt.session import Session
from explorer.qt.widgets.status_line import StatusLine
from explorer_helpers import fake_clock, make_window
from model.tracing.rowstore import RowStore


class _Gate:
    """Holds every trace of a model on the worker thread until released, one at a time."""

    def __init__(self, monkeypatch, model) -> None:
        self.release = threading.Semaphore(0)
        self.waiting = threading.Semaphore(0)
        trace = model.trace

        def gated(ids, **kwargs):
            self.waiting.release()
            self.release.acquire()
            return trace(ids, **kwargs)

        monkeypatch.setattr(model, "trace", gated)

    def open(self) -> None:
        """Let every trace through from now on (a failed test must not leave the worker waiting)."""
        for _ in range(100):
            self.release.release()


def _typing_over_a_running_trace(qtbot, monkeypatch, checkpoint, since_last_result_s: float):
    """Type "the", then, while its trace runs on the worker, "the cat" and "the cat sat", with the
    last result shown ``since_last_result_s`` ago on the scheduler's clock. Returns the session and
    the T of each trace shown after "the" was typed (None for no trace)."""
    import types

    import explorer.qt.scheduling.scheduler

    now = [0.0]
    monkeypatch.setattr(explorer.qt.scheduling.scheduler, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    s = Session(compute_mode="async")
    s.set_checkpoint(checkpoint)
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None)  # the empty text's trace, before the gate
    gate = _Gate(monkeypatch, checkpoint.model)
    shown = []
    s.sig_trace_changed.connect(lambda: shown.append(s.trace.n_tokens if s.trace is not None else None))
    s.set_text("the")
    qtbot.waitUntil(lambda: gate.waiting.acquire(blocking=False))  # "the" is being traced
    now[0] = since_last_result_s
    s.set_text("the cat")  # typed while it runs: queued,
    s.set_text("the cat sat")  # and replaced in the queue by the newer text
    gate.release.release()
    return s, shown, gate


def test_typing_over_a_trace_shows_the_newest_text_within_one_trace(qtbot, monkeypatch, tiny_checkpoint):
    """A result was shown just before: the running trace of an older text gives way between two
    blocks (model.core.stopping), so that the newest text's trace is the next result, one trace
    time after the key instead of two; nothing of the stopped trace is shown, not even an error."""
    s, shown, gate = _typing_over_a_running_trace(qtbot, monkeypatch, tiny_checkpoint, 0.1)
    try:
        qtbot.waitUntil(lambda: gate.waiting.acquire(blocking=False))  # the newest text's trace
        gate.release.release()
        qtbot.waitUntil(lambda: not s.busy and shown and shown[-1] == 3)
        assert shown == [3] and s.text == "the cat sat" and s.error == ""
    finally:
        gate.open()
        s.shutdown()


def test_typing_faster_than_the_model_never_starves_the_panels(qtbot, monkeypatch, tiny_checkpoint):
    """The last result is older than RESULT_EVERY_MS: the running trace finishes and is shown
    (the newest traced text) although a newer text waits, so that someone typing faster than the
    model sees results while typing; the newest text's trace follows, and an older one never
    replaces a newer."""
    from explorer.qt.scheduling.scheduler import RESULT_EVERY_MS

    s, shown, gate = _typing_over_a_running_trace(qtbot, monkeypatch, tiny_checkpoint, RESULT_EVERY_MS / 1e3 + 0.1)
    try:
        qtbot.waitUntil(lambda: shown == [1])
        assert s.text == "the cat sat" and s.busy  # shown though a newer text waits
        gate.release.release()
        qtbot.waitUntil(lambda: not s.busy and shown == [1, 3])
    finally:
        gate.open()
        s.shutdown()


def _long_text(n_words: int) -> str:
    words = " ".join(TINY_SENTENCES).split()
    return " ".join((words * (n_words // len(words) + 1))[:n_words])


def test_the_first_edit_after_opening_computes_its_row_and_copies_none(qtbot, monkeypatch, tiny_tokenizer):
    """A slow model opened on a long text: its first trace reuses the opening's rows, and after it
    the worker fills a second row store, so that the first edit of the last word runs one
    position and copies no row (without that store it copied every row before the edit)."""
    checkpoint = make_tiny_checkpoint(tiny_tokenizer, context_length=128)
    s = Session(compute_mode="async")
    s.set_text(_long_text(100))
    counter = PositionCounter(checkpoint.model)
    copied = []
    copy_rows = RowStore.copy_rows
    monkeypatch.setattr(RowStore, "copy_rows", lambda self, source, start, stop: (
        copied.append(stop - start), copy_rows(self, source, start, stop))[-1])
    try:
        s.set_checkpoint(checkpoint)
        qtbot.waitUntil(lambda: not s.busy and s.trace is not None)
        assert s.trace.n_tokens == 100 and counter.take() == 1 + 32 + 68  # one token, the probe's 32, the rest
        copied.clear()
        s.set_text(s.text.rsplit(" ", 1)[0] + " dog")  # the last word changed: a row the shown trace has
        qtbot.waitUntil(lambda: not s.busy and s.trace.token_ids[-1] == tiny_tokenizer.token_to_id("dog"))
        assert counter.take() == 1 and s.trace.reused_rows == 99
        assert sum(copied) <= 1  # the spare held the rows already (at most the one the spare had stale)
    finally:
        counter.handle.remove()
        s.shutdown()


@pytest.fixture
def training_window(qtbot, tmp_path, tiny_tokenizer, monkeypatch, dialogs):
    """A window in "auto" mode whose model the scheduler finds fast (traces on the GUI thread),
    with a run of three snapshots and the Training panel in front, its curves drawn."""
    from model import load_checkpoint, save_checkpoint

    folder = tmp_path / "run-snapshots"
    folder.mkdir()
    for i, step in enumerate((0, 5, 10)):
        ck = make_tiny_checkpoint(tiny_tokenizer, seed=50 + i)
        save_checkpoint(folder / f"step-{step}.safetensors", ck.model, ck.tokenizer, training={"steps": step})
    final = make_tiny_checkpoint(tiny_tokenizer, seed=7)
    save_checkpoint(tmp_path / "run.safetensors", final.model, final.tokenizer,
                    training={"steps": 20, "snapshot_dir": "run-snapshots"})
    checkpoint = load_checkpoint(tmp_path / "run.safetensors")
    fake_clock(monkeypatch, checkpoint, ms_per_token=0.01)  # fast: traces on the GUI thread
    w = make_window(qtbot, tmp_path, checkpoint, compute_mode="auto")
    w.session.set_text("the cat sat on")
    w.docks["training"].raise_()
    panel = w.panels["training"]  # it loads the snapshots once it has stayed in front a moment
    qtbot.waitUntil(lambda: panel.curves is not None and not w.session.busy and not panel.source.loading)
    assert not w.session.traces_off_gui_thread
    yield w
    w.session.shutdown()


def test_a_keystroke_with_the_training_panel_in_front_traces_no_snapshot_on_the_gui_thread(
        qtbot, monkeypatch, training_window):
    import explorer.qt.panels.training.panel as training_panel

    w, panel = training_window, training_window.panels["training"]
    threads = []
    curves = training_panel.curves_over_training

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread())
        return curves(*args, **kwargs)

    monkeypatch.setattr(training_panel, "curves_over_training", recorded)
    editor = w.panels["tokens"].editor
    editor.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClicks(editor, " the")
    qtbot.waitUntil(lambda: not w.session.busy and panel.curves is not None and panel.curves.token_ids.size == 5)
    assert threads and all(t is not threading.main_thread() for t in threads)


class _Paints(QObject):
    """Paint events per widget class name."""

    def __init__(self) -> None:
        super().__init__()
        self.by_class: dict[str, int] = {}
        QApplication.instance().installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if event.type() == QEvent.Type.Paint and isinstance(obj, QWidget):
            name = type(obj).__name__
            self.by_class[name] = self.by_class.get(name, 0) + 1
        return False


def _until_idle() -> None:
    """Run the event loop until three turns in a row found nothing to do."""
    dispatcher, idle = QAbstractEventDispatcher.instance(), 0
    while idle < 3:
        idle = 0 if dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents) else idle + 1


def test_a_keystroke_repaints_neither_the_window_ground_nor_the_status_bar(qtbot, tmp_path, tiny_checkpoint):
    """The status text changes on every keystroke (the milliseconds); it repaints the status line
    alone, and a label's new text in a panel does not lay out and repaint the window."""
    w = make_window(qtbot, tmp_path, tiny_checkpoint)
    QApplication.setCursorFlashTime(0)
    editor = w.panels["tokens"].editor
    editor.setPlainText("the cat sat on the")
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    _until_idle()
    paints = _Paints()
    for _ in range(3):  # "the" -> "th" -> "t" -> "": the last token changes, then T
        qtbot.keyClick(editor, Qt.Key.Key_Backspace)
        _until_idle()
    assert "4/8 tokens" in w.status.text() and paints.by_class.get("StatusLine", 0) >= 1
    for ground in ("MainWindow", "QStatusBar", "QSizeGrip", "NextTokenPanel"):
        assert paints.by_class.get(ground, 0) == 0, (ground, paints.by_class)


def test_the_status_line_keeps_its_size_and_shows_the_whole_text_in_its_tooltip(qtbot):
    line = StatusLine()
    qtbot.addWidget(line)
    hint = line.sizeHint()
    line.setText("default model · 12/128 tokens · model 0.4 ms, drawing 3.1 ms" * 3)
    assert line.sizeHint() == hint and line.toolTip() == line.text() and line.text().startswith("default model")
    assert not line.warning
    line.set_warning(True)
    assert line.warning


def test_a_keystroke_with_the_formula_panel_in_front_paints_each_of_its_widgets_once(qtbot, tmp_path, tiny_tokenizer):
    """Typing at the end with the formula lesson in front: its table, labels and strips are painted
    once per keystroke, the query box (unchanged) not at all. The last key's name changes width on
    each key ("mat", "<unk>" for "mats"): a key column that followed it exactly was resized in a
    later turn, and the table painted twice and the panel's labels laid out and painted again.
    Its four sentences and its table change on every key, but in as many lines: nothing in the
    panel is laid out again (each new text re-laid out the body, the splitter and the strips)."""
    ckpt = make_tiny_checkpoint(tiny_tokenizer, context_length=32, d_model=64, n_heads=2)  # d_head 32, as shipped
    w = make_window(qtbot, tmp_path, ckpt)
    QApplication.setCursorFlashTime(0)
    w.docks["formula"].raise_()
    panel, editor = w.panels["formula"], w.panels["tokens"].editor
    editor.setPlainText("the cat sat on the mat")
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    qtbot.waitUntil(lambda: panel.is_shown() and panel.steps is not None and panel.steps.position == 5)
    keys = [Qt.Key.Key_S, Qt.Key.Key_Backspace] * 3
    for key in keys[:2]:  # once each way first: the axes and columns reach their widths
        qtbot.keyClick(editor, key)
        _until_idle()
    paints, most = _PanelPaints(panel), []
    texts = [panel.totals.text()]
    try:
        for key in keys[2:]:
            paints.by_widget.clear()
            qtbot.keyClick(editor, key)
            _until_idle()
            most.append(max(paints.by_widget.values(), default=0))
            texts.append(panel.totals.text())
    finally:
        QApplication.instance().removeEventFilter(paints)
    assert len(set(texts)) > 1  # the sentences did change
    assert paints.layouts == {}, paints.layouts
    assert panel.table.item(5, 1).text() == "mat" and panel.steps.position == 5
    assert most == [1] * 4, (most, paints.by_class)  # each widget once a keystroke (the panel's holder too)
    assert paints.by_class.get("QSpinBox", 0) == 0, paints.by_class
    t, hh = panel.table, panel.table.horizontalHeader()
    assert all(hh.sectionSize(c) >= t.sizeHintForColumn(c) for c in range(t.columnCount()))  # every name fits
    assert [t.item(r, 5).text() for r in range(6)] == [f"{a:.6f}" for a in panel.steps.weights]


class _PanelPaints(QObject):
    """Paint events of ``panel`` and the widgets in it, per widget and per class name; and the
    layout requests that reached a widget of the panel with a layout (``layouts``, per class name)."""

    def __init__(self, panel: QWidget) -> None:
        super().__init__()
        self.panel, self.by_widget, self.by_class, self.layouts = panel, {}, {}, {}
        QApplication.instance().installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        ours = isinstance(obj, QWidget) and (obj is self.panel or self.panel.isAncestorOf(obj))
        if ours and event.type() == QEvent.Type.LayoutRequest and obj.layout() is not None:
            self.layouts[type(obj).__name__] = self.layouts.get(type(obj).__name__, 0) + 1
        if event.type() == QEvent.Type.Paint and ours:
            key = shiboken6.getCppPointer(obj)[0]  # a widget made by Qt may get a new wrapper each time
            self.by_widget[key] = self.by_widget.get(key, 0) + 1
            name = type(obj).__name__
            self.by_class[name] = self.by_class.get(name, 0) + 1
        return False
