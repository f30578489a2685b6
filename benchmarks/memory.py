"""Resident memory after start-up with the default model, and its growth over 1,000 edits."""

from __future__ import annotations

import gc

from benchmarks.common import rss_mb, settle
from benchmarks.keystroke import text_of


def measure(app, window, edits: int = 1000) -> dict[str, float]:
    """RSS in MB after start-up, and after ``edits`` edits cycling through T = 1 .. context_length.

    The texts repeat every 3 * context_length edits; one such cycle warms every cache (allocator
    pools, glyph caches, every text's tokens) before the baseline. (A warm-up of 50 edits, a
    part of the 96-text cycle of the default model, left the first unseen texts' caches in the
    growth, and a quick run scaled them from 300 edits to 1,000.)
    """
    session = window.session
    n_ctx = session.config.context_length
    warmup = 3 * n_ctx
    texts = [text_of(1 + i % n_ctx) + ("s" if i % 3 else "") for i in range(edits + warmup)]
    start = rss_mb()
    for text in texts[:warmup]:
        session.set_text(text)
        settle(app, 2)
    gc.collect()
    base = rss_mb()
    for text in texts[warmup:]:
        session.set_text(text)
        settle(app, 2)
    gc.collect()
    end = rss_mb()
    return {
        "memory_rss_mb_startup": start,
        "memory_growth_mb_1000_edits": (end - base) * 1000 / edits,  # scaled when edits != 1000
        "memory_edits_measured": float(edits),
    }
