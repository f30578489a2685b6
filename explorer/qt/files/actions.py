"""The File menu's actions: open (a file, a folder, a Hub model, a shipped model, a recent one, a dropped
one), reload, save as; the list of recent files.

Every way of opening ends in :meth:`FileActions.open_checkpoint` (the one open path): a reference
(a ``Path``, :class:`~model.formats.refs.HubRef` or :class:`~model.formats.refs.BuiltinRef`, text read once by
:func:`~model.formats.refs.parse_reference`) is opened by :class:`~explorer.qt.files.opening.CheckpointOpener`
(inspect, ask, load once), made current in the session, and put first in the recent files, which
hold each reference as its text (:data:`explorer.qt.settings.RECENT_FILES`).
"""

from __future__ import annotations

import os
from pathlib import Path

from explorer.core.about import shipped_models
from explorer.core.defaults import ASSETS, DEFAULT_MODEL, open_default, random_checkpoint
from explorer.qt import dialogs
from explorer.qt.files.hub import ERROR_TITLE, ask_repo
from explorer.qt.files.opening import SAVE_FILTER, CheckpointOpener, default_save_path, does_not_run, save_model
from explorer.qt.session import ModelDoesNotRun
from explorer.core.save_folder import proposed_save_folder
from explorer.qt.settings import LAST_DIR, RECENT_FILES, documents_folder
from model import Checkpoint
from model.checkpoint import CheckpointError, OpenOptions
from model.formats.refs import Reference, as_reference, parse_reference, reference_name, reference_text


class FileActions:
    """What File ▸ Open…, Open Folder…, Open from Hugging Face Hub…, Open Shipped Model, Open Recent, Reload,
    Save As and dropping a file on the window do, for one main window (its session, settings and status bar).

    Parameters
    ----------
    window : MainWindow
        Its ``session``, ``settings``, ``model_note``, ``set_checkpoint`` and status bar are used.
    """

    def __init__(self, window) -> None:
        self.window = window

    # ---- opening -------------------------------------------------------------------------------------
    def open_checkpoint(self, ref: Reference | str | os.PathLike, answers: OpenOptions | None = None) -> bool:
        """Load a checkpoint file or folder of any known format, or a Hub model, and make it current.

        Questions the file cannot answer (heads per block, the vocabulary) are all asked before it
        is loaded, and remembered per file (see :mod:`explorer.qt.files.opening`). On failure an
        error dialog shows the loader's message; on failure or cancel the current model stays.

        Parameters
        ----------
        ref : Path, HubRef, BuiltinRef or str
            A file or folder, a Hub model (fetched off the GUI thread, with a progress dialog
            and Cancel) or a shipped model; text is read by :func:`~model.formats.refs.parse_reference`
            (``hf:REPO_ID[@REVISION]`` is a Hub model, ``builtin:NAME`` a shipped one).
        answers : OpenOptions, optional
            Answers given up front (``--n-heads``, ``--vocab``), never asked.

        Returns
        -------
        bool
            True when the model was loaded and shown.
        """
        window = self.window
        try:
            ref = as_reference(ref)
        except CheckpointError as exc:  # text that starts with hf: or builtin: but names no repository or model
            dialogs.error(window, ERROR_TITLE, str(exc))
            return False
        opener = CheckpointOpener(window, window.settings)
        checkpoint = opener.open(ref, answers)
        if checkpoint is None:
            if opener.cancelled:
                window.statusBar().showMessage(f"Opening {reference_name(ref)} was cancelled; the current model stays.",
                                               8000)
            return False
        if not self.make_current(checkpoint):
            return False
        self._add_recent(ref)
        return True

    def make_current(self, checkpoint: Checkpoint, note: str = "") -> bool:
        """Show ``checkpoint`` in every panel (``note``: why it is not a file, for the title); False, after
        saying so, when its model does not run (the current model stays)."""
        window, before = self.window, self.window.model_note
        window.model_note = note
        try:
            window.set_checkpoint(checkpoint)
        except ModelDoesNotRun as exc:
            window.model_note = before
            does_not_run(window, checkpoint, exc.__cause__ or exc)
            return False
        return True

    def open_default(self) -> None:
        """Open the default checkpoint in assets/, or the seeded random model while it is missing."""
        try:
            checkpoint, note = open_default()
        except CheckpointError as exc:
            dialogs.error(self.window, "Could not open the default checkpoint", str(exc))
            checkpoint, note = random_checkpoint(), f"seeded random model: {exc}"
        self.make_current(checkpoint, note)

    def reload(self) -> None:
        """Load the current checkpoint's file again (F5), or its repository for a Hub model, keeping the
        selected layer and head (clamped to the file's model) and the selected position while the text
        still has it."""
        s = self.window.session
        ckpt, kept = s.checkpoint, (s.layer, s.head, s.position)
        if ckpt is not None and ckpt.reference is not None:
            if not self.open_checkpoint(ckpt.reference):
                return
        elif ckpt is None or self.window.model_note:
            self.open_default()
        else:
            return
        layer, head, position = kept
        s.set_layer(layer)
        s.set_head(head)
        if position is not None and position < min(len(s.encoding), s.config.context_length):
            s.set_position(position)

    def save_checkpoint_as(self, path: str | os.PathLike) -> bool:
        """Write the current model as our .safetensors (weights, config, tokenizer) and open that file.

        An unwritable place shows an error dialog and leaves nothing half-written.
        """
        ckpt = self.window.session.checkpoint
        return ckpt is not None and save_model(self.window, ckpt, path) and self.open_checkpoint(Path(path))

    # ---- the menu's dialogs ------------------------------------------------------------------------------
    def on_open(self) -> None:
        """File ▸ Open Checkpoint: a file."""
        self._open_chosen(dialogs.open_file(self.window, "Open Checkpoint", self._start_dir()))

    def on_open_folder(self) -> None:
        """File ▸ Open Folder: a model kept as a folder (llama2.c's out/, a Hugging Face model)."""
        self._open_chosen(dialogs.open_folder(self.window, "Open Folder", self._start_dir()))

    def on_open_hub(self) -> None:
        """File ▸ Open from Hugging Face Hub: a repository id, fetched into the Hub's cache."""
        ref = ask_repo(self.window, self.window.settings)
        if ref is not None:
            self.open_checkpoint(ref)

    def fill_shipped_menu(self, menu) -> None:
        """Put the shipped models in ``menu`` (File ▸ Open Shipped Model, as it is about to show), each
        as ``builtin:NAME`` with its shape and training in its tooltip (the default one said so)."""
        menu.clear()
        menu.setToolTipsVisible(True)
        models = shipped_models(DEFAULT_MODEL)
        for model in models:
            action = menu.addAction(model.ref.name + (" (default)" if model.ref == DEFAULT_MODEL else ""))
            action.setToolTip(f"{model.ref.spec}: {model.summary}")
            action.setStatusTip(action.toolTip())
            action.triggered.connect(lambda *_, ref=model.ref: self.open_checkpoint(ref))
        menu.setEnabled(bool(models))

    def on_save_as(self) -> None:
        """File ▸ Save As: the current model as our .safetensors."""
        ckpt = self.window.session.checkpoint
        if ckpt is not None:
            folder = proposed_save_folder((LAST_DIR.read(self.window.settings), documents_folder(), str(Path.home())))
            start = default_save_path(ckpt, Path(folder))
            path = dialogs.save_file(self.window, "Save Model As", str(start), SAVE_FILTER)
            if path:
                self.save_checkpoint_as(Path(path) if Path(path).suffix else Path(path + ".safetensors"))

    def on_drop(self, files: list[str]) -> None:
        """A file or folder dropped on the window is opened (the first, when several are dropped)."""
        if files:
            self.open_checkpoint(Path(files[0]))

    def _start_dir(self) -> str:
        return LAST_DIR.read(self.window.settings) or str(ASSETS)

    def _open_chosen(self, path: str | None) -> None:
        if path:
            LAST_DIR.write(self.window.settings, str(Path(path).parent))
            self.open_checkpoint(Path(path))

    # ---- recent files --------------------------------------------------------------------------------
    def recent_references(self) -> list[Reference]:
        """Recently opened files and folders that still exist, Hub models and shipped models, newest first
        (what is missing or unreadable, a shipped model no longer shipped, is pruned from the settings)."""
        texts = RECENT_FILES.read(self.window.settings)
        refs = [ref for ref in map(_parsed, texts) if ref is not None and (not isinstance(ref, Path) or ref.exists())]
        if len(refs) != len(texts):
            RECENT_FILES.write(self.window.settings, [reference_text(ref) for ref in refs])
        return refs

    def recent_files(self) -> list[str]:
        """:meth:`recent_references` as the menu shows them (``hf:owner/name`` for a Hub model)."""
        return [reference_text(ref) for ref in self.recent_references()]

    def open_recent(self, ref: Reference | str) -> bool:
        """Open a recent file, folder, Hub model or shipped model; a file that has vanished is reported and pruned."""
        ref = _parsed(ref) if isinstance(ref, str) else ref
        if ref is None or (isinstance(ref, Path) and not ref.exists()):
            name = ref.name if ref is not None else "the file"
            dialogs.error(self.window, ERROR_TITLE, f"{name}: the file no longer exists")
            self.recent_references()
            return False
        return self.open_checkpoint(ref)

    def fill_recent_menu(self, menu) -> None:
        """Put the recent files in ``menu`` (File ▸ Open Recent, as it is about to show)."""
        menu.clear()
        refs = self.recent_references()
        for ref in refs:
            menu.addAction(reference_text(ref)).triggered.connect(lambda *_, ref=ref: self.open_recent(ref))
        menu.setEnabled(bool(refs))

    def _add_recent(self, ref: Reference) -> None:
        text = reference_text(ref.resolve() if isinstance(ref, Path) else ref)
        texts = [text] + [t for t in self.recent_files() if t != text]
        RECENT_FILES.write(self.window.settings, texts[:int(RECENT_FILES.hi)])


def _parsed(text: str) -> Reference | None:
    """A recent file's text as its reference; None for damaged text (``hf:`` and no repository id) and
    for a shipped model no longer shipped."""
    try:
        return parse_reference(text)
    except CheckpointError:
        return None
