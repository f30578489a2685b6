"""Process start to the shown window and to the default model drawn, timed from the parent process,
against ``python -c "import torch"`` on the same machine at the same time.

The app runs as a user starts it (``python -m explorer --startup-time``, offscreen, with a fresh
settings folder so that no saved layout changes what is built); it prints each step as it reaches
it, and the parent stamps each line when it arrives. Runs of the app and of the plain torch import
alternate, so that a machine that is busier at one moment weighs on both alike; the ratio is taken
run by run (window time over that round's import time), then its median.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

STEPS = ("window shown", "torch imported", "model loaded and drawn")


def _app_run(env: dict[str, str]) -> dict[str, float]:
    """Seconds from launching the app to each of :data:`STEPS` (as the parent saw the lines arrive)."""
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "explorer", "--startup-time"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    seen: dict[str, float] = {}
    for line in child.stdout:  # each step's line is flushed as it happens
        step = next((s for s in STEPS if line.startswith(s)), None)
        if step is not None:
            seen[step] = time.perf_counter() - t0
            if step == STEPS[-1] and "random model" in line:  # the note of the seeded random model
                raise RuntimeError(f"the app did not open the trained default model: {line.strip()}")
    _, err = child.communicate(timeout=120)
    if child.returncode != 0 or set(seen) != set(STEPS):
        raise RuntimeError(f"the app did not start (exit {child.returncode}): {err.strip()[-500:]}")
    return seen


def _import_torch_s(env: dict[str, str]) -> float:
    """Seconds of a whole ``python -c "import torch"`` process."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def measure(runs: int = 5) -> dict[str, float]:
    """Medians over ``runs`` rounds (one app start and one torch import each), in seconds.

    Returns
    -------
    dict
        ``startup_s_median`` (launch to the shown window, its docks still empty), ``startup_s_min``,
        ``startup_torch_s_median`` (to torch imported in the app), ``startup_model_s_median`` (to the
        default model drawn in every panel in front), ``import_torch_s_median`` (``python -c "import
        torch"``) and ``startup_window_over_import_torch`` (the goal is below 1).
    """
    with tempfile.TemporaryDirectory(prefix="te-bench-startup-") as config:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": config}
        apps, imports = [], []
        for _ in range(runs):
            apps.append(_app_run(env))
            imports.append(_import_torch_s(env))
    window = [a["window shown"] for a in apps]
    return {
        "startup_s_median": statistics.median(window),
        "startup_s_min": min(window),
        "startup_torch_s_median": statistics.median(a["torch imported"] for a in apps),
        "startup_model_s_median": statistics.median(a[STEPS[-1]] for a in apps),
        "import_torch_s_median": statistics.median(imports),
        "startup_window_over_import_torch": statistics.median(w / t for w, t in zip(window, imports)),
    }
