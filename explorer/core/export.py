"""Writing a trace to files: every tensor as .npz, attention weights as CSV (no Qt here)."""

from __future__ import annotations

import csv
import os

import numpy as np

from model import Trace
from model.checkpoint import atomic_write

CSV_HEADER = ("layer", "head", "query_pos", "query_token", "key_pos", "key_token", "attn_weight")


def trace_npz_arrays(trace: Trace, tokens) -> dict[str, np.ndarray]:
    """{name: array} for an .npz: every tensor under its dotted name, plus ``token_ids`` and ``tokens``.

    The dotted names are the trace's own (``blocks.0.attn.attn_weights`` ...); shapes are as in
    :class:`model.Trace` (batch axis removed).
    """
    arrays = {name: np.asarray(a) for name, a in trace.named()}
    arrays["token_ids"] = np.asarray(trace.token_ids, dtype=np.int64)
    arrays["tokens"] = np.asarray(list(tokens), dtype=np.str_)
    return arrays


def write_trace_npz(path: str | os.PathLike, trace: Trace, tokens) -> None:
    """Write :func:`trace_npz_arrays` to ``path`` (exactly that name; atomic).

    Raises
    ------
    OSError
        When the file cannot be written.
    """
    arrays = trace_npz_arrays(trace, tokens)

    def write(tmp):
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a bare name
            np.savez(f, **arrays)

    atomic_write(path, write)


def attention_rows(trace: Trace, tokens):
    """Yield one CSV row per (layer, head, query, key) with the attention weight in [0, 1]."""
    tokens = list(tokens)
    for li, layer in enumerate(trace.blocks):
        w = layer.attn_weights  # (n_heads, T, T)
        for h in range(w.shape[0]):
            for i in range(w.shape[1]):
                for j in range(w.shape[2]):
                    yield (li, h, i, tokens[i], j, tokens[j], f"{float(w[h, i, j]):.8g}")


def write_attention_csv(path: str | os.PathLike, trace: Trace, tokens) -> None:
    """Write every head's attention weights as a long-format CSV with :data:`CSV_HEADER` (atomic).

    Raises
    ------
    OSError
        When the file cannot be written.
    """

    def write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(CSV_HEADER)
            out.writerows(attention_rows(trace, tokens))

    atomic_write(path, write)
