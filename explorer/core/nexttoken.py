"""Next-token probabilities: temperature, top-k and entropy (no Qt here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.generate import Sampling, sampling_distribution


def apply_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Next-token probabilities softmax(logits / temperature): generation's own sampling
    distribution (:func:`model.generate.sampling_distribution`) without top-k or top-p, so the
    bars show the distribution Generate draws from at that temperature.

    Parameters
    ----------
    logits : (vocab_size,) array
        Unnormalised scores in nats (one row of ``Trace.logits``).
    temperature : float
        >= 0. 1 gives the model's own probabilities; 0 is greedy: probability 1 on the argmax
        (the first one on ties) and 0 elsewhere.

    Returns
    -------
    (vocab_size,) float64 array in [0, 1] summing to 1.

    Raises
    ------
    ValueError
        When temperature is negative or not finite, or a logit is not a finite number (NaN or
        inf: there are then no probabilities to give, and 0 bits of entropy would be a lie).
    """
    z = np.asarray(logits, dtype=np.float64)
    if not z.size:
        return z.copy()
    return sampling_distribution(z, Sampling(temperature=float(temperature)))


def entropy_bits(probs: np.ndarray) -> float:
    """Shannon entropy H = -sum p log2 p in bits (0 log 0 taken as 0), >= 0; 0 for an empty array."""
    p = np.asarray(probs, dtype=np.float64)
    p = p[p > 0]
    h = float(-(p * np.log2(p)).sum()) if p.size else 0.0
    return max(0.0, h)  # never -0.0 (a one-hot row would print as "-0.000 bits")


@dataclass(frozen=True)
class TopK:
    """The k most likely next tokens, most likely first.

    Attributes
    ----------
    ids : (k,) int64 array
    probs : (k,) float64 array, probabilities in [0, 1]
    entropy : float, entropy of the whole distribution in bits
    """

    ids: np.ndarray
    probs: np.ndarray
    entropy: float


def top_k(logits: np.ndarray, k: int, temperature: float = 1.0) -> TopK:
    """The k most likely next tokens at one position, after temperature.

    Parameters
    ----------
    logits : (vocab_size,) array
    k : int
        Clamped to [1, vocab_size] (0 results only for an empty vocabulary).
    temperature : float
        See :func:`apply_temperature`.

    Raises
    ------
    ValueError
        For a negative temperature, or logits that are not all finite numbers.
    """
    probs = apply_temperature(logits, temperature)
    k = max(1, min(int(k), probs.shape[0])) if probs.size else 0
    # Ranked by logits, which temperature never reorders: at temperature 0 every probability but
    # one ties at 0, and ranking those by probability would list them in id order.
    scores = -np.asarray(logits, dtype=np.float64)
    candidates = np.argpartition(scores, k - 1)[:k] if 0 < k < scores.shape[0] else np.arange(scores.shape[0])
    order = candidates[np.lexsort((candidates, scores[candidates]))][:k]  # by logit, then by id
    return TopK(ids=order.astype(np.int64), probs=probs[order], entropy=entropy_bits(probs))
