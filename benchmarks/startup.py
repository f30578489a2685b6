"""Process start to the first painted window, measured from the parent process."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

CHILD = """
import time, sys
import torch
from PySide6.QtWidgets import QApplication
from explorer.app import main
import explorer.qt.main_window as mw
shown = mw.MainWindow.show
def show_and_report(self):
    shown(self)
    QApplication.instance().processEvents()
    print("painted", flush=True)
    time.sleep(60)
mw.MainWindow.show = show_and_report
main([])
"""


def measure(runs: int = 5) -> dict[str, float]:
    """Median seconds from launching ``python`` to the main window's first paint (offscreen).

    The child imports exactly what ``transformer-explorer`` imports and opens the default
    checkpoint; it reports as soon as the shown window has processed its paint events.
    """
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        line = child.stdout.readline()  # blocks until the window has painted (or the child died)
        elapsed = time.perf_counter() - t0
        child.kill()
        _, err = child.communicate(timeout=60)
        if "painted" not in line:
            raise RuntimeError(f"the app did not start: {err.strip()[-500:]}")
        times.append(elapsed)
    return {"startup_s_median": statistics.median(times), "startup_s_min": min(times)}
