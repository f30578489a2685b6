"""The facts behind a reordering and the one sentence that states what its numbers show.

Which tokens *can* change is decided by the token ids alone. In a transformer without positional
encoding, block l's output for a token is a function of its own previous state and the multiset of
previous states it attends to (softmax-weighted sums do not see the order of their terms, and
scaling every multiplicity alike leaves them unchanged: attending to {a, a} is attending to {a}).
So each token gets a signature per level: level 0 is its id (and its position when positional
encoding is on); level l+1 is (its level-l signature, the proportions of the level-l signatures of
the positions it sees: the keys block l's attention mask allows it, as the model defines them). Two
tokens with equal signatures at level l+1 have equal inputs up to float summation order, so block l
gives them the same output (for generic weights, different signatures give different outputs).
Proportions are identified by a sum of seeded random 64-bit codes (wrapping), vectorised over
positions; a collision has probability about T²/2⁶⁴.
"""

from __future__ import annotations

import numpy as np

from model.tokens.names import unnamed


def _codes(n: int) -> np.ndarray:
    return np.random.default_rng(12345).integers(0, 2**63, size=n, dtype=np.uint64)


def _seen_counts(onehot: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(T, n_sigs) int64: how many positions of each signature each query sees.

    ``allowed`` (T, T) bool, True = may attend. When every row is one band of keys (the causal
    mask, a local window, no mask) the counts are differences of a running sum, O(T · n_sigs);
    any other mask takes a matrix product (exact in float64 far beyond any context length).
    """
    T = len(allowed)
    if T == 0:
        return np.zeros((0, onehot.shape[1]), np.int64)
    first = allowed.argmax(axis=1)
    last = T - 1 - allowed[:, ::-1].argmax(axis=1)
    if np.array_equal(allowed.sum(axis=1), last - first + 1):
        running = np.vstack([np.zeros((1, onehot.shape[1]), np.int64), np.cumsum(onehot, axis=0)])
        return running[last + 1] - running[first]
    return np.rint(allowed.astype(np.float64) @ onehot).astype(np.int64)


def _seen_hash(sig: np.ndarray, n_sigs: int, allowed: np.ndarray) -> np.ndarray:
    """(T,) uint64: a code for the proportions of signatures each position sees.

    Softmax attention over keys with multiplicities m_c gives Σ m_c e^{s_c} v_c / Σ m_c e^{s_c},
    unchanged when every m_c is scaled alike, so the counts are divided by their gcd first.
    """
    T = len(sig)
    onehot = np.zeros((T, n_sigs), dtype=np.int64)
    onehot[np.arange(T), sig] = 1
    counts = _seen_counts(onehot, allowed)
    g = np.gcd.reduce(counts, axis=1)  # (T,), >= 1 since each position sees itself
    props = (counts // g[:, None]).astype(np.uint64)
    with np.errstate(over="ignore"):
        return (props * _codes(n_sigs)[None, :]).sum(axis=1, dtype=np.uint64)


def signatures(ids, perm, pe: bool, masks, n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Level-``n_levels`` signatures of every position of the original and the reordered ids.

    Parameters
    ----------
    ids : (T,) int
    perm : (T,) int, the reordering (reordered position p holds token perm[p])
    pe : bool, whether a token's position is part of its input
    masks : sequence of (T, T) bool, at least ``n_levels`` of them
        Block l's attention mask, True where query i may attend to key j (the model's
        ``Attention.allowed_keys``: causal mask, local window).
    n_levels : int >= 0, how many blocks deep

    Returns
    -------
    (T,) int64, (T,) int64
        Signatures by position in each order; equal numbers mean equal results (shared table).
    """
    ids = np.asarray(ids, np.int64)
    seqs = [ids, ids[np.asarray(perm, np.int64)]]
    n_sigs = 0
    for level in range(n_levels + 1):
        table: dict = {}  # shared by both orders, so equal numbers mean equal signatures
        if level == 0:
            keys = [zip(s.tolist(), (range(len(s)) if pe else [-1] * len(s))) for s in seqs]
        else:
            allowed = np.asarray(masks[level - 1], bool)
            keys = [zip(s.tolist(), _seen_hash(s, n_sigs, allowed).tolist()) for s in seqs]
        seqs = [np.array([table.setdefault(k, len(table)) for k in ks], dtype=np.int64) for ks in keys]
        n_sigs = len(table)
    return seqs[0], seqs[1]


def predict_unchanged(ids, perm, pe: bool, masks, n_levels: int) -> np.ndarray:
    """(T,) bool: original token i's result after ``n_levels`` blocks is the same at its new place."""
    a, b = signatures(ids, perm, pe, masks, n_levels)
    inv = np.argsort(np.asarray(perm, np.int64))
    return a == b[inv] if len(a) else np.zeros(0, bool)


def last_unchanged(ids, perm, pe: bool, masks, n_levels: int) -> bool:
    """Whether the last position's final state (the next-token prediction's input) is the same."""
    if len(ids) == 0:
        return True
    a, b = signatures(ids, perm, pe, masks, n_levels)
    return bool(a[-1] == b[-1])


def fmt(x: float) -> str:
    """A figure for a sentence: 3e-08, 0.0021, 0.25."""
    x = float(x)
    if x == 0:
        return "0"
    return f"{x:.0e}" if abs(x) < 1e-3 else f"{x:.2g}"


def _names(idx, tokens, limit=3) -> str:
    if tokens is None or len(idx) > limit:
        return ""
    return " (" + ", ".join(repr(tokens[i]) for i in idx) + ")"


def _token_part(c, k: int, tokens, rel_tol: float) -> tuple[str, np.ndarray]:
    rel = np.maximum(c.attn_delta[k], c.block_delta[k])
    changed = rel > rel_tol
    T = len(rel)
    where = f" after block {c.layer}" if c.n_layers > 1 else ""
    if not changed.any():
        return f"No token's contextual embedding{where} changed (largest ‖Δ‖/‖out‖ = {fmt(rel.max())})", changed
    if changed.all():
        return f"Every token's contextual embedding{where} changed (smallest ‖Δ‖/‖out‖ = {fmt(rel.min())})", changed
    moved, kept = np.flatnonzero(changed), np.flatnonzero(~changed)
    return (
        f"{len(moved)} of {T} tokens' contextual embeddings{where} changed{_names(moved, tokens)}"
        f" (‖Δ‖/‖out‖ up to {fmt(rel[moved].max())}); the other {len(kept)} stayed the same"
        f"{_names(kept, tokens)} (largest {fmt(rel[kept].max())})"
    ), changed


def _pe_phrase(c) -> str:
    """What tells the model where tokens stand: the learned table, or RoPE's rotation."""
    if getattr(c, "positional", "learned") == "rope":
        return "RoPE's rotation of q and k tells attention how far apart the tokens stand"
    return "positional encoding x_i = e_i + p_i tells the model where each token stands"


def _token_reason(c, k: int, pe_used: bool, changed: np.ndarray) -> str:
    if np.any(changed == c.predicted_same[k]):
        n = int(np.sum(changed == c.predicted_same[k]))
        return f", which the token order alone does not explain for {n} of them (threshold 1e-5)"
    if not pe_used and not c.causal:
        return ": without positional encoding and without the mask, attention treats the input as a set"
    if not pe_used:
        leak = bool(np.any(changed & c.prefix_same))
        if leak:
            return (": some kept the same set of tokens at or before them and still changed, because "
                    "with the causal mask each earlier token saw a different prefix in the block below, "
                    f"so across {c.n_layers} layers the mask leaks order")
        if changed.any() and not changed.all():
            return (": with the causal mask and no positional encoding a token's result depends only on "
                    "which tokens stand at or before it, not on their order, and that changed exactly "
                    "for these")
        if changed.all():
            return ": with the causal mask each token now sees different tokens at or before it"
        return (": each token still sees the same tokens at or before it, and without positional "
                "encoding their order does not matter")
    if not changed.all() and changed.any():
        kept = "the same tokens before them" if c.causal else "a sequence that reads the same"
        return (f": {_pe_phrase(c)}; only tokens with the same place and {kept} kept their result")
    return f": {_pe_phrase(c)}"


def _last_part(c, k: int, pe_used: bool, tokens, tv_tol: float) -> str:
    tv = float(c.last_tv[k])
    same = tv < tv_tol
    head = ("The next-token distribution at the last position "
            + (f"did not change (total variation {fmt(tv)})" if same else f"changed (total variation {fmt(tv)})"))
    if same != bool(c.last_predicted_same[k]):
        return head + ", which the token order alone does not explain (threshold 1e-6)"
    new_last = c.perm[-1]
    if not same and c.last_moved:
        who = f" ({tokens[new_last]!r})" if tokens is not None else ""
        return head + f": a different token{who} now stands last and makes the prediction"
    if same:
        if pe_used:
            return head + ": every position holds the same token as before"
        if not c.causal:
            return head + ": the same token stands last and, without the mask, sees the same set"
        return head + ": the last token is the same and sees the same set of tokens, in whatever order"
    if not pe_used and c.causal and c.n_layers > 1:
        return (head + f": the last token sees the same set of tokens, but with {c.n_layers} layers "
                "the causal mask leaks their order through what the earlier tokens saw")
    what = "RoPE's rotation" if getattr(c, "positional", "learned") == "rope" else "positional encoding"
    return head + f": with {what} the order of the tokens before it matters"


def sentence_for(c, positional_encoding: bool, tokens, rel_tol: float, tv_tol: float) -> str:
    """The sentence for one PE state of an ``OrderComparison``: the numbers first, then the reason
    (only when the token facts predict exactly what was measured)."""
    T = len(c.token_ids)
    if T == 0:
        return "There are no tokens to reorder."
    if c.is_identity:
        return "This order reads exactly as the original one, so nothing can change: pick another reordering."
    k = int(positional_encoding)
    pe_used = positional_encoding and c.model_has_pe
    prefix = ("This model has no positional encoding, so switching it on changes nothing. "
              if positional_encoding and not c.model_has_pe else "")
    part, changed = _token_part(c, k, tokens, rel_tol)
    reason = _token_reason(c, k, pe_used, changed)
    return f"{prefix}{part}{reason}. {_last_part(c, k, pe_used, tokens, tv_tol)}."


def repeats_note(token_ids, tokens=None, limit: int = 3) -> str:
    """What a reordering does with equal tokens, when the text has some; "" when every token differs.

    Equal tokens are interchangeable, so a reordering matches them in order (the k-th copy of a
    token in the original is the k-th copy in the new order: :func:`~explorer.core.lessons.positional.canonical_order`);
    a reversal of "... a ... a ..." thus keeps each "a" where its copy stood rather than crossing them.

    Parameters
    ----------
    token_ids : (T,) int
    tokens : sequence of str, optional
        The token texts, to name the tokens (else their ids).
    limit : int
        How many repeated tokens to name.
    """
    ids = [int(i) for i in token_ids]
    where: dict[int, list[int]] = {}
    for pos, token_id in enumerate(ids):
        where.setdefault(token_id, []).append(pos)
    repeated = [(token_id, pos) for token_id, pos in where.items() if len(pos) > 1]
    if not repeated:
        return ""

    def name(token_id: int, pos: list[int]) -> str:
        shown = repr(tokens[pos[0]].strip() or tokens[pos[0]]) if tokens is not None and pos[0] < len(tokens) else unnamed(token_id)
        at = ", ".join(map(str, pos[:-1])) + f" and {pos[-1]}"
        return f"{shown} at {at}"

    named = "; ".join(name(t, p) for t, p in repeated[:limit])
    more = f" (and {len(repeated) - limit} more)" if len(repeated) > limit else ""
    return (f"Repeated tokens: {named}{more}. Equal tokens are interchangeable, so the new order keeps them in "
            "their order among themselves (the first copy stays the first) and each is compared with its own "
            "copy: exchanging two equal tokens is no change.")
