"""The session: the one object that owns the model, the text, the trace and the selection.

Panels read from it and change it only through its public setters; it tells them what changed
through its signals. Traces are computed on the GUI thread while that is fast (the default model
takes about 2 ms), and on a worker thread, coalesced to the newest text, once a trace takes longer
than :data:`ASYNC_MS`. Results for older requests are dropped, so an old text never overwrites a
newer one. Each trace reuses the rows of the one computed before it (``GPT.trace(...,
reuse=)``: typing at the end computes one position, not T), and the session says how many leading
rows the shown trace shares with any earlier one (:meth:`Session.rows_unchanged`), so that panels
redraw only what changed.

Every other model computation a panel needs (the positional panel's four traces, the variants'
recomputation, later re-runs and generation) is a job given to :meth:`Session.submit`: a function
of the checkpoint and the request's inputs, run on the same worker thread when the model is slow,
newest request per panel, its result handed back to the panel on the GUI thread, its errors to
the status bar (:attr:`Session.sig_job_failed`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal

from explorer.core.token_text import display_tokens, ids_encoding
from explorer.core.trace_chain import TraceChain
from explorer.qt.scheduling.jobs import JobFn, JobResult, Requests, Worker, timed
from model import Checkpoint, Encoding, Trace
from model.explain.loo import Interrupted
from model.core.interventions import Interventions, WithInterventions

EDIT_MIN_CHARS = 20_000  # longer texts are re-tokenized from the edit on (20 kB take about 7 ms whole)
ASYNC_MS = 12.0  # a trace slower than this moves to the worker thread (in "auto" mode)
_EMPTY = Encoding(ids=(), tokens=(), spans=())
# What QPlainTextEdit.toPlainText() gives for these (QTextDocument::toPlainText): line breaks,
# paragraph and line separators and Qt's frame marks become "\n", a no-break space a space.
_EDITOR_CHANGES = "\r\u2028\u2029\ufdd0\ufdd1\u00a0"
_AS_EDITOR_STORES = str.maketrans({"\r": "\n", "\u2028": "\n", "\u2029": "\n", "\ufdd0": "\n",
                                   "\ufdd1": "\n", "\u00a0": " "})


def as_editor_stores(text: str) -> str:
    """``text`` as the editor stores it: line breaks (``\r\n``, ``\r``, U+2028, U+2029, Qt's frame
    marks) as ``\n``, a no-break space as a space, a surrogate pair as its character and a lone
    surrogate (``--text`` of bytes that are not UTF-8, a Python caller) left out, as Qt leaves it out.

    Each step runs only when the text has something for it: a 1 MB accented text had cost 60 ms
    a keystroke in ``str.translate`` alone.
    """
    text = str(text)
    try:
        text.encode("utf-8")  # fails only on a surrogate
    except UnicodeEncodeError:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if any(c in text for c in _EDITOR_CHANGES):
        text = text.translate(_AS_EDITOR_STORES)
    return text


@dataclass(frozen=True)
class _Request:
    gen: int
    checkpoint: Checkpoint
    encoding: Encoding
    positional_encoding: bool
    causal: bool
    interventions: Interventions


def _trace(request: _Request, chain: TraceChain) -> tuple[Trace, int]:
    """The request's trace, reusing the rows of the trace ``chain`` computed last, and its serial."""
    trace, serial = chain.trace(
        request.checkpoint, request.checkpoint.model,
        request.encoding.ids,  # a tuple: trace() crops it before making an array
        positional_encoding=request.positional_encoding,
        causal=request.causal,
        interventions=request.interventions,
    )
    trace.nonfinite  # noqa: B018  (found here, on the worker thread for a slow model; cached; new rows only)
    return trace, serial


def _same_vocabulary(a, b) -> bool:
    """Whether two tokenizers (or None) encode alike: one object, or the same serialized vocabulary."""
    return a is b or (a is not None and b is not None and a.to_json() == b.to_json())


class Session(QObject):
    """Current checkpoint, text, trace, selection and trace options, with change signals.

    Parameters
    ----------
    compute_mode : str
        ``"auto"`` (GUI thread while fast, worker thread when slow), ``"sync"`` or ``"async"``.
    """

    sig_model_changed = Signal()
    """A new checkpoint is loaded (model, tokenizer, config changed)."""
    sig_trace_changed = Signal()
    """A new trace is ready for the current text and options."""
    sig_selection_changed = Signal()
    """Layer, head or query position changed."""
    sig_options_changed = Signal()
    """positional_encoding / causal trace options changed."""
    sig_text_changed = Signal()
    """The text changed (the trace for it follows with sig_trace_changed)."""
    sig_timing_changed = Signal()
    """last_tokenize_ms / last_model_ms / last_draw_ms / error were updated after a trace was shown."""
    sig_job_failed = Signal(str)
    """A panel's job raised: who asked and the error, for the status bar."""
    sig_open_requested = Signal(str)
    """A panel asked to open a checkpoint file (the main window opens it, with its one open path)."""
    sig_interventions_changed = Signal()
    """The interventions (heads switched off) changed; the trace for them follows."""

    def __init__(self, compute_mode: str = "auto", parent: QObject | None = None) -> None:
        super().__init__(parent)
        if compute_mode not in ("auto", "sync", "async"):
            raise ValueError(f"compute_mode must be auto, sync or async, got {compute_mode!r}")
        self.compute_mode = compute_mode
        self._checkpoint: Checkpoint | None = None
        self._loaded: Checkpoint | None = None  # what set_checkpoint made current (show_snapshot swaps others in)
        self._snapshot_step: int | None = None
        self._text = ""
        self._encoding = _EMPTY
        self._trace: Trace | None = None
        self._trace_serial: int | None = None
        self._chain = TraceChain()  # the trace computed last, for the next one to reuse
        self._ms_per_token = 0.0  # of the newest trace computed whole (judges GUI thread or worker)
        self._tokens: list[str] = []
        self._layer = self._head = 0
        self._pin: int | None = None  # the pinned token, as an index into the whole text's encoding
        self._hover: int | None = None  # the trace row under the mouse (shown, not pinned)
        self._pe = self._causal = True
        self._interventions = Interventions()
        self._gen = 0
        self._requests = Requests()  # the newest job of each panel
        self._slow = False
        self._timing_tokens = 1  # traces this long or longer decide between GUI and worker thread
        self._closed = False
        self._weights: dict[int, dict[str, np.ndarray]] = {}
        self.last_model_ms = 0.0
        self.last_tokenize_ms = 0.0
        self.last_draw_ms = 0.0
        self._unpaced_draw_ms = 0.0
        self.error = ""
        #: The one worker thread: traces of slow models and panels' jobs.
        self.worker = Worker(self)

    # ---- read-only state -------------------------------------------------------------------
    checkpoint = property(lambda self: self._checkpoint,
                          doc="The model.Checkpoint shown (the loaded one, or a snapshot of it), or None.")
    loaded_checkpoint = property(lambda self: self._loaded,
                                 doc="The checkpoint set_checkpoint made current (also while a snapshot is shown).")
    snapshot_step = property(lambda self: self._snapshot_step,
                             doc="Training step of the snapshot shown (show_snapshot), or None for the loaded model.")
    model = property(lambda self: self._checkpoint.model if self._checkpoint else None, doc="The GPT, or None.")
    tokenizer = property(lambda self: self._checkpoint.tokenizer if self._checkpoint else None,
                         doc="The Tokenizer, or None (also None for a model without a vocabulary).")
    config = property(lambda self: self._checkpoint.config if self._checkpoint else None, doc="The GPTConfig, or None.")
    text = property(lambda self: self._text, doc="The current text.")
    encoding = property(lambda self: self._encoding, doc="model.Encoding of the whole text, before cropping.")
    trace = property(lambda self: self._trace, doc="The current model.Trace (last context_length tokens), or None.")
    tokens = property(lambda self: list(self._tokens),
                      doc="Token strings of the trace rows (after cropping); byte-level BPE names as their text.")
    layer = property(lambda self: self._layer, doc="Selected layer, in [0, n_layers).")
    head = property(lambda self: self._head, doc="Selected head, in [0, n_heads).")
    hover = property(lambda self: self._hover, doc="The trace row under the mouse (shown without pinning), or None.")
    positional_encoding = property(lambda self: self._pe, doc="Whether x_i = e_i + p_i (True) or e_i.")
    causal = property(lambda self: self._causal, doc="Whether the causal mask is applied.")
    interventions = property(lambda self: self._interventions,
                             doc="model.core.interventions.Interventions every trace and job runs with (heads "
                                 "switched off); Interventions() for the plain model.")
    busy = property(lambda self: self.worker.busy,
                    doc="True while the worker thread runs a trace or a job (until its result is handed over).")

    @property
    def traces_off_gui_thread(self) -> bool:
        """True when edits are traced on the worker thread (``async`` mode, or a slow model in ``auto``)."""
        return self.compute_mode == "async" or (self.compute_mode == "auto" and self._slow)

    @property
    def position(self) -> int | None:
        """The pinned (selected) query row, or None: nothing pinned, the panels show the last row.

        The pin holds a token, not a row: when the text outgrows the context window and the first
        tokens drop out, the row of the pinned token moves with it.
        """
        if self._pin is None:
            return None
        row = self._pin - self._dropped()
        return row if row >= 0 else None

    def selected_position(self) -> int | None:
        """The trace row every panel shows: the hovered row, else the pinned one, else the last;
        None when T == 0."""
        n = self._trace.n_tokens if self._trace is not None else 0
        if n == 0:
            return None
        if self._hover is not None and self._hover < n:
            return self._hover
        position = self.position
        return n - 1 if position is None else min(position, n - 1)

    def head_weights(self, layer: int) -> dict[str, np.ndarray]:
        """One layer's ``Attention.head_weights()``, cached per model: W_Q (n_heads, d_model, d_head),
        W_K and W_V (n_kv_heads, d_model, d_head), W_O (n_heads, d_head, d_model) and the biases."""
        if layer not in self._weights:
            self._weights[layer] = self.model.blocks[layer].attn.head_weights()
        return self._weights[layer]

    def kv_head(self, layer: int, head: int) -> int:
        """The key/value head that query ``head`` of ``layer`` reads (grouped-query attention)."""
        return self.model.blocks[layer].attn.kv_head(head)

    def expected_ms(self, passes: int = 1) -> float:
        """How long ``passes`` forward passes of the current model over the whole current text should
        take, in ms: per token as the newest trace computed whole took (the warm-up trace, right after
        a model was opened), times the tokens run (at least the warm-up's). A trace after typing at
        the end reuses the earlier rows and takes much less (``last_model_ms``); a job's passes do not."""
        n = min(len(self._encoding), self.config.context_length) if self.config else 0
        return passes * self._ms_per_token * max(n, self._timing_tokens)

    @property
    def trace_serial(self) -> int | None:
        """The shown trace's serial number (None while there is none): a panel keeps the serial of
        the trace it drew and asks :meth:`rows_unchanged` what changed since."""
        return self._trace_serial

    def rows_unchanged(self, since: int | None) -> int:
        """How many leading rows (positions) of every tensor of the shown trace are identical to
        those of the trace with serial ``since``: a panel that drew that trace redraws rows from
        there on. 0 when ``since`` is None or unknown, or the model, its options or the
        interventions changed between the two; T when it is the shown trace."""
        if self._trace is None:
            return 0
        return min(self._chain.rows_unchanged(since, self._trace_serial), self._trace.n_tokens)

    def forget_reuse(self) -> None:
        """Compute the next trace whole. For weights changed in place through ``.data``, which the
        model cannot notice (a new checkpoint, options and interventions are noticed)."""
        self._chain.forget()

    def is_slow(self, passes: int, limit_ms: float) -> bool:
        """True when ``passes`` forward passes of the current model are expected to take longer
        than ``limit_ms``; never in ``"sync"`` mode, where everything runs at once (tests, screenshots)."""
        return self.compute_mode != "sync" and self.expected_ms(passes) > limit_ms

    # ---- setters -----------------------------------------------------------------------------
    def set_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Make ``checkpoint`` current: selection reset, text re-encoded, trace recomputed.

        During sig_model_changed ``trace`` is None; sig_trace_changed follows with the new trace.
        """
        self._checkpoint = self._loaded = checkpoint
        self._snapshot_step = None
        self._trace, self._tokens = None, []  # the old trace belongs to the old model
        self._trace_serial = None
        self._chain.forget()
        self._weights = {}
        self.worker.drop_queued()  # work queued for the old model
        self._layer = self._head = 0
        self._hover = None
        self._keep_interventions_that_fit(checkpoint)
        self._encoding = self._encode(self._text)
        if self._pin is not None and self._pin >= len(self._encoding):
            self._pin = None  # the pin stays on its token while the new model's text still has it
        checkpoint.model.trace([0])  # warm-up: the first call pays torch's one-off costs
        n = self._timing_tokens = min(checkpoint.config.context_length, 32)
        t0 = time.perf_counter()
        checkpoint.model.trace([0] * n)
        self.last_model_ms = (time.perf_counter() - t0) * 1e3  # this model's, until its first real trace
        self._ms_per_token = self.last_model_ms / n
        # A model slow on a sentence goes to the worker thread from the first keystroke on.
        self._slow = self.last_model_ms > ASYNC_MS
        self.sig_model_changed.emit()
        self._request()

    def show_snapshot(self, checkpoint: Checkpoint | None, step: int | None = None) -> None:
        """Show other weights of the loaded model's architecture (a training snapshot), keeping the
        text, the selection (layer, head, position) and the trace options.

        Every panel follows as for a new model: sig_model_changed, then sig_trace_changed with the
        trace of the same text (while traces run on the GUI thread, that trace is already in place
        during sig_model_changed; otherwise ``trace`` is None then). The loaded checkpoint stays
        :attr:`loaded_checkpoint`; ``show_snapshot(None)`` shows it again.

        Parameters
        ----------
        checkpoint : Checkpoint or None
            Same config and vocabulary as the loaded checkpoint; None (or the loaded checkpoint
            itself) for the loaded model.
        step : int, optional
            The snapshot's training step, for the title and status bar (required for a snapshot).

        Raises
        ------
        ValueError
            When no model is loaded, or the snapshot differs from it in shape or vocabulary.
        """
        loaded = self._loaded
        if loaded is None:
            raise ValueError("no model is loaded to show a snapshot of")
        if checkpoint is None or checkpoint is loaded:
            checkpoint, step = loaded, None
        elif checkpoint.config != loaded.config or not _same_vocabulary(checkpoint.tokenizer, loaded.tokenizer):
            raise ValueError(f"{checkpoint.name} is not a snapshot of {loaded.name}: another shape or vocabulary")
        elif step is None:
            raise ValueError("a snapshot is shown with its training step")
        if checkpoint is self._checkpoint and step == self._snapshot_step:
            return
        self._checkpoint, self._snapshot_step = checkpoint, step
        self._weights = {}
        self.worker.drop_queued()  # work queued for the weights shown before
        if self.traces_off_gui_thread:  # as for a new model: no trace until the worker's arrives
            self._trace, self._tokens = None, []
            self.sig_model_changed.emit()
            self._request()
            return
        # The new trace is in place before sig_model_changed: panels that redraw on it draw the
        # new weights once (not an empty view first), and their second pass (sig_trace_changed)
        # finds the same arrays.
        self._gen += 1
        req = _Request(self._gen, checkpoint, self._encoding, self._pe, self._causal, self._interventions)
        chain = self._chain
        traced, exc, ms = timed(lambda: _trace(req, chain))  # another checkpoint: computed whole
        trace = traced[0] if traced is not None else None
        self._trace, self._trace_serial = trace, (traced[1] if traced is not None else None)
        self._tokens = display_tokens(checkpoint.tokenizer, self._encoding, trace.dropped) if trace is not None else []
        self.sig_model_changed.emit()
        self._finish(req, traced, exc, ms)

    def set_text(self, text: str) -> None:
        """Set the text; the trace follows (at once, or from the worker thread).

        Line breaks (and U+2028, U+2029) become ``\n``, a no-break space a space and lone
        surrogates are left out, as the text editor stores them (:func:`as_editor_stores`), so
        that the session and the editor always hold the same text (and the same character offsets).
        """
        text = as_editor_stores(text)
        if text == self._text:
            return
        before, self._text = self._text, text
        t0 = time.perf_counter()
        self._encoding = self._encode(self._text, before)
        self.last_tokenize_ms = (time.perf_counter() - t0) * 1e3
        self.sig_text_changed.emit()
        self._request()

    def set_layer(self, layer: int) -> None:
        """Select a layer (clamped to the model's layers)."""
        n = self.config.n_layers if self.config else 1
        self._set_selection("_layer", max(0, min(int(layer), n - 1)))

    def set_head(self, head: int) -> None:
        """Select a head (clamped to the model's heads)."""
        n = self.config.n_heads if self.config else 1
        self._set_selection("_head", max(0, min(int(head), n - 1)))

    def set_position(self, position: int | None) -> None:
        """Pin a query row (clamped to the trace, or while it is computed to the tokens it will
        have), or None to release the pin (the panels then show the last row)."""
        pin = None
        if position is not None:
            n = self._trace.n_tokens if self._trace is not None else min(
                len(self._encoding), self.config.context_length if self.config else 0)
            pin = None if n == 0 else max(0, min(int(position), n - 1)) + self._dropped()
        self._set_selection("_pin", pin)

    def toggle_pin(self, position: int) -> None:
        """Pin ``position``; when it is the pinned row already, release the pin (a second click)."""
        self.set_position(None if position == self.position else position)

    def set_hover(self, position: int | None) -> None:
        """Show the row under the mouse in every panel without pinning it (None: the mouse left)."""
        n = self._trace.n_tokens if self._trace is not None else 0
        position = None if position is None or not 0 <= int(position) < n else int(position)
        self._set_selection("_hover", position)

    def set_positional_encoding(self, on: bool) -> None:
        """Run with x_i = e_i + p_i (True) or x_i = e_i (False)."""
        if bool(on) != self._pe:
            self._pe = bool(on)
            self.sig_options_changed.emit()
            self._request()

    def set_causal(self, on: bool) -> None:
        """Apply the causal mask (True) or let every query see every key (False)."""
        if bool(on) != self._causal:
            self._causal = bool(on)
            self.sig_options_changed.emit()
            self._request()

    def set_interventions(self, interventions: Interventions | None) -> None:
        """Run every trace and job with ``interventions`` (None: the plain model); they stay while
        typing, and a new trace follows at once.

        Raises
        ------
        ValueError
            When a head is outside the current model (nothing changes then).
        """
        iv = interventions if interventions is not None else Interventions()
        if self.config is not None:
            iv.check(self.config)
        if iv != self._interventions or iv.key_mask is not self._interventions.key_mask:
            self._interventions = iv
            self.sig_interventions_changed.emit()
            self._request()

    def request_open(self, path) -> None:
        """Ask for a checkpoint file to be opened (emits sig_open_requested; the window opens it)."""
        self.sig_open_requested.emit(str(path))

    def submit(self, requester: QObject, fn: JobFn, inputs: Any, on_result: Callable[[JobResult], None], *,
               passes: int = 1, name: str = "", inline_ms: float = ASYNC_MS) -> None:
        """Run a model computation for a panel: ``fn(checkpoint, inputs)``, result to ``on_result``.

        Parameters
        ----------
        requester : QObject
            The panel asking. Its newest request (per ``name``) wins: a request replaces its
            queued predecessor, and an older result that still arrives is dropped; so is a result
            for a checkpoint that is no longer current, or for a requester that was deleted.
        fn : callable (checkpoint, inputs) -> value
            Runs on the worker thread: it may use the checkpoint's model and tokenizer and plain
            data, never a widget. While :attr:`interventions` change the model, the checkpoint's
            model is a :class:`~model.core.interventions.WithInterventions`: its traces and forward
            passes run with them unless the job passes its own.
        inputs : Any
            Plain data from the GUI thread (ids, selection, a trace: immutable things).
        on_result : callable (JobResult) -> None
            Called on the GUI thread with the value, or with ``error`` set when ``fn`` raised
            (the error is also emitted with :attr:`sig_job_failed` for the status bar).
        passes : int
            About how many forward passes ``fn`` makes: it runs at once, on the GUI thread, only
            in ``"sync"`` mode or while ``passes`` passes of the model stay under :data:`ASYNC_MS`
            (and the session's own traces run there); otherwise on the worker thread, after the
            trace of the newest text.
        name : str
            Separates independent requests of one requester (each coalesced on its own).
        inline_ms : float
            The most the job may take on the GUI thread (default :data:`ASYNC_MS`); a job that
            follows every keystroke passes what the frame budget leaves after the trace and paint.
        """
        if self._checkpoint is None or self._closed:
            return
        key, number = self._requests.new(requester, name)
        checkpoint = self._checkpoint
        seen = checkpoint if self._interventions.changes_nothing else dataclasses.replace(
            checkpoint, model=WithInterventions(checkpoint.model, self._interventions))

        def work():
            return fn(seen, inputs)

        def deliver(value, exc, ms) -> None:
            if not self._requests.wanted(key, number, requester) or checkpoint is not self._checkpoint:
                return  # a newer request, another model, or the panel is gone
            if isinstance(exc, Interrupted):
                return  # stopped for newer work (superseded): the trace or request it waited for follows
            error = "" if exc is None else f"{type(exc).__name__}: {exc}"
            if error:
                self.sig_job_failed.emit(f"{type(requester).__name__}{' ' + name if name else ''}: {error}")
            on_result(JobResult(value, error, ms, inputs))

        if self.compute_mode == "sync" or (not self.traces_off_gui_thread and self.expected_ms(passes) <= inline_ms):
            deliver(*timed(work))
        else:
            self.worker.submit(key, work, deliver)

    def job_superseded(self) -> bool:
        """For a long job's ``should_stop``: True when it runs on the worker thread and newer work
        waits behind it (the trace of a newer text, or a newer request of the same requester:
        :attr:`~explorer.qt.scheduling.jobs.Worker.superseded`); always False on the GUI thread. A job that
        stops raises :class:`~model.explain.loo.Interrupted`, and its result is dropped quietly."""
        return QThread.currentThread() is not self.thread() and self.worker.superseded

    def cancel(self, requester: QObject, name: str = "") -> None:
        """Forget ``requester``'s pending job (its result, if it still arrives, is dropped)."""
        self._requests.cancel(requester, name)

    def set_paced_draw_ms(self, ms: float) -> None:
        """Report drawing that panels did one per event-loop turn, after a new trace or selection:
        ``last_draw_ms`` becomes that update's whole drawing time (after a trace, the part drawn
        while sig_trace_changed was emitted plus ``ms``); emits sig_timing_changed."""
        self.last_draw_ms = self._unpaced_draw_ms + ms
        self._unpaced_draw_ms = 0.0  # a later batch (a selection change) is counted on its own
        self.sig_timing_changed.emit()

    def shutdown(self, timeout_ms: int = 30000, wait: bool = True) -> None:
        """Drop queued work and wait for a running trace or job to finish (call before the app exits).

        With ``wait=False`` it returns at once (a closing window disappears while a slow trace
        finishes in the background); call it again with ``wait=True`` before the process ends.
        """
        self._closed = True
        self.worker.shutdown(timeout_ms, wait)

    # ---- internals -----------------------------------------------------------------------------
    def _keep_interventions_that_fit(self, checkpoint: Checkpoint) -> None:
        """Keep the interventions for a new model when its layers and heads have them, else drop them."""
        try:
            self._interventions.check(checkpoint.config)
        except ValueError:
            self._interventions = Interventions()
            self.sig_interventions_changed.emit()

    def _dropped(self) -> int:
        """Tokens before the context window: the shown trace's, else what the text's will be."""
        if self._trace is not None:
            return self._trace.dropped
        return max(0, len(self._encoding) - (self.config.context_length if self.config else 0))

    def _set_selection(self, attr: str, value) -> None:
        if getattr(self, attr) != value:
            setattr(self, attr, value)
            self.sig_selection_changed.emit()

    def _encode(self, text: str, before: str | None = None) -> Encoding:
        """The tokenizer's encoding; without a vocabulary, the ids typed in the text (\"3, 17, 5\").

        ``before`` is the text that ``self._encoding`` encodes: a long text is then re-tokenized
        only from shortly before the edit (``Tokenizer.encode_edit``; the same result).
        """
        if self._checkpoint is None or not text:
            return _EMPTY
        tok = self.tokenizer
        if tok is None:
            return ids_encoding(text, self.config.vocab_size)[0]
        if before is not None and len(text) > EDIT_MIN_CHARS and len(self._encoding):
            return tok.encode_edit(text, before, self._encoding)
        return tok.encode(text)

    def _request(self) -> None:
        if self._checkpoint is None or self._closed:
            return
        self._gen += 1
        req = _Request(self._gen, self._checkpoint, self._encoding, self._pe, self._causal, self._interventions)
        chain = self._chain
        if not self.traces_off_gui_thread:
            self._finish(req, *timed(lambda: _trace(req, chain)))
        else:  # coalesced: a queued older text is replaced; the trace goes before panels' jobs
            self.worker.submit("trace", lambda: _trace(req, chain), lambda *done: self._finish(req, *done), priority=0)

    def _judge_speed(self, trace: Trace, model_ms: float) -> None:
        """GUI thread or worker thread for the next traces ("auto" mode), judged on what a trace of
        the whole text costs: a trace that reused rows says little about the next edit, which may
        change the first token, so only traces computed whole (of texts at least as long as the
        warm-up's) set the time per token."""
        if trace.reused_rows == 0 and trace.n_tokens >= self._timing_tokens:
            self._ms_per_token = model_ms / trace.n_tokens
        self._slow = self._ms_per_token * max(trace.n_tokens, self._timing_tokens) > ASYNC_MS

    def _finish(self, req: _Request, traced: tuple[Trace, int] | None, exc: Exception | None,
                model_ms: float) -> None:
        if req.gen != self._gen or req.checkpoint is not self._checkpoint:
            return  # a newer request exists: never show an older text's trace
        trace, serial = traced if traced is not None else (None, None)
        if self.compute_mode == "auto" and trace is not None:
            self._judge_speed(trace, model_ms)
        self.last_model_ms = model_ms
        self.error = "" if exc is None else f"{type(exc).__name__}: {exc}"
        self._trace, self._trace_serial = trace, serial
        self._tokens = display_tokens(req.checkpoint.tokenizer, req.encoding, trace.dropped) if trace is not None else []
        n = trace.n_tokens if trace is not None else 0
        dropped = trace.dropped if trace is not None else 0
        # The pin is released when its token is gone (the text got shorter, or it left the window).
        clamped = self._pin is not None and not 0 <= self._pin - dropped < n
        if clamped:
            self._pin = None
        if self._hover is not None and self._hover >= n:
            self._hover = None
        t0 = time.perf_counter()
        self.sig_trace_changed.emit()
        if clamped:
            self.sig_selection_changed.emit()
        self.last_draw_ms = self._unpaced_draw_ms = (time.perf_counter() - t0) * 1e3
        self.sig_timing_changed.emit()
