"""Generate panel: continue the text with the model, see what it had to choose from, fork, switch branches.

Generate (Ctrl+G) appends N tokens: greedy (the most likely each time), or sampled with a
temperature, top-k and top-p from a seed that is shown and can be edited, so a run can be repeated.
The tokens stream in as they come (one job per token, :mod:`explorer.qt.generation`); the same
button stops. Selecting a generated token (a green chip, or its row in a map) shows the
alternatives the model had when it chose it, with their probabilities; clicking one forks: a new
branch takes that token and continues from it, and the branch list switches between them.
"""

from __future__ import annotations

import html
import math

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from explorer.core.views import token_label
from explorer.qt.widgets.flow_layout import FlowLayout
from explorer.qt.generation import Generator
from explorer.qt.session import Session
from explorer.qt.settings import (
    GENERATE_MODE, GENERATE_N, GENERATE_SEED, GENERATE_TEMPERATURE, GENERATE_TOP_K, GENERATE_TOP_P, Setting,
)
from model.core.architectures import has_attention
from model.generate import Sampling
from model.tokens.names import token_name

PICK = "Select a generated token (a green chip, or its row in a map) to see what the model had to choose from."


class GeneratePanel(QWidget):
    """Generation controls, the branch list, and the alternatives of the selected generated token."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.generator = Generator.of(session)
        self._build_controls()
        self._build_layout()
        self.generator.sig_story_changed.connect(self.refresh)
        self.generator.sig_running_changed.connect(self._on_running_changed)
        session.sig_selection_changed.connect(self._show_selected)
        session.sig_trace_changed.connect(self._show_selected)
        session.sig_model_changed.connect(self._on_session_model_changed)
        self._on_mode_changed()
        self._on_session_model_changed()

    def _build_controls(self) -> None:
        self.button = QPushButton("Generate ▶")
        self.button.setToolTip("append N tokens chosen by the model (Ctrl+G); press again to stop")
        self.button.clicked.connect(self.toggle)
        self.n_box = _spin_box(QSpinBox(), GENERATE_N)
        self.n_box.setToolTip("how many tokens to add")
        self.mode = QComboBox()
        self.mode.addItems(["greedy", "sample"])
        self.mode.setToolTip("greedy: always the most likely token; sample: draw from the distribution below")
        self.mode.currentIndexChanged.connect(self._on_mode_changed)
        self.temperature_box = _spin_box(QDoubleSpinBox(), GENERATE_TEMPERATURE)
        self.temperature_box.setSingleStep(0.1)
        self.temperature_box.setToolTip("divides the logits before the softmax: below 1 sharper, above 1 flatter")
        self.top_k_box = QSpinBox()
        self.top_k_box.setSpecialValueText("all")
        self.top_k_wanted = GENERATE_TOP_K.default  # what was chosen (0: all); the box shows it clamped to the model's vocabulary
        self.top_k_box.valueChanged.connect(self._on_top_k_changed)
        self.top_k_box.setToolTip("draw only from the k most likely tokens ('all': no limit)")
        self.top_p_box = _spin_box(QDoubleSpinBox(), GENERATE_TOP_P)
        self.top_p_box.setSingleStep(0.05)
        self.top_p_box.setToolTip("nucleus: draw only from the smallest set of most likely tokens whose probability "
                                  "reaches p (1: no limit)")
        self.seed_box = _spin_box(QSpinBox(), GENERATE_SEED)
        self.seed_box.setToolTip("the seed of the draws: the same seed and settings give the same text again")
        self.new_seed = QPushButton("new seed")
        self.new_seed.clicked.connect(lambda: self.seed_box.setValue(int(np.random.default_rng().integers(GENERATE_SEED.hi))))
        self.status = QLabel()
        self.branches = QComboBox()
        self.branches.setToolTip("the continuations made from this text: choose one to show it")
        self.branches.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.branches.setMinimumContentsLength(8)  # the list shows them whole; a narrow dock cuts the box
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.branches.activated.connect(self.generator.switch)
        self.detail = QLabel(PICK)
        self.detail.setWordWrap(True)
        self.detail.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        self.detail.linkActivated.connect(self._on_detail_link)

    def _build_layout(self) -> None:
        controls = QWidget()  # the controls wrap onto more lines in a narrow dock
        flow = FlowLayout(controls)
        flow.setContentsMargins(0, 0, 0, 0)
        flow.addWidget(self.button)
        flow.addWidget(_labelled("N", self.n_box))
        flow.addWidget(self.mode)
        self._sampling_widgets = [_labelled(label, box) for label, box in (
            ("temperature", self.temperature_box), ("top-k", self.top_k_box), ("top-p", self.top_p_box),
            ("seed", self.seed_box))] + [self.new_seed]
        for w in self._sampling_widgets:
            flow.addWidget(w)
        story = QHBoxLayout()
        self.branch_label = QLabel("branch")
        story.addWidget(self.branch_label)
        story.addWidget(self.branches, 1)
        story.addWidget(self.status, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(controls)
        layout.addLayout(story)
        layout.addWidget(self.detail)
        layout.addStretch(1)

    # ---- settings and controls --------------------------------------------------------------------
    def sampling(self) -> Sampling:
        """How the next run chooses its tokens, from the controls."""
        if self.mode.currentText() == "greedy":
            return Sampling()
        top_p = self.top_p_box.value()
        return Sampling(self.temperature_box.value(), self.top_k_box.value() or None, top_p if top_p < 1 else None,
                        self.seed_box.value())

    def _on_mode_changed(self, *_) -> None:
        """The sampling settings are shown (and used) only when sampling."""
        sampled = self.mode.currentText() == "sample"
        for w in self._sampling_widgets:
            w.setVisible(sampled)

    def _on_session_model_changed(self) -> None:
        cfg = self.session.config
        with QSignalBlocker(self.top_k_box):  # a smaller vocabulary clamps the box, not the choice
            self.top_k_box.setMaximum(cfg.vocab_size if cfg else 0)
            self.top_k_box.setValue(self.top_k_wanted)
        self.refresh()

    def _on_top_k_changed(self, k: int) -> None:
        self.top_k_wanted = k

    def toggle(self) -> None:
        """Generate (Ctrl+G), or stop the run in progress."""
        if self.generator.running:
            self.generator.stop()
        else:
            self.generator.start(self.n_box.value(), self.sampling())

    def _on_running_changed(self, running: bool) -> None:
        self.button.setText("Stop ■" if running else "Generate ▶")
        self.branches.setEnabled(not running)

    # ---- showing the story -------------------------------------------------------------------------
    def token_name(self, token_id: int) -> str:
        """The display name of a token id (``#id`` without a vocabulary)."""
        return token_name(self.session.tokenizer, token_id)

    def refresh(self) -> None:
        """The status, the branch list and the selected token's alternatives."""
        g = self.generator
        self.status.setText(g.status)
        story = g.story
        items = [story.describe(i, self.token_name) for i in range(len(story.branches))] if story else []
        if items != [self.branches.itemText(i) for i in range(self.branches.count())]:
            self.branches.blockSignals(True)
            self.branches.clear()
            self.branches.addItems(items)
            self.branches.blockSignals(False)
        if story is not None and self.branches.currentIndex() != story.current:
            self.branches.setCurrentIndex(story.current)
        self.branches.setEnabled(len(items) > 1 and not g.running)
        for w in (self.branch_label, self.branches):
            w.setVisible(story is not None)
        self._show_selected()

    def _selected_index(self) -> int | None:
        """Index into the session's encoding of the selected token, or None."""
        s = self.session
        row = s.selected_position()
        return None if row is None or s.trace is None else row + s.trace.dropped

    def _show_selected(self) -> None:
        index = self._selected_index()
        found = self.generator.step_at(index) if index is not None else None
        if found is None:
            self.detail.setText(html.escape(PICK))
            return
        step, g = found
        self.detail.setText(self._describe(index, step, g) + " " + self._alternatives_html(g))

    def _describe(self, index: int, step: int, g) -> str:
        """What the model had when it chose the token at ``index`` (step ``step`` of the branch)."""
        s, name = self.session, token_label(self.token_name(g.token_id))
        story = self.generator.story
        head = f"<b>{html.escape(name)}</b> (position {index - s.trace.dropped}, token {step + 1} of branch " \
               f"{story.current + 1}) was "
        if g.forked:
            how = f"chosen by you from the alternatives (the model's softmax gave it {_p(g.model_prob)})."
        elif g.sampling.greedy:
            how = f"the most likely token (greedy): the model's softmax gave it {_p(g.model_prob)}."
        else:
            sp = g.sampling
            how = (f"drawn with probability {_p(g.prob)} from the sampling distribution (temperature "
                   f"{sp.temperature:g}{f', top-k {sp.top_k}' if sp.top_k else ''}"
                   f"{f', top-p {sp.top_p:g}' if sp.top_p else ''}, seed {sp.seed}); the model's own softmax "
                   f"gave it {_p(g.model_prob)}.")
        row = index - 1 - s.trace.dropped
        ctx = s.config.context_length
        if row < 0:
            saw = "What it saw has left the context window."
        else:
            saw = (f"It saw the tokens before it: <a href='row'>query row {row}</a> of the attention maps."
                   if has_attention(s.config) else
                   f"It saw the tokens before it: <a href='row'>row {row}</a>, a window of the last {ctx} tokens.")
            if max(0, index - ctx) != s.trace.dropped:
                saw += f" The window has moved since: it then saw tokens {max(0, index - ctx)}–{index - 1}."
        alts = "Its alternatives (softmax probabilities; click one to fork a branch from it):"
        return f"{head}{html.escape(how, quote=False)} {saw}<br>{alts}"

    def _alternatives_html(self, g) -> str:
        """The alternatives it had, as links that fork (the chosen one in bold, not a link)."""
        parts = []
        for token_id, p in g.alternatives():
            name = html.escape(token_label(self.token_name(token_id), 14))
            if token_id == g.token_id:
                parts.append(f"<b>{name} {p:.3f}</b>")
            elif self.generator.running:
                parts.append(f"{name} {p:.3f}")
            else:
                parts.append(f"<a href='fork:{int(token_id)}'>{name}</a> {p:.3f}")
        return " · ".join(parts)

    def _on_detail_link(self, link: str) -> None:
        index = self._selected_index()
        if index is None:
            return
        if link == "row":
            self.session.set_position(index - 1 - self.session.trace.dropped)
            return
        found = self.generator.step_at(index)
        if link.startswith("fork:") and found is not None:
            self.generator.fork(found[0], int(link[5:]), self.n_box.value(), self.sampling())

    def save_settings(self, settings) -> None:
        """Remember N, the mode and the sampling settings (the seed too: a run can be repeated)."""
        for setting, value in ((GENERATE_N, self.n_box.value()), (GENERATE_MODE, self.mode.currentIndex()),
                               (GENERATE_TEMPERATURE, self.temperature_box.value()),
                               (GENERATE_TOP_K, self.top_k_wanted), (GENERATE_TOP_P, self.top_p_box.value()),
                               (GENERATE_SEED, self.seed_box.value())):
            setting.write(settings, value)

    def restore_settings(self, settings) -> None:
        """Restore them; a damaged value gives the default (:mod:`explorer.qt.settings`)."""
        self.n_box.setValue(GENERATE_N.read(settings))
        self.mode.setCurrentIndex(GENERATE_MODE.read(settings))
        self.temperature_box.setValue(GENERATE_TEMPERATURE.read(settings))
        self.top_k_wanted = GENERATE_TOP_K.read(settings)
        with QSignalBlocker(self.top_k_box):
            self.top_k_box.setValue(self.top_k_wanted)  # clamped to the model's vocabulary, if one is open
        self.top_p_box.setValue(GENERATE_TOP_P.read(settings))
        self.seed_box.setValue(GENERATE_SEED.read(settings))


def _spin_box(box, setting: Setting):
    """``box`` with the setting's range and default."""
    box.setRange(setting.lo, setting.hi)
    box.setValue(setting.default)
    return box


def _labelled(text: str, box: QWidget) -> QWidget:
    """A label and its box, kept together on one line of the flow."""
    pair = QWidget()
    row = QHBoxLayout(pair)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(3)
    row.addWidget(QLabel(text))
    row.addWidget(box)
    return pair


def _p(x: float) -> str:
    return "?" if x is None or not math.isfinite(x) else f"{x:.3f}"
