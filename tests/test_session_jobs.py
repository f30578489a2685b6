"""Session.submit: a panel's model computation, run at once or on the worker thread, newest per
requester, delivered on the GUI thread; stale results dropped; errors to the status bar."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject

from conftest import make_tiny_checkpoint
from explorer.qt.session import Session
from model.explain import stop_if


def _ids(checkpoint, inputs):
    """A job: the trace's last-position top token for some ids (one forward pass)."""
    return int(checkpoint.model.trace(inputs).logits[-1].argmax()), threading.current_thread()


@pytest.fixture
def async_session(qtbot, tiny_checkpoint):
    s = Session(compute_mode="async")
    s.set_checkpoint(tiny_checkpoint)
    yield s
    s.shutdown()


def test_sync_mode_delivers_at_once_on_the_gui_thread(qtbot, tiny_checkpoint):
    s = Session(compute_mode="sync")
    s.set_checkpoint(tiny_checkpoint)
    got = []
    requester = QObject()
    s.submit(requester, _ids, [3, 4, 5], got.append)
    assert len(got) == 1  # before submit returned
    result = got[0]
    expected = int(tiny_checkpoint.model.trace([3, 4, 5]).logits[-1].argmax())
    assert result.value == (expected, threading.main_thread()) and result.error == "" and result.ms > 0
    assert result.inputs == [3, 4, 5]


@pytest.mark.slow
def test_slow_mode_runs_on_the_worker_and_keeps_only_the_newest_per_requester(qtbot, async_session):
    s = async_session
    a, b = QObject(), QObject()
    got_a, got_b = [], []
    s.set_text("the cat sat on the mat")  # a trace first: jobs queue behind it
    for n in range(1, 6):
        s.submit(a, _ids, list(range(3, 3 + n)), got_a.append)
    s.submit(b, _ids, [7], got_b.append)
    qtbot.waitUntil(lambda: not s.busy and bool(got_a) and bool(got_b))
    assert [r.inputs for r in got_a] == [[3, 4, 5, 6, 7]]  # the older four were replaced unrun or dropped
    assert got_a[0].value[1] is not threading.main_thread()
    assert [r.inputs for r in got_b] == [[7]]  # another requester's job is its own


def test_a_result_for_an_older_request_or_model_is_dropped(qtbot, async_session, tiny_tokenizer):
    s = async_session
    requester, got = QObject(), []
    s.submit(requester, _ids, [3], got.append)
    s.cancel(requester)  # e.g. the text was cleared while it ran
    qtbot.waitUntil(lambda: not s.busy)
    assert got == []
    s.submit(requester, _ids, [4], got.append)
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, seed=9))  # another model before it arrives
    qtbot.waitUntil(lambda: not s.busy)
    assert got == []


def test_a_deleted_requester_gets_nothing(qtbot, async_session):
    from shiboken6 import delete

    s = async_session
    requester, got = QObject(), []
    s.submit(requester, _ids, [3], lambda r: got.append(r))
    delete(requester)
    qtbot.waitUntil(lambda: not s.busy)
    assert got == []


def test_an_error_reaches_the_requester_and_the_status_bar(qtbot, async_session):
    s = async_session
    messages, got = [], []
    s.sig_job_failed.connect(messages.append)

    def bad(checkpoint, inputs):
        return checkpoint.model.trace([checkpoint.config.vocab_size + 1])

    requester = QObject()
    s.submit(requester, bad, None, got.append, name="probe")
    qtbot.waitUntil(lambda: bool(got))
    assert got[0].value is None and got[0].error.startswith("ValueError: token id")
    assert messages == [f"QObject probe: {got[0].error}"]


@pytest.mark.slow
def test_the_window_shows_a_failed_job_in_the_status_bar(qtbot, tmp_path, tiny_checkpoint, dialogs):
    from explorer_helpers import make_window

    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    window.session.submit(window, lambda ck, x: 1 / 0, None, lambda r: None, name="division")
    assert "ZeroDivisionError" in window.statusBar().currentMessage()


def test_a_slow_model_s_jobs_leave_the_gui_thread_and_say_how_slow(qtbot, tiny_checkpoint, monkeypatch):
    import explorer.qt.scheduling.scheduler as scheduler_module

    s = Session(compute_mode="auto")
    monkeypatch.setattr(scheduler_module, "ASYNC_MS", -1.0)  # every model counts as slow
    s.set_checkpoint(tiny_checkpoint)
    assert s.traces_off_gui_thread and s.expected_ms(4) == pytest.approx(4 * s.last_model_ms)
    assert s.is_slow(4, -1.0) and not Session(compute_mode="sync").is_slow(4, -1.0)
    got = []
    s.submit(QObject(s), _ids, [3, 4], got.append, passes=4)
    assert got == []
    qtbot.waitUntil(lambda: bool(got))
    assert got[0].value[1] is not threading.main_thread()
    s.shutdown()


def test_a_long_job_stops_between_steps_when_a_newer_text_waits(qtbot, async_session):
    """A job that asks ``job_superseded`` between steps (as the Why panel's leave-one-out does)
    stops when the trace of a newer text is queued behind it; its result is dropped quietly and
    the newer text's trace follows at once."""
    s = async_session
    started, steps, got, failed = threading.Event(), [], [], []
    s.sig_job_failed.connect(failed.append)

    def long_job(checkpoint, inputs):
        started.set()
        for step in range(2000):  # ~10 s unless stopped
            stop_if(s.job_superseded)
            steps.append(step)
            threading.Event().wait(0.005)
        return "finished"

    assert not s.job_superseded()  # on the GUI thread: never
    s.submit(QObject(), long_job, None, got.append, passes=10 ** 6)
    qtbot.waitUntil(started.is_set, timeout=5000)  # after the trace the session queued before it
    s.set_text("the cat sat")  # a trace: priority over any job
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None and s.trace.n_tokens == 3, timeout=5000)
    assert 0 < len(steps) < 2000 and got == [] and failed == []


def test_the_worker_says_superseded_for_its_key_or_a_higher_priority_only(qtbot):
    from explorer.qt.scheduling.jobs import Worker

    w = Worker()
    go, seen = threading.Event(), []

    def work():
        go.wait(5)
        return w.superseded

    w.submit("a", work, lambda value, exc, ms: seen.append(value), priority=1)
    w.submit("b", lambda: None, lambda *_: None, priority=1)  # another key, the same priority
    assert not w.superseded
    w.submit("t", lambda: None, lambda *_: None, priority=0)  # a trace: first in line
    assert w.superseded
    go.set()
    qtbot.waitUntil(lambda: not w.busy and bool(seen))
    assert seen == [True] and not w.superseded  # reset when the next work starts
    w.shutdown()
