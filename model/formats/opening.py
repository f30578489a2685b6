"""A checkpoint inspected before it is loaded: what it is, what only the user can supply, and the load.

Opening a file goes in one pass: every reader's ``inspect(source, options)`` reads the file once,
checks its tensors and returns an :class:`Opening` that says which format it is and which
:class:`Question` s remain (heads per block that the weights cannot tell, a vocabulary that was not
found) after what the caller already gave; :meth:`Opening.load` then builds the model once with
the answers. A caller with nobody to ask (``load_any``, ``python -m model.trace``) gets the first
unanswered question as :class:`~model.formats.errors.NeedsInput`; the app asks them all first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from model.formats.base import Checkpoint, OpenOptions
from model.formats.errors import NeedsInput

__all__ = ["N_HEADS", "VOCAB", "Opening", "Question"]

N_HEADS = "n_heads"  # heads per block cannot be read from the weights
VOCAB = "vocab"  # no vocabulary was found for the model


@dataclass(frozen=True)
class Question:
    """Something a file cannot tell and only the user can supply.

    Attributes
    ----------
    kind : str                   :data:`N_HEADS` (answered by ``OpenOptions.n_heads``) or :data:`VOCAB`
                                 (``vocab_path``, or ``allow_no_tokenizer``).
    message : str                what is missing and how to supply it, starting with the file name.
    path : Path                  the checkpoint file (or model folder).
    proposed : int or None       for n_heads: the most likely value, to offer as the default.
    choices : tuple of int       for n_heads: every value the weights allow (the divisors of d_model).
    searched : tuple of Path     for vocab: the places where a vocabulary was looked for.
    suggested : Path or None     for vocab: a vocabulary the user may choose that the format does not
                                 assume (GPT-2's files for a model with GPT-2's 50,257 rows), or None.
    """

    kind: str
    message: str
    path: Path
    proposed: int | None = None
    choices: tuple[int, ...] = ()
    searched: tuple[Path, ...] = ()
    suggested: Path | None = None

    def answered_by(self, options: OpenOptions) -> bool:
        """Whether ``options`` answer it."""
        if self.kind == N_HEADS:
            return options.n_heads is not None
        return options.vocab_path is not None or options.allow_no_tokenizer

    def error(self) -> NeedsInput:
        """The question as the exception a caller without a user gets."""
        return NeedsInput(self.message, kind=self.kind, path=self.path, proposed=self.proposed,
                          choices=self.choices, searched=self.searched, suggested=self.suggested)


@dataclass(frozen=True)
class Opening:
    """A file read and checked, waiting for the answers to its questions.

    Attributes
    ----------
    path : Path                     the file or folder.
    source_format : str             the format it was recognised as (``"nanogpt"``, ...).
    questions : tuple of Question   what the caller still has to supply, in the order to ask it
                                    (none for most files).
    finish : callable               ``(OpenOptions) -> Checkpoint``: builds the model (see :meth:`load`).
    """

    path: Path
    source_format: str
    questions: tuple[Question, ...]
    finish: Callable[[OpenOptions], Checkpoint]

    def load(self, options: OpenOptions | None = None) -> Checkpoint:
        """Build the checkpoint with ``options``: what was given to ``inspect`` plus the answers (None: nothing).

        Raises
        ------
        NeedsInput
            For the first question ``options`` leave unanswered.
        CheckpointError
            When an answer does not fit (heads that do not divide d_model, a vocabulary of another
            size or one that cannot be read); the file itself was checked by ``inspect``.
        """
        options = options or OpenOptions()
        for question in self.questions:
            if not question.answered_by(options):
                raise question.error()
        return self.finish(options)

    def wrapped(self, around: Callable[[Callable[[], Checkpoint]], Checkpoint],
                questions: Callable[[Question], Question] = lambda q: q) -> Opening:
        """The same opening with its load run through ``around(load)`` (which may rename the result
        or the errors) and each question passed through ``questions``."""
        return dataclasses.replace(self, questions=tuple(map(questions, self.questions)),
                                   finish=lambda options: around(lambda: self.finish(options)))

    @classmethod
    def ready(cls, path: Path, source_format: str, load: Callable[[], Checkpoint]) -> Opening:
        """An opening without questions (the file says everything), loaded by ``load()``."""
        return cls(path, source_format, (), lambda _options: load())
