"""``python -m benchmarks [--quick] [--json PATH] [--only NAME ...]``: run, print a table, write JSON."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

SECTIONS = ("keystroke", "panels", "snapshots", "trace", "explain", "big", "training", "memory", "startup")


def _run_sections(args) -> dict[str, float]:
    from benchmarks import big_model, explain, keystroke, memory, panels, snapshots, startup, trace_overhead, training
    from benchmarks.common import new_window

    want = set(args.only or SECTIONS)
    results: dict[str, float] = {}
    quick = args.quick
    import torch

    torch.set_num_threads(1)  # as the app does: the GUI process leaves a core for painting
    gui = want & {"memory", "keystroke", "panels", "snapshots", "trace", "big"}
    app, window = new_window() if gui else (None, None)
    if "memory" in want:  # first, so that the baseline is the start-up state
        results.update(memory.measure(app, window, edits=300 if quick else 1000))
    if "keystroke" in want:
        for n in (1, 16, 32):
            results.update(keystroke.measure(app, window, n, edits=200))
        results.update(keystroke.after_paste(app, window))
        results.update(keystroke.with_why_panel(app, window, 32, edits=60 if quick else 200))
    if "panels" in want:
        results.update(panels.measure(app, window, edits=10 if quick else 40))
    if "snapshots" in want:
        results.update(snapshots.measure(app, window, steps=30 if quick else 100))
    if "trace" in want:
        results.update(trace_overhead.measure(window.session.model, reps=300 if quick else 900))
    if "explain" in want:
        results.update(explain.measure(reps=60 if quick else 200))
    if "big" in want:
        results.update(big_model.measure(app, window, quick))
    if window is not None:
        window.session.shutdown()
        window.close()
    if "training" in want:
        torch.set_num_threads(args.train_threads)
        results.update(training.measure(steps=20 if quick else 100, rounds=1 if quick else 3, corpus=args.corpus))
    if "startup" in want:
        results.update(startup.measure(runs=3 if quick else 5))
    return results


def _table(results: dict[str, float]) -> str:
    width = max(map(len, results)) if results else 10
    lines = [f"{'figure':<{width}}  value", f"{'-' * width}  ---------"]
    for key, value in results.items():
        lines.append(f"{key:<{width}}  {value:,.3f}" if math.isfinite(value) else f"{key:<{width}}  n/a")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; exit 0, or 2 on a bad option."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repetitions: a run under two minutes")
    p.add_argument("--json", metavar="PATH", help="also write the figures as one flat JSON object")
    p.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    p.add_argument("--train-threads", type=int, default=2, help="torch threads for the training section (2)")
    p.add_argument("--corpus", metavar="TXT", help="training text for the training section, at least 330 kB "
                   "(default: generated sentences)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    results = _run_sections(args)
    results["benchmark_wall_s"] = time.perf_counter() - t0
    print(_table(results))
    from benchmarks.frames import NOTES

    if NOTES:
        print("\nPaints per keystroke by widget (dock: panel > widget):")
        print("\n".join(NOTES))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
