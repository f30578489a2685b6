"""Opening a checkpoint: the questions asked when a file cannot tell everything, and their answers.

:func:`model.checkpoint.load_any` raises :class:`model.checkpoint.NeedsInput` when only the
user can supply something: the number of attention heads (an LLMs-from-scratch ``model.pth``
without its config JSON) or the vocabulary (a nanoGPT ``ckpt.pt`` without its ``meta.pkl``, a
llama2.c ``model.bin`` without its ``tokenizer.bin``). A path may be a file or a folder.
:class:`CheckpointOpener` asks (through :mod:`explorer.qt.dialogs`), loads again with every answer
so far, and remembers the answers per file in QSettings, so that Open Recent, Reload and drag and
drop open the same file again without asking. Cancelling any question keeps the current model.
``hf:REPO_ID[@REVISION]`` is a model on the Hugging Face Hub: fetched off the GUI thread
(:mod:`explorer.qt.files.hub`), then opened from its snapshot folder in the Hub's cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QWidget

from explorer.qt import dialogs
from explorer.qt.files.hub import fetch_in_background
from explorer.qt.settings import read_bool, read_int, read_str
from model import Checkpoint
from model.checkpoint import CheckpointError, NeedsInput, load_any, load_snapshot, save_as
from model.formats.hub import HubError, is_hub_spec, parse_hub_spec
from model.core.plain import clip, readable

MAX_ROUNDS = 8  # questions per opening; each answer removes one, so this is never reached
VOCAB_FILTER = ("Vocabularies (*.pkl *.json *.bin);;nanoGPT meta.pkl (meta.pkl *.pkl);;"
                "Vocabulary JSON / tokenizer.json (*.json);;llama2.c tokenizer.bin (*.bin);;All files (*)")
VOCAB_CHOICES = ["Choose a vocabulary file…", "Choose GPT-2's folder…", "Open without a vocabulary"]
ERROR_TITLE = "Could not open checkpoint"
MAX_HEADS = 4096  # a remembered number of heads above this is damage, not an answer
SAVE_FILTER = "Transformer Explorer checkpoints (*.safetensors);;All files (*)"
SAVE_ERROR_TITLE = "Could not save the model"
log = logging.getLogger(__name__)


@dataclass
class Answers:
    """What the user supplied for one file (see :func:`model.checkpoint.load_any`)."""

    n_heads: int | None = None
    vocab_path: str | None = None
    no_vocab: bool = False


def settings_key(path: Path) -> str:
    """The QSettings group of a file's answers: one per absolute path."""
    return "opened/" + hashlib.sha1(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def recall(settings: QSettings, path: Path) -> Answers:
    """The answers remembered for ``path`` (empty when none)."""
    key = settings_key(path)
    heads = read_int(settings, f"{key}/n_heads", 0, 1, MAX_HEADS)
    vocab = read_str(settings, f"{key}/vocab_path")
    return Answers(heads or None, vocab or None, read_bool(settings, f"{key}/no_vocab", False))


def remember(settings: QSettings, path: Path, answers: Answers) -> None:
    """Store the answers for ``path`` (replacing earlier ones)."""
    key = settings_key(path)
    settings.remove(key)
    if answers == Answers():
        return
    settings.setValue(f"{key}/path", str(path.resolve()))
    if answers.n_heads is not None:
        settings.setValue(f"{key}/n_heads", str(answers.n_heads))
    if answers.vocab_path:
        settings.setValue(f"{key}/vocab_path", answers.vocab_path)
    if answers.no_vocab:
        settings.setValue(f"{key}/no_vocab", "true")


class CheckpointOpener:
    """Loads a file, asking the user what the file cannot tell.

    Parameters
    ----------
    parent : QWidget
        Parent of the dialogs.
    settings : QSettings
        Where answers are remembered (group ``opened/``).

    Attributes
    ----------
    cancelled : bool
        True after :meth:`open` returned None because the user cancelled a question.
    """

    def __init__(self, parent: QWidget, settings: QSettings) -> None:
        self.parent = parent
        self.settings = settings
        self.cancelled = False

    def open(self, path: str | os.PathLike, given: Answers | None = None) -> Checkpoint | None:
        """Load ``path``, asking what it needs; None when cancelled or on error (already shown).

        Parameters
        ----------
        path : path-like or str
            A file or folder, or ``hf:REPO_ID[@REVISION]`` (fetched with a progress dialog and Cancel).
        given : Answers, optional
            Answers supplied up front (command-line options); used as they are, never asked.
        """
        self.cancelled = False
        try:
            if is_hub_spec(path):
                return self._open_hub(str(path), given)
            return self._open(Path(path), given, load_any)
        except Exception as exc:  # noqa: BLE001 - the app's boundary: one dialog, the current model stays
            log.exception("opening %s failed", path)  # the traceback, for whoever runs the app from a terminal
            name = readable(str(path) if is_hub_spec(path) else Path(path).name)
            dialogs.error(self.parent, ERROR_TITLE, f"{name}: cannot be opened ({type(exc).__name__}: {clip(str(exc))})")
            return None

    def _open_hub(self, spec: str, given: Answers | None) -> Checkpoint | None:
        """Fetch a Hub model off the GUI thread, then open its snapshot folder, named after the repository."""
        try:
            ref = parse_hub_spec(spec)  # a bad repository id is refused before anything is fetched
            folder = fetch_in_background(self.parent, ref)
        except HubError as exc:
            dialogs.error(self.parent, ERROR_TITLE, str(exc))
            return None
        if folder is None:
            self.cancelled = True
            return None
        return self._open(folder, given, partial(load_snapshot, ref))

    def _open(self, path: Path, given: Answers | None, load) -> Checkpoint | None:
        """:meth:`open` for a file or folder, loaded with ``load`` (:func:`load_any`'s signature)."""
        answers = dataclasses.replace(given) if given is not None else Answers()
        memory = recall(self.settings, path)
        answered: dict[str, str] = {}  # kind -> "user" or "memory", for this opening's questions
        for _ in range(MAX_ROUNDS):
            try:
                checkpoint = load(path, answers.n_heads, vocab_path=answers.vocab_path,
                                  allow_no_tokenizer=answers.no_vocab)
            except NeedsInput as exc:
                if not self._answer(exc, answers, memory, answered):
                    self.cancelled = True
                    return None
                continue
            except CheckpointError as exc:
                if "vocab" not in answered:  # the file itself is bad: nothing to ask
                    dialogs.error(self.parent, ERROR_TITLE, str(exc))
                    return None
                # The model is sound (the vocabulary is read last): the chosen vocabulary is not.
                # Tell the user and ask again; a remembered one that no longer fits is just dropped.
                if answered.pop("vocab") == "user":
                    dialogs.error(self.parent, "Not this model's vocabulary", str(exc))
                answers.vocab_path = None
                continue
            if not self._runs(checkpoint):
                return None
            if answered:
                remember(self.settings, path, answers)
            return checkpoint
        dialogs.error(self.parent, ERROR_TITLE, f"{path.name}: the loader kept asking the same question")
        return None

    def _runs(self, checkpoint: Checkpoint) -> bool:
        """Whether the loaded model runs on one token (and its tokenizer on a word), checked before
        it replaces the current model; False after saying why."""
        try:
            checkpoint.model.trace([0])
            if checkpoint.tokenizer is not None:
                checkpoint.tokenizer.encode("once upon a time")
        except Exception as exc:  # noqa: BLE001 - a model that loads but cannot run must not replace the current one
            log.exception("the model of %s does not run", checkpoint.path)
            name = checkpoint.origin or (readable(checkpoint.path.name) if checkpoint.path is not None else "the model")
            dialogs.error(self.parent, ERROR_TITLE, f"{name}: the model was read but does not run "
                                                    f"({type(exc).__name__}: {clip(str(exc))})")
            return False
        return True

    def _answer(self, exc: NeedsInput, answers: Answers, memory: Answers, answered: dict[str, str]) -> bool:
        """Fill in ``answers`` for the question ``exc`` asks: from memory (once), else the user.
        False when the user cancelled."""
        if exc.kind == "n_heads":
            if memory.n_heads in exc.choices:
                answers.n_heads, memory.n_heads, answered["n_heads"] = memory.n_heads, None, "memory"
                return True
            answers.n_heads, answered["n_heads"] = self.ask_n_heads(exc), "user"
            return answers.n_heads is not None
        if exc.kind == "vocab":
            if memory.no_vocab or (memory.vocab_path and Path(memory.vocab_path).exists()):
                answers.vocab_path, answers.no_vocab = memory.vocab_path, memory.no_vocab
                memory.vocab_path, memory.no_vocab, answered["vocab"] = None, False, "memory"
                return True
            answered["vocab"] = "user"
            return self.ask_vocab(exc, answers)
        dialogs.error(self.parent, ERROR_TITLE, str(exc))  # a question this app does not know
        return False

    def ask_n_heads(self, exc: NeedsInput) -> int | None:
        """Heads per block: proposes ``exc.proposed``; a value that does not divide d_model is explained
        and asked again. None when cancelled."""
        possible = ", ".join(map(str, exc.choices))
        value = exc.proposed or exc.choices[0]
        while True:
            n = dialogs.ask_int(self.parent, "Number of attention heads",
                                f"{exc}\n\nHeads per block (one of {possible}):", value, 1, max(exc.choices))
            if n is None or n in exc.choices:
                return n
            dialogs.error(self.parent, "Not a possible number of heads",
                          f"{n} heads do not divide the model's width; possible values: {possible}.")

    def ask_vocab(self, exc: NeedsInput, answers: Answers) -> bool:
        """A vocabulary file, GPT-2's folder, or none (tokens named by id). False when cancelled."""
        choice = dialogs.ask_choice(self.parent, "Vocabulary not found", str(exc), VOCAB_CHOICES)
        start = str(exc.path.resolve().parent)
        if choice == 0:
            answers.vocab_path = dialogs.open_file(self.parent, "Choose the vocabulary", start, VOCAB_FILTER)
        elif choice == 1:
            answers.vocab_path = dialogs.open_folder(self.parent, "Choose the folder with encoder.json and vocab.bpe",
                                                     start)
        elif choice == 2:
            answers.vocab_path, answers.no_vocab = None, True
            return True
        if answers.vocab_path:
            answers.vocab_path = str(Path(answers.vocab_path).resolve())
            return True
        return False


def default_save_path(checkpoint: Checkpoint, fallback_dir: Path) -> Path:
    """Where Save As proposes to write: the file's stem + ``.safetensors`` beside it; for a Hub model
    the repository's name in ``fallback_dir`` (never inside the Hub's cache)."""
    if checkpoint.origin is not None and is_hub_spec(checkpoint.origin):
        return fallback_dir / f"{parse_hub_spec(checkpoint.origin).repo_id.split('/')[-1]}.safetensors"
    if checkpoint.path is None:
        return fallback_dir / "model.safetensors"
    return checkpoint.path.resolve().with_suffix(".safetensors")


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
