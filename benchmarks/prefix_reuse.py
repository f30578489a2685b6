"""Prefix reuse with the GPT-2-small-sized model, at model level (no window): the model time per
keystroke when typing at the end of a 512-token text (``GPT.trace(..., reuse=previous)``), the full
recompute it replaces, the memory one trace holds at T = 1,024, and how memory grows over 200
edits at T of about 1,000 while only the newest trace is kept (as the app keeps the shown one)."""

from __future__ import annotations

import gc
import time

import numpy as np
import torch

from benchmarks.common import rss_mb
from benchmarks.keystroke import text_of

TYPED = " and the little dog ran to the park with her big red ball . she liked to play"


def _retrace(model, tokenizer, text: str, prev):
    ids = tokenizer.encode(text).ids
    t0 = time.perf_counter()
    trace = model.trace(ids, reuse=prev)
    return trace, (time.perf_counter() - t0) * 1e3


def append_ms(model, tokenizer, n_tokens: int = 512, keystrokes: int = 60) -> dict[str, float]:
    """Median and 95th percentile ms of ``trace(ids, reuse=previous)`` per key typed at the end of
    a text of ``n_tokens`` word tokens (every key: new words, edits of the last word, spaces), and
    the median ms of a plain forward pass of one token (the floor of an append)."""
    text = text_of(n_tokens)
    trace, _ = _retrace(model, tokenizer, text, model.trace([]))
    one = torch.tensor(trace.token_ids[:1])
    with torch.no_grad():  # the floor: one position's forward pass reads every weight once
        floor = [_timed(model, one) for _ in range(7)]
    times = []
    for ch in (TYPED * (keystrokes // len(TYPED) + 1))[:keystrokes]:
        text += ch
        trace, ms = _retrace(model, tokenizer, text, trace)
        times.append(ms)
    return {f"big_model_append_ms_t{n_tokens}": float(np.median(times)),
            f"big_model_append_ms_p95_t{n_tokens}": float(np.percentile(times, 95)),
            "big_model_one_token_forward_ms": float(np.median(floor))}


def _timed(model, ids) -> float:
    t0 = time.perf_counter()
    model(ids)
    return (time.perf_counter() - t0) * 1e3


def memory(model, tokenizer, edits: int = 200, warmup: int = 20) -> dict[str, float]:
    """RSS held by one trace made at T = context_length (1,024), and its growth over ``edits``
    keystrokes at T of about 1,000 after ``warmup`` (typing at the end; deleting the last words
    whenever T passes 1,010), holding only the newest trace."""
    n_ctx = model.config.context_length
    gc.collect()
    before = rss_mb()
    trace = model.trace(tokenizer.encode(text_of(n_ctx)).ids, reuse=model.trace([]))
    gc.collect()
    out = {f"big_model_trace_mb_t{n_ctx}": rss_mb() - before}
    text = text_of(n_ctx - 30)
    trace, _ = _retrace(model, tokenizer, text, trace)  # deleting at the end: views, no compute
    keys = iter((TYPED * (edits // len(TYPED) + 2)))
    base = None
    for i in range(warmup + edits):
        if i == warmup:
            gc.collect()
            base = rss_mb()
        text += next(keys)
        if trace.n_tokens > n_ctx - 14:
            text = text_of(n_ctx - 30)
        trace, _ = _retrace(model, tokenizer, text, trace)
    gc.collect()
    out["big_model_memory_growth_mb_200_edits"] = (rss_mb() - base) * 200 / edits
    out["big_model_reuse_held_mb_t1000"] = rss_mb() - before  # the shown trace and the spare buffer
    return out


def measure(model, tokenizer, quick: bool) -> dict[str, float]:
    """Every figure above; ``quick`` types fewer keys (the growth is then scaled to 200 edits)."""
    out = append_ms(model, tokenizer, 512, keystrokes=20 if quick else 60)
    out.update(memory(model, tokenizer, edits=50 if quick else 200, warmup=10 if quick else 20))
    return out
