"""What :meth:`model.core.transformer.GPT.trace` accepts: one sequence of token ids, in the vocabulary,
cropped to the context window, and a first position inside it."""

from __future__ import annotations

from collections.abc import Sized

import numpy as np
import torch

from model.core.config import GPTConfig


def _one_sequence(token_ids) -> np.ndarray:
    """``token_ids`` as a 1-D int64 array (a (1, T) batch as its one row).

    Raises
    ------
    ValueError
        For anything that is not one sequence of integers (see :meth:`GPT.trace`).
    """
    if isinstance(token_ids, torch.Tensor):
        token_ids = token_ids.detach().cpu().numpy()
    try:
        ids = np.asarray(token_ids)
    except ValueError:  # ragged: numpy refuses lists of different lengths
        raise ValueError("trace() takes one sequence of token ids; got a nested list of different lengths") from None
    if ids.ndim == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.ndim != 1:
        what = (f"a batch of {ids.shape[0]} sequences, shape {tuple(ids.shape)}: trace each on its own"
                if ids.ndim == 2 else f"an array of shape {tuple(ids.shape)}")
        raise ValueError(f"trace() takes one sequence of token ids (shape (T,) or (1, T)); got {what}")
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    if ids.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers; got values of type {ids.dtype}")
    return ids.astype(np.int64, copy=False)


def checked_ids(token_ids, config: GPTConfig, start_position: int = 0) -> tuple[np.ndarray, int]:
    """(ids, dropped): the last ids that fit the context from ``start_position`` on, as a
    contiguous (T,) int64 array, and how many leading ids were cropped away.

    Raises
    ------
    ValueError
        When an id is outside [0, vocab_size), ``start_position`` is not a position of the
        context window, or the input is not one sequence of integers: a batch of several
        sequences (shape (B, T) with B > 1; a (1, T) batch is taken as its one row), a single
        number, a nested or ragged list, floats, booleans or strings.
    """
    start = int(start_position)
    if start != start_position or not 0 <= start < config.context_length:
        raise ValueError(f"start_position must be a position 0..{config.context_length - 1}; got {start_position!r}")
    n_ctx = config.context_length - start
    skipped = 0
    flat = isinstance(token_ids, (list, tuple)) and not (token_ids and isinstance(token_ids[0], Sized))
    if flat and len(token_ids) > n_ctx:
        # Crop before converting: a pasted book is 10^5 ids, of which n_ctx are run.
        skipped = len(token_ids) - n_ctx
        token_ids = token_ids[skipped:]
    ids = _one_sequence(token_ids)
    dropped = max(0, ids.size - n_ctx)
    ids = np.ascontiguousarray(ids[dropped:])  # checked in numpy: cheaper than in torch
    if not ids.flags.writeable:
        ids = ids.copy()  # a trace's read-only token_ids: torch.from_numpy wants memory it may write
    if ids.size and (ids.min() < 0 or ids.max() >= config.vocab_size):
        bad = int(ids[(ids < 0) | (ids >= config.vocab_size)][0])
        raise ValueError(f"token id {bad} is outside the vocabulary (0..{config.vocab_size - 1})")
    return ids, dropped + skipped
