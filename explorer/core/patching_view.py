"""The Why panel's Patching view, Qt-free: its job (:func:`model.explain.patching.activation_patching`
on the session's text and a corrupted one), the labels of its positions and the sentences it shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from model.core.interventions import Interventions
from model.explain.patching import IDENTITY_TOL, LengthMismatch, PatchingResult, activation_patching, patch_cells
from model.tracing.records import Trace

Name = Callable[[int], str]


@dataclass(frozen=True)
class PatchingRequest:
    """The clean run (the session's trace), the corrupted text's ids, and the metric's tokens.

    ``target`` / ``foil`` None: the clean top-1 and the corrupted top-1. ``should_stop`` is asked
    between batches (the session's worker: newer work waits).
    """

    trace: Trace
    corrupted_ids: tuple[int, ...]
    target: int | None = None
    foil: int | None = None
    should_stop: Callable[[], bool] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PatchingOutcome:
    """A result, or why there is none (``message``: texts of different lengths, nothing to normalise)."""

    result: PatchingResult | None
    message: str = ""


def patching_passes(config, T: int) -> int:
    """About how many forward passes of T tokens the job costs: three sweeps of every cell, batched."""
    return 2 + 3 * len(patch_cells(config, T))


def patching_job(checkpoint, request: PatchingRequest) -> PatchingOutcome:
    """Session job: patch the session's text (clean) into the corrupted text, with the heads switched off kept off."""
    tr = request.trace
    base = tr.interventions or Interventions()
    try:
        result = activation_patching(checkpoint.model, tr.token_ids.tolist(), request.corrupted_ids, request.target,
                                     request.foil, base=base, positional_encoding=tr.positional_encoding,
                                     causal=tr.causal, should_stop=request.should_stop)
    except LengthMismatch as exc:
        return PatchingOutcome(None, f"The {str(exc)[4:]}. Change a word for one that is one token too.")
    except ValueError as exc:
        return PatchingOutcome(None, str(exc)[:1].upper() + str(exc)[1:] + ".")
    return PatchingOutcome(result)


def position_labels(r: PatchingResult, name: Name) -> list[str]:
    """One label per position: ``"3 girl"``, or ``"3 girl/dog"`` where the clean and the corrupted token differ."""
    out = []
    for i, (a, b) in enumerate(zip(r.clean_ids.tolist(), r.corrupted_ids.tolist())):
        out.append(f"{i} {name(a)}" if a == b else f"{i} {name(a)}/{name(b)}")
    return out


def metric_line(r: PatchingResult, name: Name) -> str:
    """The metric and its two ends, and the identity check, in one paragraph."""
    text = (f"Metric: logit({name(r.target_id)!r}) − logit({name(r.foil_id)!r}) at the last position: "
            f"{r.clean:.3f} nats on the clean text, {r.corrupted:.3f} on the corrupted one"
            + (f" ({r.foil_note})" if r.foil_note else "") + ". Each cell copies one activation of the clean run "
            "into the corrupted run: 0 = the corrupted answer, 1 = the clean answer.")
    if r.identity_ok:
        return text + (f" Identity check passed: clean into clean gives 1 and corrupted into corrupted 0 in every "
                       f"cell (largest error {r.identity_error:.1e}).")
    return text


def identity_failure(r: PatchingResult) -> str:
    """What the view says instead of drawing when the identity check fails."""
    return (f"The identity check failed: patching clean into clean or corrupted into corrupted moved a cell by "
            f"{r.identity_error:.2e} (allowed {IDENTITY_TOL:g}), so the maps would not mean what they say and are "
            "not drawn. The model's forward pass is not the same from one batch row to another.")


def strongest(r: PatchingResult, labels: list[str]) -> str:
    """A sentence on the cells that restore most of the clean answer (resid_pre and the heads)."""
    m = r.resid_pre
    layer, pos = np.unravel_index(np.nanargmax(m), m.shape)
    text = (f"The residual before layer {layer} at position {labels[pos]} restores {m[layer, pos]:.2f} of the clean "
            "answer")
    h = r.head_out
    if h.size:
        hl, hh = np.unravel_index(np.nanargmax(h), h.shape)
        text += f"; of the heads, L{hl}H{hh} restores most ({h[hl, hh]:.2f})"
    return text + "."
