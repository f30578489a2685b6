"""How a model's attention scores are written on screen: the factor its trace records, in words
and formulas (no Qt here). Every title and sentence that names a score takes it from here."""

from __future__ import annotations

import math

from model.core.config import GPTConfig


def score_formula(scale: float, d_head: int, query: str = "i", key: str = "j") -> str:
    """A score as the model computed it, from the factor its trace records (``attn_scale``):
    "q_i·k_j/√d_head" (1/√d_head, Vaswani et al. 2017), "q_i·k_j" (1: GPT-Neo does not scale), or
    "q_i·k_j × 0.5" for another factor. Every sentence that names a score writes it with this."""
    dot = f"q_{query}·k_{key}"
    if math.isclose(scale, 1 / math.sqrt(d_head), rel_tol=1e-6):
        return f"{dot}/√d_head"
    return dot if scale == 1 else f"{dot} × {scale:.4g}"


def score_terms_title(scale: float, d_head: int) -> str:
    """The title of the Why panel's map of layer 0's scores, written as the model computed them
    (:func:`score_formula` of the factor its trace records): "scores q_i·k_j/√d_head (layer 0)", or
    for a model that does not scale (GPT-Neo) "scores q_i·k_j, not divided by √d_head (layer 0)"."""
    formula = score_formula(scale, d_head)
    return f"scores {formula}{', not divided by √d_head' if scale == 1 else ''} (layer 0)"


def score_title(config: GPTConfig | None) -> str:
    """The attention map's title: the scores as this model computes them (scaled or not, soft-capped)."""
    if config is not None and not config.scale_scores:
        title = "scores q·k (this model does not divide by √d_head)"
    elif config is not None and config.score_scale is not None:
        title = f"scores q·k × {config.score_scale:.4g}"
    else:
        title = "scores q·k/√d_head"
    if config is not None and config.attn_softcap:
        title += f", soft-capped at ±{config.attn_softcap:g}"
    return title
