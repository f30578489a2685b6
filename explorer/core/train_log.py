"""Following a training run through its ``--log-file`` (JSON lines, see :mod:`model.training.progress`),
Qt-free: the Train dialog feeds it what the file grew by and draws what it holds."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from model.training.data import unknown_warning


@dataclass
class TrainLog:
    """What a run reported so far.

    Attributes
    ----------
    steps : int                        the run's steps (0 until its ``start`` line).
    step : int                         the last update done.
    tokens_per_step : int              global batch size x context_length.
    train_s : float                    seconds spent training (validation and snapshots excluded).
    losses : list of (step, loss)      each update's batch loss, nats per token.
    val : list of (step, val_loss)     validation losses, nats per token.
    snapshots : list of (step, path)   snapshot files written.
    snapshot_dir, out : str or None    from the ``start`` line.
    val_unk_share : float or None      the share of <unk> in the validation text (``start`` line).
    status : str or None               the ``end`` line's status: done, interrupted or diverged.
    bad_lines : int                    lines that were not JSON objects (skipped).
    """

    steps: int = 0
    step: int = 0
    tokens_per_step: int = 0
    train_s: float = 0.0
    losses: list[tuple[int, float]] = field(default_factory=list)
    val: list[tuple[int, float]] = field(default_factory=list)
    snapshots: list[tuple[int, str]] = field(default_factory=list)
    snapshot_dir: str | None = None
    out: str | None = None
    val_unk_share: float | None = None
    status: str | None = None
    bad_lines: int = 0
    _partial: str = ""

    def feed(self, text: str) -> list[dict]:
        """Take the text the log grew by (it may end inside a line); return the complete events in it."""
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()  # "" after a complete last line
        events = []
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if isinstance(event, dict):
                self._take(event)
                events.append(event)
            else:
                self.bad_lines += 1
        return events

    def _take(self, e: dict) -> None:
        kind = e.get("event")
        if kind == "start":
            self.steps = int(e.get("steps", 0))
            self.tokens_per_step = int(e.get("tokens_per_step", 0))
            self.snapshot_dir, self.out = e.get("snapshot_dir"), e.get("out")
            share = e.get("val_unk_share")
            self.val_unk_share = float(share) if isinstance(share, (int, float)) and not isinstance(share, bool) else None
        elif kind == "step":
            self.step = int(e["step"])
            self.train_s = float(e.get("train_s", self.train_s))
            self.losses.append((self.step, float(e["loss"])))
        elif kind == "val":
            self.val.append((int(e["step"]), float(e["val_loss"])))
        elif kind == "snapshot":
            self.snapshots.append((int(e["step"]), str(e["path"])))
        elif kind == "end":
            self.status = str(e.get("status"))
            self.out = e.get("out", self.out)

    @property
    def tokens_per_s(self) -> float | None:
        """Training tokens per second so far (None before the first update)."""
        if self.step == 0 or self.train_s <= 0:
            return None
        return self.step * self.tokens_per_step / self.train_s

    @property
    def seconds_left(self) -> float | None:
        """Training seconds the remaining updates take at the speed so far (validation passes and
        snapshots add to it); None before the first update."""
        if self.step == 0 or self.train_s <= 0 or self.steps == 0:
            return None
        return (self.steps - self.step) * self.train_s / self.step

    def summary(self) -> str:
        """One line: step, recent loss, tokens/s and time left, e.g. ``step 120 of 1,000 · ...``."""
        if self.steps == 0:
            return "reading the text and building the vocabulary…"
        parts = [f"step {self.step:,} of {self.steps:,}"]
        recent = [loss for _, loss in self.losses[-20:] if math.isfinite(loss)]
        if recent:
            parts.append(f"training loss {sum(recent) / len(recent):.3f}")
        if self.val:
            parts.append(f"validation loss {self.val[-1][1]:.3f}")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:,.0f} tokens/s")
        left = self.seconds_left
        if left is not None and self.status is None:
            parts.append(f"about {duration(left)} left")
        if unknown_warning(self.val_unk_share):
            parts.append(f"{self.val_unk_share:.0%} of the validation tokens are <unk>")
        return " · ".join(parts)


def duration(seconds: float) -> str:
    """A short duration: ``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
