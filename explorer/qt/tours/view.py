"""The tour's dock: the list of steps, the step's sentences with their numbers, its question and
reveal, Back and Next."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QLineEdit, QListWidget, QPushButton, QScrollArea,
                               QVBoxLayout, QWidget)

from explorer.qt import theme
from explorer.qt.tours.controller import TourController

WAITING = "computing…"
HEIGHT_PX = 220  # the dock's height: the step's sentences, its question and the reveal (the text scrolls beyond)


def _label(style: str = "", selectable: bool = True) -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if style:
        label.setStyleSheet(style)
    return label


class TourView(QWidget):
    """Shows a :class:`TourController`'s step and sends the learner's clicks back to it."""

    def __init__(self, controller: TourController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.steps = QListWidget()
        self.steps.setMaximumWidth(260)
        self.steps.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.steps.currentRowChanged.connect(self._on_steps_row_changed)
        self.title = _label()
        font = QFont(self.title.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.title.setFont(font)
        self.say = _label()
        self.problems = _label(theme.note_style(self))
        self.ask = _label()
        ask_font = QFont(self.ask.font())
        ask_font.setBold(True)
        self.ask.setFont(ask_font)
        self.choice = _label(f"QLabel {{ color:{theme.muted_text(self).name()}; }}")
        self.number = QLineEdit()
        self.number.setMaximumWidth(160)
        self.number.returnPressed.connect(self._on_number_return_pressed)
        self.reveal_button = QPushButton("Reveal")
        self.reveal_button.clicked.connect(self._on_reveal_clicked)
        self.revealed = _label(theme.soft_box_style(self))
        self.explain = _label()
        self.back_button, self.next_button = QPushButton("◀ Back"), QPushButton("Next ▶")
        self.back_button.clicked.connect(controller.back)
        self.next_button.clicked.connect(controller.next)
        self.counter = _label(selectable=False)
        self.worksheet_button = QPushButton("Worksheet…")
        self.close_button = QPushButton("Close tour")
        self.close_button.clicked.connect(controller.close)
        self._shown: tuple | None = None  # (tour, step index) shown: the typed answer is cleared on a new one
        self._build_layout()
        controller.sig_tour_changed.connect(self._on_controller_tour_changed)
        controller.sig_step_changed.connect(self.refresh)
        self._on_controller_tour_changed()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt naming)
        return QSize(super().sizeHint().width(), HEIGHT_PX)

    def _build_layout(self) -> None:
        question = QHBoxLayout()
        question.addWidget(self.number)
        question.addWidget(self.reveal_button)
        question.addWidget(self.choice, 1)
        body = QWidget()
        text = QVBoxLayout(body)
        text.setContentsMargins(6, 2, 6, 2)
        for widget in (self.title, self.say, self.problems, self.ask):
            text.addWidget(widget)
        text.addLayout(question)
        text.addWidget(self.revealed)
        text.addWidget(self.explain)
        text.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        buttons = QVBoxLayout()
        nav = QHBoxLayout()
        nav.addWidget(self.back_button)
        nav.addWidget(self.next_button)
        buttons.addLayout(nav)
        buttons.addWidget(self.counter)
        buttons.addStretch(1)
        buttons.addWidget(self.worksheet_button)
        buttons.addWidget(self.close_button)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.steps)
        layout.addWidget(scroll, 1)
        layout.addLayout(buttons)

    def _on_controller_tour_changed(self) -> None:
        tour = self.controller.tour
        self.steps.blockSignals(True)
        self.steps.clear()
        if tour is not None:
            self.steps.addItems([f"{k + 1}. {s.title}" for k, s in enumerate(tour.steps)])
            for k, s in enumerate(tour.steps):
                self.steps.item(k).setToolTip(s.title)
        self.steps.blockSignals(False)
        self.refresh()

    def _on_steps_row_changed(self, row: int) -> None:
        if row >= 0 and row != self.controller.index:
            self.controller.go(row)

    def _on_number_return_pressed(self) -> None:
        if self.controller.guess_number(self.number.text()):
            self.controller.reveal()

    def _on_reveal_clicked(self) -> None:
        typed = self.number.isVisible() and self.number.text().strip()
        if typed and not self.controller.guess_number(self.number.text()):
            return
        self.controller.reveal()

    def refresh(self) -> None:
        """Show the controller's step as it is now."""
        c = self.controller
        step = c.step
        if step is None:
            for label in (self.title, self.say, self.problems, self.ask, self.choice, self.revealed, self.explain):
                label.clear()
            self.title.setText("No tour is open: File ▸ Open Tour…")
            self._show_question(False)
            self.counter.clear()
            return
        self.steps.blockSignals(True)
        self.steps.setCurrentRow(c.index)
        self.steps.blockSignals(False)
        self.title.setText(step.title)
        self.say.setText(c.say.text if c.say is not None else WAITING)
        errors = list(c.say.errors if c.say is not None else ()) + ([c.problem] if c.problem else [])
        self.problems.setText("\n".join(["Not computed on this text: " + e for e in errors[:3]]))
        self.problems.setVisible(bool(errors))
        self.counter.setText(f"step {c.index + 1} of {len(c.tour.steps)}")
        self.back_button.setEnabled(c.index > 0)
        self.next_button.setEnabled(c.index + 1 < len(c.tour.steps))
        self._show_question(step.question is not None)
        if step.question is not None:
            self._refresh_question(step.question)

    def _show_question(self, on: bool) -> None:
        for widget in (self.ask, self.choice, self.reveal_button, self.number, self.revealed, self.explain):
            widget.setVisible(on)

    def _refresh_question(self, q) -> None:
        c, answer = self.controller, self.controller.answer()
        if self._shown != (id(c.tour), c.index):  # another step: its own answer (or none) in the field
            self._shown = (id(c.tour), c.index)
            self.number.setText(answer.words if q.kind == "number" else "")
        self.ask.setText(c.ask.text if c.ask is not None else WAITING)
        self.number.setVisible(q.kind in ("number", "token"))
        self.number.setPlaceholderText("your number" if q.kind == "number" else "or type its position")
        how = {"number": "Type your answer and press Reveal.",
               "token": "Click a token (a chip or a row of a map), or type its position.",
               "cell": "Click a cell of a map in the panel."}[q.kind]
        chosen = f"Your choice: {answer.words}." if answer.words else how
        self.choice.setText(chosen + (f"  ({answer.error})" if answer.error else ""))
        self.reveal_button.setEnabled(answer.revealed is None)
        self.number.setEnabled(answer.revealed is None)
        self.revealed.setVisible(answer.revealed is not None)
        self.revealed.setText(answer.revealed.text if answer.revealed is not None else "")
        self.explain.setVisible(answer.revealed is not None and c.explain is not None)
        self.explain.setText(c.explain.text if c.explain is not None else "")
