"""Rotary position embedding as the lessons show it: its angles, its rotation, its shift invariance.

RoPE (Su et al. 2021, RoFormer, eq. 34) turns pair j of q_i by the angle i·θ_j and pair j of k_j
by j·θ_j, with θ_j = θ^(−2j/d_head). A rotation keeps lengths and the dot product of two turned
pairs depends on the difference of their angles only, so q_i·k_j depends on i − j, not on where
the two tokens stand. The angles always come from the model (``GPT.rope_angles``) and the pair
layout from its config; :func:`rotate` recomputes the rotation in float64 so that the formula panel
can compare it with the q and k the model recorded, and :func:`shift_check` measures the invariance
on the live text with the model's own traces at two start positions (``GPT.trace(..., start_position=s)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.core.lessons.positional_sentence import fmt

TWO_PI = 2.0 * math.pi
#: A shift changes scores by less than this (relative to the largest |score|, at least 1): float32 noise.
SHIFT_TOL = 1e-5


def angle_view(angles: np.ndarray) -> np.ndarray:
    """RoPE's angles (T, d_head/2) in radians, folded into [0, 2π): how far each pair is turned.

    Position i's row j is i·θ_j mod 2π; the embeddings panel draws it with a cyclic colour map.
    """
    return np.mod(np.asarray(angles, dtype=np.float64), TWO_PI).astype(np.float32)


def pair_frequencies(angles: np.ndarray) -> np.ndarray:
    """θ_j = θ^(−2j/d_head) in radians per position, (d_head/2,): the model's angles at position 1.

    ``angles`` is ``GPT.rope_angles(T)`` with T >= 2.
    """
    return np.asarray(angles[1], dtype=np.float64)


def pair_labels(freqs: np.ndarray) -> list[str]:
    """Column labels of the angle map: "j: θ_j" ("0: 1", "1: 0.1", ...)."""
    return [f"{j}: {f:.2g}" for j, f in enumerate(freqs)]


def pair_dims(d_head: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The two dimensions of each rotated pair, (d_head/2,) each: (2j, 2j+1) for ``"interleaved"``,
    (j, j + d_head/2) for ``"halves"`` (``GPTConfig.rope_pairs``)."""
    j = np.arange(d_head // 2)
    if layout == "interleaved":
        return 2 * j, 2 * j + 1
    return j, j + d_head // 2


def rotate(x: np.ndarray, angles: np.ndarray, layout: str) -> np.ndarray:
    """Turn each pair of ``x`` (..., d_head) by ``angles`` (..., d_head/2) radians, in float64.

    Pair (a, b) becomes (a cos φ − b sin φ, a sin φ + b cos φ). The recomputation the formula
    panel compares with the model's rotated q and k.
    """
    x = np.asarray(x, dtype=np.float64)
    a_idx, b_idx = pair_dims(x.shape[-1], layout)
    a, b = x[..., a_idx], x[..., b_idx]
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(x)
    out[..., a_idx] = a * cos - b * sin
    out[..., b_idx] = a * sin + b * cos
    return out


@dataclass(frozen=True)
class ShiftCheck:
    """Layer 0's attention scores at positions 0..T−1 and at s..s+T−1 (every token moved by s).

    Attributes
    ----------
    positional : str            the model's scheme: ``"learned"``, ``"rope"`` or ``"none"``.
    shift : int                 s (0 when the text leaves no room in the context window).
    n_tokens : int              T.
    scores, shifted : (n_heads, T, T)   scale · q_i·k_j, NaN where the query may not see the key.
    max_abs_delta : float       max |shifted − scores| over every head and visible (i, j).
    max_abs_score : float       max |scores|, for scale.
    sentence : str              what the numbers show.
    """

    positional: str
    shift: int
    n_tokens: int
    scores: np.ndarray
    shifted: np.ndarray
    max_abs_delta: float
    max_abs_score: float
    sentence: str

    @property
    def unchanged(self) -> bool:
        """True when the shift changed no score beyond float32 noise."""
        return self.max_abs_delta <= SHIFT_TOL * max(1.0, self.max_abs_score)


def layer0_scores(model, token_ids: Sequence[int], start: int, causal: bool = True) -> np.ndarray:
    """Block 0's scores (n_heads, T, T) for the tokens at positions start .. start + T − 1, NaN
    where the query may not see the key.

    The model computes them: its trace with ``start_position=start`` (its positional table's rows
    start .., or RoPE's rotation at those positions; nothing recomputed here).

    Raises
    ------
    ValueError
        When start + T exceeds the context length.
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    T = ids.shape[0]
    if start < 0 or start + T > model.config.context_length:
        raise ValueError(f"positions {start}..{start + T - 1} are outside the context window of "
                         f"{model.config.context_length}")
    layer = model.trace(ids, causal=causal, start_position=start).blocks[0]
    return np.where(layer.attn_mask, layer.attn_scores, np.nan)  # attn_mask: True = may attend


def _sentence(kind: str, s: int, T: int, delta: float, top: float, unchanged: bool) -> str:
    moved = f"Every position moved by s = {s} ({0}..{T - 1} → {s}..{s + T - 1}): layer 0's scores"
    shown = f"{delta:.1e}" if 0 < delta < 1e-3 else fmt(delta)
    change = f"change by at most {shown} (largest |score| {top:.3g})"
    if kind == "rope":
        why = ("RoPE turns q_i by i·θ_j and k_j by j·θ_j, so q_i·k_j depends only on the offset i − j, "
               "not on where the two tokens stand" if unchanged else
               "more than float32 noise, which the offset alone does not explain")
        return f"{moved} {change}: {'float32 noise. ' if unchanged else ''}{why}."
    if kind == "learned":
        why = ("the learned table adds p_(i+s) instead of p_i, another vector, so the scores depend on "
               "where the tokens stand, not only on i − j" if not unchanged else
               "the table's rows are too alike to tell these positions apart")
        return f"{moved} {change}: {why}."
    return (f"{moved} {change}: this model has no positional encoding, so nothing in it depends on "
            "where a token stands.")


def shift_check(model, token_ids: Sequence[int], shift: int, causal: bool = True) -> ShiftCheck:
    """Measure how much moving every token by ``shift`` positions changes layer 0's scores.

    Parameters
    ----------
    model : model.GPT
    token_ids : sequence of int, length T (cropped to the last context_length ids)
    shift : int
        s; clamped to [0, context_length − T] (the positions the model has).
    causal : bool
        Whether the scores use the causal mask.

    Returns
    -------
    ShiftCheck
        For RoPE, ``max_abs_delta`` is float32 rounding (below 1e-5 for these small models); for a
        learned table it is the effect of absolute positions.
    """
    kind = model.config.positional
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)[-model.config.context_length:]
    T = len(ids)
    s = max(0, min(int(shift), model.config.context_length - T))
    empty = np.zeros((model.config.n_heads, T, T), np.float32)
    if T == 0:
        return ShiftCheck(kind, s, 0, empty, empty, 0.0, 0.0, 0.0, "There are no tokens to shift.")
    scores = layer0_scores(model, ids, 0, causal)
    shifted = layer0_scores(model, ids, s, causal) if s else scores
    seen = ~np.isnan(scores)
    delta = float(np.max(np.abs(shifted - scores)[seen]))
    top = float(np.max(np.abs(scores)[seen]))
    if s == 0:
        sentence = (f"The text fills the context window ({T} of {model.config.context_length} positions): "
                    "there is no room to move it. Delete a few tokens to measure a shift.")
    else:
        sentence = _sentence(kind, s, T, delta, top, delta <= SHIFT_TOL * max(1.0, top))
    return ShiftCheck(kind, s, T, scores, shifted, delta, top, sentence)


@dataclass(frozen=True)
class ShiftRequest:
    """The inputs of :func:`shift_job`: the ids (T,), the shift and the mask option."""

    token_ids: np.ndarray
    shift: int
    causal: bool = True


def shift_job(checkpoint, request: ShiftRequest) -> ShiftCheck:
    """:func:`shift_check` as a session job: ``fn(checkpoint, inputs)``."""
    return shift_check(checkpoint.model, request.token_ids, request.shift, request.causal)
