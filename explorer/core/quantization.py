"""A quantised file's weights in words, and how far its logits are from another file's (no Qt here).

:func:`storage_rows` writes the Model panel's rows for a file whose weights were quantised
blocks (a GGUF file): the type of each kind of tensor with its block size and bits per weight,
and what dequantising cost. :func:`compare_logits` measures two files of one model (a Q8_0 file
and its F16, say) on the same token ids: the largest |Δ logit| and where it is, and at how many
positions both predict the same top token.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from explorer.core.model_facts import fmt_seconds
from model.formats.storage import KINDS, StoredTensor, WeightStorage

FLOAT_TYPES = ("F32", "F16", "BF16")


def type_text(tensor: StoredTensor) -> str:
    """A storage type in words: "Q8_0 (blocks of 32, 8.5 bits per weight)", or "F32" for a float type."""
    if tensor.type_name in FLOAT_TYPES:
        return tensor.type_name
    return f"{tensor.type_name} (blocks of {tensor.block_size}, {tensor.bits_per_weight:.3g} bits per weight)"


def kind_types(storage: WeightStorage) -> list[tuple[str, str]]:
    """(kind, its types) for every kind of tensor in the file, in :data:`KINDS` order.

    A kind whose tensors share one type says it once ("attention", "Q8_0 (blocks of 32, 8.5 bits
    per weight)"); a mix says how many tensors have each ("Q4_K (…) × 6, Q6_K (…) × 2").
    """
    rows = []
    for kind in KINDS + ("other",):
        tensors = [t for t in storage.tensors if t.kind == kind]
        if not tensors:
            continue
        counts = Counter(type_text(t) for t in tensors)
        if len(counts) == 1:
            rows.append((kind, next(iter(counts))))
        else:
            rows.append((kind, ", ".join(f"{text} × {n}" for text, n in counts.most_common())))
    return rows


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.3g} MB" if n >= 1e6 else f"{n / 1e3:.3g} kB"


def _duration(s: float) -> str:
    return f"{1000 * s:.3g} ms" if s < 1 else fmt_seconds(s)


def storage_summary(storage: WeightStorage) -> str:
    """One line: "attention Q8_0 (blocks of 32, 8.5 bits per weight), norms F32, …"."""
    return ", ".join(f"{kind} {types}" for kind, types in kind_types(storage))


def storage_rows(storage: WeightStorage) -> list[tuple[str, str]]:
    """The Model panel's rows for a file's stored weights: each kind's types, the sizes and what
    dequantising cost (the largest |w − dequantised| is not known: the file holds no original)."""
    n = sum(t.n_weights for t in storage.tensors)
    ratio = storage.float32_bytes / max(1, storage.stored_bytes)
    rows = [(kind, types) for kind, types in kind_types(storage)]
    rows.append(("in the file", f"{_megabytes(storage.stored_bytes)} for {n:,} weights "
                                f"({8 * storage.stored_bytes / max(1, n):.3g} bits per weight on average)"))
    rows.append(("dequantised", f"to float32 when opened: {_megabytes(storage.float32_bytes)} ({ratio:.3g}× the file's "
                                f"weights) in {_duration(storage.dequantize_s)}, with the gguf package's own code"))
    rows.append(("error per weight", "not known: the file holds the quantised values only; each type's "
                                     "block size and bits bound how finely a weight is kept"))
    return rows


@dataclass(frozen=True)
class LogitsDelta:
    """How two models' logits on the same ids differ.

    Attributes
    ----------
    max_abs : float        largest |Δ logit| over every position and vocabulary entry.
    position : int         where it is: the query position (0-based).
    token_id : int         and which vocabulary entry's logit.
    mean_abs : float       mean |Δ logit| over every position and entry.
    top1_same : int        positions where both models' highest logit is the same token.
    n_positions : int      positions compared.
    """

    max_abs: float
    position: int
    token_id: int
    mean_abs: float
    top1_same: int
    n_positions: int

    @property
    def top1_agreement(self) -> float:
        """Share of positions with the same top token, in [0, 1]."""
        return self.top1_same / max(1, self.n_positions)


def compare_logits(logits: np.ndarray, other: np.ndarray) -> LogitsDelta:
    """Δ = other − logits, both (T, vocab_size) for the same token ids (see :class:`LogitsDelta`).

    Raises
    ------
    ValueError
        When the shapes differ or there is no position.
    """
    a, b = np.asarray(logits, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(f"logits of shapes {a.shape} and {b.shape} cannot be compared")
    delta = np.abs(b - a)  # (T, vocab_size)
    position, token_id = np.unravel_index(int(np.argmax(delta)), delta.shape)
    same = int(np.count_nonzero(a.argmax(-1) == b.argmax(-1)))
    return LogitsDelta(float(delta[position, token_id]), int(position), int(token_id), float(delta.mean()),
                       same, a.shape[0])
