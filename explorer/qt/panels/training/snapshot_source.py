"""Where the Training panel's snapshots come from: found for the loaded model (its run's folder, or
for a Hub model its repository's step revisions in the local cache), read from a folder, or
followed while a run writes them. Loading runs on a thread of its own (14 snapshots of the
default model take 0.3 to 1.5 s), and each result is handed to the GUI thread as an immutable
:class:`SnapshotView`, so that the GUI never reads a set that the loading thread is changing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from explorer.qt.scheduling.jobs import Worker, timed
from model import Checkpoint
from model.training.snapshots import (
    Skipped, Snapshot, SnapshotError, SnapshotSet, hub_revisions_for, load_snapshots, revision_snapshots,
    snapshot_folder_for,
)

FOLLOW_MS = 1000  # how often a folder that a run is writing is looked at


@dataclass(frozen=True)
class SnapshotView:
    """The snapshots as loaded at one moment (a run still writing brings a new view per new file).

    Attributes
    ----------
    folder : Path
    snapshots : tuple of Snapshot          increasing step.
    skipped : tuple of Skipped             files not of the run, with the reason.
    val_curve : tuple of (step, loss)      the run's stored validation curve (nats per token).
    reference : Checkpoint or None         the loaded model they were matched to (they are its run's,
                                           with its vocabulary object); None for another run's.
    identical : tuple of tuple of int      per snapshot, the indices of the others with the same weights.
    revisions : bool                       True for a Hub repository's revisions (not a folder of files).
    tokenizer : Tokenizer or None          the run's one tokenizer object (read from the headers: no
                                           snapshot's weights are loaded for it).
    """

    folder: Path
    snapshots: tuple[Snapshot, ...]
    skipped: tuple[Skipped, ...]
    val_curve: tuple[tuple[int, float], ...]
    reference: Checkpoint | None
    identical: tuple[tuple[int, ...], ...] = ()
    revisions: bool = False
    tokenizer: object = None

    @property
    def steps(self) -> list[int]:
        """The snapshots' steps, increasing."""
        return [s.step for s in self.snapshots]


def _view(snaps: SnapshotSet, matched: bool) -> SnapshotView:
    return SnapshotView(snaps.folder, tuple(snaps.snapshots), tuple(snaps.skipped), tuple(snaps.val_curve),
                        snaps.reference if matched else None, tuple(tuple(i) for i in snaps.identical()),
                        bool(snaps.revisions), snaps.tokenizer)


def load_matching(folder: Path, reference: Checkpoint | None) -> tuple[SnapshotSet, bool]:
    """A folder's snapshots, matched to ``reference`` when they are of its run, else on their own.

    Returns
    -------
    (SnapshotSet, bool)
        The set, and whether it was matched to ``reference``.

    Raises
    ------
    SnapshotError
        When the folder does not exist or cannot be read.
    """
    snaps = load_snapshots(folder, reference=reference)
    if reference is not None and not snaps.snapshots and snaps.skipped:
        own = load_snapshots(folder)  # another run's: of another shape or vocabulary
        if own.snapshots:
            return own, False
    return snaps, reference is not None


class SnapshotSource(QObject):
    """The snapshots of one run, loaded once and kept; emits :attr:`sig_changed` when they change.

    Parameters
    ----------
    sync : bool
        Load on the calling thread (tests, screenshots); otherwise on a thread of its own.
    """

    sig_changed = Signal()
    """A new view, or the message changed (loading, nothing found, an error)."""

    def __init__(self, sync: bool = False, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.sync = sync
        self.view: SnapshotView | None = None
        self.message = ""
        self.loading = False
        self._set: SnapshotSet | None = None  # touched only by the loading thread once loaded
        self._matched = False
        self._folder: Path | None = None
        self._gen = 0
        self._worker = Worker(self)
        self._timer = QTimer(self)
        self._timer.setInterval(FOLLOW_MS)
        self._timer.timeout.connect(self._look_again)

    @property
    def following(self) -> bool:
        """True while a folder that a run is writing is looked at again every :data:`FOLLOW_MS`."""
        return self._timer.isActive()

    def for_model(self, checkpoint: Checkpoint | None) -> None:
        """The snapshots that belong to a loaded checkpoint: a Hub model's step revisions in the local cache
        (:func:`model.training.snapshots.hub_revisions_for`), else its run's folder
        (:func:`model.training.snapshots.snapshot_folder_for`)."""
        self.stop_following()
        revisions = hub_revisions_for(checkpoint) if checkpoint is not None else []
        if revisions:  # a Hub model: its repository's step revisions in the local cache
            self._load(revisions[0].folder.parent.parent, checkpoint,
                       reader=lambda: (revision_snapshots(revisions, reference=checkpoint), True))
            return
        folder = snapshot_folder_for(checkpoint) if checkpoint is not None else None
        if folder is None:
            hub = checkpoint is not None and checkpoint.training.get("source") == "Hugging Face Hub"
            where = (f"revisions of {checkpoint.training.get('repo')} named after a training step, such as "
                     "step1000, are used when they are in the local Hub cache (open hf:REPO@step1000 to fetch one)"
                     if hub else "a run of python -m model.train --snapshots K keeps them beside the model")
            self._set_view(None, "" if checkpoint is None else
                           f"No training snapshots found for {checkpoint.name} ({where}). File ▸ Open Snapshot "
                           "Folder… opens any folder.")
            return
        self._load(folder, checkpoint)

    def open_folder(self, folder: str | os.PathLike, reference: Checkpoint | None) -> None:
        """Read a folder: matched to ``reference`` when it holds that model's run, else on its own."""
        self.stop_following()
        self._load(Path(folder), reference)

    def follow(self, folder: str | os.PathLike) -> None:
        """Follow a folder that a run is writing (it may not exist yet): new snapshots stream in."""
        self._load(Path(folder), None, follow=True)
        self._timer.start()

    def stop_following(self) -> None:
        """Stop looking for new snapshots (a last look is taken first, when following)."""
        if self._timer.isActive():
            self._timer.stop()
            self._look_again()

    def read_weights(self, snapshot: Snapshot, deliver) -> None:
        """Read a snapshot's weights off the GUI thread (at once when :attr:`sync`, or when they are
        in memory) and call ``deliver(checkpoint, error)`` on the GUI thread: a checkpoint, or None
        and the exception (a file changed or gone since it was listed). A newer request replaces a
        queued older one (its ``deliver`` is then never called; a running one's still is). Reading one of 3,000 small
        snapshots, with the torch model it builds, took 40 ms or more of the GUI thread."""
        if self.sync or snapshot.loaded:
            value, exc, _ms = timed(lambda: snapshot.checkpoint)
            deliver(value, exc)
            return
        self._worker.submit("weights", lambda: snapshot.checkpoint, lambda value, exc, _ms: deliver(value, exc),
                            priority=0)

    def shutdown(self) -> None:
        """Stop following and drop queued loading (a running load finishes in the background)."""
        self._timer.stop()
        self._worker.shutdown(wait=False)

    # ---- loading ----------------------------------------------------------------------------------
    def _load(self, folder: Path, reference: Checkpoint | None, follow: bool = False, reader=None) -> None:
        self._gen += 1
        gen = self._gen
        waiting = follow and self._folder == folder and self.view is None  # looking again for a first file
        self._set, self._folder, self.loading = None, folder, True
        if not waiting:
            self._set_view(None, f"Loading the snapshots in {folder}…")

        def work():
            try:
                snaps, matched = reader() if reader is not None else load_matching(folder, reference)
            except SnapshotError:
                if follow:
                    return None  # the run has not written its first snapshot yet
                raise
            return snaps, matched, _view(snaps, matched)  # here: on the GUI thread it froze 3,000 for 0.4 s

        def deliver(value, exc, _ms) -> None:
            if gen != self._gen:
                return
            self.loading = False
            if exc is not None:
                self._set_view(None, f"Could not read the snapshots: {exc}")
            elif value is None:
                self._set_view(None, f"Waiting for the run's first snapshot in {folder}…")
            else:
                self._set, self._matched, view = value
                self._set_view(view, "" if view.snapshots else f"No snapshots in {folder}.")

        self._run(work, deliver)

    def _look_again(self) -> None:
        """Load the files that appeared since the last look (the folder itself, the first time)."""
        if self.loading or self._worker.busy:
            return
        snaps, gen = self._set, self._gen
        if snaps is None:
            if self._folder is not None:
                self._load(self._folder, None, follow=True)
            return

        def work():
            return snaps.refresh() and _view(snaps, self._matched)

        def deliver(value, exc, _ms) -> None:
            if gen == self._gen and exc is None and value:
                self._set_view(value, "")

        self._run(work, deliver)

    def _run(self, work, deliver) -> None:
        if self.sync:
            deliver(*timed(work))
        else:
            self._worker.submit("load", work, deliver)

    def _set_view(self, view: SnapshotView | None, message: str) -> None:
        self.view, self.message = view, message
        self.sig_changed.emit()
