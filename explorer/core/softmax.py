"""The one softmax of explorer/core: what the lessons and the next-token bars recompute with."""

from __future__ import annotations

import numpy as np


def softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax_j(s_j) = exp(s_j - max s) / Σ_j exp(s_j - max s), in float64.

    Parameters
    ----------
    scores : array of any shape
        Scores in nats; -inf entries (masked keys) get weight exactly 0. Every slice along
        ``axis`` needs one finite entry (a query always sees itself).
    axis : int
        The axis that sums to 1.

    Returns
    -------
    float64 array of the same shape, in [0, 1], summing to 1 along ``axis`` (empty stays empty).
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s.copy()
    e = np.exp(s - s.max(axis=axis, keepdims=True))  # the max subtracted: exp never overflows
    return e / e.sum(axis=axis, keepdims=True)
