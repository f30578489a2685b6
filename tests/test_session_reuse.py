"""The session traces with prefix reuse: an append runs only the new positions, the shown trace
equals a full one, and the session says which rows every panel can keep (issue 17, app side)."""

import threading
import types

import numpy as np
import pytest

from conftest import PositionCounter, make_tiny_checkpoint
from explorer.core.trace_chain import ALL_ROWS, TraceChain
from explorer.qt.session import Session


def assert_full_trace(session):
    """The shown trace equals a trace of the session's text computed whole."""
    shown = session.trace
    full = session.model.trace(list(session.encoding.ids), positional_encoding=session.positional_encoding,
                               causal=session.causal)
    assert shown.token_ids.tolist() == full.token_ids.tolist() and shown.dropped == full.dropped
    np.testing.assert_allclose(shown.logits, full.logits, rtol=0, atol=1e-5)
    for a, b in zip(shown.blocks, full.blocks):
        np.testing.assert_allclose(a.attn_weights, b.attn_weights, rtol=0, atol=1e-6)
        np.testing.assert_allclose(a.resid_post, b.resid_post, rtol=0, atol=1e-5)


@pytest.fixture
def checkpoint(tiny_tokenizer):
    return make_tiny_checkpoint(tiny_tokenizer, context_length=32)


def test_typing_at_the_end_runs_only_the_new_positions(checkpoint):
    s = Session(compute_mode="sync")
    s.set_checkpoint(checkpoint)
    counter = PositionCounter(checkpoint.model)

    def equals_full_trace():
        assert_full_trace(s)
        counter.take()  # the reference trace's positions

    try:
        s.set_text("the cat sat on")
        assert counter.take() == 4 and s.trace.reused_rows == 0
        first = s.trace_serial
        s.set_text("the cat sat on the")  # typing at the end
        assert counter.take() == 1 and s.trace.reused_rows == 4 and s.rows_unchanged(first) == 4
        equals_full_trace()
        s.set_text("the cat sat on the mat")
        assert counter.take() == 1
        s.set_text("the cat sat on the log")  # the last word changed
        assert counter.take() == 1 and s.rows_unchanged(first) == 4
        equals_full_trace()
        s.set_text("the cat sat on")  # deleting at the end: nothing to run
        assert counter.take() == 0 and s.rows_unchanged(s.trace_serial) == 4
        s.set_text("a cat sat on")  # an edit of the first word: every row
        assert counter.take() == 4 and s.rows_unchanged(first) == 0
        equals_full_trace()
        s.set_causal(False)  # without the mask every row sees the new token
        assert counter.take() == 4 and s.trace.reused_rows == 0
        equals_full_trace()
    finally:
        counter.handle.remove()


def test_rows_unchanged_spans_traces_that_were_never_shown(qtbot, checkpoint):
    s = Session(compute_mode="async")
    s.set_checkpoint(checkpoint)
    s.set_text("the cat sat on the mat")
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None and s.trace.n_tokens == 6)
    shown = s.trace_serial
    for text in ("the cat sat on the mat .", "the cat sat on the mat . the", "the cat sat on the dog",
                 "the cat sat on the dog and"):
        s.set_text(text)  # typed faster than traced: coalesced
    qtbot.waitUntil(lambda: not s.busy and s.trace.n_tokens == 7)
    assert_full_trace(s)
    assert s.rows_unchanged(shown) == 5  # "the cat sat on the" is all two traces of it share
    s.shutdown()


def test_the_chain_is_a_chain_of_reuse(checkpoint):
    chain = TraceChain()
    model = checkpoint.model
    _, a = chain.trace(checkpoint, model, [3, 4, 5, 6])
    _, b = chain.trace(checkpoint, model, [3, 4, 5, 6, 7])  # rows 0..3 of a
    _, c = chain.trace(checkpoint, model, [3, 4, 9, 6, 7])  # rows 0..1 of b
    assert chain.rows_unchanged(a, b) == 4 and chain.rows_unchanged(b, c) == 2 and chain.rows_unchanged(a, c) == 2
    assert chain.rows_unchanged(c, c) == ALL_ROWS and chain.rows_unchanged(c, a) == 0  # not backwards
    assert chain.rows_unchanged(None, c) == 0 and chain.rows_unchanged(a, 10_000) == 0
    other = make_tiny_checkpoint(checkpoint.tokenizer, seed=9, context_length=32)
    _, d = chain.trace(other, other.model, [3, 4, 9, 6, 7])  # another model: computed whole
    assert chain.rows_unchanged(c, d) == 0
    chain.forget()
    trace, e = chain.trace(other, other.model, [3, 4, 9, 6, 7, 8])
    assert trace.reused_rows == 0 and chain.rows_unchanged(d, e) == 0


def test_two_threads_tracing_at_once_are_no_chain(checkpoint):
    """Two traces made from the same predecessor at once (a GUI-thread trace while the worker
    finishes one) share its rows, not each other's beyond them: rows_unchanged says 0."""
    chain = TraceChain()
    model = checkpoint.model
    _, a = chain.trace(checkpoint, model, [3, 4, 5, 6])
    both_read = threading.Barrier(2)

    class Waiting:  # both threads have taken their predecessor before either trace is made
        def trace(self, ids, **options):
            both_read.wait()
            return model.trace(ids, **options)

    serials = {}

    def run(name, ids):
        serials[name] = chain.trace(checkpoint, Waiting(), ids)[1]

    threads = [threading.Thread(target=run, args=(n, ids)) for n, ids in (("x", [3, 4, 5, 6, 7]), ("y", [3, 4, 5, 9]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    x, y = sorted(serials.values())
    assert chain.rows_unchanged(a, x) >= 3 and chain.rows_unchanged(a, y) >= 3
    assert chain.rows_unchanged(x, y) == 0  # siblings: not a chain


def test_weights_changed_through_data_are_traced_whole_after_forget_reuse(checkpoint):
    s = Session(compute_mode="sync")
    s.set_checkpoint(checkpoint)
    s.set_text("the cat sat on")
    block = checkpoint.model.blocks[1]
    block.mlp.fc_in.weight.data.mul_(3.0)  # through .data: the model cannot see it
    s.forget_reuse()
    s.set_text("the cat sat on the")
    assert s.trace.reused_rows == 0
    assert_full_trace(s)


def test_a_new_model_is_traced_whole(checkpoint, tiny_tokenizer):
    s = Session(compute_mode="sync")
    s.set_checkpoint(checkpoint)
    s.set_text("the cat sat on")
    before = s.trace_serial
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer, seed=5, context_length=32))
    assert s.trace.reused_rows == 0 and s.rows_unchanged(before) == 0
    assert_full_trace(s)


def test_a_model_fast_to_append_but_slow_whole_stays_off_the_gui_thread(qtbot, checkpoint, monkeypatch):
    """Appends cost a position each, but the next edit may change the first token: the session
    judges GUI thread or worker by what a whole trace costs, and jobs too (``expected_ms``)."""
    import explorer.qt.scheduling.jobs
    import explorer.qt.scheduling.scheduler

    now, lock = [0.0], threading.Lock()
    clock = types.SimpleNamespace(perf_counter=lambda: now[0])
    monkeypatch.setattr(explorer.qt.scheduling.scheduler, "time", clock)
    monkeypatch.setattr(explorer.qt.scheduling.jobs, "time", clock)
    trace = checkpoint.model.trace

    def timed_trace(ids, **kwargs):  # 1 ms per position computed
        result = trace(ids, **kwargs)
        with lock:
            now[0] += (result.n_tokens - result.reused_rows) * 1e-3
        return result

    monkeypatch.setattr(checkpoint.model, "trace", timed_trace)
    s = Session(compute_mode="auto")
    s.set_checkpoint(checkpoint)  # warm-up: 32 positions, 32 ms: slow
    assert s.traces_off_gui_thread
    text = "the cat sat on the mat ."
    s.set_text(text)
    qtbot.waitUntil(lambda: not s.busy and s.trace is not None and s.trace.n_tokens == 7)
    for word in ("the", "dog", "sat"):
        text += " " + word
        s.set_text(text)
        qtbot.waitUntil(lambda t=text: not s.busy and s.text == t and s.trace.n_tokens == len(s.encoding))
        assert s.last_model_ms == pytest.approx(1.0)  # one position ...
        assert s.traces_off_gui_thread  # ... but the whole text would take longer than the budget
    assert s.expected_ms(4) == pytest.approx(4 * 32.0)  # 10 tokens: at least the warm-up's 32
    s.shutdown()


@pytest.mark.slow
def test_a_hidden_panel_keeps_no_trace_buffers_alive(qtbot, tmp_path, tiny_tokenizer):
    """Panels keep copies, not views of a trace's row buffers: typing alternates between two
    buffers however many panels drew an older trace (model.tracing.reuse writes only unviewed rows)."""
    from explorer_helpers import make_window

    window = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer, context_length=64))
    s = window.session
    text = "the cat sat on the mat ."
    s.set_text(text)
    for i in range(12):
        s.set_text(text + (" the" if i % 2 == 0 else " a"))  # the last word edited: a shown row changes
    lineage = s.trace._reuse.lineage
    assert len(lineage.stores) <= 3  # the shown trace's, the one before it and a spare
    assert sum(store.in_use() for store in lineage.stores) == 1  # only the shown trace's is viewed


def test_a_new_model_s_speed_is_measured_on_the_text_s_first_rows_which_its_first_trace_keeps(tiny_tokenizer):
    """Opening a model runs one warm-up token, then the text's first 32 positions (timed), then only
    the rest: every position of the text once, and the first trace equals one computed whole."""
    big = make_tiny_checkpoint(tiny_tokenizer, context_length=64)
    s = Session(compute_mode="sync")
    s.set_text("the cat sat on the mat . " * 7)  # 49 tokens, set before any model
    counter = PositionCounter(big.model)
    s.set_checkpoint(big)
    assert len(s.encoding) == 49 and counter.take() == 1 + 49 and s.trace.n_tokens == 49 and s.trace.reused_rows == 32
    assert_full_trace(s)
    short = make_tiny_checkpoint(tiny_tokenizer, context_length=64, seed=9)
    s.set_text("the cat")
    counter = PositionCounter(short.model)
    s.set_checkpoint(short)  # a text shorter than the measurement: 32 zeros, then the text whole
    assert counter.take() == 1 + 32 + 2 and s.trace.reused_rows == 0
    assert_full_trace(s)
