"""What-if knobs of the attention formula: the 1/√d_head scale, a temperature τ, the causal mask.

Each knob re-runs the model with the change (through :class:`model.core.interventions.Interventions`
or ``trace(causal=...)``) and reports what happened to the attention weights (each row's
entropy, in bits) and to the prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.core.interventions import Interventions
from model.tracing.records import Trace


@dataclass(frozen=True)
class WhatIf:
    """The model under one change of the attention formula.

    Attributes
    ----------
    knob : str
        What was changed, e.g. ``"baseline"``, ``"τ = 2"``, ``"no 1/√d_head"``, ``"causal mask off"``.
    trace : Trace or None
        The full trace under the change (every panel can draw it); None where a caller kept only
        the numbers (the Why panel's job: a trace of GPT-2 small at T = 1,024 holds 1.2 GB).
    attn_entropy : (n_layers, n_heads, T) float64
        Entropy of each attention row in bits: 0 = all weight on one key, log2(keys seen) = uniform.
    top_k : tuple of (int, float)
        The most likely next token ids at the position with their probabilities in [0, 1].
    target_prob : float
        The target's probability at the position, in [0, 1].
    """

    knob: str
    trace: Trace | None
    attn_entropy: np.ndarray
    top_k: tuple[tuple[int, float], ...]
    target_prob: float

    @property
    def mean_entropy(self) -> float:
        """Mean attention-row entropy over every layer, head and query, in bits."""
        return float(self.attn_entropy.mean()) if self.attn_entropy.size else float("nan")


def attention_entropy(tr: Trace) -> np.ndarray:
    """(n_layers, n_heads, T): each attention row's entropy −Σ_j a_ij log2 a_ij in bits (0 log 0 = 0)."""
    if not tr.blocks:
        return np.zeros((0, 0, tr.n_tokens))
    out = []
    for layer in tr.blocks:
        a = layer.attn_weights.astype(np.float64)  # (n_heads, T, T)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, -a * np.log2(a), 0.0)
        out.append(terms.sum(-1))
    return np.stack(out)


def what_if(model, tr: Trace, position: int, target: int, *, temperature: float = 1.0,
            scale_scores: bool | None = None, causal: bool | None = None, top_k: int = 5,
            knob: str = "") -> WhatIf:
    """Re-run trace ``tr``'s tokens with the attention formula changed.

    Parameters
    ----------
    model : GPT
        The model that made ``tr``. Its ablated heads and key mask are kept; τ and the scale
        are the ones given here (not ``tr``'s).
    tr : Trace
    position : int
        Where the prediction is read, 0 <= position < T.
    target : int
        Token id whose probability is reported.
    temperature : float
        τ > 0 dividing the scores before the softmax.
    scale_scores : bool or None
        Force the 1/√d_head scale on (True) or off (False); None keeps the model's.
    causal : bool or None
        The causal mask on or off; None keeps ``tr``'s.
    top_k : int
    knob : str
        The label; by default made from the changes.

    Returns
    -------
    WhatIf

    Raises
    ------
    ValueError
        On a temperature that is not a finite positive number.
    """
    base = tr.interventions or Interventions()
    iv = Interventions(ablate=base.ablate, temperature=temperature, scale_scores=scale_scores,
                       key_mask=base.key_mask)
    causal = tr.causal if causal is None else causal
    changed = Interventions(temperature=temperature, scale_scores=scale_scores).describe()
    label = knob or "; ".join(p for p in (changed, "" if causal == tr.causal else
                                          ("causal mask on" if causal else "causal mask off")) if p) or "baseline"
    new = model.trace(tr.token_ids.tolist(), positional_encoding=tr.positional_encoding, causal=causal, interventions=iv)
    top, target_prob = prediction(new.logits[position], target, top_k)
    return WhatIf(label, new, attention_entropy(new), top, target_prob)


def prediction(logits: np.ndarray, target: int, top_k: int) -> tuple[tuple[tuple[int, float], ...], float]:
    """(top_k, p(target)) from one position's logits (vocab_size,): the k most likely ids with their
    probabilities in [0, 1], most likely first (the lower id first on ties), and the target's.

    The softmax of one row, not ``Trace.probs`` (all T rows), and a partial sort: a full argsort of
    GPT-2's 50,257 probabilities cost more than the rest of a what-if.
    """
    p = torch.softmax(torch.from_numpy(np.asarray(logits, dtype=np.float64)), dim=-1).numpy()  # (vocab_size,)
    k = max(0, min(int(top_k), p.shape[0]))
    if k == 0:
        return (), float(p[target])
    part = np.argpartition(-p, k - 1)[:k]
    order = part[np.lexsort((part, -p[part]))]
    return tuple((int(i), float(p[i])) for i in order), float(p[target])


def standard_what_ifs(model, tr: Trace, position: int, target: int, top_k: int = 5) -> list[WhatIf]:
    """The panel's knobs, one at a time: baseline, the scale flipped, τ = 0.5, τ = 2, the causal mask flipped."""
    scaled = model.config.scale_scores
    runs = [dict(knob="baseline"), dict(scale_scores=not scaled), dict(temperature=0.5),
            dict(temperature=2.0), dict(causal=not tr.causal)]
    return [what_if(model, tr, position, target, top_k=top_k, **kw) for kw in runs]
