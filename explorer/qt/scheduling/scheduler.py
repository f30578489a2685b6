"""Where the session's model computations run: the GUI thread while they are fast, else the worker.

Traces are computed on the GUI thread while that is fast (the default model takes about 2 ms), and
on the worker thread (:class:`~explorer.qt.scheduling.jobs.Worker`), coalesced to the newest text,
once a trace takes longer than :data:`ASYNC_MS` (each trace that finishes is shown unless a newer one
is shown already: typing faster than the model shows the newest traced text, never nothing). Which it is, is measured: when a model opens
(:meth:`Scheduler.probe`, on the text's first :data:`TIMING_TOKENS` tokens, which its first trace
then reuses) and on every trace computed whole. Each trace reuses the rows of the one computed
before it (:class:`~explorer.core.trace_chain.TraceChain`).

Every other model computation a panel needs is a job given to :meth:`Scheduler.submit`: a function
of the checkpoint and the request's inputs, run on the same worker thread when the model is slow,
newest request per panel, its result handed back on the GUI thread, its errors to
:attr:`Scheduler.sig_job_failed`. The session (:mod:`explorer.qt.session`) owns the state these
run on; this class owns only the threads, the chain and the clock.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, Signal

from explorer.core.trace_chain import TraceChain
from explorer.qt.scheduling.jobs import JobFn, JobResult, Requests, Worker, timed
from model import Checkpoint, Encoding, Trace
from model.core.interventions import Interventions, WithInterventions
from model.core import stopping
from model.core.stopping import Interrupted

ASYNC_MS = 12.0  # a trace slower than this moves to the worker thread (in "auto" mode)
#: What a 16 ms frame leaves for a panel's job on the GUI thread after a keystroke's trace and paint
#: (13-15 ms at T = 32 with the default model); a job expected to take longer runs on the worker.
FRAME_LEFT_MS = 2.0
#: Work expected to take longer than this is worth a "computing…" note; a note for shorter work only
#: flashes (and lays its panel out and repaints it twice a keystroke).
NOTICEABLE_MS = 100.0
RESULT_EVERY_MS = 500.0  # typing into a slow model: a trace gives way to a newer one only within this of the last result
SPARE_ROWS = 64  # after a worker's trace that computed this many rows, a second row store is filled ahead of the next edit
TIMING_TOKENS = 32  # a new model's speed is measured on this many tokens (at most its context)
COMPUTE_MODES = ("auto", "sync", "async")


@dataclass(frozen=True)
class TraceRequest:
    """One trace the session asked for: its number (newer requests have larger ones) and inputs."""

    gen: int
    checkpoint: Checkpoint
    encoding: Encoding
    positional_encoding: bool
    causal: bool
    interventions: Interventions


class Scheduler(QObject):
    """The worker thread, the trace chain and the speed that decides between them and the GUI thread.

    Parameters
    ----------
    compute_mode : str
        ``"auto"`` (GUI thread while fast, worker thread when slow), ``"sync"`` or ``"async"``.
    current : callable () -> Checkpoint or None
        The checkpoint shown now: a job's result for another one is dropped.
    n_tokens : callable () -> int
        How many tokens the current text gives the model (after cropping), for :meth:`expected_ms`.

    Raises
    ------
    ValueError
        For another compute mode.
    """

    sig_job_failed = Signal(str)
    """A panel's job raised: who asked and the error."""

    def __init__(self, compute_mode: str, current: Callable[[], Checkpoint | None], n_tokens: Callable[[], int],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        if compute_mode not in COMPUTE_MODES:
            raise ValueError(f"compute_mode must be auto, sync or async, got {compute_mode!r}")
        self.compute_mode = compute_mode
        self._current, self._n_tokens = current, n_tokens
        self.chain = TraceChain()  # the trace computed last, for the next one to reuse
        self._gen = 0
        self._requests = Requests()  # the newest job of each panel
        self._ms_per_token = 0.0  # of the newest trace computed whole (judges GUI thread or worker)
        self._timing_tokens = 1  # traces this long or longer decide between GUI and worker thread
        self._slow = False
        self._closed = False
        self._shown_at = 0.0  # perf_counter() when the worker's last trace was handed over
        self._worker_trace_ms = 0.0  # ... and how long it took
        #: The one worker thread: traces of slow models and panels' jobs.
        self.worker = Worker(self)

    busy = property(lambda self: self.worker.busy,
                    doc="True while the worker thread runs a trace or a job (until its result is handed over).")

    @property
    def traces_off_gui_thread(self) -> bool:
        """True when edits are traced on the worker thread (``async`` mode, or a slow model in ``auto``)."""
        return self.compute_mode == "async" or (self.compute_mode == "auto" and self._slow)

    def expected_ms(self, passes: int = 1) -> float:
        """How long ``passes`` forward passes of the current model over the whole current text should
        take, in ms: per token as the newest trace computed whole took (the probe, right after a
        model was opened), times the tokens run (at least the probe's). A trace after typing at the
        end reuses the earlier rows and takes much less; a job's passes do not."""
        return passes * self._ms_per_token * max(self._n_tokens(), self._timing_tokens)

    def is_slow(self, passes: int, limit_ms: float) -> bool:
        """True when ``passes`` forward passes are expected to take longer than ``limit_ms``; never in
        ``"sync"`` mode, where everything runs at once (tests, screenshots)."""
        return self.compute_mode != "sync" and self.expected_ms(passes) > limit_ms

    # ---- traces ------------------------------------------------------------------------------------
    def request(self, checkpoint: Checkpoint, encoding: Encoding, positional_encoding: bool, causal: bool,
                interventions: Interventions) -> TraceRequest:
        """A new trace request, newer than every earlier one (its ``gen`` is larger)."""
        self._gen += 1
        return TraceRequest(self._gen, checkpoint, encoding, positional_encoding, causal, interventions)

    def probe(self, request: TraceRequest) -> float:
        """The first runs of a newly opened model, before the session shows it: torch's one-off costs
        paid on one token (which also shows that the model runs), then the time per token measured
        on :data:`TIMING_TOKENS` tokens: the text's first ones through the chain, so that its first
        trace reuses those rows, or zeros while the text is shorter. Returns that run's ms.

        Raises
        ------
        Exception
            Whatever the model raised (nothing is changed then).
        """
        model, context = request.checkpoint.model, request.checkpoint.config.context_length
        model.trace([0])  # the first call pays torch's one-off costs
        n = min(context, TIMING_TOKENS)
        window = request.encoding.ids[-context:]
        self.chain.forget()  # a model opened again is computed whole: a measurement, not a reuse
        t0 = time.perf_counter()
        if len(window) >= n:
            self._trace(request, window[:n])
        else:
            model.trace([0] * n)
        ms = (time.perf_counter() - t0) * 1e3
        self._timing_tokens, self._ms_per_token = n, ms / n
        self._slow = ms > ASYNC_MS  # a model slow on a sentence goes to the worker from the first key on
        return ms

    def compute(self, request: TraceRequest) -> tuple[tuple[Trace, int] | None, Exception | None, float]:
        """The request's trace, here and now: ((trace, serial) or None, the exception or None, ms)."""
        return timed(lambda: self._trace(request))

    def run(self, request: TraceRequest, on_done: Callable[[TraceRequest, Any, Exception | None, float], None]) -> None:
        """The request's trace, here at once or on the worker (coalesced: a queued older text is
        replaced, and the trace goes before panels' jobs); ``on_done(request, *Traced)`` then."""
        if self._closed:
            return
        if not self.traces_off_gui_thread:
            on_done(request, *self.compute(request))
            return

        def work() -> tuple[Trace, int]:
            with stopping.stop_when(self._gives_way):
                return self._trace(request)

        def delivered(traced, exc, ms) -> None:
            if isinstance(exc, Interrupted):
                return  # it gave way to the newer text's trace, which runs next
            self._shown_at, self._worker_trace_ms = time.perf_counter(), ms
            on_done(request, traced, exc, ms)
            if traced is not None and traced[0].n_tokens - traced[0].reused_rows >= SPARE_ROWS:
                self._prepare_spare()

        self.worker.submit("trace", work, delivered, priority=0)

    def _gives_way(self) -> bool:
        """For the trace running on the worker, asked between two blocks: True when a newer text's
        trace waits and stopping now still shows a result within :data:`RESULT_EVERY_MS` of the
        last one (at the pace of the last trace shown). The last key's result then follows within
        one trace time instead of after the older text's trace too, and typing never starves the
        panels: past that time the running trace finishes and is shown."""
        if not self.worker.superseded:
            return False
        waited_ms = (time.perf_counter() - self._shown_at) * 1e3
        return waited_ms + self._worker_trace_ms <= RESULT_EVERY_MS

    def _prepare_spare(self) -> None:
        """After the worker traced many rows (a model opened on a long text, a paste), fill a second
        row store with the latest trace's rows on the worker, after every trace and job, stopping
        for newer work: the next edit of a row it shows then computes only its new rows (without:
        the first keystroke after opening the GPT-2-small-sized model at T = 520 took 2.9 s)."""
        chain = self.chain
        self.worker.submit("spare", lambda: chain.prepare_spare(lambda: self.worker.superseded),
                           lambda *_: None, priority=2)

    def measured(self, trace: Trace, model_ms: float) -> None:
        """GUI thread or worker thread for the next traces ("auto" mode), judged on what a trace of
        the whole text costs: a trace that reused rows says little about the next edit, which may
        change the first token, so only traces computed whole (of texts at least as long as the
        probe's) set the time per token."""
        if self.compute_mode != "auto":
            return
        if trace.reused_rows == 0 and trace.n_tokens >= self._timing_tokens:
            self._ms_per_token = model_ms / trace.n_tokens
        self._slow = self._ms_per_token * max(trace.n_tokens, self._timing_tokens) > ASYNC_MS

    def _trace(self, request: TraceRequest, ids=None) -> tuple[Trace, int]:
        """The trace of ``ids`` (default the request's), reusing the rows of the trace computed last."""
        trace, serial = self.chain.trace(
            request.checkpoint, request.checkpoint.model,
            request.encoding.ids if ids is None else ids,  # a tuple: trace() crops it before making an array
            positional_encoding=request.positional_encoding,
            causal=request.causal,
            interventions=request.interventions,
        )
        trace.nonfinite  # noqa: B018  (found here, on the worker thread for a slow model; cached; new rows only)
        return trace, serial

    # ---- panels' jobs ---------------------------------------------------------------------------------
    def submit(self, requester: QObject, checkpoint: Checkpoint, interventions: Interventions, fn: JobFn,
               inputs: Any, on_result: Callable[[JobResult], None], *, passes: int = 1, name: str = "",
               inline_ms: float = FRAME_LEFT_MS) -> None:
        """Run a model computation for a panel: ``fn(checkpoint, inputs)``, result to ``on_result``.

        Parameters
        ----------
        requester : QObject
            The panel asking. Its newest request (per ``name``) wins: a request replaces its
            queued predecessor, and an older result that still arrives is dropped; so is a result
            for a checkpoint that is no longer current (``checkpoint``), or for a requester that
            was deleted.
        checkpoint : Checkpoint
            The current checkpoint.
        interventions : Interventions
            What every trace runs with: while they change the model, ``fn`` gets the checkpoint with
            its model a :class:`~model.core.interventions.WithInterventions` (its traces and forward
            passes run with them unless the job passes its own).
        fn : callable (checkpoint, inputs) -> value
            Runs on the worker thread: it may use the checkpoint's model and tokenizer and plain
            data, never a widget.
        inputs : Any
            Plain data from the GUI thread (ids, selection, a trace: immutable things).
        on_result : callable (JobResult) -> None
            Called on the GUI thread with the value, or with ``error`` set when ``fn`` raised
            (the error is also emitted with :attr:`sig_job_failed` for the status bar).
        passes : int
            About how many forward passes ``fn`` makes: it runs at once, on the GUI thread, only
            in ``"sync"`` mode or while ``passes`` passes of the model stay under ``inline_ms``
            (and the traces run there); otherwise on the worker thread, after the trace of the
            newest text.
        name : str
            Separates independent requests of one requester (each coalesced on its own).
        inline_ms : float
            The most the job may take on the GUI thread (default :data:`FRAME_LEFT_MS`, what a
            frame leaves after a keystroke's trace and paint); 0 for work that never fits a frame.
        """
        if self._closed:
            return
        key, number = self._requests.new(requester, name)
        seen = checkpoint if interventions.changes_nothing else dataclasses.replace(
            checkpoint, model=WithInterventions(checkpoint.model, interventions))

        def deliver(value, exc, ms) -> None:
            if not self._requests.wanted(key, number, requester) or checkpoint is not self._current():
                return  # a newer request, another model, or the panel is gone
            if isinstance(exc, Interrupted):
                return  # stopped for newer work (superseded): the trace or request it waited for follows
            error = "" if exc is None else f"{type(exc).__name__}: {exc}"
            if error:
                self.sig_job_failed.emit(f"{type(requester).__name__}{' ' + name if name else ''}: {error}")
            on_result(JobResult(value, error, ms, inputs))

        if self.compute_mode == "sync" or (not self.traces_off_gui_thread and self.expected_ms(passes) <= inline_ms):
            deliver(*timed(lambda: fn(seen, inputs)))
        else:
            self.worker.submit(key, lambda: fn(seen, inputs), deliver)

    def job_superseded(self) -> bool:
        """For a long job's ``should_stop``: True when it runs on the worker thread and newer work
        waits behind it (:attr:`~explorer.qt.scheduling.jobs.Worker.superseded`); always False on the
        GUI thread. A job that stops raises :class:`~model.explain.loo.Interrupted`, and its result
        is dropped quietly."""
        return QThread.currentThread() is not self.thread() and self.worker.superseded

    def cancel(self, requester: QObject, name: str = "") -> None:
        """Forget ``requester``'s pending job (its result, if it still arrives, is dropped)."""
        self._requests.cancel(requester, name)

    def shutdown(self, timeout_ms: int = 30000, wait: bool = True) -> None:
        """Drop queued work and wait for a running trace or job to finish (``wait=False``: return at once)."""
        self._closed = True
        self.worker.shutdown(timeout_ms, wait)
