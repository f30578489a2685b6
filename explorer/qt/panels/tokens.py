"""Text panel: the editor, and under it a strip of token chips (text, id, position)."""

from __future__ import annotations

import dataclasses
import time

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from explorer.core.architecture import causal_switch, position_switch
from explorer.core.token_text import display_tokens, ids_encoding
from explorer.core.views import Chip, crop_note, token_chips, token_label
from explorer.qt import theme
from explorer.qt.widgets.flow_layout import FlowLayout
from explorer.qt.generation import Generator
from explorer.qt.scheduling.pacing import Pacer
from explorer.qt.widgets.pin_note import PinNote
from explorer.qt.session import Session
from explorer.qt.widgets.token_chip import ChipLabel
from explorer.qt.widgets.wrapped_label import wrapped_label
from model import Encoding

MAX_DROPPED_CHIPS = 32  # dropped tokens shown before the context window; older ones are summarised
CHIP_TURN_MS = 15.0  # chips are brought up to date for about this long per turn (a turn also lays them out)
FIRST_CHIPS = 64  # chips always done in the update's own turn (a short text is done at once)
TYPE_TEXT = "Type here: every keystroke runs the model."
TYPE_IDS = "No vocabulary: type token ids, e.g. 3, 17, 5"


def _utf16_index(text: str, index: int) -> int:
    """Qt counts positions in UTF-16 code units: an emoji is one Python char but two units."""
    return len(text[:index].encode("utf-16-le")) // 2


class TokensPanel(QWidget):
    """The text editor and the token strip. Editing the text updates the session (and every panel)."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.chip_data: list[Chip] = []
        self.chips: list[ChipLabel] = []
        self._next_chip = 0  # chips before this one show chip_data; the rest follow (_fill_chips)
        self._selected: int | None = None  # the pinned row
        self._hovered: int | None = None
        self._generated: frozenset[int] = frozenset()  # indices into the encoding of tokens the model wrote
        self._pacer = Pacer.of(session)  # the rest of a long strip's chips, a batch per event-loop turn
        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText(TYPE_TEXT)
        self.hint = QLabel()  # shown for a model without a vocabulary: type ids
        self.hint.setWordWrap(True)
        self.hint.setTextFormat(Qt.TextFormat.PlainText)
        self.hint.setStyleSheet(theme.soft_box_style(self))
        self.note = wrapped_label()  # "showing the last 32 of 35 tokens" wraps beside the boxes
        self.pin_note = PinNote(session)
        self.summary = QLabel()
        self.pe_box = QCheckBox("positional encoding")
        self.causal_box = QCheckBox("causal mask")
        self._build_layout()
        self.editor.textChanged.connect(self._on_editor_text_changed)
        self.pe_box.toggled.connect(session.set_positional_encoding)
        self.causal_box.toggled.connect(session.set_causal)
        session.sig_text_changed.connect(self._on_session_text_changed)
        session.sig_trace_changed.connect(self.refresh)
        session.sig_selection_changed.connect(self._on_session_selection_changed)
        session.sig_options_changed.connect(self._on_session_options_changed)
        session.sig_model_changed.connect(self._on_session_options_changed)
        self.generator = Generator.of(session)
        self.generator.sig_story_changed.connect(self._on_generator_story_changed)
        self._on_session_options_changed()
        self._on_session_text_changed()
        self.refresh()

    def _build_layout(self) -> None:
        self.strip = QWidget()
        self.strip_layout = FlowLayout(self.strip)
        self.strip_layout.setContentsMargins(2, 2, 2, 2)
        self.strip_layout.addWidget(self.summary)
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.strip)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setMinimumHeight(60)
        boxes = QWidget()  # the two check boxes side by side, one under the other in a narrow dock
        flow = FlowLayout(boxes, spacing=6)
        flow.setContentsMargins(0, 0, 0, 0)
        flow.addWidget(self.pe_box)
        flow.addWidget(self.causal_box)
        options = QHBoxLayout()
        options.addWidget(self.note)
        options.addWidget(boxes, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.hint)
        layout.addWidget(self.editor, 2)
        layout.addWidget(self.scroll, 3)
        layout.addWidget(self.pin_note)
        layout.addLayout(options)

    def _on_editor_text_changed(self) -> None:
        self._typed = self.editor.toPlainText()  # kept: reading 1 MB back costs a millisecond
        try:
            self.session.set_text(self._typed)
        finally:
            self._typed = None

    def _on_session_text_changed(self) -> None:
        typed = getattr(self, "_typed", None)
        if typed is not None and typed == self.session.text:
            return  # the session took the editor's text as it is
        if self.editor.toPlainText() != self.session.text:  # changed elsewhere (e.g. a next-token click)
            with QSignalBlocker(self.editor):
                self.editor.setPlainText(self.session.text)
                self.editor.moveCursor(QTextCursor.MoveOperation.End)

    def _on_session_options_changed(self) -> None:
        """Show the session's options. The position box says what it switches for this model (a
        learned table, or RoPE's rotation); a model without positional encoding greys it (off) with
        the reason, and the session keeps the choice for the next model that has one. The model
        before attention greys both (it has no positional encoding and no mask)."""
        config = self.session.config
        for box, switch, on in ((self.pe_box, position_switch(config), self.session.positional_encoding),
                                (self.causal_box, causal_switch(config), self.session.causal)):
            with QSignalBlocker(box):
                box.setChecked(on and switch.enabled)
            box.setText(switch.label)
            box.setEnabled(switch.enabled)
            box.setToolTip(switch.tooltip)

    def _chip(self, i: int) -> ChipLabel:
        while len(self.chips) <= i:  # grow the pool; chips are reused on every update
            chip = ChipLabel(len(self.chips))
            chip.sig_hovered.connect(self._on_chip_hovered)
            chip.sig_clicked.connect(self._on_chip_clicked)
            self.strip_layout.addWidget(chip)
            self.chips.append(chip)
        return self.chips[i]

    def refresh(self) -> None:
        """Rebuild the chips from the session's encoding; dropped tokens greyed, with the crop note."""
        s = self.session
        ctx = s.config.context_length if s.config else 0
        self._show_hint()
        n = len(s.encoding)
        hidden = max(0, n - ctx - MAX_DROPPED_CHIPS)
        # Chips only for the tokens shown: a pasted megabyte is 10^5 tokens (a second per keystroke).
        e = s.encoding
        tail = Encoding(e.ids[hidden:], tuple(display_tokens(s.tokenizer, e, hidden)), e.spans[hidden:])
        chips = token_chips(s.text, tail, ctx, s.tokenizer.unk_id if s.tokenizer else None)
        self.chip_data = [dataclasses.replace(c, index=c.index + hidden) for c in chips] if hidden else chips
        self.summary.setText(f"… {hidden:,} earlier tokens" if hidden else "")
        self.summary.setVisible(bool(hidden))
        self.note.setText(crop_note(n, ctx) or f"{n} of {ctx} tokens")
        self._selected, self._hovered = s.position, s.hover
        self._generated = self.generator.generated_indices()
        self._next_chip = 0
        self._fill_chips()

    def _on_session_selection_changed(self) -> None:
        """Only the borders change: the pinned chip's and the hovered one's (no new layout)."""
        s = self.session
        if (s.position, s.hover) == (self._selected, self._hovered):
            return
        self._selected, self._hovered = s.position, s.hover
        for chip, label in zip(self.chip_data[:self._next_chip], self.chips):
            self._show(label, chip)

    def _on_generator_story_changed(self) -> None:
        """Mark the chips of the generated tokens (a branch switched, the story cleared)."""
        generated = self.generator.generated_indices()
        if generated != self._generated:
            self._generated = generated
            for chip, label in zip(self.chip_data[:self._next_chip], self.chips):
                self._show(label, chip)

    def _show(self, label: ChipLabel, chip: Chip) -> None:
        here = not chip.dropped
        label.show_chip(chip, here and chip.position == self._selected, here and chip.position == self._hovered,
                        chip.index in self._generated)

    def _fill_chips(self) -> None:
        """Bring the chips up to date from ``_next_chip`` on, for about CHIP_TURN_MS; the rest in
        later turns of the event loop, so that a long paste never blocks the window."""
        t0 = time.perf_counter()
        i, n = self._next_chip, len(self.chip_data)
        # The layout is off while chips change: each chip shown would otherwise lay out the whole
        # strip again at once (quadratic: a 1,100-word paste, 1,056 chips, blocked 3.6 s); it is
        # laid out once, after.
        self.strip_layout.setEnabled(False)
        try:
            while i < n:
                chip, label = self.chip_data[i], self._chip(i)
                self._show(label, chip)
                if label.isHidden():
                    label.setVisible(True)
                i += 1
                if i >= FIRST_CHIPS and i % 8 == 0 and (time.perf_counter() - t0) * 1e3 > CHIP_TURN_MS:
                    break
            self._next_chip = i
            if i == n:
                for label in self.chips[n:]:
                    if not label.isHidden():
                        label.setVisible(False)
        finally:
            self.strip_layout.setEnabled(True)
            self.strip_layout.invalidate()
            # Laid out now, not when the posted layout request comes: a new chip is a 640 x 480
            # widget at (0, 0) until then, and a grab (--screenshot, Export) drew it over the strip.
            self.strip_layout.activate()
        if i < n:
            self._pacer.call_later(self, self._fill_chips)

    @property
    def chips_pending(self) -> int:
        """Chips not yet brought up to date (they are, in the next turns of the event loop)."""
        return len(self.chip_data) - self._next_chip

    def _show_hint(self) -> None:
        """Without a vocabulary the text is token ids: say so, with the valid range and what was left out."""
        s = self.session
        by_id = s.checkpoint is not None and s.tokenizer is None
        self.hint.setVisible(by_id)
        self.editor.setPlaceholderText(TYPE_IDS if by_id else TYPE_TEXT)
        if not by_id:
            return
        ignored = ids_encoding(s.text, s.config.vocab_size)[1]
        text = (f"This model has no vocabulary: type token ids 0–{s.config.vocab_size - 1} separated by "
                "commas or spaces (e.g. 3, 17, 5); tokens are named by id.")
        if ignored:
            # Each item cut short: one unbroken 5,000-digit item made the label (and panel) 38,000 px wide.
            shown = ", ".join(repr(token_label(p, 24)) for p in ignored[:5]) + (" …" if len(ignored) > 5 else "")
            text += f" Left out (not a valid id): {shown}"
        self.hint.setText(text)

    def _on_chip_hovered(self, i: int) -> None:
        if not 0 <= i < len(self.chip_data):
            self.editor.setExtraSelections([])
            self.session.set_hover(None)
            return
        chip = self.chip_data[i]
        self.session.set_hover(None if chip.dropped else chip.position)  # shown in every panel, not pinned
        sel = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.editor.document())
        cursor.setPosition(_utf16_index(self.session.text, chip.start))
        cursor.setPosition(_utf16_index(self.session.text, chip.end), QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(QColor("#ffe066"))
        fmt.setForeground(QColor("#000000"))  # its own ink: the palette's may be light (a dark theme)
        sel.format = fmt
        self.editor.setExtraSelections([sel])

    def _on_chip_clicked(self, i: int) -> None:
        if 0 <= i < len(self.chip_data) and not self.chip_data[i].dropped:
            self.session.toggle_pin(self.chip_data[i].position)
