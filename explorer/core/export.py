"""Writing a trace to files: every tensor as .npz, attention weights as CSV (no Qt here).

Both writers report progress and can be cancelled (``progress(done, total)`` returning False),
write a temporary file that is renamed onto the chosen name only when complete, and name the
chosen file (never the temporary one) in their errors. A GPT-2-small-sized trace of 1,024 tokens
is 151 million CSV rows (several GB): the app asks first and writes on a worker thread.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile
from typing import Callable

import numpy as np

from model import Trace
from model.checkpoint import atomic_write

CSV_HEADER = ("layer", "head", "query_pos", "query_token", "key_pos", "key_token", "attn_weight")
Progress = Callable[[int, int], bool]  # (done, total) -> False to cancel


class ExportCancelled(Exception):
    """The user cancelled an export; nothing was written."""


def _write_atomically(path: str | os.PathLike, write) -> None:
    """:func:`model.checkpoint.atomic_write`, with an OSError naming ``path`` (not the temporary file)."""
    try:
        atomic_write(path, write)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc


def trace_npz_arrays(trace: Trace, tokens) -> dict[str, np.ndarray]:
    """{name: array} for an .npz: every tensor under its dotted name, plus ``token_ids`` and ``tokens``.

    The dotted names are the trace's own (``blocks.0.attn.attn_weights`` ...); shapes are as in
    :class:`model.Trace` (batch axis removed).
    """
    arrays = {name: np.asarray(a) for name, a in trace.named()}
    arrays["token_ids"] = np.asarray(trace.token_ids, dtype=np.int64)
    arrays["tokens"] = np.asarray(list(tokens), dtype=np.str_)
    return arrays


def trace_npz_bytes(trace: Trace) -> int:
    """The bytes of every tensor of the trace (``trace.named()``'s), found from the shapes
    (:meth:`model.Trace.nbytes`): ``attn_scores`` and ``probs``, which a trace made with reuse
    computes on first use, are not computed (at T = 1,024 a GPT-2-sized trace's are 800 MB and
    two seconds of work)."""
    return sum(trace.nbytes(name) for name in trace.names())


def write_trace_npz(path: str | os.PathLike, trace: Trace, tokens, progress: Progress | None = None) -> None:
    """Write :func:`trace_npz_arrays` to ``path`` (exactly that name; atomic), one array at a time.

    The file is what ``np.savez`` writes (a zip of ``NAME.npy`` entries), read by ``np.load``.

    Raises
    ------
    OSError
        When the file cannot be written (the message names ``path``).
    ExportCancelled
        When ``progress`` returned False (nothing is left behind).
    """
    arrays = trace_npz_arrays(trace, tokens)
    total = sum(a.nbytes for a in arrays.values())

    def write(tmp):
        done = 0
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, a in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
                done += a.nbytes
                if progress is not None and not progress(done, total):
                    raise ExportCancelled()

    _write_atomically(path, write)


def _csv_field(text: str) -> str:
    """``text`` as one CSV field (quoted when it holds a comma, quote or line break)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([text])
    return buf.getvalue()


def attention_csv_rows(trace: Trace) -> int:
    """How many data rows :func:`write_attention_csv` writes: n_layers * n_heads * T * T."""
    return sum(int(np.prod(layer.attn_weights.shape)) for layer in trace.blocks)


def attention_csv_bytes(trace: Trace, tokens, sample: int = 4096) -> int:
    """About how many bytes :func:`write_attention_csv` writes: exact but for the weights' digits,
    whose mean length is taken from ``sample`` weights of each layer drawn at random (seeded);
    exact when a layer has no more weights than that."""
    fields = [_csv_field(t) for t in list(tokens)[: trace.n_tokens]]
    T = trace.n_tokens
    if T == 0:
        return len(",".join(CSV_HEADER)) + 1
    pos_len = np.array([len(str(i)) for i in range(T)])
    tok_len = np.array([len(f) for f in fields])
    per_query = pos_len + tok_len  # "i,token" and "j,token" have the same lengths
    # One row: layer , head , i , tok_i , j , tok_j , weight \n -> 6 commas and a newline.
    pairs = T * per_query.sum() * 2  # over all (i, j): each query part T times, each key part T times
    total = len(",".join(CSV_HEADER)) + 1
    for li, layer in enumerate(trace.blocks):
        w = layer.attn_weights  # (n_heads, T, T)
        n_heads = w.shape[0]
        flat = w.reshape(-1)
        picks = flat if flat.size <= sample else flat[np.random.default_rng(li).integers(0, flat.size, sample)]
        weight_len = float(np.mean([len(_weight(x)) for x in picks.tolist()]))
        head_len = sum(len(str(li)) + len(str(h)) for h in range(n_heads))
        total += int(n_heads * pairs + T * T * head_len + w.size * (weight_len + 7))
    return total


def _weight(x: float) -> str:
    return f"{x:.8g}"


def write_attention_csv(path: str | os.PathLike, trace: Trace, tokens, progress: Progress | None = None) -> None:
    """Write every head's attention weights as a long-format CSV with :data:`CSV_HEADER` (atomic),
    one row per (layer, head, query, key), with LF line endings.

    Parameters
    ----------
    progress : callable, optional
        Called as ``progress(rows_done, rows_total)`` after each query row of each head; returning
        False cancels.

    Raises
    ------
    OSError
        When the file cannot be written (the message names ``path``).
    ExportCancelled
        When ``progress`` returned False (nothing is left behind).
    """
    T = trace.n_tokens
    fields = [_csv_field(t) for t in list(tokens)[:T]]
    keys = [f",{j},{fields[j]}," for j in range(T)]  # ",j,key_token," before each weight
    total = attention_csv_rows(trace)

    def write(tmp):
        done = 0
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            f.write(",".join(CSV_HEADER) + "\n")
            for li, layer in enumerate(trace.blocks):
                w = layer.attn_weights  # (n_heads, T, T)
                for h in range(w.shape[0]):
                    for i in range(T):
                        query = f"{li},{h},{i},{fields[i]}"
                        f.write("".join([f"{query}{k}{x:.8g}\n" for k, x in zip(keys, w[h, i].tolist())]))
                        done += T
                        if progress is not None and not progress(done, total):
                            raise ExportCancelled()

    _write_atomically(path, write)
