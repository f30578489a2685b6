"""The session: the one object that owns the model, the text, the trace and the selection.

Panels read from it and change it only through its public setters; it tells them what changed
through its signals. Where its traces and the panels' jobs run (the GUI thread while the model is
fast, else the worker thread, newest request first) is its :class:`~explorer.qt.scheduling.scheduler.Scheduler`'s
business: :meth:`Session.submit`, :meth:`Session.rows_unchanged` and the other scheduling calls are
handed to it. Each trace reuses the rows of the one computed before it (typing at the end computes
one position, not T), and the session says how many leading rows the shown trace shares with any
earlier one (:meth:`Session.rows_unchanged`), so that panels redraw only what changed.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QObject, Signal

from explorer.core.editor_text import as_editor_stores, encode_text
from explorer.core.held_tokens import TokenText, edited, spliced
from explorer.core.token_text import display_tokens
from explorer.qt.scheduling.calls import SchedulerCalls
from explorer.qt.scheduling.jobs import JobFn, JobResult
from explorer.qt.scheduling.pacing import settle_layouts
from explorer.qt.scheduling.scheduler import FRAME_LEFT_MS, Scheduler, TraceRequest
from model import Checkpoint, Trace
from model.tokens.tokenizer import Tokenizer
from model.core.interventions import Interventions


class ModelDoesNotRun(Exception):
    """A checkpoint's model (or its tokenizer, on the session's text) raised on its first run, in
    :meth:`Session.set_checkpoint`; what it raised is ``__cause__``, and the current model stays."""


class Session(SchedulerCalls, QObject):
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
    sig_panel_requested = Signal(str)
    """A panel asked for another panel (by its registered name) to be shown (the window brings its dock forward)."""

    def __init__(self, compute_mode: str = "auto", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._checkpoint: Checkpoint | None = None
        self._loaded: Checkpoint | None = None  # what set_checkpoint made current (show_snapshot swaps others in)
        self._snapshot_step: int | None = None
        self._tt = TokenText()  # the text, its tokens, and which of them the model gave as ids
        self._trace: Trace | None = None
        self._trace_serial: int | None = None
        self._shown_gen = 0  # the number of the request whose trace is shown (older ones are never shown)
        self._tokens: list[str] = []
        self._layer = self._head = 0
        self._pin: int | None = None  # the pinned token, as an index into the whole text's encoding
        self._hover: int | None = None  # the trace row under the mouse (shown, not pinned)
        self._pe = self._causal = True
        self._interventions = Interventions()
        self._weights: dict[int, dict[str, np.ndarray]] = {}
        self.last_model_ms = 0.0
        self.last_tokenize_ms = 0.0
        self.last_draw_ms = 0.0
        self._unpaced_draw_ms = 0.0
        self._opening = False  # set_checkpoint hands a new model to the panels (paced outside sync mode)
        self.error = ""
        #: Where traces and jobs run: the GUI thread or the one worker thread (raises ValueError
        #: for a compute mode other than auto, sync and async).
        self.scheduler = Scheduler(compute_mode, lambda: self._checkpoint, self._window_tokens, self)
        self.scheduler.sig_job_failed.connect(self.sig_job_failed)

    # ---- read-only state -------------------------------------------------------------------
    checkpoint = property(lambda self: self._checkpoint,
                          doc="The model.Checkpoint shown (the loaded one, or a snapshot of it), or None.")
    loaded_checkpoint = property(lambda self: self._loaded,
                                 doc="The checkpoint set_checkpoint made current (also while a snapshot is shown).")
    snapshot_step = property(lambda self: self._snapshot_step,
                             doc="Training step of the snapshot shown (show_snapshot), or None for the loaded model.")
    model = property(lambda self: self._checkpoint.model if self._checkpoint else None, doc="The model, or None.")
    pacing_new_model = property(lambda self: self._opening and self.compute_mode != "sync",
                                doc="True while set_checkpoint hands a new model and its first trace to the panels "
                                    "(not in sync mode): they refresh one per event-loop turn then, even for a "
                                    "fast model (every shown panel redrawn in one turn froze the window).")
    tokenizer = property(lambda self: self._checkpoint.tokenizer if self._checkpoint else None,
                         doc="The Tokenizer, or None (also None for a model without a vocabulary).")
    config = property(lambda self: self._checkpoint.config if self._checkpoint else None, doc="The GPTConfig, or None.")
    text = property(lambda self: self._tt.text, doc="The current text.")
    encoding = property(lambda self: self._tt.encoding, doc="model.Encoding of the whole text, before cropping.")
    token_text = property(lambda self: self._tt, doc="TokenText: the text, its encoding and the tokens held as "
                                                       "ids (generated or chosen: their text is their rendering).")
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
            self._weights[layer] = self._attention(layer).head_weights()
        return self._weights[layer]

    def kv_head(self, layer: int, head: int) -> int:
        """The key/value head that query ``head`` of ``layer`` reads (grouped-query attention)."""
        return self._attention(layer).kv_head(head)

    def _attention(self, layer: int):
        """Layer ``layer``'s Attention; ValueError, saying why, for a model without attention."""
        if not hasattr(self.model, "blocks"):
            raise ValueError("the model before attention has no attention layers, heads or W_Q, W_K, W_V")
        return self.model.blocks[layer].attn

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
        return min(self.scheduler.chain.rows_unchanged(since, self._trace_serial), self._trace.n_tokens)

    def forget_reuse(self) -> None:
        """Compute the next trace whole. For weights changed in place through ``.data``, which the
        model cannot notice (a new checkpoint, options and interventions are noticed)."""
        self.scheduler.chain.forget()

    # ---- setters -----------------------------------------------------------------------------
    def set_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Make ``checkpoint`` current: selection reset, every head on (:attr:`interventions` none), text
        re-encoded (its held ids kept where the vocabulary is the same), trace recomputed.

        The model's first runs (:meth:`Scheduler.probe <explorer.qt.scheduling.scheduler.Scheduler.probe>`:
        one token, then the text's first tokens, which its first trace reuses) come before anything
        changes. During sig_model_changed ``trace`` is None; sig_trace_changed follows with the new trace.

        Raises
        ------
        ModelDoesNotRun
            When the model or its tokenizer raises on those first runs (nothing changes then).
        """
        try:
            tt = self._tt if self._keeps_ids(checkpoint) else TokenText(self.text, encode_text(checkpoint, self.text))
            request = self.scheduler.request(checkpoint, tt.encoding, self._pe, self._causal, Interventions())
            self.last_model_ms = self.scheduler.probe(request)  # this model's, until its first real trace
        except Exception as exc:  # noqa: BLE001 - a model that cannot run must not replace the current one
            raise ModelDoesNotRun(f"{type(exc).__name__}: {exc}") from exc
        self._checkpoint = self._loaded = checkpoint
        self._snapshot_step = None
        self._trace, self._tokens, self._trace_serial = None, [], None  # the old trace belongs to the old model
        self._weights = {}
        self.worker.drop_queued()  # work queued for the old model
        self._layer = self._head = 0
        self._hover, self._tt = None, tt
        if self._pin is not None and self._pin >= len(tt.encoding):
            self._pin = None  # the pin stays on its token while the new model's text still has it
        if not self._interventions.changes_nothing:  # heads switched off on the model before: on again
            self._interventions = Interventions()
            self.sig_interventions_changed.emit()
        self._opening = True
        try:
            self.sig_model_changed.emit()
            self._request()
        finally:
            self._opening = False

    def show_snapshot(self, checkpoint: Checkpoint | None, step: int | None = None) -> None:
        """Show other weights of the loaded model's architecture (a training snapshot), keeping the
        text, the selection (layer, head, position) and the trace options.

        Every panel follows as for a new model: sig_model_changed, then sig_trace_changed with the
        trace of the same text (while traces run on the GUI thread, that trace is already in place
        during sig_model_changed; otherwise ``trace`` is None then). ``checkpoint`` has the loaded
        checkpoint's config and vocabulary (which stays :attr:`loaded_checkpoint`); None (or the
        loaded one) shows the loaded model again. ``step``, the snapshot's training step, is for the
        title and status bar (required for a snapshot).

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
        elif checkpoint.config != loaded.config or not Tokenizer.same_vocabulary(checkpoint.tokenizer, loaded.tokenizer):
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
        req = self.scheduler.request(checkpoint, self.encoding, self._pe, self._causal, self._interventions)
        traced, exc, ms = self.scheduler.compute(req)  # another checkpoint: computed whole
        trace = traced[0] if traced is not None else None
        self._trace, self._trace_serial = trace, (traced[1] if traced is not None else None)
        self._tokens = display_tokens(checkpoint.tokenizer, self.encoding, trace.dropped) if trace is not None else []
        self.sig_model_changed.emit()
        self._finish(req, traced, exc, ms)

    def set_text(self, text: str) -> None:
        """Set the text as the editor stores it (:func:`~explorer.core.editor_text.as_editor_stores`:
        line breaks as ``\n``, ...); the trace follows (at once, or from the worker thread)."""
        text = as_editor_stores(text)
        if text != self.text:
            t0 = time.perf_counter()
            self._take(edited(self._checkpoint, self._tt, text), (time.perf_counter() - t0) * 1e3)

    def insert_tokens(self, index: int, ids) -> None:
        """Put token ids before token ``index`` of the encoding (its length: at the end), as they are:
        they are held, and the text gets their rendering (:func:`~explorer.core.held_tokens.spliced`)."""
        if self._checkpoint is not None:
            self.set_tokens(spliced(self.tokenizer, self._tt, index, index, ids))

    def set_tokens(self, tt: TokenText) -> None:
        """Make ``tt`` the text and its tokens as they are (a generated branch); the trace follows."""
        if tt != self._tt:
            self._take(tt, 0.0)

    def _take(self, tt: TokenText, tokenize_ms: float) -> None:
        self._tt, self.last_tokenize_ms = tt, tokenize_ms
        self.sig_text_changed.emit()
        self._request()

    def set_layer(self, layer: int) -> None:
        """Select a layer (clamped to the model's layers; 0 for a model without attention)."""
        n = getattr(self.config, "n_layers", 1)  # the model before attention has no layers of heads
        self._set_selection("_layer", max(0, min(int(layer), n - 1)))

    def set_head(self, head: int) -> None:
        """Select a head (clamped to the model's heads; 0 for a model without attention)."""
        n = getattr(self.config, "n_heads", 1)
        self._set_selection("_head", max(0, min(int(head), n - 1)))

    def set_position(self, position: int | None) -> None:
        """Pin a query row (clamped to the trace, or while it is computed to the tokens it will
        have), or None to release the pin (the panels then show the last row)."""
        pin = None
        if position is not None:
            n = self._trace.n_tokens if self._trace is not None else min(
                len(self.encoding), self.config.context_length if self.config else 0)
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
        self._set_option("_pe", bool(on))

    def set_causal(self, on: bool) -> None:
        """Apply the causal mask (True) or let every query see every key (False)."""
        self._set_option("_causal", bool(on))

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

    def request_panel(self, name: str) -> None:
        """Ask for the registered panel ``name`` to be shown (emits sig_panel_requested; the window shows it)."""
        self.sig_panel_requested.emit(str(name))

    def submit(self, requester: QObject, fn: JobFn, inputs: Any, on_result: Callable[[JobResult], None], *,
               passes: int = 1, name: str = "", inline_ms: float = FRAME_LEFT_MS) -> None:
        """Run a model computation for a panel: ``fn(checkpoint, inputs)``, result to ``on_result``
        on the GUI thread, at once or from the worker thread; the newest request of each requester
        (per ``name``) wins. The parameters are :meth:`Scheduler.submit
        <explorer.qt.scheduling.scheduler.Scheduler.submit>`'s. While :attr:`interventions` change the
        model, the checkpoint's model is a :class:`~model.core.interventions.WithInterventions`: its
        traces and forward passes run with them unless the job passes its own."""
        if self._checkpoint is not None:
            self.scheduler.submit(requester, self._checkpoint, self._interventions, fn, inputs, on_result,
                                  passes=passes, name=name, inline_ms=inline_ms)

    def set_paced_draw_ms(self, ms: float) -> None:
        """Report drawing that panels did one per event-loop turn, after a new trace or selection:
        ``last_draw_ms`` becomes that update's whole drawing time (after a trace, the part drawn
        while sig_trace_changed was emitted plus ``ms``); emits sig_timing_changed."""
        self.last_draw_ms = self._unpaced_draw_ms + ms
        self._unpaced_draw_ms = 0.0  # a later batch (a selection change) is counted on its own
        self.sig_timing_changed.emit()

    # ---- internals -----------------------------------------------------------------------------
    def _keeps_ids(self, checkpoint: Checkpoint) -> bool:
        """Whether the held token ids stay for ``checkpoint``: its vocabulary is the current one's."""
        return bool(self._tt.held) and self._checkpoint is not None and Tokenizer.same_vocabulary(
            checkpoint.tokenizer, self.tokenizer) and max(self.encoding.ids) < checkpoint.config.vocab_size

    def _dropped(self) -> int:
        """Tokens before the context window: the shown trace's, else what the text's will be."""
        if self._trace is not None:
            return self._trace.dropped
        return max(0, len(self.encoding) - (self.config.context_length if self.config else 0))

    def _set_selection(self, attr: str, value) -> None:
        if getattr(self, attr) != value:
            setattr(self, attr, value)
            self.sig_selection_changed.emit()
            settle_layouts()

    def _set_option(self, attr: str, on: bool) -> None:
        if getattr(self, attr) != on:
            setattr(self, attr, on)
            self.sig_options_changed.emit()
            self._request()

    def _window_tokens(self) -> int:
        """How many tokens of the text the model sees (after cropping to the context)."""
        return min(len(self.encoding), self.config.context_length) if self.config else 0

    def _request(self) -> None:
        if self._checkpoint is not None:
            request = self.scheduler.request(self._checkpoint, self.encoding, self._pe, self._causal,
                                             self._interventions)
            self.scheduler.run(request, self._finish)

    def _finish(self, req: TraceRequest, traced: tuple[Trace, int] | None, exc: Exception | None,
                model_ms: float) -> None:
        if req.gen <= self._shown_gen or req.checkpoint is not self._checkpoint:
            return  # never an older text's trace over a newer one's, nor another model's
        # A trace whose text was typed over while it ran is shown all the same (the newest traced): dropping
        # them showed nothing while someone typed faster than the model. The newest text's trace follows.
        self._shown_gen = req.gen
        trace, serial = traced if traced is not None else (None, None)
        if trace is not None:
            self.scheduler.measured(trace, model_ms)
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
        settle_layouts()
        self.last_draw_ms = self._unpaced_draw_ms = (time.perf_counter() - t0) * 1e3
        self.sig_timing_changed.emit()
