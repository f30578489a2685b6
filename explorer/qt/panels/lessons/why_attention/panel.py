"""Why attention? The model before attention beside the transformer, on the user's own text.

The lesson runs the two shipped models (the default transformer and the model before attention,
trained the same way: :data:`explorer.core.defaults.DEFAULT_CHECKPOINT`, :data:`~explorer.core.defaults.BEFORE_ATTENTION`)
on the session's text, whatever model the session shows; its arithmetic is
:mod:`explorer.core.lessons.why_attention` (one session job), its sentences
:mod:`explorer.core.lessons.why_attention_text`.
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, QSize
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.core.defaults import BEFORE_ATTENTION, DEFAULT_CHECKPOINT
from explorer.core.lessons import why_attention as lesson
from explorer.core.lessons import why_attention_text as text
from explorer.core.lessons.why_attention import TRANSFORMER, WINDOW
from explorer.core.views import token_label
from explorer.qt import theme
from explorer.qt.panels.lessons.why_attention.views import (
    BlocksView, ParameterPlot, PhraseTable, ValidationTable, sentence_label,
)
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from model.checkpoint import CheckpointError

LABELS = {TRANSFORMER: "the transformer", WINDOW: "the model before attention"}  # in sentences
SHORT = {TRANSFORMER: "transformer", WINDOW: "before attention"}  # in the tables' first column
PASSES = 8  # about how many forward passes the lesson's job makes (six traces and two of one token)
DEFAULT_PHRASE = 3  # tokens at the end of the text that make the phrase


class WhyAttentionPanel(RefreshWhenShown, QWidget):
    """The chapter's argument for attention in four comparisons of two real models.

    Attributes
    ----------
    parts : dict of str to QWidget
        What a tour can point at: ``"window-blocks"`` (the two blocks of W_in), ``"shared"`` (the
        transformer's W_Q, W_K, W_V), ``"blocks"`` (both), ``"phrase"`` (the early/late table and its
        sentence), ``"params"`` (the parameter curve), ``"val-loss"`` (the validation losses).
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.pair: lesson.Pair | None = None
        self.lesson: lesson.Lesson | None = None  # the result drawn
        self._token_id: int | None = None  # the user's choice, kept while the text has it
        self._build_controls()
        self.blocks = BlocksView()
        self.phrase = PhraseTable()
        self.params = ParameterPlot()
        self.val = ValidationTable()
        self.sentences = {key: sentence_label() for key in ("blocks", "phrase", "params", "val")}
        self._build_layout()
        self.follow(session)
        session.sig_text_changed.connect(self.schedule_refresh)
        self.schedule_refresh()  # the two models are opened when the lesson is first shown, not at start-up

    def _build_controls(self) -> None:
        self.header = sentence_label()
        self.token_box = QComboBox()
        self.token_box.setToolTip("a token of your text: the weights each model meets it with")
        self.place_a, self.place_b = QSpinBox(), QSpinBox()
        for box in (self.place_a, self.place_b):
            box.setToolTip("a place in the window: 0 is the oldest token, the last place the newest (the one the "
                           "prediction follows)")
            box.valueChanged.connect(self.refresh)
        self.phrase_length = QSpinBox()
        self.phrase_length.setRange(1, 8)
        self.phrase_length.setValue(DEFAULT_PHRASE)
        self.phrase_length.setToolTip("the phrase: this many tokens at the end of your text")
        self.token_box.activated.connect(self._on_token_box_activated)
        self.phrase_length.valueChanged.connect(self.refresh)
        self.message = QLabel()  # why nothing is shown (no text, a missing file)
        self.message.setWordWrap(True)

    def _build_layout(self) -> None:
        controls = QHBoxLayout()
        for label, widget in (("token", self.token_box), ("at places", self.place_a), ("and", self.place_b),
                              ("phrase: the last", self.phrase_length)):
            controls.addWidget(QLabel(label))
            controls.addWidget(widget)
        controls.addWidget(QLabel("tokens of your text"))
        controls.addStretch(1)
        left = QVBoxLayout()
        for widget in (self.phrase, self.sentences["phrase"], self.val, self.sentences["val"]):
            left.addWidget(widget)
        left.addStretch(1)
        right = QVBoxLayout()
        right.addWidget(self.params)
        right.addWidget(self.sentences["params"])
        right.addStretch(1)
        bottom = QHBoxLayout()
        bottom.addLayout(left, 1)
        bottom.addLayout(right, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addLayout(controls)
        layout.addWidget(self.message)
        layout.addWidget(self.blocks, 1)  # the maps take what the rest leaves
        layout.addWidget(self.sentences["blocks"])
        layout.addLayout(bottom)
        self.sentences["blocks"].setStyleSheet(theme.soft_box_style(self))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        """As high as the wrapped sentences need at the panel's width: the dock scrolls (panel_scroll)
        rather than draw a sentence over a plot."""
        hint = super().minimumSizeHint()
        # Qt's minimum for the two columns of wrapped sentences came out 20-30 px short at 905 px wide
        # (the plot's sentence was drawn over its axis): two lines of slack.
        need = self.layout().totalMinimumHeightForWidth(self.width()) + 2 * self.fontMetrics().lineSpacing()
        return QSize(hint.width(), max(hint.height(), need))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # the sentences' height follows the width

    @property
    def parts(self) -> dict[str, QWidget]:
        return {"blocks": self.blocks, "window-blocks": self.blocks.window_box, "shared": self.blocks.shared_box,
                "phrase": self.phrase, "params": self.params, "val-loss": self.val}

    def choose(self, token_id: int | None = None, places: tuple[int, int] | None = None,
               phrase_length: int | None = None) -> None:
        """Set what the lesson shows, as the controls do (for a tour step): a token of the text (by id,
        ignored when the text lacks it), two places of the window, the phrase's length; then recompute."""
        if self._ensure_pair() is None:
            return
        if token_id is not None and token_id in self.pair.encode(self.session.text):
            self._token_id = int(token_id)
            self._place_token(self._token_id)
        for box, value in zip((self.place_a, self.place_b, self.phrase_length), (*(places or (None, None)), phrase_length)):
            if value is not None:
                with QSignalBlocker(box):
                    box.setValue(int(value))
        self.refresh()

    # ---- inputs -------------------------------------------------------------------------------------
    def _ensure_pair(self) -> lesson.Pair | None:
        """The two shipped models, opened the first time the lesson is shown (None, said why, when not)."""
        if self.pair is None:
            try:
                self.pair = lesson.open_pair(DEFAULT_CHECKPOINT, BEFORE_ATTENTION)
            except (CheckpointError, ValueError) as exc:
                self.message.setText(f"The lesson needs the two shipped models: {exc}")
                return None
            self.header.setText(f"Two real models trained on the same text with the same {self.pair.transformer.tokenizer.vocab_size:,}-word "
                                f"vocabulary: {self.pair.transformer.name} (a transformer, {self.pair.transformer.model.n_params():,} "
                                f"parameters) and {self.pair.window.name} (the model before attention, "
                                f"{self.pair.window.model.n_params():,}), on the last {self.pair.context_length} tokens of your text.")
            for box in (self.place_a, self.place_b):
                box.setRange(0, self.pair.context_length - 1)
        return self.pair

    def _on_token_box_activated(self, index: int) -> None:
        self._token_id = self.token_box.itemData(index)
        self._place_token(self._token_id)
        self.refresh()

    def _fill_tokens(self, ids: tuple[int, ...]) -> int:
        """The text's tokens in the box (each once, in order); returns the token to show."""
        distinct = list(dict.fromkeys(ids))
        if self._token_id not in distinct:
            self._token_id = None
        chosen = self._token_id if self._token_id is not None else ids[-1]
        with QSignalBlocker(self.token_box):
            self.token_box.clear()
            for tid in distinct:
                self.token_box.addItem(token_label(self.pair.name(tid), 16), tid)
            self.token_box.setCurrentIndex(distinct.index(chosen))
        return chosen

    def _place_token(self, token_id: int) -> None:
        """Places a and b for a newly chosen token: its last place in the window, and half a window away."""
        ids = self.pair.encode(self.session.text)
        n = self.pair.context_length
        a = n - len(ids) + max(i for i, t in enumerate(ids) if t == token_id)
        for box, value in ((self.place_a, a), (self.place_b, a - n // 2 if a >= n // 2 else a + n // 2)):
            with QSignalBlocker(box):
                box.setValue(value)

    # ---- computing and drawing ------------------------------------------------------------------------
    def refresh(self) -> None:
        """Ask for the four comparisons on the session's text (drawn when they arrive)."""
        pair = self._ensure_pair()
        if pair is None:
            return
        ids = pair.encode(self.session.text)
        if not ids:
            self.session.cancel(self)
            self.message.setText("Type a text: the lesson runs both models on it.")
            self.blocks.clear()
            return
        first = self.token_box.count() == 0
        token = self._fill_tokens(ids)
        if first:
            self._place_token(token)
        self.message.setText("")
        request = lesson.LessonRequest(pair, ids, token, (self.place_a.value(), self.place_b.value()),
                                       self.phrase_length.value())
        self.session.submit(self, lesson.lesson_job, request, self._on_lesson, passes=PASSES)

    def _on_lesson(self, result: JobResult) -> None:
        if result.error:
            self.message.setText(f"The lesson failed: {result.error}")
            return
        self.lesson = result.value
        pair, name = result.inputs.pair, result.inputs.pair.name
        w, t = pair.window.config, pair.transformer.config
        self.blocks.show_blocks(self.lesson.blocks, name(self.lesson.blocks.token_id))
        self.sentences["blocks"].setText(text.blocks_sentence(self.lesson.blocks, name, w.d_model, w.d_mlp, t.d_head))
        self.phrase.show_shift(self.lesson.shift, name, SHORT)
        self.sentences["phrase"].setText(text.phrase_sentence(self.lesson.shift, name, LABELS))
        real = {key: ck.model.n_params() for key, ck in ((WINDOW, pair.window), (TRANSFORMER, pair.transformer))}
        self.params.show_curve(self.lesson.curve, real)
        self.sentences["params"].setText(text.parameter_sentence(self.lesson.curve, LABELS, WINDOW, TRANSFORMER))
        rows, val_text = self.lesson.validation
        self.val.show_rows(rows, SHORT)
        self.sentences["val"].setText(text.validation_sentence(rows, val_text, LABELS))
