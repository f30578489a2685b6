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
``steps`` (nanoGPT's ``iter_num``), else the last number in its name.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from model.checkpoint import Checkpoint, CheckpointError, load_any

CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin")


class SnapshotError(Exception):
    """A snapshot folder cannot be read (missing, not a folder); the message says which."""


@dataclass(frozen=True)
class Snapshot:
    """One loaded snapshot.

    Attributes
    ----------
    step : int            training steps behind these weights (total over resumed runs).
    path : Path           the file.
    checkpoint : Checkpoint
        Model in eval mode, float32, on the CPU; its tokenizer is the run's shared object.
    """

    step: int
    path: Path
    checkpoint: Checkpoint

    @property
    def model(self):
        """The snapshot's GPT (eval mode, CPU)."""
        return self.checkpoint.model


@dataclass(frozen=True)
class Skipped:
    """A file in a snapshot folder that is not part of the run, and why."""

    path: Path
    reason: str


def _signature(ck: Checkpoint) -> tuple[str, str | None]:
    """What every snapshot of one run shares: the config and the vocabulary."""
    tokens = ck.tokenizer.to_json() if ck.tokenizer is not None else None
    return json.dumps(ck.config.to_dict(), sort_keys=True), tokens


def _difference(sig: tuple[str, str | None], ref: tuple[str, str | None], whose: str) -> str | None:
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


def _step_of(ck: Checkpoint, relative: str) -> int | None:
    steps = ck.training.get("steps")
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
    """The snapshots of one run, ordered by step, loaded once and kept.

    Attributes
    ----------
    folder : Path
    snapshots : list of Snapshot   increasing step (ties by file name).
    skipped : list of Skipped      files that are not part of the run (unreadable, another shape
                                   or vocabulary, no step, a step already taken), by file name.
    reference : Checkpoint or None the model the snapshots were matched against, if any.
    """

    folder: Path
    snapshots: list[Snapshot] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    reference: Checkpoint | None = None
    _signature: tuple[str, str | None] | None = None
    _seen: dict[Path, tuple[int, int]] = field(default_factory=dict)
    _load_options: dict = field(default_factory=dict)

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
    def val_curve(self) -> list[tuple[int, float]]:
        """The run's stored validation curve: (step, loss in nats per token), increasing step.

        The reference checkpoint's ``val_curve`` when it has one, else that of the snapshot with
        the highest step (written with each snapshot: the curve up to it). Empty when unknown
        (nanoGPT files keep only the best loss so far).
        """
        sources = [self.reference] if self.reference is not None else []
        sources += [s.checkpoint for s in self.snapshots[::-1]]
        for ck in sources:
            curve = ck.training.get("val_curve")
            if isinstance(curve, list) and curve:
                try:
                    return sorted((int(s), float(v)) for s, v in curve)
                except (TypeError, ValueError):
                    continue
        return []

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
        """Load files that appeared (or changed) since the last look: for a run still writing.

        Files are written atomically, so a file that is there is complete.

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
        fresh = [p for p in _candidates(self.folder) if self._seen.get(p) != _stat_key(p)]
        if not fresh:
            return []
        loaded: list[tuple[Path, Checkpoint]] = []
        for path in fresh:
            self._seen[path] = _stat_key(path)
            self.snapshots = [s for s in self.snapshots if s.path != path]
            self.skipped = [s for s in self.skipped if s.path != path]
            try:
                loaded.append((path, load_any(path, allow_no_tokenizer=True, **self._load_options)))
            except CheckpointError as exc:  # NeedsInput too
                reason = str(exc)
                if reason.startswith(path.name + ": "):
                    reason = reason[len(path.name) + 2:]
                self.skipped.append(Skipped(path, reason))
        if self._signature is None and loaded:
            counts = Counter(_signature(ck) for _, ck in loaded)
            # The most common shape and vocabulary is the run's (ties: the one of the highest step).
            self._signature = max(counts, key=lambda sig: (counts[sig], max(
                (_step_of(ck, str(p)) or -1) for p, ck in loaded if _signature(ck) == sig)))
        added = [s for s in (self._accept(path, ck) for path, ck in loaded) if s is not None]
        self.snapshots.sort(key=lambda s: (s.step, str(s.path)))
        self.skipped.sort(key=lambda s: str(s.path))
        return sorted(added, key=lambda s: (s.step, str(s.path)))

    def _accept(self, path: Path, ck: Checkpoint) -> Snapshot | None:
        relative = os.path.relpath(path, self.folder)
        whose = "the model has" if self.reference is not None else "the run has"
        why = _difference(_signature(ck), self._signature, whose)
        step = _step_of(ck, relative)
        taken = next((s for s in self.snapshots if s.step == step), None)
        if why is None and step is None:
            why = "no training step in the file or in its name"
        elif why is None and taken is not None:
            why = f"step {step} again (already {os.path.relpath(taken.path, self.folder)})"
        if why is not None:
            self.skipped.append(Skipped(path, why))
            return None
        if self.reference is not None and self.reference.tokenizer is not None:
            ck.tokenizer, ck.vocab_padding = self.reference.tokenizer, self.reference.vocab_padding
        else:  # one shared tokenizer object per run
            shared = next((s.checkpoint.tokenizer for s in self.snapshots if s.checkpoint.tokenizer is not None), None)
            ck.tokenizer = shared or ck.tokenizer
        snap = Snapshot(step=step, path=path, checkpoint=ck)
        self.snapshots.append(snap)
        return snap


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
                        _signature=_signature(reference) if reference is not None else None)
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


def snapshots_for(checkpoint: Checkpoint) -> SnapshotSet | None:
    """The loaded snapshots of a checkpoint's run (see :func:`snapshot_folder_for`), or None."""
    folder = snapshot_folder_for(checkpoint)
    return None if folder is None else load_snapshots(folder, reference=checkpoint)
