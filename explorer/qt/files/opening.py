"""Opening a checkpoint in one pass: inspect the file, ask everything it cannot tell, load once.

:func:`model.checkpoint.inspect` reads the file (a Hub model is fetched first, off the GUI thread:
:mod:`explorer.qt.files.hub`) and says what only the user can supply: the number of attention
heads (an LLMs-from-scratch ``model.pth`` without its config JSON, a bare nanoGPT state dict) and
the vocabulary (a nanoGPT ``ckpt.pt`` without its ``meta.pkl``, a llama2.c ``model.bin`` without
its ``tokenizer.bin``). :class:`CheckpointOpener` asks all of it (through :mod:`explorer.qt.dialogs`)
before anything is loaded, then loads once; the answers are remembered per file in the settings
(:data:`explorer.qt.settings.OPENED_N_HEADS` ...), so that Open Recent, Reload and drag and drop open
the same file again without asking. Cancelling any question keeps the current model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QWidget

from explorer.core.save_folder import usable_save_folder
from explorer.qt import dialogs
from explorer.qt.files.hub import ERROR_TITLE, fetch_in_background
from explorer.qt.settings import OPENED_N_HEADS, OPENED_NO_VOCAB, OPENED_PATH, OPENED_VOCAB_PATH
from model import Checkpoint
from model.checkpoint import (
    CheckpointError, OpenOptions, Opening, Question, WrongVocabulary, inspect, inspect_snapshot, save_as,
)
from model.core.plain import clip, readable
from model.formats.opening import N_HEADS, VOCAB
from model.formats.refs import HubRef, Reference, reference_name

VOCAB_FILTER = ("Vocabularies (*.pkl *.json *.bin);;nanoGPT meta.pkl (meta.pkl *.pkl);;"
                "Vocabulary JSON / tokenizer.json (*.json);;llama2.c tokenizer.bin (*.bin);;All files (*)")
VOCAB_CHOICES = ["Choose a vocabulary file…", "Choose GPT-2's folder…", "Open without a vocabulary"]
SUGGESTED_CHOICE = "Use GPT-2's tokenizer (the files the question names)"
SAVE_FILTER = "Transformer Explorer checkpoints (*.safetensors);;All files (*)"
SAVE_ERROR_TITLE = "Could not save the model"
log = logging.getLogger(__name__)
__all__ = ["ERROR_TITLE", "SAVE_ERROR_TITLE", "SAVE_FILTER", "CheckpointOpener", "default_save_path", "does_not_run",
           "recall", "remember", "save_model", "settings_key"]


def settings_key(path: Path) -> str:
    """The settings group of a file's answers: one per absolute path (the ``{file}`` of the OPENED_ keys)."""
    return hashlib.sha1(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def recall(settings: QSettings, path: Path) -> OpenOptions:
    """The answers remembered for ``path`` (empty when none, or damaged)."""
    key = settings_key(path)
    vocab = OPENED_VOCAB_PATH.at(file=key).read(settings)
    return OpenOptions(OPENED_N_HEADS.at(file=key).read(settings), Path(vocab) if vocab else None,
                       OPENED_NO_VOCAB.at(file=key).read(settings))


def remember(settings: QSettings, path: Path, answers: OpenOptions) -> None:
    """Store the answers for ``path`` (replacing earlier ones)."""
    key = settings_key(path)
    for setting in (OPENED_PATH, OPENED_N_HEADS, OPENED_VOCAB_PATH, OPENED_NO_VOCAB):
        setting.at(file=key).write(settings, None)
    if answers == OpenOptions():
        return
    OPENED_PATH.at(file=key).write(settings, str(path.resolve()))
    OPENED_N_HEADS.at(file=key).write(settings, answers.n_heads)
    OPENED_VOCAB_PATH.at(file=key).write(settings, str(answers.vocab_path) if answers.vocab_path else None)
    OPENED_NO_VOCAB.at(file=key).write(settings, True if answers.allow_no_tokenizer else None)


def does_not_run(parent: QWidget | None, checkpoint: Checkpoint, exc: BaseException) -> None:
    """Say that a model (or its tokenizer) was read but raises when it runs; the current model stays."""
    name = checkpoint.origin.spec if checkpoint.origin is not None else (
        readable(checkpoint.path.name) if checkpoint.path is not None else "the model")
    dialogs.error(parent, ERROR_TITLE, f"{name}: the model was read but does not run "
                                       f"({type(exc).__name__}: {clip(str(exc))})")


class CheckpointOpener:
    """Loads a file or a Hub model, asking the user first what the file cannot tell.

    Parameters
    ----------
    parent : QWidget
        Parent of the dialogs.
    settings : QSettings
        Where answers are remembered.

    Attributes
    ----------
    cancelled : bool
        True after :meth:`open` returned None because the user cancelled (a question, the fetch).
    """

    def __init__(self, parent: QWidget, settings: QSettings) -> None:
        self.parent = parent
        self.settings = settings
        self.cancelled = False

    def open(self, ref: Reference, given: OpenOptions | None = None) -> Checkpoint | None:
        """Load ``ref``: inspect it, ask what it needs, load once; None when cancelled or on error
        (already shown in one dialog).

        Parameters
        ----------
        ref : Path, HubRef or BuiltinRef
            A file or folder, a Hub model (fetched with a progress dialog and Cancel) or a shipped model.
        given : OpenOptions, optional
            Answers supplied up front (command-line options); used as they are, never asked.
        """
        self.cancelled = False
        given = given or OpenOptions()
        try:
            opening = self._inspect(ref, given)
            return None if opening is None else self._load(opening, given)
        except CheckpointError as exc:  # the file, the fetch or an answer: the message says which
            dialogs.error(self.parent, ERROR_TITLE, str(exc))
        except Exception as exc:  # noqa: BLE001 - the app's boundary: one dialog, the current model stays
            log.exception("opening %s failed", ref)  # the traceback, for whoever runs the app from a terminal
            dialogs.error(self.parent, ERROR_TITLE,
                          f"{reference_name(ref)}: cannot be opened ({type(exc).__name__}: {clip(str(exc))})")
        return None

    def _inspect(self, ref: Reference, given: OpenOptions) -> Opening | None:
        """What the file is and asks; a Hub model fetched off the GUI thread first (None: cancelled)."""
        if not isinstance(ref, HubRef):
            return inspect(ref, given)
        folder = fetch_in_background(self.parent, ref)
        if folder is None:
            self.cancelled = True
            return None
        return inspect_snapshot(ref, folder, given)

    def _load(self, opening: Opening, given: OpenOptions) -> Checkpoint | None:
        """Every question answered (from memory or the user), then the one load; a vocabulary that does
        not fit the model is explained and asked again (it is read before the model is built)."""
        memory = recall(self.settings, opening.path)
        answered: dict[str, str] = {}  # kind -> "user" or "memory"
        answers = self._answer_all(opening.questions, given, memory, answered)
        while answers is not None:
            try:
                checkpoint = opening.load(answers)
            except WrongVocabulary as exc:
                if VOCAB not in answered:
                    raise
                if answered.pop(VOCAB) == "user":  # a remembered one that no longer fits is just dropped
                    dialogs.error(self.parent, "Not this model's vocabulary", str(exc))
                question = next(q for q in opening.questions if q.kind == VOCAB)
                answers = self._answer(question, dataclasses.replace(answers, vocab_path=None), OpenOptions(),
                                       answered)
                continue
            if not self._tokenizer_works(checkpoint):
                return None
            if answered:
                remember(self.settings, opening.path, answers)
            return checkpoint
        self.cancelled = True
        return None

    def _answer_all(self, questions: tuple[Question, ...], given: OpenOptions, memory: OpenOptions,
                    answered: dict[str, str]) -> OpenOptions | None:
        """``given`` with an answer to each question, before anything is loaded; None when cancelled."""
        answers: OpenOptions | None = given
        for question in questions:
            answers = self._answer(question, answers, memory, answered)
            if answers is None:
                return None
        return answers

    def _answer(self, question: Question, answers: OpenOptions, memory: OpenOptions,
                answered: dict[str, str]) -> OpenOptions | None:
        """``answers`` with the answer to ``question``: from memory when it still fits, else the user's
        (None when cancelled)."""
        if question.kind == N_HEADS:
            if memory.n_heads in question.choices:
                answered[N_HEADS] = "memory"
                return dataclasses.replace(answers, n_heads=memory.n_heads)
            answered[N_HEADS] = "user"
            n = self.ask_n_heads(question)
            return None if n is None else dataclasses.replace(answers, n_heads=n)
        if question.kind == VOCAB:
            if memory.allow_no_tokenizer or (memory.vocab_path is not None and memory.vocab_path.exists()):
                answered[VOCAB] = "memory"
                return dataclasses.replace(answers, vocab_path=memory.vocab_path,
                                           allow_no_tokenizer=memory.allow_no_tokenizer)
            answered[VOCAB] = "user"
            vocab = self.ask_vocab(question)
            return None if vocab is None else dataclasses.replace(answers, vocab_path=vocab[0],
                                                                  allow_no_tokenizer=vocab[1])
        dialogs.error(self.parent, ERROR_TITLE, question.message)  # a question this app does not know
        return None

    def ask_n_heads(self, question: Question) -> int | None:
        """Heads per block: proposes ``question.proposed``; a value that does not divide d_model is
        explained and asked again. None when cancelled."""
        possible = ", ".join(map(str, question.choices))
        value = question.proposed or question.choices[0]
        while True:
            n = dialogs.ask_int(self.parent, "Number of attention heads",
                                f"{question.message}\n\nHeads per block (one of {possible}):", value, 1,
                                max(question.choices))
            if n is None or n in question.choices:
                return n
            dialogs.error(self.parent, "Not a possible number of heads",
                          f"{n} heads do not divide the model's width; possible values: {possible}.")

    def ask_vocab(self, question: Question) -> tuple[Path | None, bool] | None:
        """A vocabulary file, GPT-2's folder, or none (tokens named by id), and first, where the question
        suggests one (GPT-2's files for a model of GPT-2's size), that one: (path, no vocabulary), or
        None when cancelled."""
        offer = [SUGGESTED_CHOICE] if question.suggested is not None else []
        choice = dialogs.ask_choice(self.parent, "Vocabulary not found", question.message, offer + VOCAB_CHOICES)
        if offer and choice == 0:
            return question.suggested.resolve(), False
        choice = None if choice is None else choice - len(offer)
        start = str(question.path.resolve().parent)
        path = None
        if choice == 0:
            path = dialogs.open_file(self.parent, "Choose the vocabulary", start, VOCAB_FILTER)
        elif choice == 1:
            path = dialogs.open_folder(self.parent, "Choose the folder with encoder.json and vocab.bpe", start)
        elif choice == 2:
            return None, True
        return (Path(path).resolve(), False) if path else None

    def _tokenizer_works(self, checkpoint: Checkpoint) -> bool:
        """Whether the tokenizer encodes a word (the model's first run is the session's, when it is shown);
        False after saying why."""
        try:
            if checkpoint.tokenizer is not None:
                checkpoint.tokenizer.encode("once upon a time")
        except Exception as exc:  # noqa: BLE001 - a tokenizer that cannot encode must not replace the current one
            log.exception("the tokenizer of %s does not run", checkpoint.path)
            does_not_run(self.parent, checkpoint, exc)
            return False
        return True


def default_save_path(checkpoint: Checkpoint, fallback_dir: Path) -> Path:
    """Where Save As proposes to write: the file's stem + ``.safetensors`` beside it; for a Hub model
    the repository's name, for a shipped model its name, in ``fallback_dir`` (never inside the Hub's
    cache or the installed app); for a file in a folder that cannot take it (read-only, or the
    shipped ``assets/`` opened by path) its name in ``fallback_dir``."""
    if isinstance(checkpoint.origin, HubRef):
        return fallback_dir / f"{checkpoint.origin.repo_id.split('/')[-1]}.safetensors"
    if checkpoint.origin is not None:
        return fallback_dir / f"{checkpoint.origin.name}.safetensors"
    if checkpoint.path is None:
        return fallback_dir / "model.safetensors"
    beside = checkpoint.path.resolve().with_suffix(".safetensors")
    return beside if usable_save_folder(beside.parent) else fallback_dir / beside.name


def save_model(parent: QWidget, checkpoint: Checkpoint, path: str | os.PathLike) -> bool:
    """Write ``checkpoint`` as our .safetensors (:func:`model.checkpoint.save_as`); False after
    showing any error in one dialog naming the file (nothing is left half-written: the file is
    written whole, then renamed)."""
    try:
        save_as(checkpoint, path)
    except OSError as exc:
        dialogs.error(parent, SAVE_ERROR_TITLE, f"cannot write {readable(str(path))}: {exc.strerror or exc}")
        return False
    except Exception as exc:  # noqa: BLE001 - the library's own errors: one dialog, nothing written
        log.exception("saving %s failed", path)
        dialogs.error(parent, SAVE_ERROR_TITLE, f"cannot write {readable(str(path))}: "
                                                f"{type(exc).__name__}: {clip(str(exc))}")
        return False
    return True
