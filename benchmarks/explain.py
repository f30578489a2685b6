"""What the Why panel adds to a keystroke: ``explain()`` on the default model at T = 32."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

DEFAULT = Path(__file__).resolve().parents[1] / "assets" / "tinystories-1L1H.safetensors"


def _median_ms(fn, reps: int) -> float:
    for _ in range(max(3, reps // 10)):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def measure(reps: int = 200) -> dict[str, float]:
    """Median ms of ``explain(model, trace)`` at the last of 32 tokens, the trace already made (as
    the session has it), and of its parts.

    Returns
    -------
    dict
        explain_ms_t32 (all of it, leave-one-out batched), explain_loo_ms_t32 (the one batched
        forward of 32 masked copies), explain_lens_ms_t32, explain_dla_ms_t32,
        explain_score_terms_ms_t32, and explain_loo_unbatched_ms_t32 (the same 31 re-runs as
        separate forwards, for comparison).
    """
    from model import load_checkpoint
    from model.explain import direct_logit_attribution, explain, leave_one_out, logit_lens, score_terms
    from model.interventions import Interventions, leave_one_out_masks

    model = load_checkpoint(DEFAULT).model
    n = model.config.context_length
    ids = list(range(n))
    tr = model.trace(ids)
    i, target = n - 1, int(np.argmax(tr.logits[-1]))
    ids_t = torch.tensor(ids)
    masks = leave_one_out_masks(n, range(n - 1))

    def unbatched():
        with torch.no_grad():
            for b in range(n - 1):
                model(ids_t, interventions=Interventions(key_mask=masks[b]), positions=[i])

    return {
        "explain_ms_t32": _median_ms(lambda: explain(model, tr), reps),
        "explain_loo_ms_t32": _median_ms(lambda: leave_one_out(model, tr, i, target, n), reps),
        "explain_lens_ms_t32": _median_ms(lambda: logit_lens(model, tr, i, target), reps),
        "explain_dla_ms_t32": _median_ms(lambda: direct_logit_attribution(model, tr, i, target, n), reps),
        "explain_score_terms_ms_t32": _median_ms(lambda: score_terms(model, tr, 0), reps),
        "explain_loo_unbatched_ms_t32": _median_ms(unbatched, max(10, reps // 10)),
    }
