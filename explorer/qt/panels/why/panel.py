"""Why panel: why the model predicts a token at the selected position, and what changes it.

The numbers come from :func:`explorer.core.why.why_job` (:func:`model.explain.explain` and the
attention formula's what-ifs), run as a job of the session (:meth:`Session.submit`): on the worker
thread unless it fits in what the frame leaves after a keystroke (the scheduler's ``FRAME_LEFT_MS``). The target is the most likely
next token unless one was chosen (here, or by right-clicking a bar of the next-token panel).
Switching a head off changes the session's interventions: every panel follows. The what-if knobs
(1/√d_head, τ, the causal mask) are this panel's own: they re-run the model here and change
nothing elsewhere.
"""

from __future__ import annotations

import html
import time

import numpy as np
from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from explorer.core import why
from explorer.core.views import token_label
from explorer.qt import theme
from explorer.qt.widgets.explain_target import ExplainTarget
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.scheduling.scheduler import NOTICEABLE_MS
from explorer.qt.session import Session
from explorer.qt.widgets.not_applicable import NotApplicable
from explorer.qt.panels.why.bars import SourceBars
from explorer.qt.panels.why.patching import PatchingView
from explorer.qt.panels.why.views import HeadSwitches, LensTable, ScoreTermsView, WhatIfView, align_top, column
from explorer.qt.widgets.steady import LiveLabel, SteadyBox
from model.explain.report import resolve_target
from model.tokens.names import token_name

TOP_K = 5


class WhyPanel(RefreshWhenShown, QWidget):
    """Logit lens, attention against influence, heads switched off and what-ifs, the score's terms."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.target = ExplainTarget.of(session)
        self.result: why.WhyResult | None = None  # the explanation drawn
        self.request: why.WhyRequest | None = None  # what it answers
        self._drawn_tabs: set[int] = set()  # tabs drawn from ``result`` (the others when shown)
        self.drawn_trace = None  # the trace it explains (benchmarks wait for the newest)
        self.last_draw_ms = 0.0  # how long drawing the last result took, on the GUI thread
        self.last_job_ms = 0.0  # how long its job ran
        self.waiting = False
        self._build_header()
        self._build_tabs()
        self.gate = NotApplicable(self, "why")  # the model before attention: one sentence instead
        self.follow(session, self._on_session_model_changed)
        session.sig_interventions_changed.connect(self._on_session_interventions_changed)
        self.target.sig_target_changed.connect(self.schedule_refresh)
        self.target.sig_show_requested.connect(self._on_target_show_requested)
        self._on_session_model_changed()

    # ---- building -----------------------------------------------------------------------------
    def _build_header(self) -> None:
        self.target_box = QComboBox()
        self.target_box.setEditable(True)
        self.target_box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.target_box.setMinimumContentsLength(16)
        self.target_box.setToolTip("The token to explain: pick one of the most likely, or type a token and press "
                                   "Enter. The next-token panel's bars choose one too (right-click or Shift+click).")
        self.target_box.activated.connect(self._on_target_box_activated)
        self.target_box.lineEdit().returnPressed.connect(self._on_target_typed)
        self.top1_button = QPushButton("most likely")
        self.top1_button.setToolTip("explain the most likely next token again")
        self.top1_button.clicked.connect(lambda: self.target.set_target(None))
        self.status = QLabel()
        self.summary = align_top(LiveLabel(), plain=True)  # the sentences follow every keystroke
        self.ablation = align_top(LiveLabel(), plain=True)
        self.restore_button = QPushButton("Restore all heads")
        self.restore_button.clicked.connect(self.restore_all)

    def _build_tabs(self) -> None:
        self.lens = LensTable()
        self.bars = SourceBars()
        self.bars.setMinimumHeight(220)
        self.bars.scene().sigMouseMoved.connect(self._on_bars_mouse_moved)
        self.readout = QLabel(" ")
        self.attention_label = align_top(LiveLabel())
        self.scope, self.disagree, self.sink, self.sums = (align_top(LiveLabel(), plain=True) for _ in range(4))
        self.scope.setVisible(False)
        bars = QHBoxLayout()
        bars.setSpacing(0)
        bars.addWidget(self.bars, 1)
        bars.addWidget(self.bars.scroll)
        influence = column(align_top(QLabel(
            "<b>Logit lens</b>: the next-token guess the residual stream holds after each stage, through the final "
            "norm and the unembedding (the last stage is the model's output).")), self.lens, self.attention_label,
            self.scope, (bars, 1), self.readout, self.disagree, self.sink, self.sums)
        self.heads = HeadSwitches()
        self.heads.sig_head_toggled.connect(self.toggle_head)
        self.tau_box = QDoubleSpinBox()
        self.tau_box.setRange(0.05, 20.0)
        self.tau_box.setSingleStep(0.25)
        self.tau_box.setValue(2.0)
        self.tau_box.setToolTip("τ divides every score before the softmax: τ > 1 flattens the weights, τ < 1 sharpens")
        self.tau_box.valueChanged.connect(self.schedule_refresh)
        self.what_ifs = WhatIfView()
        tau_row = QHBoxLayout()
        tau_row.addWidget(QLabel("what if the scores were divided by τ ="))
        tau_row.addWidget(self.tau_box)
        tau_row.addStretch(1)
        knobs = column(align_top(QLabel(
            "<b>Switch heads off</b> (their output zeroed before W_O): every panel follows, the status bar lists "
            "them, and they stay while you type. Each button shows the head's direct contribution to the target's "
            "logit. Also from the attention panel's all-heads grid (right-click or Ctrl+click a tile).")),
            self.heads, self.restore_button, align_top(QLabel(
                "<b>What if</b> the attention formula were different: each row re-runs the model here with one "
                "change (the other panels keep the model as it is).")), tau_row, (self.what_ifs, 1))
        self.terms = ScoreTermsView()
        self.tabs = QTabWidget()
        self.tabs.addTab(influence, "Attention vs influence")
        self.tabs.addTab(knobs, "Heads and what-ifs")
        self.tabs.addTab(self.terms, "Score terms")
        self.patching = PatchingView(self.session)  # its own job: runs only while its tab is shown
        self.tabs.addTab(self.patching, "Patching")
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)
        header = QHBoxLayout()
        self.status.setMinimumWidth(self.status.fontMetrics().horizontalAdvance("(00000 ms)"))
        for w in (QLabel("explain"), self.target_box, self.top1_button, SteadyBox(self.status)):
            header.addWidget(w)  # the job's time changes the status on every keystroke: in a SteadyBox
        header.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(header)
        layout.addWidget(self.summary)
        layout.addWidget(self.ablation)
        layout.addWidget(self.tabs, 1)

    # ---- choosing -------------------------------------------------------------------------------
    def token_name(self, token_id: int) -> str:
        """The display text of a token id (``#id`` without a tokenizer)."""
        return token_name(self.session.tokenizer, token_id)

    def _on_target_box_activated(self, index: int) -> None:
        self.target.set_target(self.target_box.itemData(index))

    def _on_target_typed(self) -> None:
        """A token typed in the target box: as the tokenizer writes it, one token of text, or #ID."""
        s = self.session
        try:
            tid = resolve_target(self.target_box.currentText().strip(), s.tokenizer, s.config.vocab_size)
        except ValueError as exc:
            self.status.setText(str(exc).replace("--target ", ""))
            self.status.setStyleSheet(theme.note_style(self))
            return
        self.target.set_target(tid)

    def toggle_head(self, layer: int, head: int) -> None:
        """Switch head (layer, head) off, or back on, for every panel (the session's interventions)."""
        self.session.set_interventions(why.toggled_head(self.session.interventions, layer, head))

    def restore_all(self) -> None:
        """Every head back on."""
        self.session.set_interventions(None)

    def _on_target_show_requested(self) -> None:
        """The first tab forward (the next-token panel asked to explain a token; the window has
        brought this panel's dock forward: :meth:`ExplainTarget.explain`)."""
        self.tabs.setCurrentIndex(0)

    def _on_session_model_changed(self) -> None:
        if not self.gate.applies(self.session.config):
            return
        cfg = self.session.config
        self.heads.set_shape(*((cfg.n_layers, cfg.n_heads) if cfg else (0, 0)))
        self.result = None
        self._on_session_interventions_changed()
        self.schedule_refresh()

    def _on_session_interventions_changed(self) -> None:
        if not self.gate.applies(self.session.config):
            return
        iv = self.session.interventions
        contributions = why.head_contributions(self.result.explanation) if self.result is not None else None
        self.heads.show_heads(contributions, iv.ablate)
        self.restore_button.setEnabled(bool(iv.ablate))

    # ---- computing ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Ask for the explanation of the session's trace at the selected position (drawn when it arrives)."""
        if not self.gate.applies(self.session.config):
            return
        s = self.session
        pos = s.selected_position()
        if s.trace is None or pos is None or s.model is None:
            self._cancel()
            self._clear("No tokens yet: type some text.")
            return
        if not np.isfinite(s.trace.logits[pos]).all():
            self._cancel()
            self._clear(f"The logits after position {pos} are not numbers (NaN or inf): nothing to explain.")
            return
        head = min(s.head, s.config.n_heads - 1)
        what_ifs = self.tabs.currentIndex() == 1  # three more traces: only while they are shown
        request = why.WhyRequest(s.trace, pos, self.target.target, head, self.tau_box.value(), TOP_K,
                                 tuple(s.tokens), what_ifs, should_stop=s.job_superseded)
        S = pos + 1 if s.trace.causal else s.trace.n_tokens
        passes = why.job_passes(s.config, S, s.trace.n_tokens, bool(s.interventions.ablate), what_ifs)
        self.waiting = True
        s.submit(self, why.why_job, request, self._on_result, passes=passes)
        if self.waiting and s.is_slow(passes, NOTICEABLE_MS):  # a note for a few ms would only flash
            self.status.setText("computing…")
            self.status.setStyleSheet("")

    def _cancel(self) -> None:
        self.session.cancel(self)

    def _on_result(self, result: JobResult) -> None:
        self.waiting = False
        if result.error:
            self.status.setText(f"could not explain: {result.error}")
            self.status.setStyleSheet(theme.note_style(self))
            return
        self.status.setText(f"({result.ms:.0f} ms)")
        self.last_job_ms = result.ms
        self.status.setStyleSheet("")
        self.result, self.request = result.value, result.inputs
        t0 = time.perf_counter()
        self._draw(result.value, result.inputs)
        self.drawn_trace = result.inputs.trace
        self.last_draw_ms = (time.perf_counter() - t0) * 1e3

    # ---- drawing -------------------------------------------------------------------------------------
    def _draw(self, r: why.WhyResult, req: why.WhyRequest) -> None:
        ex, tokens, name = r.explanation, list(req.tokens), self.token_name
        self._fill_target_box(ex)
        self.summary.setText(why.summary(ex, tokens, name))
        describe = req.trace.interventions.describe() if req.trace.interventions is not None else ""
        self.ablation.setText(why.plain_note(r, name, describe))
        self.ablation.setVisible(r.plain is not None)
        self._on_session_interventions_changed()
        self._drawn_tabs = set()
        self._draw_tab(self.tabs.currentIndex())

    def _on_tabs_current_changed(self, index: int) -> None:
        if self.result is None:
            return
        if index == 1 and not self.result.what_ifs:
            self.refresh()  # the what-ifs are computed only while their tab is shown
        else:
            self._draw_tab(index)

    def _draw_tab(self, index: int) -> None:
        """Draw one tab from the result (each tab once per result: hidden tabs are drawn when shown)."""
        r, req = self.result, self.request
        if index in self._drawn_tabs or r is None:
            return
        self._drawn_tabs.add(index)
        if index == 0:
            self._draw_influence(r.explanation, list(req.tokens))
        elif index == 1:
            self._draw_what_ifs(r, list(req.tokens))
        elif index == 2:
            self._draw_terms(r.explanation, req)

    def _draw_influence(self, ex, tokens: list[str]) -> None:
        name = self.token_name
        positional = self.session.config.positional
        sequential = self.session.config is None or self.session.config.block_layout == "sequential"
        columns = [(why.stage_title(st.stage, positional, sequential), st.kl_to_final,
                    [(t, name(t), p) for t, p in st.top_k], st.target_prob) for st in ex.logit_lens]
        self.lens.show_stages(columns, ex.target_id)
        loo = ex.leave_one_out if ex.leave_one_out is not None else np.full(ex.n_sources, np.nan)
        rows = why.shown_sources(ex)
        values = np.stack([why.mean_attention(ex), ex.dla.sources, loo])[:, rows]
        marked = set(ex.disagreements())
        missing = (f"only the {ex.n_leave_one_out:,} sources with most attention or direct effect are hidden at "
                   "this length" if ex.leave_one_out_capped else "")
        self.bars.show_sources([f"{j} {token_label(tokens[j])}" for j in rows], values,
                               [r for r, j in enumerate(rows) if j in marked], int(np.searchsorted(rows, ex.position)),
                               missing)
        scope = " ".join(t for t in (why.leave_one_out_scope(ex), why.rows_note(ex, rows)) if t)
        self.scope.setText(scope)
        self.scope.setVisible(bool(scope))
        self.attention_label.setText(
            f"<b>Attention versus influence</b> on the logit of {html.escape(repr(name(ex.target_id)), quote=False)}, per earlier "
            f"token j: {why.attention_label(ex)}; its direct contribution through every head (DLA); and what hiding "
            "it from every query in every layer changes (leave-one-out).")
        self.disagree.setText(why.disagreement_note(ex, tokens))
        self.sink.setText(why.sink_paragraph(ex, tokens, name))
        self.sums.setText(why.sum_check(ex))

    def _fill_target_box(self, ex) -> None:
        final = ex.logit_lens[-1].top_k
        with QSignalBlocker(self.target_box):
            self.target_box.clear()
            self.target_box.addItem(f"most likely: {token_label(self.token_name(final[0][0]), 16)}", None)
            for t, p in final:
                self.target_box.addItem(f"{token_label(self.token_name(t), 16)}  {p:.3f}", t)
            chosen = self.target.target
            if chosen is not None and chosen not in [t for t, _ in final]:
                self.target_box.addItem(f"{token_label(self.token_name(chosen), 16)}  {ex.prob:.3f}", chosen)
            self.target_box.setCurrentIndex(max(0, self.target_box.findData(chosen)) if chosen is not None else 0)

    def _draw_what_ifs(self, r: why.WhyResult, tokens: list[str]) -> None:
        s, i = self.session, r.explanation.position
        layer = min(s.layer, s.config.n_layers - 1)
        head = min(s.head, s.config.n_heads - 1)
        rows, curves = [], []
        for w in r.what_ifs:
            top = ", ".join(f"{token_label(self.token_name(t), 10)} {p:.3f}" for t, p in w.top_k[:3])
            entropy = why.entropy_rows(w, layer, head)
            rows.append((w.knob, w.mean_entropy, float(entropy[i]), w.target_prob, top))
            curves.append(entropy)
        title = f"entropy of each query row's attention weights, layer {layer} head {head} (bits)"
        self.what_ifs.show_what_ifs(rows, curves, tokens, title, i)

    def _draw_terms(self, ex, req: why.WhyRequest) -> None:
        if ex.score_terms is None:
            self.terms.show_note(ex.score_terms_note, req.head)
            return
        block = req.trace.blocks[0]
        scores = block.attn_scores[req.head].astype(np.float64)
        self.terms.show_terms(ex.score_terms, scores, list(req.tokens), req.head, block.attn_scale,
                              req.trace.blocks[0].q.shape[-1])

    def _clear(self, message: str) -> None:
        self.result = self.request = self.drawn_trace = None
        self._drawn_tabs = set()
        self.summary.setText(message)
        self.ablation.setVisible(False)
        self.status.setText("")
        self.lens.setColumnCount(0)
        self.bars.show_sources([], np.zeros((3, 0)), [], -1)
        for label in (self.scope, self.disagree, self.sink, self.sums, self.attention_label):
            label.setText("")
        self.scope.setVisible(False)
        self.what_ifs.show_what_ifs([], [], [], "")
        self.terms.clear()

    def _on_bars_mouse_moved(self, pos) -> None:
        r = self.bars.row_at(pos)
        text = self.bars.describe_row(r) if r is not None else ""
        self.readout.setText(text or " ")
        if self.bars.toolTip() != text:
            self.bars.setToolTip(text)
