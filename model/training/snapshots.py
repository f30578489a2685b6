"""Snapshots of one training run: found, checked against each other, ordered by step, kept loaded.

``python -m model.train --snapshots K`` (or ``--snapshot-every N``) writes float16 checkpoints
``step-NNNNNN.safetensors`` into ``OUT-STEM-snapshots/`` (or ``--snapshot-dir``) and records that
folder, relative to the checkpoint's folder, as ``snapshot_dir`` in the checkpoint's training
facts. Checkpoints trained before that fact existed are linked through the ``--snapshot-dir``
and ``--out`` of the ``command`` they record: the default model's command says
``--snapshot-dir assets/snapshots --out assets/tinystories-1L1H.safetensors``, so its snapshots
are the ``snapshots`` folder beside it.

A folder may also hold nanoGPT ``ckpt.pt`` files of one run (directly, or one per subfolder):
whatever :func:`model.checkpoint.load_any` opens. Files of another shape or vocabulary than the
run's are listed as skipped, with the reason. The training step of a file is its training facts'
``steps`` (nanoGPT's ``iter_num``), else the last number in its name. Our files are listed by their
headers and their weights read on first use (:mod:`model.training.lazy_snapshots`).

A model opened from the Hugging Face Hub has as its snapshots the revisions of its repository
that are in the local Hub cache and are named after a training step (EleutherAI's Pythia suite:
``step0`` ... ``step143000``; :func:`model.checkpoint.cached_revisions`). Checkpoint series can lie
(EleutherAI/pythia#195, #205, #206: whole ranges of revisions serve the same weights), so every
such snapshot's weights are hashed when it is listed (:func:`weights_digest`; a Hub revision is a
folder read whole to be listed) and :meth:`SnapshotSet.identical` says which are the same as another.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from model.checkpoint import Checkpoint, CheckpointError, HubRef, cached_revisions, load_any, load_checkpoint
from model.training.lazy_snapshots import Listed, LoadedSnapshots, Lister, Signature, Snapshot, signature_of

CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin")


class SnapshotError(Exception):
    """A snapshot folder cannot be read (missing, not a folder); the message says which."""


@dataclass(frozen=True)
class Skipped:
    """A file in a snapshot folder that is not part of the run, and why."""

    path: Path
    reason: str


def weights_digest(model) -> str:
    """A SHA-256 of a model's weights: every tensor of its state dict, by name, with its dtype and
    shape (equal digests: the same weights, whatever file they came from)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def _difference(sig: Signature, ref: Signature, whose: str) -> str | None:
    """Why a file's signature does not fit the run's (``whose`` says against what), or None."""
    mine, theirs = json.loads(sig[0]), json.loads(ref[0])
    for key in theirs:
        if mine.get(key) != theirs[key]:
            return f"{key} {mine.get(key)} where {whose} {theirs[key]}"
    if sig[1] is not None and ref[1] is not None and sig[1] != ref[1]:
        return f"another vocabulary than {whose.split()[0]} {whose.split()[1]}'s (both {mine['vocab_size']} tokens)"
    return None


_NUMBER = re.compile(r"\d+")


def step_from_name(relative: str) -> int | None:
    """The last number in a file's path inside its folder (``iter-1000/ckpt.pt`` -> 1000)."""
    numbers = _NUMBER.findall(str(Path(relative).with_suffix("")))
    return int(numbers[-1]) if numbers else None


def _step_of(training: dict, relative: str) -> int | None:
    steps = training.get("steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0:
        return steps
    return step_from_name(relative)


def _candidates(folder: Path) -> list[Path]:
    """Checkpoint-named files in the folder and in its immediate subfolders (hidden and .tmp left
    out; unreadable subfolders too).

    Raises
    ------
    SnapshotError
        When the folder itself cannot be listed.
    """
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise SnapshotError(f"{folder}: cannot be read ({exc.strerror or exc})") from None
    found = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            inner = sorted(entry.iterdir()) if entry.is_dir() else [entry]
        except OSError:
            continue
        found += [p for p in inner if p.is_file() and not p.name.startswith(".")
                  and p.suffix.lower() in CHECKPOINT_SUFFIXES]
    return found


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:  # removed since it was listed
        return None
    return st.st_mtime_ns, st.st_size


@dataclass
class SnapshotSet:
    """The snapshots of one run, ordered by step, listed by their headers and loaded on first use.

    Attributes
    ----------
    folder : Path
    snapshots : list of Snapshot   increasing step (ties by file name).
    skipped : list of Skipped      files that are not part of the run (unreadable, another shape
                                   or vocabulary, no step, a step already taken), by file name.
    reference : Checkpoint or None the model the snapshots were matched against, if any.
    kept : LoadedSnapshots         the snapshots loaded now, within their memory budget.
    revisions : dict of Path to (int, str)   for a Hub repository's revisions (:func:`revision_snapshots`):
                                   each snapshot folder's step and revision name, the only files
                                   looked at; empty for a folder of files.
    """

    folder: Path
    snapshots: list[Snapshot] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    reference: Checkpoint | None = None
    kept: LoadedSnapshots = field(default_factory=LoadedSnapshots)
    revisions: dict[Path, tuple[int, str]] = field(default_factory=dict)
    _signature: Signature | None = None
    _seen: dict[Path, tuple[int, int]] = field(default_factory=dict)
    _load_options: dict = field(default_factory=dict)
    _lister: Lister | None = None

    def __len__(self) -> int:
        return len(self.snapshots)

    def __getitem__(self, index: int) -> Snapshot:
        return self.snapshots[index]

    def __iter__(self):
        return iter(self.snapshots)

    @property
    def steps(self) -> list[int]:
        """The snapshots' steps, increasing."""
        return [s.step for s in self.snapshots]

    @property
    def tokenizer(self):
        """The run's one tokenizer object (the reference's when it has one), or None."""
        if self.reference is not None and self.reference.tokenizer is not None:
            return self.reference.tokenizer
        lister = self._lister
        return lister.tokenizers.get(self._signature[1]) if lister is not None and self._signature else None

    @property
    def val_curve(self) -> list[tuple[int, float]]:
        """The run's stored validation curve: (step, loss in nats per token), increasing step.

        The reference checkpoint's ``val_curve`` when it has one, else that of the snapshot with
        the highest step (written with each snapshot: the curve up to it). Empty when unknown
        (nanoGPT files keep only the best loss so far).
        """
        sources = [self.reference.training] if self.reference is not None else []
        sources += [s.training for s in self.snapshots[::-1]]
        for training in sources:
            curve = training.get("val_curve")
            if isinstance(curve, list) and curve:
                try:
                    return sorted((int(s), float(v)) for s, v in curve)
                except (TypeError, ValueError):
                    continue
        return []

    def identical(self) -> list[list[int]]:
        """Per snapshot (by index), the indices of the others whose weights are the same
        (:func:`weights_digest`): a series that served one checkpoint under several steps."""
        by_digest: dict[str, list[int]] = {}
        for i, snap in enumerate(self.snapshots):  # grouped once: comparing every pair took 0.4 s of 3,000
            if snap.digest:
                by_digest.setdefault(snap.digest, []).append(i)
        return [[j for j in by_digest[snap.digest] if j != i] if snap.digest else []
                for i, snap in enumerate(self.snapshots)]

    def index_at(self, step: int) -> int:
        """Index of the snapshot at ``step``, or of the last one before it (0 before the first).

        Raises
        ------
        IndexError
            When the set is empty.
        """
        if not self.snapshots:
            raise IndexError("no snapshots")
        before = [i for i, s in enumerate(self.snapshots) if s.step <= step]
        return before[-1] if before else 0

    def refresh(self) -> list[Snapshot]:
        """List files that appeared (or changed) since the last look: for a run still writing.

        Files are written atomically, so a file that is there is complete. Our files are read by
        their headers only (their weights on first use); others whole.

        Returns
        -------
        list of Snapshot
            The new snapshots (also merged into :attr:`snapshots` in step order).

        Raises
        ------
        SnapshotError
            When the folder is gone.
        """
        if not self.folder.is_dir():
            raise SnapshotError(f"{self.folder}: " + ("no such folder" if not self.folder.exists() else "not a folder"))
        candidates = list(self.revisions) if self.revisions else _candidates(self.folder)
        fresh = [p for p in candidates if self._seen.get(p) != _stat_key(p)]
        if not fresh:
            return []
        lister = self._lister = self._lister or Lister(self._load_options)
        again = set(fresh)
        self.snapshots = [s for s in self.snapshots if s.path not in again]
        self.skipped = [s for s in self.skipped if s.path not in again]
        listed: list[tuple[Path, Listed]] = []
        for path in fresh:
            self._seen[path] = _stat_key(path)
            try:
                listed.append((path, lister.list(path)))
            except CheckpointError as exc:  # NeedsInput too
                reason = str(exc)
                if reason.startswith(path.name + ": "):
                    reason = reason[len(path.name) + 2:]
                self.skipped.append(Skipped(path, reason))
        if self._signature is None and listed:
            counts = Counter(item.signature for _, item in listed)
            # The most common shape and vocabulary is the run's (ties: the one of the highest step).
            self._signature = max(counts, key=lambda sig: (counts[sig], max(
                (_step_of(item.training, str(p)) or -1) for p, item in listed if item.signature == sig)))
        taken = {s.step: s for s in self.snapshots}
        added = [s for s in (self._accept(path, item, taken) for path, item in listed) if s is not None]
        self.snapshots.sort(key=lambda s: (s.step, str(s.path)))
        self.skipped.sort(key=lambda s: str(s.path))
        return sorted(added, key=lambda s: (s.step, str(s.path)))

    def _accept(self, path: Path, item: Listed, taken: dict[int, Snapshot]) -> Snapshot | None:
        relative = os.path.relpath(path, self.folder)
        whose = "the model has" if self.reference is not None else "the run has"
        why = _difference(item.signature, self._signature, whose)
        step, label = self.revisions.get(path, (_step_of(item.training, relative), relative))
        if why is None and step is None:
            why = "no training step in the file or in its name"
        elif why is None and step in taken:
            why = f"step {step} again (already {taken[step].label or os.path.relpath(taken[step].path, self.folder)})"
        if why is not None:
            self.skipped.append(Skipped(path, why))
            return None
        foreign = item.checkpoint is not None
        snap = Snapshot(step, path, item.training, lambda: self._load(path, foreign), self.kept,
                        self._shared(item.checkpoint) if foreign else None, label=label,
                        digest=weights_digest(item.checkpoint.model) if foreign else "")
        taken[step] = snap
        self.snapshots.append(snap)
        return snap

    def _shared(self, ck: Checkpoint) -> Checkpoint:
        """``ck`` with the run's one tokenizer object (the reference's, with its padding)."""
        if self.reference is not None and self.reference.tokenizer is not None:
            ck.tokenizer, ck.vocab_padding = self.reference.tokenizer, self.reference.vocab_padding
        elif self.tokenizer is not None:
            ck.tokenizer = self.tokenizer
        elif ck.tokenizer is not None and self._lister is not None:  # a foreign run's: the first file's
            self._lister.tokenizers.setdefault(signature_of(ck)[1], ck.tokenizer)
        return ck

    def _load(self, path: Path, foreign: bool) -> Checkpoint:
        """A listed snapshot's weights, read now (our file with the run's tokenizer, not parsed again).

        Raises
        ------
        CheckpointError
            When the file changed or went away since it was listed.
        """
        if foreign:
            return self._shared(load_any(path, allow_no_tokenizer=True, **self._load_options))
        return self._shared(load_checkpoint(path, tokenizer=self.tokenizer))


def load_snapshots(folder: str | os.PathLike, reference: Checkpoint | None = None, *,
                   n_heads: int | None = None, vocab_path: str | os.PathLike | None = None) -> SnapshotSet:
    """Load every snapshot of one run from a folder (and its immediate subfolders).

    Parameters
    ----------
    folder : path-like
    reference : Checkpoint, optional
        The model the snapshots must match (its config and vocabulary; a snapshot without a
        vocabulary of its own takes the reference's). Without one, the shape and vocabulary
        shared by most files is the run's.
    n_heads, vocab_path
        Passed to :func:`model.checkpoint.load_any` for foreign files that need them.

    Returns
    -------
    SnapshotSet
        Possibly empty (then :attr:`SnapshotSet.skipped` says why).

    Raises
    ------
    SnapshotError
        When ``folder`` does not exist or is not a folder.
    """
    options = {k: v for k, v in (("n_heads", n_heads), ("vocab_path", vocab_path)) if v is not None}
    snaps = SnapshotSet(folder=Path(folder), reference=reference, _load_options=options,
                        _signature=signature_of(reference) if reference is not None else None)
    snaps.refresh()
    return snaps


def _from_command(command: str) -> str | None:
    """``--snapshot-dir`` relative to the folder of ``--out``, from a recorded training command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    options = {}
    for i, word in enumerate(words[:-1]):
        if word in ("--snapshot-dir", "--out"):
            options[word] = words[i + 1]
    for word in words:
        for name in ("--snapshot-dir", "--out"):
            if word.startswith(name + "="):
                options[name] = word.split("=", 1)[1]
    if "--out" not in options or "--snapshot-dir" not in options:
        return None  # without --snapshot-dir the folder is OUT-STEM-snapshots, looked for anyway
    if os.path.isabs(options["--snapshot-dir"]) != os.path.isabs(options["--out"]):
        return None  # one absolute, one relative to a working folder we do not know
    return os.path.relpath(options["--snapshot-dir"], os.path.dirname(options["--out"]) or ".")


def snapshot_folder_for(checkpoint: Checkpoint) -> Path | None:
    """The folder of snapshots that belongs to a checkpoint, or None when there is none.

    Looked for, in order: the training facts' ``snapshot_dir`` (relative to the checkpoint's
    folder, written by ``python -m model.train``); the ``--snapshot-dir`` of the recorded
    ``command`` taken relative to its ``--out``; ``<stem>-snapshots/`` beside the file. The
    first that is an existing folder wins.
    """
    if checkpoint.path is None:
        return None
    here = checkpoint.path.parent
    names = [checkpoint.training.get("snapshot_dir")]
    if isinstance(checkpoint.training.get("command"), str):
        names.append(_from_command(checkpoint.training["command"]))
    names.append(checkpoint.path.stem + "-snapshots")
    for name in names:
        if isinstance(name, str) and name and (here / name).is_dir():
            return (here / name).resolve()
    return None


def hub_revisions_for(checkpoint: Checkpoint) -> list:
    """The cached revisions (:class:`model.checkpoint.CachedRevision`) of a Hub model's repository that
    are named after a training step, by step; [] for a model not opened from the Hub."""
    if not isinstance(checkpoint.origin, HubRef):
        return []
    return sorted((r for r in cached_revisions(checkpoint.origin.repo_id) if r.step is not None),
                  key=lambda r: (r.step, r.name))


def revision_snapshots(revisions: list, reference: Checkpoint | None = None) -> SnapshotSet:
    """Load a Hub repository's cached revisions (:func:`hub_revisions_for`) as the snapshots of one run,
    matched against ``reference`` (the model opened from it) when given. Refs that point at one commit
    are one snapshot, at the lowest of their steps, labelled with every name.

    Raises
    ------
    SnapshotError
        When there are no revisions.
    """
    if not revisions:
        raise SnapshotError("no revisions of this repository named after a training step are in the local Hub cache")
    by_folder: dict[Path, tuple[int, str]] = {}
    for r in sorted(revisions, key=lambda r: (r.step, r.name)):  # refs of one commit: one snapshot, both names
        step, names = by_folder.get(r.folder, (r.step, ""))
        by_folder[r.folder] = (step, f"{names} = {r.name}" if names else r.name)
    snaps = SnapshotSet(folder=revisions[0].folder.parent.parent, reference=reference, revisions=by_folder,
                        _signature=signature_of(reference) if reference is not None else None)
    snaps.refresh()
    return snaps


def snapshots_for(checkpoint: Checkpoint) -> SnapshotSet | None:
    """The snapshots of a checkpoint's run: a Hub model's cached step revisions
    (:func:`hub_revisions_for`), else the folder of :func:`snapshot_folder_for`; None when there are none."""
    revisions = hub_revisions_for(checkpoint)
    if revisions:
        return revision_snapshots(revisions, reference=checkpoint)
    folder = snapshot_folder_for(checkpoint)
    return None if folder is None else load_snapshots(folder, reference=checkpoint)
