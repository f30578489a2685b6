"""trace() against a plain forward of the same model on the same input, in one run."""

from __future__ import annotations

import time

import numpy as np
import torch


def _median_ms(fn, reps: int) -> float:
    for _ in range(max(5, reps // 10)):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def measure(model, reps: int = 300) -> dict[str, float]:
    """Median ms of ``model.trace(ids)`` and of ``model(ids)`` under no_grad at T = context_length.

    Returns
    -------
    dict
        trace_ms_t32, forward_ms_t32 and trace_overhead_ratio (trace / forward; goal <= 1.3).
    """
    n = model.config.context_length
    ids = list(range(n))
    ids_t = torch.tensor(ids)
    with torch.no_grad():
        # Interleave the two so that machine noise hits both alike.
        trace_ms, forward_ms = [], []
        for _ in range(3):
            trace_ms.append(_median_ms(lambda: model.trace(ids), reps // 3))
            forward_ms.append(_median_ms(lambda: model(ids_t), reps // 3))
    t, f = float(np.median(trace_ms)), float(np.median(forward_ms))
    return {"trace_ms_t32": t, "forward_ms_t32": f, "trace_overhead_ratio": t / f}
