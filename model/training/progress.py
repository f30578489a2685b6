"""What a training run reports while it runs: the progress bar and the ``--log-file`` lines (rank 0 only).

``--log-file FILE`` writes one JSON object per line, flushed as it is written, so that another
program (the app's Train dialog, a script) can follow the run:

- ``{"event": "start", "steps": N, "processes": W, "device": "cpu", "tokens_per_step": B*T,
  "out": PATH, "snapshot_dir": DIR or null, "val_unk_share": share of <unk> in the validation text}``
- ``{"event": "step", "step": s, "loss": L, "lr": r, "train_s": t}``: the global batch's mean
  cross-entropy (nats per token) at update s, the learning rate used, and the seconds spent
  training so far (validation and snapshots excluded).
- ``{"event": "val", "step": s, "val_loss": V}``
- ``{"event": "snapshot", "step": s, "path": FILE}``
- ``{"event": "end", "status": "done" | "interrupted" | "diverged", "step": s, "out": PATH or null}``
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from model.training.distributed import Ranks


class Progress:
    """The tqdm bar on stderr and the JSON-lines log; both silent on every rank but 0.

    Parameters
    ----------
    total : int
        Steps of this run.
    quiet : bool
        No bar (the log, when asked for, is still written).
    log_path : str or None
        The ``--log-file`` file, created or truncated.
    ranks : Ranks
    """

    def __init__(self, total: int, quiet: bool, log_path: str | None, ranks: Ranks) -> None:
        from tqdm import tqdm

        self.main = ranks.is_main
        self.quiet = quiet or not self.main
        self.bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr,
                        mininterval=1.0 if sys.stderr.isatty() else 30.0, disable=self.quiet)
        self._log: TextIO | None = None
        if log_path and self.main:
            self._log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (kept open for the run, closed in close())

    def event(self, name: str, **fields: Any) -> None:
        """Write one log line ``{"event": name, **fields}`` (rank 0 with ``--log-file`` only)."""
        if self._log is not None:
            self._log.write(json.dumps({"event": name, **fields}) + "\n")
            self._log.flush()

    def step(self, step: int, loss: float, lr: float, train_s: float) -> None:
        """One update done: advance the bar and log its loss."""
        self.bar.update(1)
        self.event("step", step=step, loss=loss, lr=lr, train_s=round(train_s, 4))

    def status(self, text: str) -> None:
        """The text after the bar (training and validation loss, tokens/s)."""
        self.bar.set_postfix_str(text, refresh=False)

    def say(self, line: str) -> None:
        """A line on stderr above the bar (rank 0, not with --quiet)."""
        if not self.quiet:
            self.bar.write(line, file=sys.stderr)

    def error(self, line: str) -> None:
        """A line on stderr from rank 0, even with --quiet."""
        if self.main:
            print(line, file=sys.stderr)

    def close_bar(self) -> None:
        """Close the bar (before a last message; the log stays open)."""
        self.bar.close()

    def close(self) -> None:
        """Close the bar and the log."""
        self.bar.close()
        if self._log is not None:
            self._log.close()
            self._log = None
