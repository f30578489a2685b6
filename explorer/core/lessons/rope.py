"""Rotary position embedding as the lessons show it: its angles, its rotation, its shift invariance.

RoPE (Su et al. 2021, RoFormer, eq. 34) turns pair j of q_i by the angle i·θ_j and pair j of k_j
by j·θ_j, with θ_j = θ^(−2j/d_head). A rotation keeps lengths and the dot product of two turned
pairs depends on the difference of their angles only, so q_i·k_j depends on i − j, not on where
the two tokens stand. The angles always come from the model (``GPT.rope_angles``) and the pair
layout from its config; :func:`rotate` recomputes the rotation in float64 so that the formula panel
can compare it with the q and k the model recorded, and :func:`shift_check` measures the invariance
on the live text with the model's own traces at two start positions (``GPT.trace(..., start_position=s)``),
in the layer the learner has selected: under partial rotary (GPT-NeoX, Phi) only the first r
dimensions of each head turn, and a layer without RoPE (SmolLM3's NoPE layers) turns none, so no
position signal enters there (its scores still depend only on offsets, through the layers before it).
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
    layer : int                 the layer whose scores were compared.
    n_tokens : int              T.
    scores, shifted : (n_heads, T, T)   scale · q_i·k_j, NaN where the query may not see the key.
    max_abs_delta : float       max |shifted − scores| over every head and visible (i, j).
    max_abs_score : float       max |scores|, for scale.
    sentence : str              what the numbers show.
    """

    positional: str
    shift: int
    layer: int
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


def layer0_scores(model, token_ids: Sequence[int], start: int, causal: bool = True, layer: int = 0) -> np.ndarray:
    """Block ``layer``'s scores (n_heads, T, T) (block 0's by default) for the tokens at positions
    start .. start + T − 1, NaN where the query may not see the key.

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
    block = model.trace(ids, causal=causal, start_position=start).blocks[layer]
    return np.where(block.attn_mask, block.attn_scores, np.nan)  # attn_mask: True = may attend


def rotated_share(config, layer: int) -> str:
    """How much of each head RoPE turns in ``layer``, in words: "all 64 dimensions of each head",
    "the first 16 of each head's 64 dimensions (25 %; the other 48 carry no position)", or "none
    (no RoPE in this layer)"."""
    if config.layer_rope_theta(layer) is None:
        return "none (no RoPE in this layer)"
    r, d = config.rotary_width, config.d_head
    if r == d:
        return f"all {d} dimensions of each head"
    return f"the first {r} of each head's {d} dimensions ({100 * r / d:g} %; the other {d - r} carry no position)"


def _rope_sentence(model, layer: int, unchanged: bool) -> str:
    cfg = model.config
    if cfg.layer_rope_theta(layer) is None:
        why = (f"layer {layer} has no RoPE (a NoPE layer): its q and k are not turned, so no position signal "
               "enters in this layer; its scores depend on where tokens stand only through the layers before it, "
               "which see offsets alone")
        return why if unchanged else why.replace("see offsets alone", "should see offsets alone: more than float32 noise")
    turned = rotated_share(cfg, layer)
    if not unchanged:
        return f"more than float32 noise, which the offset alone does not explain (RoPE turns {turned})"
    return (f"RoPE turns q_i by i·θ_j and k_j by j·θ_j ({turned}), so q_i·k_j depends only on the offset i − j, "
            "not on where the two tokens stand")


def _sentence(model, layer: int, s: int, T: int, delta: float, top: float, unchanged: bool) -> str:
    kind = model.config.positional
    moved = f"Every position moved by s = {s} ({0}..{T - 1} → {s}..{s + T - 1}): layer {layer}'s scores"
    shown = f"{delta:.1e}" if 0 < delta < 1e-3 else fmt(delta)
    change = f"change by at most {shown} (largest |score| {top:.3g})"
    if kind == "rope":
        return f"{moved} {change}: {'float32 noise. ' if unchanged else ''}{_rope_sentence(model, layer, unchanged)}."
    if kind == "learned":
        why = ("the learned table adds p_(i+s) instead of p_i, another vector, so the scores depend on "
               "where the tokens stand, not only on i − j" if not unchanged else
               "the table's rows are too alike to tell these positions apart")
        return f"{moved} {change}: {why}."
    return (f"{moved} {change}: this model has no positional encoding, so nothing in it depends on "
            "where a token stands.")


def shift_check(model, token_ids: Sequence[int], shift: int, causal: bool = True, layer: int = 0) -> ShiftCheck:
    """Measure how much moving every token by ``shift`` positions changes the scores of ``layer``
    (0 by default).

    Parameters
    ----------
    model : model.GPT
    token_ids : sequence of int, length T (cropped to the last context_length ids)
    shift : int
        s; clamped to [0, context_length − T] (the positions the model has).
    causal : bool
        Whether the scores use the causal mask.
    layer : int
        The layer whose scores are compared (clamped to the model's).

    Returns
    -------
    ShiftCheck
        For RoPE, ``max_abs_delta`` is float32 rounding (below 1e-5 for these small models), in every
        layer (a NoPE layer too); for a learned table it is the effect of absolute positions.
    """
    kind = model.config.positional
    layer = max(0, min(int(layer), model.config.n_layers - 1))
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)[-model.config.context_length:]
    T = len(ids)
    s = max(0, min(int(shift), model.config.context_length - T))
    empty = np.zeros((model.config.n_heads, T, T), np.float32)
    if T == 0:
        return ShiftCheck(kind, s, layer, 0, empty, empty, 0.0, 0.0, "There are no tokens to shift.")
    scores = layer0_scores(model, ids, 0, causal, layer)
    shifted = layer0_scores(model, ids, s, causal, layer) if s else scores
    seen = ~np.isnan(scores)
    delta = float(np.max(np.abs(shifted - scores)[seen]))
    top = float(np.max(np.abs(scores)[seen]))
    if s == 0:
        sentence = (f"The text fills the context window ({T} of {model.config.context_length} positions): "
                    "there is no room to move it. Delete a few tokens to measure a shift.")
    else:
        sentence = _sentence(model, layer, s, T, delta, top, delta <= SHIFT_TOL * max(1.0, top))
    return ShiftCheck(kind, s, layer, T, scores, shifted, delta, top, sentence)


@dataclass(frozen=True)
class ShiftRequest:
    """The inputs of :func:`shift_job`: the ids (T,), the shift, the mask option and the layer."""

    token_ids: np.ndarray
    shift: int
    causal: bool = True
    layer: int = 0


def shift_job(checkpoint, request: ShiftRequest) -> ShiftCheck:
    """:func:`shift_check` as a session job: ``fn(checkpoint, inputs)``."""
    return shift_check(checkpoint.model, request.token_ids, request.shift, request.causal, request.layer)
