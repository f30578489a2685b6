"""The Training panel's arithmetic, Qt-free: the log step axis, the positions of its slider, the
curves of one head, where the top-1 prediction changed, and which tokens a difference shows.

Training steps are drawn at x = log10(1 + step): the snapshots of ``--snapshots K`` are
log-spaced (0, 1, 2, 4, 7, ..., 2000), so they are about evenly spaced on this axis, step 0
included (x = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from model.training.over_training import TrainingCurves

#: The statistics of one head that the panel draws, with their names in TrainingCurves.
HEAD_STATS = {"entropy": "attn_entropy", "first": "attn_first", "prev": "attn_prev", "self": "attn_self"}


def step_x(steps: Sequence[int] | np.ndarray | int) -> np.ndarray:
    """x position of training steps on the log axis: log10(1 + step) (step 0 at x = 0)."""
    return np.log10(1.0 + np.asarray(steps, dtype=np.float64))


def step_ticks(max_step: int) -> list[tuple[float, str]]:
    """Labelled ticks for steps 0 .. max_step: 0, 1, 3, 10, 30, 100, ... (as ``(x, label)``)."""
    ticks = [(0.0, "0")]
    decade = 1
    while decade <= max(max_step, 1):
        for value in (decade, 3 * decade):
            if value <= max(max_step, 1):
                ticks.append((float(step_x(value)), f"{value:,}"))
        decade *= 10
    return ticks


def nearest_index(x: float, steps: Sequence[int] | np.ndarray) -> int:
    """Index of the step nearest to ``x`` on the log axis (the first on ties).

    Raises
    ------
    ValueError
        When there are no steps.
    """
    xs = step_x(steps)
    if xs.size == 0:
        raise ValueError("no steps")
    return int(np.argmin(np.abs(xs - x)))


@dataclass(frozen=True)
class SliderStop:
    """One position of the panel's slider: a snapshot, or the loaded model after the last one.

    Attributes
    ----------
    step : int        training step of the weights (the loaded model's ``steps`` fact, else the last snapshot's).
    index : int       index into the snapshots, or -1 for the loaded model.
    label : str       what the panel says about it.
    """

    step: int
    index: int
    label: str


def slider_stops(steps: Sequence[int], final_step: int | None, identical: Sequence[Sequence[int]] = (),
                 names: Sequence[str] = ()) -> list[SliderStop]:
    """The slider's positions: one per snapshot, and one for the loaded ("final") model.

    Parameters
    ----------
    steps : sequence of int
        The snapshots' steps, increasing.
    final_step : int or None
        The loaded model's training step, when the snapshots are its run's; None when they are
        not (a folder of another run, a run still training): no final position then.
    identical : sequence of sequences of int, optional
        Per snapshot, the indices of the others with the same weights (a series that served one
        checkpoint under several steps): their labels say so.
    names : sequence of str, optional
        Per snapshot, a name to give (a Hub revision's); "" for none.
    """
    n = len(steps)
    stops = []
    for i, s in enumerate(steps):
        label = f"snapshot {i + 1} of {n}: step {int(s):,}"
        if i < len(names) and names[i]:
            label += f" (revision {names[i]})"
        same = list(identical[i]) if i < len(identical) else []
        if same:
            shown = ", ".join(f"{int(steps[j]):,}" for j in same[:3]) + (f" and {len(same) - 3} more" if len(same) > 3 else "")
            label += f" · the very same weights as step{'s' * (len(same) > 1)} {shown}"
        stops.append(SliderStop(int(s), i, label))
    if final_step is not None:
        stops.append(SliderStop(int(final_step), -1, f"the model you opened (step {int(final_step):,})"))
    return stops


#: The curves of the current text run over at most this many snapshots (each is a forward pass per
#: text change): all of a run of 14, an even spread (the first and last included) of 3,000.
CURVE_SNAPSHOTS = 200


def curve_snapshots(snapshots: Sequence, limit: int = CURVE_SNAPSHOTS) -> tuple:
    """The snapshots the curves are computed over: every one up to ``limit``, else ``limit`` of them
    spread evenly by index, the first and the last included (in step order)."""
    n = len(snapshots)
    if n <= limit:
        return tuple(snapshots)
    return tuple(snapshots[i] for i in spread_indices(n, limit))


def spread_indices(n: int, k: int) -> list[int]:
    """``k`` indices of ``range(n)`` spread evenly, the first and the last included, increasing,
    without repeats (fewer when ``n < k``). (Not ``np.unique``: its first call imports ``numpy.ma``,
    40 to 80 ms of the GUI thread the first time a long run's snapshots were listed.)"""
    if n <= 0 or k <= 0:
        return []
    return list(dict.fromkeys(int(i) for i in np.round(np.linspace(0, n - 1, min(k, n))).astype(np.int64)))


def head_curves(curves: TrainingCurves, layer: int, head: int) -> dict[str, np.ndarray]:
    """One head's statistics over the snapshots: ``entropy`` (nats), ``first``, ``prev``, ``self``
    (attention mass in [0, 1]); each (S,)."""
    return {name: getattr(curves, field)[:, layer, head] for name, field in HEAD_STATS.items()}


def top1_changes(curves: TrainingCurves) -> np.ndarray:
    """Indices of the snapshots whose top-1 prediction at the selected position differs from the
    snapshot before (int64, increasing)."""
    return np.flatnonzero(curves.top1_changed)


def largest_changes(probs_diff: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` token ids whose next-token probability changed most at any position.

    Parameters
    ----------
    probs_diff : (T, vocab_size)
        Later minus earlier probabilities, in [-1, 1].
    k : int

    Returns
    -------
    (min(k, vocab_size),) int64
        Ordered by the largest absolute change over the positions, largest first (lower id on ties).
        A value that is not a number (a snapshot whose logits overflowed) is no change: such tokens
        come last (NaN had ranked them as the largest, and their ids first).
    """
    if probs_diff.size == 0:
        return np.zeros(0, np.int64)
    finite = np.isfinite(probs_diff)
    peak = np.where(finite, np.abs(np.where(finite, probs_diff, 0.0)), -1.0).max(axis=0)  # (vocab_size,)
    order = np.lexsort((np.arange(peak.size), -peak))
    return order[: max(0, min(k, peak.size))].astype(np.int64)


#: A change of probability smaller than this reads as 0 when printed with 3 decimals ("+0.000"):
#: it is never called a gain or a loss.
SHOWN_CHANGE = 0.0005


def last_position_extremes(probs_diff: np.ndarray) -> tuple[int, int]:
    """The tokens whose next-token probability after the last token rose most and fell most,
    taken over the whole vocabulary.

    Parameters
    ----------
    probs_diff : (T, vocab_size)
        Later minus earlier probabilities, in [-1, 1]; values that are not numbers are no change.

    Returns
    -------
    (int, int)
        ``(rose, fell)``: token ids, lowest id on ties; -1 when ``T = 0`` or no value of the last row
        is a number. The rise may be ≤ 0 and the fall ≥ 0 (see :func:`difference_sentence`).
    """
    if probs_diff.ndim != 2 or probs_diff.shape[0] == 0 or probs_diff.shape[1] == 0:
        return -1, -1
    last = np.asarray(probs_diff[-1], dtype=np.float64)  # (vocab_size,)
    finite = np.isfinite(last)
    if not finite.any():
        return -1, -1
    return int(np.argmax(np.where(finite, last, -np.inf))), int(np.argmin(np.where(finite, last, np.inf)))


def difference_columns(probs_diff: np.ndarray, k: int) -> np.ndarray:
    """The vocabulary columns a difference map shows: :func:`largest_changes`, with the last
    position's largest rise and fall (:func:`last_position_extremes`) always among them, so the
    token the sentence names is one the map shows.

    Returns
    -------
    (min(k, vocab_size),) int64
        Token ids, ordered by the largest absolute change over the positions, largest first.
    """
    cols = [int(c) for c in largest_changes(probs_diff, k)]
    if not cols:
        return np.zeros(0, np.int64)
    keep = [c for c in dict.fromkeys(last_position_extremes(probs_diff))
            if c >= 0 and abs(float(probs_diff[-1, c])) >= SHOWN_CHANGE][: len(cols)]
    for c in keep:
        if c not in cols:  # in place of the smallest change not kept
            cols[max(i for i, d in enumerate(cols) if d not in keep)] = c
    finite = np.isfinite(probs_diff)
    peak = np.where(finite, np.abs(np.where(finite, probs_diff, 0.0)), -1.0).max(axis=0)  # (vocab_size,)
    chosen = np.asarray(cols, np.int64)
    return chosen[np.lexsort((chosen, -peak[chosen]))]


def difference_sentence(probs_diff: np.ndarray, name: Callable[[int], str]) -> str:
    """What changed most after the last token, in words, over the whole vocabulary.

    Parameters
    ----------
    probs_diff : (T, vocab_size)
        Later minus earlier next-token probabilities, in [-1, 1].
    name : callable
        A token id's text as the map labels it.

    Returns
    -------
    str
        The largest rise is called a gain only when it shows as more than +0.000 (at least
        :data:`SHOWN_CHANGE`), the largest fall a loss only when it shows as less than -0.000;
        when neither does, the sentence says that no probability changed that much. "" when
        ``T = 0``.
    """
    if probs_diff.ndim != 2 or probs_diff.shape[0] == 0:
        return ""
    rose, fell = last_position_extremes(probs_diff)
    if rose < 0:
        return "After the last token, the probabilities of one of the two steps are not numbers (NaN or inf)."
    up, down = float(probs_diff[-1, rose]), float(probs_diff[-1, fell])
    parts = []
    if up >= SHOWN_CHANGE:
        parts.append(f"{name(rose)!r} gained most ({up:+.3f})")
    if down <= -SHOWN_CHANGE:
        parts.append(f"{name(fell)!r} lost most ({down:+.3f})")
    if not parts:
        return (f"After the last token, no token's probability changed by {SHOWN_CHANGE:.4f} or more "
                f"(the largest change is {up if abs(up) >= abs(down) else down:+.1e}).")
    if up < SHOWN_CHANGE:
        parts.insert(0, "no token gained")
    return f"After the last token, {' and '.join(parts)}."
