"""The errors every checkpoint reader raises (the bottom layer of :mod:`model.formats`)."""

from __future__ import annotations

import os
from pathlib import Path


class CheckpointError(Exception):
    """A checkpoint file could not be read or is not valid; the message names file and problem."""


class ReaderFailure(CheckpointError):
    """A reader failed in a way none of its checks foresaw (a library's own exception, a recursion
    or memory limit): raised by :func:`model.checkpoint.load_any` in place of that exception, so
    that a bad file still ends in one message naming it. The original exception is ``__cause__``;
    tests that feed damaged files assert that none ends here (every kind has its own check)."""


class WrongVocabulary(CheckpointError):
    """The vocabulary the caller gave for a model cannot be read or does not fit it (another size);
    the model itself is sound, so another vocabulary may be tried."""


class HubError(CheckpointError):
    """A model could not be fetched from the Hub (or its cache), or a repository id is not one; the
    message names the repository."""


class NotThisFormat(CheckpointError):
    """Raised by a reader whose format the file is not; the dispatcher then tries the next one.

    Parameters
    ----------
    message : str
        What the reader found instead (for the "tried: ..." message when no reader fits).
    """


class NeedsInput(CheckpointError):
    """The file is sound but cannot be opened without something only the user can supply.

    Call :func:`model.checkpoint.load_any` again with the answer (and every earlier answer):
    ``n_heads=`` for kind ``"n_heads"``; ``vocab_path=`` (or ``allow_no_tokenizer=True``) for
    kind ``"vocab"``.

    Parameters
    ----------
    message : str
        What is missing and how to supply it, starting with the file name.
    kind : str
        ``"n_heads"`` (heads per block cannot be read from the weights) or ``"vocab"`` (no
        vocabulary was found for the model).
    path : path-like
        The checkpoint file.
    proposed : int, optional
        For ``"n_heads"``: the most likely value, to offer as the default.
    choices : tuple of int
        For ``"n_heads"``: every value the weights allow (the divisors of d_model).
    searched : tuple of Path
        For ``"vocab"``: the places where a vocabulary was looked for.
    suggested : Path, optional
        For ``"vocab"``: a vocabulary to offer that the format does not assume (GPT-2's files).
    """

    def __init__(self, message: str, *, kind: str, path: str | os.PathLike,
                 proposed: int | None = None, choices: tuple[int, ...] = (),
                 searched: tuple[Path, ...] = (), suggested: Path | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = Path(path)
        self.proposed = proposed
        self.choices = tuple(choices)
        self.searched = tuple(searched)
        self.suggested = Path(suggested) if suggested is not None else None
