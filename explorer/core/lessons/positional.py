"""What does order change? Reorder the tokens and compare, with positional encoding on and off.

The course's claim: attention alone treats its input as a set, so without a position signal a
reordering only reorders the results; positional encoding x_i = e_i + p_i fixes that. For a RoPE
model the switch is the rotation of q and k inside attention (``GPT.trace(positional_encoding=)``
turns it off), and the same four traces show what it changes. This module
runs the four traces (original / reordered, positional encoding on / off), measures how far each
token's contextual embedding moved between the two orders (each token compared with ITSELF at its
new place), the total variation between the two last-position next-token distributions, and
writes one sentence from those numbers and the facts of the reordering.

A permutation ``perm`` (T,) means: reordered position p holds original token ``perm[p]``, so
``reordered_ids = ids[perm]`` and original token i stands at ``inverse[i]`` after reordering.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from explorer.core.lessons.positional_sentence import last_unchanged, predict_unchanged, repeats_note, sentence_for
from explorer.core.softmax import softmax

#: Relative change ‖Δ‖/‖out‖ below which a token's result counts as unchanged (float32 error).
REL_TOL = 1e-5
#: Total variation below which two next-token distributions count as the same.
TV_TOL = 1e-6


def _with_last(perm_head: np.ndarray, n: int, keep_last: bool) -> np.ndarray:
    """Append the last index when the first n-1 were reordered alone."""
    if keep_last:
        return np.concatenate([perm_head, [n - 1]]).astype(np.int64)
    return perm_head.astype(np.int64)


def reverse(n: int, keep_last: bool = False) -> np.ndarray:
    """The permutation that reverses n tokens (the first n-1 when ``keep_last``). Returns (n,)."""
    m = n - 1 if keep_last and n else n
    return _with_last(np.arange(m)[::-1], n, keep_last and n > 0)


def rotate(n: int, shift: int = 1, keep_last: bool = False) -> np.ndarray:
    """Rotate left by ``shift``: token ``shift`` comes first (the last stays with ``keep_last``)."""
    m = n - 1 if keep_last and n else n
    head = np.roll(np.arange(m), -shift) if m else np.arange(0)
    return _with_last(head, n, keep_last and n > 0)


def shuffle(n: int, seed: int, keep_last: bool = False) -> np.ndarray:
    """A seeded random permutation (``numpy.random.default_rng(seed)``); never the identity when
    a different order exists. "Shuffle again" is the same call with ``seed + 1``."""
    m = n - 1 if keep_last and n else n
    rng = np.random.default_rng(seed)
    head = rng.permutation(m)
    for _ in range(20):
        if m < 2 or not np.array_equal(head, np.arange(m)):
            break
        head = rng.permutation(m)
    return _with_last(head, n, keep_last and n > 0)


def swap(n: int, i: int, j: int) -> np.ndarray:
    """Exchange the tokens at positions i and j. Raises ValueError when either is outside [0, n)."""
    for p in (i, j):
        if not 0 <= p < n:
            raise ValueError(f"position {p} is outside the {n} tokens (0..{n - 1})")
    perm = np.arange(n, dtype=np.int64)
    perm[[i, j]] = perm[[j, i]]
    return perm


def order_for(mode: tuple, n: int, keep_last: bool) -> np.ndarray:
    """The reordering a mode names, applied to n tokens: ``("reverse",)``, ``("rotate", shift)``,
    ``("shuffle", seed)``, ``("swap", i, j)`` (the identity when i or j is past the end) or
    ``("custom", order)`` (reversed when the order has another length). Returns (n,) int64."""
    kind = mode[0]
    if kind == "rotate":
        return rotate(n, mode[1], keep_last)
    if kind == "shuffle":
        return shuffle(n, mode[1], keep_last)
    if kind == "swap":
        return swap(n, mode[1], mode[2]) if max(mode[1], mode[2]) < n else np.arange(n, dtype=np.int64)
    if kind == "custom" and len(mode[1]) == n:
        return check_permutation(mode[1], n)
    return reverse(n, keep_last)


def canonical_order(ids: Sequence[int], perm: Sequence[int]) -> np.ndarray:
    """The permutation that gives the same reordered sequence ``ids[perm]`` while equal tokens keep
    their order among themselves (the k-th occurrence of a token stays its k-th occurrence).

    Equal tokens are interchangeable: exchanging two of them gives the same sequence, and this
    returns the identity for it, so no token is said to have moved. Returns (T,) int64.
    """
    ids, p = np.asarray(ids, np.int64).reshape(-1), np.asarray(perm, np.int64).reshape(-1)
    out = np.empty_like(p)
    out[np.argsort(ids[p], kind="stable")] = np.argsort(ids, kind="stable")
    return out


def check_permutation(perm: Sequence[int], n: int) -> np.ndarray:
    """Validate an explicit order (e.g. from dragged chips) and return it as int64 (n,).

    Raises
    ------
    ValueError
        When ``perm`` is not a rearrangement of 0..n-1, saying what is wrong.
    """
    p = np.asarray(perm, dtype=np.int64).reshape(-1)
    if p.shape[0] != n:
        raise ValueError(f"an order of {n} tokens needs {n} positions, got {p.shape[0]}")
    if n and not np.array_equal(np.sort(p), np.arange(n)):
        raise ValueError(f"{list(p)} is not a rearrangement of 0..{n - 1}")
    return p


@dataclass(frozen=True)
class OrderRun:
    """One of the four traces: an order (original or reordered) with positional encoding on or off.

    Attributes
    ----------
    positional_encoding, reordered : bool
    token_ids : (T,) int64                the ids in this run's order.
    attn_weights : (T, T)                 the selected layer and head, rows sum to 1, in [0, 1].
    top_ids : (k,) int64, top_probs : (k,)  the most likely next tokens at the last position.
    last_probs : (vocab_size,)            the whole next-token distribution at the last position.
    """

    positional_encoding: bool
    reordered: bool
    token_ids: np.ndarray
    attn_weights: np.ndarray
    top_ids: np.ndarray
    top_probs: np.ndarray
    last_probs: np.ndarray


@dataclass(frozen=True)
class OrderComparison:
    """Original order versus a reordering, with positional encoding off (index 0) and on (index 1).

    Attributes
    ----------
    token_ids : (T,) int64     the original ids (cropped to the context).
    perm, inverse : (T,) int64 reordered position p holds token perm[p]; token i moved to inverse[i]
                               (the requested order with equal tokens matched in order).
    layer, head : int          where the attention weights and the deltas are taken.
    causal : bool              whether the four traces used the causal mask.
    n_layers : int
    model_has_pe : bool        whether the model uses position at all, a table or RoPE (False: on == off).
    runs : tuple of OrderRun   (pe off, original), (pe off, reordered), (pe on, original), (pe on, reordered).
    attn_delta, block_delta : (2, T)  per original token i, ‖out_i - out'_{inverse[i]}‖ / ‖out_i‖
                               of ``blocks[layer].attn_out`` and ``blocks[layer].resid_post``.
    last_tv : (2,)             total variation between the two last-position next-token
                               distributions, in [0, 1] (½ Σ |p - p'|, computed in float64).
    predicted_same : (2, T) bool  token i's result at this layer is unchanged by the order alone.
    last_predicted_same : (2,) bool  the same for the last position's prediction.
    prefix_same : (T,) bool    the multiset of tokens token i sees with the causal mask (at or before
                               it, within the first block's window) is the same in both orders.
    sentences : tuple of str   (pe off, pe on): what the numbers show.
    positional : str           the model's scheme (``GPTConfig.positional``): for ``"rope"`` the
                               switch is RoPE's rotation of q and k, not a table added to the input.
    repeats : str              where the text repeats a token, that equal tokens keep their order
                               (:func:`~explorer.core.lessons.positional_sentence.repeats_note`); "" if none.
    """

    token_ids: np.ndarray
    perm: np.ndarray
    inverse: np.ndarray
    layer: int
    head: int
    causal: bool
    n_layers: int
    model_has_pe: bool
    runs: tuple[OrderRun, ...]
    attn_delta: np.ndarray
    block_delta: np.ndarray
    last_tv: np.ndarray
    predicted_same: np.ndarray
    last_predicted_same: np.ndarray
    prefix_same: np.ndarray
    sentences: tuple[str, str]
    positional: str = "learned"
    repeats: str = ""

    @property
    def last_moved(self) -> bool:
        """True when a different token stands last after reordering."""
        n = len(self.perm)
        return bool(n and self.perm[-1] != n - 1)

    @property
    def is_identity(self) -> bool:
        """True when the reordering leaves every token in place."""
        return bool(np.array_equal(self.perm, np.arange(len(self.perm))))

    def run(self, positional_encoding: bool, reordered: bool) -> OrderRun:
        """The run for this PE state and order."""
        return self.runs[2 * int(positional_encoding) + int(reordered)]

    def sentence(self, positional_encoding: bool) -> str:
        """The computed sentence for positional encoding on or off."""
        return self.sentences[int(positional_encoding)]


def relative_delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ‖a_i - b_i‖ / ‖a_i‖ for (T, d) arrays, in float64 (0 where both rows are zero)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    num = np.linalg.norm(a64 - b64, axis=-1)
    den = np.linalg.norm(a64, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), num)


def total_variation(logits_a: np.ndarray, logits_b: np.ndarray) -> float:
    """½ Σ_v |softmax(a)_v - softmax(b)_v| for two (vocab_size,) logit rows, in float64; in [0, 1]."""
    return float(0.5 * np.abs(softmax(logits_a) - softmax(logits_b)).sum())


def _top(probs_row: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    k = min(k, probs_row.shape[0])
    idx = np.argsort(-probs_row, kind="stable")[:k]
    return idx.astype(np.int64), probs_row[idx].astype(np.float32)


def compare_orders(
    model,
    token_ids: Sequence[int],
    perm: Sequence[int],
    *,
    layer: int = 0,
    head: int = 0,
    causal: bool = True,
    top_k: int = 5,
    tokens: Sequence[str] | None = None,
) -> OrderComparison:
    """Run original and reordered ids with positional encoding on and off, and compare.

    Parameters
    ----------
    model : model.GPT
    token_ids : sequence of int, length N
        Cropped to the last ``context_length`` ids first (as ``GPT.trace`` does).
    perm : sequence of int, length T (after cropping)
        The reordering; see :func:`check_permutation`. Equal tokens are matched in order
        (:func:`canonical_order`), so exchanging two equal tokens is no change.
    layer, head : int
        Selected block (0-based) and head.
    causal : bool
        Whether the four traces use the causal mask.
    top_k : int
        How many next tokens to keep per run.
    tokens : sequence of str, optional
        The token strings (length T), used to name tokens in the sentence.

    Returns
    -------
    OrderComparison

    Raises
    ------
    ValueError
        For a bad permutation, layer or head.
    """
    cfg = model.config
    ids = np.array(token_ids, dtype=np.int64).reshape(-1)[-cfg.context_length:].copy()
    T = ids.shape[0]
    p = canonical_order(ids, check_permutation(perm, T))
    if not 0 <= layer < cfg.n_layers or not 0 <= head < cfg.n_heads:
        raise ValueError(f"layer {layer} / head {head} outside {cfg.n_layers} layers x {cfg.n_heads} heads")
    inv = np.argsort(p)
    runs, attn_d, block_d, tv = [], np.zeros((2, T)), np.zeros((2, T)), np.zeros(2)
    for pe in (False, True):
        a = model.trace(ids, positional_encoding=pe, causal=causal)
        b = model.trace(ids[p], positional_encoding=pe, causal=causal)
        for tr, reordered in ((a, False), (b, True)):
            last = tr.probs[-1] if T else np.zeros(0, np.float32)
            top = _top(last, top_k)
            weights = tr.blocks[layer].attn_weights[head]
            runs.append(OrderRun(pe, reordered, tr.token_ids, weights, *top, last))
        if T:
            la, lb = a.blocks[layer], b.blocks[layer]
            attn_d[int(pe)] = relative_delta(la.attn_out, lb.attn_out[inv])
            block_d[int(pe)] = relative_delta(la.resid_post, lb.resid_post[inv])
            tv[int(pe)] = total_variation(a.logits[-1], b.logits[-1])
    has_pe = bool(cfg.uses_position)
    masks = [block.attn.allowed_keys(T, causal).numpy() for block in model.blocks]  # True = may attend
    pred = np.stack([predict_unchanged(ids, p, pe and has_pe, masks, layer + 1) for pe in (False, True)])
    last_pred = np.array([
        last_unchanged(ids, p, pe and has_pe, masks, cfg.n_layers) for pe in (False, True)
    ])
    prefix = predict_unchanged(ids, p, False, [model.blocks[0].attn.allowed_keys(T, True).numpy()], 1)
    comp = OrderComparison(
        ids, p, inv, layer, head, causal, cfg.n_layers, has_pe, tuple(runs), attn_d, block_d, tv,
        pred, last_pred, prefix, ("", ""), cfg.positional,
    )
    sentences = tuple(sentence_for(comp, pe, tokens, REL_TOL, TV_TOL) for pe in (False, True))
    return replace(comp, sentences=sentences, repeats=repeats_note(ids, tokens))



@dataclass(frozen=True)
class CompareRequest:
    """The inputs of one comparison, as a panel asks for it: ids, order, selection, token texts.

    ``token_ids`` and ``perm`` are (T,) int64; ``tokens`` the T token texts (for the sentence).
    """

    token_ids: np.ndarray
    perm: np.ndarray
    layer: int
    head: int
    causal: bool
    tokens: tuple[str, ...]
    top_k: int = 5


def compare_job(checkpoint, request: CompareRequest) -> OrderComparison:
    """:func:`compare_orders` as a session job: ``fn(checkpoint, inputs)`` (its four traces run on
    the session's worker thread when the model is slow)."""
    return compare_orders(checkpoint.model, request.token_ids, request.perm, layer=request.layer,
                          head=request.head, causal=request.causal, top_k=request.top_k,
                          tokens=list(request.tokens))
