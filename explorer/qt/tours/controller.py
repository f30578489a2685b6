"""A tour running in the main window: which step is shown, putting its model, text, panel and
highlight in place, and computing its sentences and question from the session's trace.

The controller changes the app only through what a person could do: the window's one open path
(:meth:`FileActions.open_checkpoint <explorer.qt.files.actions.FileActions.open_checkpoint>`), the
session's setters and :meth:`MainWindow.show_panel`. Its sentences are computed again on every new
trace, so they follow the text while the learner types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from explorer.core.tours.expressions import Env, ExpressionError, as_number, evaluate
from explorer.core.tours.questions import Reveal, reveal
from explorer.core.tours.templates import Rendered, render
from explorer.core.tours.tourfile import Step, Tour, TourError, load_tour
from explorer.core.views import token_label
from explorer.qt import dialogs
from explorer.qt.panels import panel_names
from explorer.qt.plots.heatmap import Heatmap

ERROR_TITLE = "Could not open the tour"


@dataclass
class Answer:
    """What the learner answered on one step: the guess (a number, a token row or a cell), the
    words for it, and the reveal once asked for."""

    guess: object = None
    words: str = ""
    revealed: Reveal | None = None
    error: str = ""


class TourController(QObject):
    """Runs one tour at a time in ``window`` (a :class:`~explorer.qt.main_window.MainWindow`)."""

    sig_tour_changed = Signal()
    """A tour was opened or closed."""
    sig_step_changed = Signal()
    """Another step is shown, or the shown step's numbers, guess or reveal changed."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.session = window.session
        self.tour: Tour | None = None
        self.index = 0
        self.answers: dict[int, Answer] = {}
        self.say: Rendered | None = None
        self.ask: Rendered | None = None
        self.explain: Rendered | None = None
        self.problem = ""  # why the step's model could not be shown
        self._pending_highlight = False
        self._applying = False  # while a step puts its selection in place (not the learner's choice)
        self._cells: list[Heatmap] = []
        self.session.sig_trace_changed.connect(self._on_session_trace_changed)
        self.session.sig_selection_changed.connect(self._on_session_selection_changed)

    # ---- opening and moving ----------------------------------------------------------------------------
    def open(self, path: str | Path, step: int = 0) -> bool:
        """Read and check a tour file and show its step ``step`` (0-based); a bad file, or a step it
        does not have, shows one dialog with every problem, and the tour shown before (if any) stays."""
        try:
            tour = load_tour(path, panel_names())
        except TourError as exc:
            dialogs.error(self.window, ERROR_TITLE, str(exc))
            return False
        if not 0 <= step < len(tour.steps):
            dialogs.error(self.window, ERROR_TITLE, f"{Path(path).name}: the tour has {len(tour.steps)} steps; "
                                                    f"there is no step {step + 1}")
            return False
        self.tour, self.answers = tour, {}
        self.sig_tour_changed.emit()
        self.go(step)
        return True

    def close(self) -> None:
        """Stop the tour (the model, text and panels stay as they are)."""
        self._leave_step()
        self.tour = None
        self.sig_tour_changed.emit()

    @property
    def step(self) -> Step | None:
        """The step shown, or None without a tour."""
        return self.tour.steps[self.index] if self.tour is not None else None

    def answer(self) -> Answer:
        """The learner's answer on the step shown (made empty on first use)."""
        return self.answers.setdefault(self.index, Answer())

    def next(self) -> None:
        """Show the next step (nothing at the last)."""
        if self.tour is not None and self.index + 1 < len(self.tour.steps):
            self.go(self.index + 1)

    def back(self) -> None:
        """Show the step before (nothing at the first)."""
        if self.tour is not None and self.index > 0:
            self.go(self.index - 1)

    def go(self, index: int) -> None:
        """Show step ``index`` (clamped): its model, text, layer and head, panel and highlight."""
        if self.tour is None:
            return
        self._leave_step()
        self.index = max(0, min(int(index), len(self.tour.steps) - 1))
        step = self.step
        self.problem = self._show_model(step)
        s = self.session
        if step.text is not None:
            s.set_text(step.text)
        s.set_position(None)
        if step.layer is not None:
            s.set_layer(step.layer)
        if step.head is not None:
            s.set_head(step.head)
        self.window.show_panel(step.panel)
        self._pending_highlight = True
        self._on_session_trace_changed()

    def _show_model(self, step: Step) -> str:
        """Open the step's model unless it is the one loaded; "" or why it could not be."""
        if step.model is None:
            return ""
        loaded = self.session.loaded_checkpoint
        here = getattr(loaded, "path", None)
        if here is not None and Path(here).resolve() == step.model.path.resolve():
            if self.session.snapshot_step is not None:
                self.session.show_snapshot(None)
            return ""
        if self.window.files.open_checkpoint(step.model.path):
            return ""
        return f"This step is about {step.model.text}, which could not be opened: the numbers are the loaded model's."

    def _leave_step(self) -> None:
        map_panel = self.window.panels.built().get("map")  # one never built has nothing outlined
        if map_panel is not None and hasattr(map_panel, "set_highlight"):
            map_panel.set_highlight(None)
        for hm in self._cells:
            hm.set_marked_cell(None)
            hm.sig_cell_clicked.disconnect(self._on_heatmap_cell_clicked)
        self._cells = []
        self.say = self.ask = self.explain = None

    # ---- the step's numbers --------------------------------------------------------------------------
    def env(self) -> Env | None:
        """What the step's expressions read: the session's trace and selection (None without a trace)."""
        s = self.session
        if s.trace is None or s.trace.n_tokens == 0 or s.checkpoint is None:
            return None
        return Env(s.trace, s.tokens, s.config, s.checkpoint, s.layer, s.head, s.position)

    def _on_session_trace_changed(self) -> None:
        step, env = self.step, self.env()
        if step is None:
            return
        if env is not None and self._pending_highlight:
            self._pending_highlight, self._applying = False, True
            try:
                self._highlight(step, env)
            finally:
                self._applying = False
            env = self.env()
        self._render(step, env)

    def _on_session_selection_changed(self) -> None:
        if not self._applying and self.step is not None and self.step.question is not None and self.step.question.kind == "token":
            pos = self.session.position
            if pos is not None:
                self._set_guess(pos, f"token {self._token(pos)}")

    def _render(self, step: Step, env: Env | None) -> None:
        if env is None:
            self.say = self.ask = self.explain = None
        else:
            self.say = render(step.say, env)
            q = step.question
            self.ask = render(q.ask, env) if q is not None else None
            answer = self.answers.get(self.index)
            if q is not None and answer is not None and answer.revealed is not None:
                self._reveal_now(env)
        self.sig_step_changed.emit()

    def _position(self, value, env: Env) -> int | None:
        try:
            number = as_number(evaluate(value, env) if isinstance(value, str) else value)
        except ExpressionError:
            return None
        return None if number is None else int(number)

    def _highlight(self, step: Step, env: Env) -> None:
        """Pin the step's token or row, outline its cell in the panel's maps, its box in the map."""
        for key, value in step.highlight:
            if key in ("token", "row"):
                pos = self._position(value, env)
                if pos is not None:
                    self.session.set_position(pos)
            elif key == "cell":
                cell = [self._position(v, env) for v in value]
                if None not in cell:
                    self.session.set_position(cell[0])
                    for hm in self.window.panels[step.panel].findChildren(Heatmap):
                        hm.set_marked_cell(tuple(cell))
            elif key == "box" and hasattr(self.window.panels.get("map"), "set_highlight"):
                self.window.panels["map"].set_highlight(value)
        q = step.question
        if q is not None and q.kind == "cell":
            self._cells = self.window.panels[step.panel].findChildren(Heatmap)
            for hm in self._cells:
                hm.sig_cell_clicked.connect(self._on_heatmap_cell_clicked)

    # ---- questions ---------------------------------------------------------------------------------------
    def _token(self, i: int) -> str:
        """Token row ``i`` as the guess is written: its position and its label."""
        tokens = self.session.tokens
        return f"{i} '{token_label(tokens[i])}'" if 0 <= i < len(tokens) else str(i)

    def _on_heatmap_cell_clicked(self, row: int, col: int) -> None:
        self._set_guess((row, col), f"row {self._token(row)}, column {self._token(col)}")

    def _set_guess(self, guess, words: str) -> None:
        answer = self.answer()
        if answer.revealed is None:
            answer.guess, answer.words, answer.error = guess, words, ""
            self.sig_step_changed.emit()

    def guess_number(self, text: str) -> bool:
        """The learner typed a number (a token's position for a token question); False if it is not one."""
        try:
            value = float(text.replace(",", "").strip())
        except ValueError:
            self.answer().error = f"{text!r} is not a number"
            self.sig_step_changed.emit()
            return False
        q = self.step.question if self.step is not None else None
        if q is not None and q.kind == "token":
            self._set_guess(int(value), f"token {int(value)}")
        else:
            self._set_guess(value, text.strip())
        return True

    def reveal(self) -> None:
        """Show the model's answer beside the guess (once there is a guess)."""
        env = self.env()
        if env is None or self.step is None or self.step.question is None or self.answer().guess is None:
            return
        self._reveal_now(env)
        self.sig_step_changed.emit()

    def _reveal_now(self, env: Env) -> None:
        q, answer = self.step.question, self.answer()
        try:
            answer.revealed = reveal(q, answer.guess, env)
            answer.error = ""
            self.explain = render(q.explain, env) if q.explain else None
        except ExpressionError as exc:
            answer.error = str(exc)
