"""A folder of many snapshots (3,000 by default, small models of one run): how long ``python -m
model.trace FOLDER TEXT --over-training --json`` takes and its peak memory, and in the window how
long the Training panel takes to show them and the longest time the window did not answer while it
did (the event loop's longest gap between two turns of a 5 ms heartbeat timer: a freeze).

``python -m benchmarks.many_snapshots [N]`` prints the figures (they depend on the machine and its
load; nothing here is a test)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEXT = "once upon a time there was a cat"
HEARTBEAT_MS = 5


def make_run(folder: Path, n: int) -> Path:
    """``n`` float16 snapshots of one small model (2 layers, d_model 32, a 512-word vocabulary), the
    weights moved a little from one to the next, as ``model.train --snapshots`` writes them."""
    import torch

    from model import GPT, GPTConfig, save_checkpoint
    from model.tokens.tokenizer import train_word_tokenizer

    words = [f"w{i}" for i in range(500)] + TEXT.split()
    tokenizer = train_word_tokenizer([" ".join(words)], vocab_size=512)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, context_length=32, d_model=32, n_heads=2, n_layers=2,
                          d_mlp=64))
    folder.mkdir(parents=True, exist_ok=True)
    for step in range(n):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.001 * torch.randn_like(p))
        save_checkpoint(folder / f"step-{step:06d}.safetensors", model, tokenizer, training={"steps": step},
                        dtype=torch.float16)
    return folder


def measure_cli(folder: Path) -> dict[str, float]:
    """Seconds and peak resident MB of the command over the folder (one child process)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "model.trace", str(folder), TEXT, "--over-training", "--json"],
                         capture_output=True, text=True, check=True).stdout
    seconds = time.perf_counter() - t0
    rows = json.loads(out)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KB on Linux
    return {"cli_rows": len(rows), "cli_s": seconds, "cli_peak_mb": peak_mb}


def measure_window(folder: Path) -> dict[str, float]:
    """Seconds until the Training panel shows the folder's snapshots and its curves, and the longest
    event-loop gap (ms) meanwhile.

    The text is traced and drawn and the raised Training dock painted before the heartbeat starts,
    as in the app, where File ▸ Open Snapshot Folder raises the dock and its folder dialog runs the
    event loop before the folder is opened (the first gap was that catch-up: 234-254 ms, of which
    the opening's own first turn was 43-61 ms)."""
    from PySide6.QtCore import QTimer

    from benchmarks.common import new_window
    from benchmarks.frames import until_quiet

    app, window = new_window()
    panel, session = window.panels["training"], window.session
    window.panels["tokens"].editor.setPlainText(TEXT)
    window.docks["training"].raise_()
    until_quiet(window)
    gaps, last = [], [time.perf_counter()]

    def beat() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1e3)
        last[0] = now

    timer = QTimer()
    timer.setInterval(HEARTBEAT_MS)
    timer.timeout.connect(beat)
    timer.start()
    t0 = time.perf_counter()
    panel.open_folder(folder)
    end = t0 + 600
    while not (panel.source.view is not None and not panel.source.loading and not panel.reading
               and panel.curves is not None and not session.busy):
        if time.perf_counter() > end:
            raise TimeoutError("the Training panel did not show the snapshots and their curves")
        app.processEvents()
        time.sleep(0.001)
    seconds = time.perf_counter() - t0
    beat()  # the last turn's gap too (the one that showed the last result: no heartbeat came after it)
    timer.stop()
    return {"window_snapshots": len(panel.source.view.snapshots), "window_s": seconds,
            "window_longest_freeze_ms": max(gaps, default=0.0)}


def main(n: int = 3000) -> None:
    folder = make_run(Path(tempfile.mkdtemp()) / "run", n)
    figures = {**measure_cli(folder), **measure_window(folder)}
    for key, value in figures.items():
        print(f"{key}: {value:,.1f}" if isinstance(value, float) else f"{key}: {value:,}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
