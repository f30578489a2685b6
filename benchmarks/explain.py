"""What the Why panel adds to a keystroke: ``explain()`` on the default model at T = 32, and the
Why panel's job on the GPT-2-small-sized model at T = 512 (:func:`why_job_t512`)."""

from __future__ import annotations

import time

import numpy as np
import torch

import transformer_explorer_assets as shipped

DEFAULT = shipped.path("tinystories-1L1H.safetensors")


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
    from model.core.interventions import Interventions, leave_one_out_masks

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


def why_job_t512(model, tokenizer, text: str, reps: int) -> dict[str, float]:
    """Median ms of the Why panel's job (:func:`explorer.core.why.why_job`, as its first tab asks:
    no what-ifs) at the last of 512 tokens, the trace already made (as the session has it), one
    torch thread as the app's.

    Returns
    -------
    dict
        big_model_why_job_ms_t512, and big_model_why_hidden_t512: the sources whose leave-one-out
        the job computed (the cap, :func:`explorer.core.why.leave_one_out_cap`).
    """
    from types import SimpleNamespace

    from explorer.core import why

    ids = tokenizer.encode(text).ids
    tr = model.trace(ids)
    request = why.WhyRequest(tr, tr.n_tokens - 1, None, 0, what_ifs=False)
    checkpoint = SimpleNamespace(model=model)
    times, result = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = why.why_job(checkpoint, request)
        times.append((time.perf_counter() - t0) * 1e3)
    return {f"big_model_why_job_ms_t{tr.n_tokens}": float(np.median(times)),
            f"big_model_why_hidden_t{tr.n_tokens}": float(result.explanation.n_leave_one_out)}
