"""Where a run's snapshots go: ``step-NNNNNN.safetensors``, named by the total step the file records.

A resumed run counts on from the steps of the checkpoint it resumes (its files say so), and its
snapshot files are named by that total too: a second run resumed into the first run's folder (the
default when ``--out`` is the same file) adds ``step-000011`` ... ``step-000020`` beside the first
run's files instead of writing its own steps 0, 1, 10 over them. A planned file that is already
there is never overwritten: the one exception is the resumed checkpoint's own step (the first run's
last snapshot: the same weights), which is kept; any other is refused before training.
"""

from __future__ import annotations

from pathlib import Path

from model.checkpoint import CheckpointError, read_header
from model.training.errors import TrainError

MIN_DIGITS = 6


def snapshot_path(folder: str | Path, total_step: int, last_total_step: int) -> Path:
    """The file of the snapshot after ``total_step`` steps (over every phase of a resumed run), its
    number as wide as the run's last step needs (at least :data:`MIN_DIGITS`)."""
    width = max(MIN_DIGITS, len(str(last_total_step)))
    return Path(folder) / f"step-{total_step:0{width}d}.safetensors"


def _recorded_step(path: Path) -> int | None:
    try:
        steps = read_header(path).training.get("steps")
    except CheckpointError:
        return None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def planned_snapshots(folder: str | Path | None, steps: set[int], previous: int, last_step: int,
                      resumed: bool) -> dict[int, Path]:
    """This run's snapshot files: its step -> the file, without the one it need not write.

    Parameters
    ----------
    folder : path-like or None      ``--snapshot-dir`` (None: no snapshots).
    steps : set of int              the steps of this run after which a snapshot is taken (0 included).
    previous : int                  steps before this run (the resumed checkpoint's; 0 for a new run).
    last_step : int                 this run's last step (``--steps``).
    resumed : bool                  whether the run resumes a checkpoint.

    Raises
    ------
    TrainError
        When a planned file is already there (another run's, or this lineage's at another step).
    """
    if folder is None:
        return {}
    planned = {s: snapshot_path(folder, previous + s, previous + last_step) for s in sorted(steps)}
    for step, path in list(planned.items()):
        if not path.exists():
            continue
        if resumed and step == 0 and _recorded_step(path) == previous:
            del planned[step]  # the resumed checkpoint's own step, written by the run before: kept
            continue
        recorded = _recorded_step(path)
        what = f"step {recorded} of an earlier run" if recorded is not None else "a file of another kind"
        raise TrainError(f"--snapshot-dir {folder} already holds {path.name} ({what}), which this run would "
                         f"write over: choose another --snapshot-dir (or move that file)")
    return planned
