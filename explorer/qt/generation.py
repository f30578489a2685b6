"""Generation in the app: the session's text continued by the model, one token per job, with branches.

:class:`Generator` (one per session, :meth:`Generator.of`) owns the :class:`~explorer.core.story.Story`.
Each token is one job of :meth:`Session.submit` (on the worker thread when the model is slow): the
job runs :func:`model.generate.next_token` on the story's ids with the run's random generator, and
its result is appended to the story and to the session's tokens as the id it is (its text is its
rendering: :meth:`Session.insert_tokens`), which the panels then trace and draw (the tokens stream in). The next step starts in a later turn of the event loop, so the window
repaints and input is handled between tokens, and Stop takes effect at once. The random state
travels with each job, so a run of N tokens with a seed gives exactly what
``model.generate.generate`` (and ``python -m model.trace --generate N --seed S``) gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from explorer.core.story import Generated, Story, branch_tokens
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.session import Session
from model.generate import Sampling, next_token

ALTERNATIVES = 10  # the model's most likely tokens kept for each generated one


@dataclass(frozen=True)
class StepRequest:
    """One step of a run: the ids so far, how to choose, the random state before the draw, and
    the session's switches (the model runs as the panels' trace runs)."""

    ids: tuple[int, ...]
    sampling: Sampling
    rng_state: dict[str, Any]
    alternatives: int = ALTERNATIVES
    positional_encoding: bool = True
    causal: bool = True


def step_job(checkpoint, request: StepRequest):
    """Worker-thread job: one :func:`next_token` step; returns (Step, the random state after it)."""
    rng = np.random.default_rng()
    rng.bit_generator.state = request.rng_state
    step = next_token(checkpoint.model, request.ids, request.sampling, rng, request.alternatives,
                      positional_encoding=request.positional_encoding, causal=request.causal)
    return step, rng.bit_generator.state


class Generator(QObject):
    """Generates text into the session: start, stop, fork, switch branches.

    Attributes
    ----------
    story : Story or None
        The prompt and its branches (None before the first run, and after a model change that
        reads the prompt differently).
    status : str
        What happened last, for the Generate panel ("generated 20 tokens", "stopped: ...").
    """

    sig_story_changed = Signal()
    """A token was added, a branch made or switched, or the story dropped."""
    sig_running_changed = Signal(bool)
    """Generation started (True) or ended (False)."""

    @classmethod
    def of(cls, session: Session) -> Generator:
        """The session's generator (made on first use, a child of the session)."""
        found = session.findChild(Generator)
        return found if found is not None else cls(session)

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.session = session
        self.story: Story | None = None
        self.status = ""
        self.running = False
        self._left = 0  # tokens still to generate in this run
        self._done = 0
        self._after = ""  # what the status adds to "generated N tokens" (after a fork)
        self._sampling = Sampling()
        self._rng_state: dict[str, Any] | None = None
        self._expected_text: str | None = None  # the text the last step left in the session
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._next)
        session.sig_model_changed.connect(self._on_session_model_changed)

    # ---- what panels read ------------------------------------------------------------------
    def generated_indices(self) -> frozenset[int]:
        """Indices into the session's encoding of the tokens the model generated (the current branch's,
        while the text still holds them)."""
        if self.story is None:
            return frozenset()
        return self.story.generated_indices(self.session.encoding.ids)

    def step_at(self, index: int) -> tuple[int, Generated] | None:
        """(step number in the current branch, its record) of the generated token at ``index`` of the
        session's encoding, or None when that token was not generated."""
        if self.story is None or index not in self.generated_indices():
            return None
        step = index - len(self.story.prompt_ids)
        return step, self.story.branch.steps[step]

    # ---- actions -------------------------------------------------------------------------------
    def start(self, n: int, sampling: Sampling) -> None:
        """Append ``n`` tokens to the session's text. The current branch is continued when the text
        is its text; otherwise the text becomes the prompt of a new story."""
        s = self.session
        if self.running or s.checkpoint is None or n <= 0:
            return
        if not len(s.encoding):
            self._finish("type a text first: generation continues it")
            return
        if self.story is None or not self._shows(branch_tokens(self.story, s.tokenizer)):
            self.story = Story(s.token_text)
            self.sig_story_changed.emit()
        self._run(n, sampling)

    def fork(self, step: int, token_id: int, n: int, sampling: Sampling) -> None:
        """Take ``token_id`` (an alternative of the current branch's step ``step``) instead, in a new
        branch, and generate ``n`` tokens after it; the branch it forked from stays."""
        if self.story is None or self.running:
            return
        self.story.fork(step, token_id)
        self._show_branch()
        self._run(n, sampling, after=f" after the fork at token {step + 1}")

    def switch(self, branch: int) -> None:
        """Show another branch (its text in the editor)."""
        if self.story is None or self.running or not 0 <= branch < len(self.story.branches):
            return
        self.story.current = branch
        self._show_branch()

    def stop(self, why: str = "stopped") -> None:
        """End the run after the token being computed (its result is dropped)."""
        if self.running:
            self.session.cancel(self, "generate")
            self._timer.stop()
            self._finish(f"{why} after {self._done} token{'s' * (self._done != 1)}")

    # ---- the run ---------------------------------------------------------------------------------
    def _run(self, n: int, sampling: Sampling, after: str = "") -> None:
        if n <= 0:  # a fork with nothing after it: the chosen token alone
            self._finish(f"generated 0 tokens{after}")
            return
        self._sampling, self._left, self._done, self._after = sampling, int(n), 0, after
        self._rng_state = np.random.default_rng(sampling.seed).bit_generator.state
        self._expected_text = self.session.text
        self.running = True
        self.status = f"generating 0 of {n}…"
        self.sig_running_changed.emit(True)
        self._next()

    def _next(self) -> None:
        if not self.running or self.story is None:
            return
        if self.session.text != self._expected_text:
            self.stop("stopped: the text was edited")
            return
        s = self.session
        request = StepRequest(tuple(self.story.ids()), self._sampling, self._rng_state,
                              positional_encoding=s.positional_encoding, causal=s.causal)
        self.session.submit(self, step_job, request, self._on_step, name="generate")

    def _on_step(self, result: JobResult) -> None:
        if not self.running or self.story is None:
            return
        if result.error:
            if not any(b.steps for b in self.story.branches):
                self.story = None  # nothing was generated: no story of one empty branch to list
            self._finish(f"stopped: {result.error}")
            return
        step, self._rng_state = result.value
        if self.session.text != self._expected_text:
            self.stop("stopped: the text was edited")
            return
        self.story.extend(Generated.from_step(step, self._sampling))
        self._done += 1
        self._left -= 1
        self.status = f"generating {self._done} of {self._done + self._left}…"
        self.session.insert_tokens(len(self.session.encoding), [step.token_id])  # the panels trace and draw it
        self._expected_text = self.session.text
        self.sig_story_changed.emit()
        if self._left > 0:
            self._timer.start()  # the next token in a later turn: the window repaints in between
        else:
            self._finish(f"generated {self._done} token{'s' * (self._done != 1)}{self._after}")

    def _finish(self, status: str) -> None:
        was = self.running
        self.running = False
        self.status = status
        if was:
            self.sig_running_changed.emit(False)
        self.sig_story_changed.emit()

    def _show_branch(self) -> None:
        self.session.set_tokens(branch_tokens(self.story, self.session.tokenizer))
        self.sig_story_changed.emit()

    def _shows(self, tt) -> bool:
        """Whether the session holds this text and these tokens."""
        s = self.session
        return s.text == tt.text and tuple(s.encoding.ids) == tuple(tt.encoding.ids)

    def _on_session_model_changed(self) -> None:
        """Another model: stop; keep the story only while the new tokenizer reads the prompt alike.

        The status then says what this switch did: a run it stopped, branches it cleared, or
        nothing (a message of an earlier switch, "the branches were cleared", is not repeated)."""
        was_running = self.running
        self.stop("stopped: another model was opened")
        s, story = self.session, self.story
        if not was_running:
            self.status = ""
        if story is None:
            self.sig_story_changed.emit()
            return
        biggest = max((max(story.ids(b), default=0) for b in range(len(story.branches))), default=0)
        same = (s.config is not None and biggest < s.config.vocab_size
                and tuple(int(i) for i in s.encoding.ids[:len(story.prompt_ids)]) == story.prompt_ids)
        if not same:
            self.story = None
            self.status = "the new model reads the text differently: the branches were cleared"
        self.sig_story_changed.emit()
