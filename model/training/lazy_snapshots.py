"""One snapshot file of a run: known by its header first, its weights loaded on first use, and kept
loaded within a memory budget shared by the run's snapshots.

A folder of 3,000 snapshots took 69 s and 545 MB to list when every file was loaded whole and kept:
one of our own files (:func:`model.checkpoint.read_header`) says its step, config and vocabulary in
its header, which is all the listing needs; the weights are read when a snapshot is shown or traced,
and the least recently used are dropped again once the loaded ones pass :data:`KEEP_LOADED_BYTES`
(a dropped one is read again when needed). Foreign files (nanoGPT's ``ckpt.pt``) have no such
header: they are read whole to be listed, and then kept or dropped like the others.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from model.core.architectures import architecture_of
from model.checkpoint import Checkpoint, CheckpointError, NotThisFormat, load_any, read_header
from model.tokens.tokenizer import Tokenizer

#: The loaded snapshots of a run are kept up to this many bytes of float32 weights (the shipped
#: model's 14 snapshots take 73 MB), the least recently used dropped beyond it.
KEEP_LOADED_BYTES = 512 * 2**20

#: (the config as sorted JSON, a hash of the vocabulary's tokenizer.json or None): what every
#: snapshot of one run shares.
Signature = tuple[str, "str | None"]


def _config_json(config) -> str:
    """The architecture and the config, as sorted JSON: what every snapshot of one run shares."""
    return json.dumps({"architecture": architecture_of(config), **config.to_dict()}, sort_keys=True)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def signature_of(ck: Checkpoint) -> Signature:
    """A loaded checkpoint's signature."""
    return _config_json(ck.config), _digest(ck.tokenizer.to_json()) if ck.tokenizer is not None else None


def _weight_bytes(ck: Checkpoint) -> int:
    return sum(p.numel() * p.element_size() for p in ck.model.parameters())


class LoadedSnapshots:
    """The loaded snapshots of a run, least recently used first, within a budget (thread-safe: the GUI
    thread shows snapshots while a worker thread traces them)."""

    def __init__(self, budget: int = KEEP_LOADED_BYTES) -> None:
        self.budget = budget
        self._order: OrderedDict[int, tuple[Snapshot, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def used(self, snap: Snapshot, nbytes: int | None = None) -> None:
        """``snap`` was used (loaded, with ``nbytes`` of weights): the others beyond the budget are dropped."""
        with self._lock:
            key = id(snap)
            if key in self._order:
                self._order.move_to_end(key)
            elif nbytes is not None:
                self._order[key] = (snap, nbytes)
                self._bytes += nbytes
            dropped = []
            while self._bytes > self.budget and len(self._order) > 1:
                _, (old, size) = self._order.popitem(last=False)
                self._bytes -= size
                dropped.append(old)
        for old in dropped:
            old.release()

    @property
    def loaded_bytes(self) -> int:
        return self._bytes


class Snapshot:
    """One snapshot of a run: its step and file, its weights loaded on first use.

    Attributes
    ----------
    step : int            training steps behind these weights (total over resumed runs).
    path : Path           the file (a Hub revision's snapshot folder).
    training : dict       its training facts (from the header: steps, val_curve, ...).
    label : str           what names it: its file's path in the folder, or a Hub revision's name.
    digest : str          a hash of its weights (:func:`model.training.snapshots.weights_digest`),
                          "" when not computed (our own files, listed by their headers).
    """

    def __init__(self, step: int, path: Path, training: dict[str, Any], load: Callable[[], Checkpoint],
                 kept: LoadedSnapshots, checkpoint: Checkpoint | None = None, *, label: str = "",
                 digest: str = "") -> None:
        self.step, self.path, self.training = step, path, training
        self.label, self.digest = label, digest
        self._load, self._kept, self._checkpoint = load, kept, None
        self._lock = threading.Lock()
        if checkpoint is not None:
            self._checkpoint = checkpoint
            kept.used(self, _weight_bytes(checkpoint))

    @classmethod
    def of(cls, step: int, checkpoint: Checkpoint, path: Path | None = None) -> "Snapshot":
        """A snapshot held in memory: ``checkpoint`` at ``step`` (its weights never dropped nor read
        again; ``path`` names it, the checkpoint's own path by default)."""
        path = Path(path) if path is not None else Path(checkpoint.path or f"step-{step}")
        return cls(step, path, dict(checkpoint.training), lambda: checkpoint, LoadedSnapshots(budget=2**62),
                   checkpoint)

    def __repr__(self) -> str:
        return f"Snapshot(step={self.step}, path={self.path.name!r}, loaded={self.loaded})"

    @property
    def checkpoint(self) -> Checkpoint:
        """The snapshot's checkpoint: model in eval mode, float32, on the CPU; its tokenizer is the run's
        shared object. Read from the file when not loaded (then kept within the run's budget).

        Raises
        ------
        CheckpointError
            When the file changed or went away since it was listed.
        """
        with self._lock:
            ck, fresh = self._checkpoint, self._checkpoint is None
            if fresh:
                ck = self._checkpoint = self._load()
        self._kept.used(self, _weight_bytes(ck) if fresh else None)
        return ck

    @property
    def model(self):
        """The snapshot's GPT (eval mode, CPU; loaded on first use)."""
        return self.checkpoint.model

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory now."""
        return self._checkpoint is not None

    def release(self) -> None:
        """Drop the weights (they are read again when needed)."""
        with self._lock:
            self._checkpoint = None

    def is_file_of(self, checkpoint: Checkpoint | None) -> bool:
        """Whether ``checkpoint`` is this snapshot's (loaded from its file), without loading it."""
        return checkpoint is not None and (checkpoint is self._checkpoint or checkpoint.path == self.path)


@dataclass(frozen=True)
class Listed:
    """What a file is, to list it: its signature and training facts, and, for a file without our
    header (read whole for that), its checkpoint."""

    signature: Signature
    training: dict[str, Any]
    checkpoint: Checkpoint | None = None


class Lister:
    """Reads what each file of a folder is: our files by their headers (each distinct tokenizer text
    parsed once, to compare vocabularies as parsed), others whole through ``load_any``."""

    def __init__(self, load_options: dict[str, Any]) -> None:
        self.load_options = load_options
        self._vocab: dict[str, str] = {}  # digest of a header's tokenizer text -> digest of it parsed
        self.tokenizers: dict[str, Any] = {}  # digest parsed -> one Tokenizer object

    def list(self, path: Path) -> Listed:
        """Raises CheckpointError (NeedsInput too) for a file that cannot be read."""
        try:
            header = read_header(path)
        except NotThisFormat:
            ck = load_any(path, allow_no_tokenizer=True, **self.load_options)
            return Listed(signature_of(ck), ck.training, ck)
        vocab = None
        if header.tokenizer_json is not None:
            raw = _digest(header.tokenizer_json)
            if raw not in self._vocab:
                try:
                    tok = Tokenizer.from_json(header.tokenizer_json)
                except ValueError as exc:
                    raise CheckpointError(f"{path.name}: bad tokenizer: {exc}") from None
                self._vocab[raw] = _digest(tok.to_json())
                self.tokenizers.setdefault(self._vocab[raw], tok)
            vocab = self._vocab[raw]
        return Listed((_config_json(header.config), vocab), header.training)
