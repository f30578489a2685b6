"""Text the model writes itself: greedy decoding, or sampling with temperature, top-k and top-p.

Each step runs the model on the text so far (its last ``context_length`` tokens) and picks the
next token from the distribution at the last position:

- greedy (temperature 0): the most likely token, argmax of the logits (the lowest id on a tie);
- sampling: softmax(logits / temperature), then only the ``top_k`` most likely tokens, then only
  the smallest set of most likely tokens whose probability reaches ``top_p`` (nucleus sampling,
  Holtzman et al. 2020), renormalised; one uniform draw from a seeded generator picks the token,
  so the same seed gives the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from model.core.transformer import GPT


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen.

    Attributes
    ----------
    temperature : float
        0 for greedy decoding; > 0 divides the logits before the softmax.
    top_k : int or None
        Keep only the k most likely tokens (None or 0: all).
    top_p : float or None
        Keep the smallest set of most likely tokens whose probability reaches top_p, in (0, 1]
        (None or 1: all).
    seed : int
        Seed of the uniform draws (sampling only): a whole number 0 or more (numpy's seeds).

    Raises
    ------
    ValueError
        For a negative temperature, top_k or seed, or top_p outside (0, 1].
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, got {self.temperature!r}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or int(self.top_k) != self.top_k
                                       or self.top_k < 0):
            raise ValueError(f"top_k must be a whole number 0 or more, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.seed, bool) or int(self.seed) != self.seed or self.seed < 0:
            raise ValueError(f"seed must be a whole number 0 or more, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        """True for greedy decoding (temperature 0)."""
        return self.temperature == 0


def sampling_distribution(logits: np.ndarray, sampling: Sampling) -> np.ndarray:
    """The distribution the next token is drawn from, for one position's logits.

    This is not the model's own distribution (softmax of the logits): temperature, top-k and
    top-p reshape it. :class:`Step` keeps both.

    Parameters
    ----------
    logits : (vocab_size,) float
    sampling : Sampling

    Returns
    -------
    (vocab_size,) float64, summing to 1
        Greedy: all probability on the argmax. Else softmax(logits / temperature) restricted to
        the top-k, then to the top-p nucleus, renormalised (tokens left out get exactly 0).

    Raises
    ------
    ValueError
        When a logit is not a finite number (NaN or inf): there is nothing to choose from.
    """
    z = np.asarray(logits, dtype=np.float64).reshape(-1)
    if not np.isfinite(z).all():
        raise ValueError(f"{int(np.count_nonzero(~np.isfinite(z)))} of {z.size} logits are not numbers "
                         "(NaN or inf): there is no distribution to choose the next token from")
    out = np.zeros_like(z)
    if sampling.greedy:
        out[int(np.argmax(z))] = 1.0
        return out
    with np.errstate(over="ignore"):  # a temperature near 0 (1e-320): -inf below the top, exp gives 0
        e = np.exp((z - z.max()) / sampling.temperature)
    p = e / e.sum()
    order = np.argsort(-p, kind="stable")  # most likely first; ties by lower id
    keep = len(order)
    if sampling.top_k:
        keep = min(keep, int(sampling.top_k))
    if sampling.top_p is not None and sampling.top_p < 1:
        cumulative = np.cumsum(p[order])
        # The smallest prefix whose probability reaches top_p (a tiny slack for float rounding).
        keep = min(keep, int(np.searchsorted(cumulative, sampling.top_p - 1e-12)) + 1)
    kept = order[:keep]
    out[kept] = p[kept] / p[kept].sum()
    return out


@dataclass(frozen=True)
class Step:
    """One generated token.

    Attributes
    ----------
    token_id : int
        The token chosen.
    prob : float
        Its probability under the sampling distribution (:func:`sampling_distribution`: after
        temperature, top-k and top-p; 1 for greedy), in [0, 1]: the chance it had of being drawn.
    top_ids : (k,) int64
        The most likely tokens of the model's own distribution (softmax of the logits, before
        temperature, top-k and top-p): the alternatives it had.
    top_probs : (k,) float32
        Their probabilities under the model's own distribution.
    model_prob : float
        The chosen token's probability under the model's own distribution, in [0, 1].
    """

    token_id: int
    prob: float
    top_ids: np.ndarray
    top_probs: np.ndarray
    model_prob: float = float("nan")


@torch.no_grad()
def next_token(model: GPT, token_ids: Sequence[int], sampling: Sampling, rng: np.random.Generator,
               alternatives: int = 5, *, positional_encoding: bool = True, causal: bool = True) -> Step:
    """Choose one next token after ``token_ids`` (their last ``context_length``): one step of
    :func:`generate`, with the caller's random generator (one uniform draw when sampling, none
    when greedy), so that steps taken one at a time repeat ``generate``'s tokens exactly.

    Parameters
    ----------
    model : GPT
    token_ids : sequence of int
        At least one id, each in [0, vocab_size).
    sampling : Sampling
    rng : numpy.random.Generator
        Advanced by one draw when sampling.
    alternatives : int
        How many of the model's most likely tokens the Step keeps.
    positional_encoding, causal : bool
        The model runs as :meth:`GPT.trace` runs with them (the app's switches, the trace
        command's ``--no-pe`` and ``--bidirectional``), so that the token chosen is the one the
        trace's last logits give.

    Raises
    ------
    ValueError
        For empty ids, an id outside the vocabulary, or logits that are not numbers.
    """
    ids = [int(i) for i in token_ids]
    if not ids:
        raise ValueError("generation needs at least one token to continue from")
    vocab = model.config.vocab_size
    if min(ids) < 0 or max(ids) >= vocab:
        raise ValueError(f"token ids must be in 0..{vocab - 1}")
    device = model.tok_emb.weight.device
    window = torch.tensor(ids[-model.config.context_length:], dtype=torch.long, device=device)
    logits = model(window, positional_encoding=positional_encoding, causal=causal)[-1].float().cpu().numpy()
    dist = sampling_distribution(logits, sampling)
    if sampling.greedy:
        choice = int(np.argmax(dist))
    else:  # inverse CDF of one uniform draw: the same seed gives the same tokens
        choice = int(np.searchsorted(np.cumsum(dist), rng.random() * dist.sum(), side="right"))
        choice = min(choice, vocab - 1)
        while dist[choice] == 0:  # only on float edge cases: step back to a kept token
            choice -= 1
    probs = np.exp(logits.astype(np.float64) - logits.max())
    probs /= probs.sum()
    top = np.argsort(-probs, kind="stable")[:max(0, alternatives)]
    return Step(choice, float(dist[choice]), top.astype(np.int64), probs[top].astype(np.float32), float(probs[choice]))


@torch.no_grad()
def generate(
    model: GPT,
    token_ids: Sequence[int],
    n_new: int,
    sampling: Sampling = Sampling(),
    *,
    alternatives: int = 5,
    on_step: Callable[[Step], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    positional_encoding: bool = True,
    causal: bool = True,
) -> list[Step]:
    """Append ``n_new`` tokens to ``token_ids``, one at a time.

    Parameters
    ----------
    model : GPT
    token_ids : sequence of int
        The text so far (at least one id). Only the last ``context_length`` ids are run at
        each step (the window slides as text grows).
    n_new : int
        How many tokens to add (>= 0).
    sampling : Sampling
    alternatives : int
        How many of the model's most likely tokens each Step keeps.
    on_step : callable, optional
        Called with each Step as soon as it is chosen (to stream results).
    should_stop : callable, optional
        Checked before each step; True ends generation early (what was made is returned).
    positional_encoding, causal : bool
        How the model runs at each step (:func:`next_token`).

    Returns
    -------
    list of Step

    Raises
    ------
    ValueError
        For an empty ``token_ids``, a negative ``n_new`` or an id outside the vocabulary.
    """
    ids = [int(i) for i in token_ids]
    if not ids:
        raise ValueError("generation needs at least one token to continue from")
    if n_new < 0:
        raise ValueError(f"n_new must be 0 or more, got {n_new}")
    vocab = model.config.vocab_size
    if min(ids) < 0 or max(ids) >= vocab:
        raise ValueError(f"token ids must be in 0..{vocab - 1}")
    rng = np.random.default_rng(sampling.seed)
    steps: list[Step] = []
    for _ in range(n_new):
        if should_stop is not None and should_stop():
            break
        step = next_token(model, ids, sampling, rng, alternatives, positional_encoding=positional_encoding,
                          causal=causal)
        steps.append(step)
        ids.append(step.token_id)
        if on_step is not None:
            on_step(step)
    return steps
