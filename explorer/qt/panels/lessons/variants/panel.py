"""Variants panel: the book chapter's four attention variants on the current tokens.

The numbers come from :func:`explorer.core.lessons.variants.all_variants`, run as a session job
(:meth:`Session.submit`: on the worker thread when the model is slow, since it is proportional to
T² per head); this file only draws the selected variant's scores, weights and outputs, and the
line saying how it differs from the model's own computation. A source switch shows the chapter's
own worked example instead (:class:`explorer.qt.panels.lessons.variants.book.BookView`).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget

from explorer.core.lessons import book_views
from explorer.core.lessons import variants
from explorer.core.views import axis_labels, masked_as_nan, symmetric_levels, token_label
from explorer.qt import theme
from explorer.qt.plots.heatmap import DIVERGING, SEQUENTIAL, Heatmap, dimension_title
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.panels.lessons.variants.book import BookView
from explorer.qt.session import Session
from explorer.qt.widgets.not_applicable import NotApplicable
from explorer.qt.widgets.steady import LiveLabel


def side_by_side(mats: np.ndarray) -> np.ndarray:
    """(n, T, T) -> (T, n*(T+1)-1): the matrices next to each other, a blank (NaN) column between."""
    n, T, _ = mats.shape
    out = np.full((T, n * (T + 1) - 1), np.nan, dtype=np.float32)
    for h in range(n):
        out[:, h * (T + 1):h * (T + 1) + T] = mats[h]
    return out


def _side_labels(n: int, keys: list[str]) -> list[str]:
    labels = []
    for h in range(n):
        labels += [f"h{h}:{k}" if n > 1 else k for k in keys] + ([""] if h < n - 1 else [])
    return labels


SOURCES = {"model": "the loaded model", "book": "the book's example"}


class VariantsPanel(RefreshWhenShown, QWidget):
    """A selector for the four variants; each shows scores, weights, outputs and its difference line.

    The source switch picks the loaded model (the current tokens) or the book's example (Raschka,
    ch. 3, "Your journey starts with one step", with the chapter's seeds and printed values).
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.results: tuple[variants.Variant, ...] = ()
        self._tokens: list[str] = []  # of the request the results answer
        self._layer = self._head = 0
        self._stale = True
        self.selector = QComboBox()
        for key in variants.KEYS:
            self.selector.addItem(variants.TITLES[key], key)
        self.selector.currentIndexChanged.connect(lambda _: self.draw())
        self.source = QComboBox()
        for key, text in SOURCES.items():
            self.source.addItem(text, key)
        self.source.currentIndexChanged.connect(lambda _: self._on_source_changed())
        self.book = BookView()
        # These four follow every keystroke (LiveLabel); the header wraps a model's long token.
        self.header = LiveLabel(text_format=Qt.TextFormat.PlainText)
        self.formula = LiveLabel(text_format=Qt.TextFormat.PlainText)
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.difference = LiveLabel()
        self.difference.setStyleSheet(theme.soft_box_style(self))
        self.row_text = LiveLabel()
        self.scores = Heatmap("scores (before softmax)", DIVERGING, col_axis="top", bar_title="score, before softmax")
        self.weights = Heatmap("weights (softmax, rows sum to 1)", SEQUENTIAL, col_axis="top", bar_title="weight 0..1")
        self.outputs = Heatmap("outputs (context vectors)", DIVERGING, row_title="query i",
                               col_title=dimension_title("d_head"), bar_title="value of the context vector")
        self.mixed = Heatmap("after W_O: the attention output", DIVERGING, row_title="query i",
                             col_title=dimension_title("d_model"), bar_title="value of the output")
        for hm in (self.scores, self.weights, self.outputs, self.mixed):
            hm.sig_row_clicked.connect(session.toggle_pin)  # a second click releases the pin
            hm.keep_readable()  # room for its rows: the dock scrolls instead (23-52 px at 1,280 x 720)
        self._build_layout()
        self.gate = NotApplicable(self, "variants")  # the model before attention: one sentence instead
        self.follow(session)
        self.refresh()

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(QLabel("source"))
        top.addWidget(self.source)
        top.addWidget(QLabel("variant"))
        top.addWidget(self.selector)
        top.addWidget(self.header, 1)
        grid = QGridLayout()
        grid.addWidget(self.scores, 0, 0)
        grid.addWidget(self.weights, 0, 1)
        outs = QHBoxLayout()  # the W_O output is hidden except for multi-head: outputs then fill the row
        outs.addWidget(self.outputs)
        outs.addWidget(self.mixed)
        grid.addLayout(outs, 1, 0, 1, 2)
        model_page = QWidget()
        page = QVBoxLayout(model_page)
        page.setContentsMargins(0, 0, 0, 0)
        page.addWidget(self.formula)
        page.addWidget(self.difference)
        page.addLayout(grid, 1)
        page.addWidget(self.row_text)
        self.pages = QStackedWidget()
        self.pages.addWidget(model_page)
        self.pages.addWidget(self.book)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self.pages, 1)

    def source_key(self) -> str:
        """``"model"`` or ``"book"``: what the variants run on."""
        return self.source.currentData()

    def set_source(self, key: str) -> None:
        """Run the variants on the loaded model (``"model"``) or on the book's example (``"book"``)."""
        self.source.setCurrentIndex(list(SOURCES).index(key))

    def _on_source_changed(self) -> None:
        book = self.source_key() == "book"
        titles = book_views.TITLES if book else variants.TITLES
        for i, key in enumerate(variants.KEYS):
            self.selector.setItemText(i, titles[key])
        self.pages.setCurrentIndex(1 if book else 0)
        if book:
            self.draw()
        else:  # the model's variants were not kept up to date meanwhile
            self.refresh()

    def select(self, key: str) -> None:
        """Show the variant with this key (one of :data:`explorer.core.lessons.variants.KEYS`)."""
        self.selector.setCurrentIndex(list(variants.KEYS).index(key))

    def current(self) -> variants.Variant | None:
        """The variant on show, or None when there are no tokens."""
        return self.results[self.selector.currentIndex()] if self.results else None

    def refresh(self) -> None:
        """Ask for the four variants of the session's layer, head and position (drawn when they arrive)."""
        if not self.gate.applies(self.session.config):
            return
        self._stale = False
        if self.source_key() == "book":  # the book's example does not follow the text
            return
        s = self.session
        i = s.selected_position()
        if i is None or s.model is None:
            s.cancel(self)
            self.results = ()
            self.draw()
            return
        request = variants.VariantsRequest(s.trace, s.layer, s.head, i, s.head_weights(s.layer), tuple(s.tokens))
        s.submit(self, variants.variants_job, request, self._on_variants)

    def _on_variants(self, result: JobResult) -> None:
        self.results = () if result.error else result.value
        self._tokens = list(result.inputs.tokens)
        self._layer, self._head = result.inputs.layer, result.inputs.head
        if self.source_key() == "model":
            self.draw()
            if result.error:
                self.header.setText(f"the variants could not be computed: {result.error}")

    def draw(self) -> None:
        """Draw the selected variant (everything cleared when there are no tokens)."""
        if self.source_key() == "book":
            self.header.setText("Raschka, Build a Large Language Model (From Scratch), chapter 3")
            self.book.show_variant(variants.KEYS[self.selector.currentIndex()])
            return
        v = self.current()
        if v is None:
            self.header.setText("no tokens yet: type some text")
            for w in (self.formula, self.difference, self.row_text):
                w.setText("")
            for hm in (self.scores, self.weights, self.outputs, self.mixed):
                hm.clear()
            return
        tokens = self._tokens
        rows = axis_labels(tokens)
        keys = [f"{j} {token_label(t, 8)}" for j, t in enumerate(tokens)]
        n = v.weights.shape[0]
        head = variants.heads_phrase(n) if v.key == "multihead" else f"head {self._head}"
        cfg = self.session.config
        if cfg is not None and cfg.n_kv_heads < cfg.n_heads:  # grouped-query attention: say which k, v
            head += (f" ({cfg.n_kv_heads} key/value heads)" if v.key == "multihead"
                     else f" (key/value head {self.session.kv_head(self._layer, self._head)})")
        self.header.setText(f"layer {self._layer} · {head} · token {v.position} {token_label(tokens[v.position])!r}")
        self.formula.setText(v.formula)
        self.difference.setText(v.difference)
        scores = masked_as_nan(side_by_side(v.scores) if n > 1 else v.scores[0])
        cols = _side_labels(n, keys)
        self.scores.set_data(scores, symmetric_levels(scores), rows, cols)
        self.weights.set_data(side_by_side(v.weights) if n > 1 else v.weights[0], (0.0, 1.0), rows, cols)
        out = v.combined if v.combined is not None else v.outputs[0]
        self.outputs.setVisible(True)
        self.outputs.plot.setTitle("heads concatenated (each head's outputs side by side)" if v.combined is not None
                                   else "outputs: one context vector per token")
        self.outputs.set_titles(col=dimension_title(variants.output_space(v.key, n)))  # z_i of variant 1: d_model
        self.outputs.set_data(out, symmetric_levels(out), rows, None)
        self.mixed.setVisible(v.mixed is not None)
        if v.mixed is not None:
            self.mixed.set_data(v.mixed, symmetric_levels(v.mixed), rows, None)
        for hm in (self.scores, self.weights, self.outputs, self.mixed):
            hm.set_selected_row(v.position)
        row = v.output_row
        shown = ", ".join(f"{x:.4f}" for x in row[:6]) + (", …" if len(row) > 6 else "")
        self.row_text.setText(
            f"output for token {v.position}: width {len(row)}, ‖·‖ = {np.linalg.norm(row):.4f}, [{shown}] "
            "(hover a cell for its exact value; click a row to pick another token)")
