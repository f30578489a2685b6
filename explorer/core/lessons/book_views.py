"""The book's example as the variants panel shows it: four variants, each a list of small matrices.

The numbers are :func:`explorer.core.lessons.book.chapter3`'s; this module chooses, for each of the four
variants of :mod:`explorer.core.lessons.variants`, which of the chapter's tensors to show and how to label
them (rows = the six tokens where a tensor has one row per token), and writes the line for the
selected query token from the numbers. No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core.lessons.book import NUM_HEADS, QUERY, SECTIONS, TOKENS, BookExample, chapter3
from explorer.core.lessons.variants import KEYS

TITLES = {
    "simplified": "1. Simplified self-attention, no trainable weights (ch. 3.3.1–3.3.2)",
    "self": "2. Self-attention with trainable weights (ch. 3.4.1–3.4.2)",
    "causal": "3. Causal attention: mask, renormalisation, −∞, dropout (ch. 3.5.1–3.5.3)",
    "multihead": "4. Multi-head attention (ch. 3.6.1–3.6.2)",
}
FORMULAS = {
    "simplified": "attn_scores = inputs @ inputs.T,  attn_weights = softmax(attn_scores, dim=-1),  "
                  "all_context_vecs = attn_weights @ inputs",
    "self": "queries = inputs @ W_query (keys, values alike),  attn_weights = softmax(queries @ keys.T / d_k**0.5),  "
            "context_vecs = attn_weights @ values",
    "causal": "masked = attn_scores.masked_fill(mask.bool(), -inf),  "
              "attn_weights = dropout(softmax(masked / d_k**0.5)),  context_vecs = attn_weights @ values",
    "multihead": "wrapper: cat([head(batch) for head in heads], dim=-1)  ·  MultiHeadAttention: one W_query split "
                 "into heads, heads side by side, then out_proj",
}
DIMS = ("0", "1", "2", "3")


@dataclass(frozen=True)
class BookCard:
    """One tensor as the panel draws it: a small matrix, four decimals a cell.

    Attributes
    ----------
    key : str
        The tensor's key in :attr:`BookExample.tensors` (its name in ``python -m explorer.book --json``).
    name : str
        The chapter's variable, e.g. ``attn_scores_2`` (tooltips say ``name[row, col]``).
    caption : str
        ``name = code``, with ``[0]`` or the head where only part of the tensor is shown.
    section : str
        The chapter's section, e.g. ``"3.3.1"``.
    value : numpy.ndarray
        (rows, cols) float32; -inf where masked.
    row_labels, col_labels : tuple of str
    query_row : int or None
        The selected query's row (outlined) when the rows are the six tokens, else None.
    printed : bool
        Whether the chapter prints this tensor.
    part : tuple of int
        The leading indices of the part shown (``(0,)``: batch[0]; ``(0, 1)``: batch[0], head 1).
    vector : bool
        The tensor is a vector (or a number) shown as one row.
    """

    key: str
    name: str
    caption: str
    section: str
    value: np.ndarray
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    query_row: int | None
    printed: bool
    part: tuple[int, ...] = ()
    vector: bool = False

    def cell_name(self, row: int, col: int) -> str:
        """The cell's place in the chapter's tensor, e.g. ``attn_scores_2[3]`` or ``context_vecs[0, 1, 0]``."""
        if self.vector:
            return self.name if self.value.size == 1 else f"{self.name}[{col}]"
        return f"{self.name}[{', '.join(str(i) for i in (*self.part, row, col))}]"

    def tooltip(self, row: int, col: int) -> str:
        """The exact value of a cell (the float32 value, printed in full)."""
        return f"{self.cell_name(row, col)} = {float(self.value[row, col])!r}  ({self.section})"


@dataclass(frozen=True)
class BookVariant:
    """One variant on the book's example: title (with the chapter's sections), formula, the line
    for the selected query, and the tensors to show."""

    key: str
    title: str
    formula: str
    line: str
    cards: tuple[BookCard, ...]


def x_name(i: int) -> str:
    """The chapter's name of input i (0-based), counted from 1: ``x⁽²⁾`` for i = 1."""
    sup = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    return f"x⁽{str(i + 1).translate(sup)}⁾"


def vec(values) -> str:
    """A vector as the chapter prints it: four decimals, e.g. ``[0.9544, 1.4950]``."""
    return "[" + ", ".join(f"{float(v):.4f}" for v in np.ravel(values)) + "]"


class _Cards:
    def __init__(self, ex: BookExample) -> None:
        self.ex, self.q = ex, ex.query
        self.tokens = tuple(f"{t} {x_name(i)}" for i, t in enumerate(TOKENS))

    def __call__(self, key: str, part=None, label: str = "", cols=None, rows=None) -> BookCard:
        t = self.ex.tensors[key]
        value = np.asarray(t.value if part is None else t.value[part], np.float32)
        vector = value.ndim < 2
        if vector:  # a vector or a number: one row, the query's
            value = value.reshape(1, -1)
            rows = rows or (TOKENS[self.q],)
        by_token = rows is None and value.shape[0] == len(TOKENS)
        rows = self.tokens if by_token else (rows or DIMS[:value.shape[0]])
        if cols is None:
            cols = TOKENS if value.shape[1] == len(TOKENS) else DIMS[:value.shape[1]]
        caption = f"{t.name} = {t.code}" + (f"  ·  {label}" if label else "")
        part = () if part is None else tuple(np.atleast_1d(part).tolist())
        return BookCard(key, t.name, caption, t.section, value, tuple(rows), tuple(cols),
                        self.q if by_token else None, t.printed, part, vector)


def _simplified(ex: BookExample, card: _Cards) -> BookVariant:
    n = ex.query + 1
    w = ex[f"attn_weights_{n}"]
    same = float(np.max(np.abs(ex["all_context_vecs"][ex.query] - ex[f"context_vec_{n}"])))
    line = (f"Query {x_name(ex.query)} “{TOKENS[ex.query]}” (3.3.1): attn_scores_{n} = {vec(ex[f'attn_scores_{n}'])}, "
            f"attn_weights_{n} = {vec(w)} (sum {w.sum():.4f}), context_vec_{n} = {vec(ex[f'context_vec_{n}'])}. "
            f"For all queries at once (3.3.2) its row of all_context_vecs is the same (max |Δ| {same:.1e}).")
    keys = ["inputs", f"attn_scores_{n}", f"attn_weights_{n}_tmp", f"attn_weights_{n}_naive", f"attn_weights_{n}",
            f"context_vec_{n}", "attn_scores", "attn_weights", "all_context_vecs"]
    return BookVariant("simplified", TITLES["simplified"], FORMULAS["simplified"], line,
                       tuple(card(k) for k in keys))


def _self(ex: BookExample, card: _Cards) -> BookVariant:
    n, q = ex.query + 1, ex.query
    same = float(np.max(np.abs(ex["sa_v1"][q] - ex[f"trainable_context_vec_{n}"])))
    line = (f"Query {x_name(q)} “{TOKENS[q]}” (3.4.1): query_{n} = {vec(ex[f'query_{n}'])}, "
            f"attn_score_{n}{n} = {float(ex[f'attn_score_{n}{n}']):.4f}, attn_scores_{n} = "
            f"{vec(ex[f'trainable_attn_scores_{n}'])}, attn_weights_{n} = {vec(ex[f'trainable_attn_weights_{n}'])}, "
            f"context_vec_{n} = {vec(ex[f'trainable_context_vec_{n}'])}. SelfAttention_v1 (3.4.2) draws the same "
            f"weights with the same seed and order: its row {n} differs by {same:.1e}; SelfAttention_v2's nn.Linear "
            f"with seed 789 gives other weights: {vec(ex['sa_v2'][q])}.")
    keys = ["W_query", "W_key", "W_value", f"query_{n}", "keys", "values", f"attn_score_{n}{n}",
            f"trainable_attn_scores_{n}", f"trainable_attn_weights_{n}", f"trainable_context_vec_{n}",
            "trainable_attn_scores", "trainable_attn_weights", "sa_v1", "sa_v2"]
    cards = [card(k, cols=(TOKENS[q],) if k == f"attn_score_{n}{n}" else None) for k in keys]
    return BookVariant("self", TITLES["self"], FORMULAS["self"], line, tuple(cards))


def _batch_note(ex: BookExample, key: str) -> str:
    v = ex[key]
    return "both copies alike" if np.array_equal(v[0], v[1]) else "batch[1] differs (its own dropout mask)"


def _causal(ex: BookExample, card: _Cards) -> BookVariant:
    q, n = ex.query, ex.query + 1
    d = float(np.max(np.abs(ex["masked_simple_norm"] - ex["causal_attn_weights"])))
    line = (f"Query {x_name(q)} “{TOKENS[q]}” (3.5.1): masked_simple_norm[{q}] = {vec(ex['masked_simple_norm'][q])}; "
            f"the −∞ trick gives the same weights (max |Δ| {d:.1e}). ")
    keys = ["sa_v2_attn_weights", "mask_simple", "masked_simple", "masked_simple_norm", "masked", "causal_attn_weights"]
    cards = [card(k) for k in keys]
    if ex.dropout:
        kept = ex["dropout_attn_weights"][q]
        line += (f"Dropout 0.5, seed 123 (3.5.2): {int(np.count_nonzero(kept))} of {n} weights kept, each doubled: "
                 f"{vec(kept)}. ")
        cards += [card("dropout_example"), card("dropout_attn_weights")]
    drop = "dropout 0.5, not printed in the chapter" if ex.dropout else "dropout 0.0, as printed"
    line += (f"CausalAttention (3.5.3, new weights, seed 123, {drop}) on the batch of two copies: "
             f"context_vecs[0][{q}] = {vec(ex['causal_context_vecs'][0, q])}, "
             f"{_batch_note(ex, 'causal_context_vecs')}.")
    cards += [card("causal_attn_weights_batch", 0, "batch[0]"), card("causal_context_vecs", 0, "batch[0]")]
    return BookVariant("causal", TITLES["causal"], FORMULAS["causal"], line, tuple(cards))


def _multihead(ex: BookExample, card: _Cards) -> BookVariant:
    q = ex.query
    plain = chapter3(q, False)  # without dropout: the wrapper's head 0 against 3.5.3
    head0 = float(np.max(np.abs(plain["mha_wrapper"][..., :2] - plain["causal_context_vecs"])))
    drop = "dropout 0.5, not printed in the chapter" if ex.dropout else "dropout 0.0, as printed"
    line = (f"Query {x_name(q)} “{TOKENS[q]}”, {drop}. MultiHeadAttentionWrapper (3.6.1): {NUM_HEADS} CausalAttention "
            f"heads side by side, width 2 × 2 = 4: mha_wrapper[0][{q}] = {vec(ex['mha_wrapper'][0, q])}; "
            f"head 0 has 3.5.3's weights (same seed and order: without dropout max |Δ| {head0:.1e}). "
            f"MultiHeadAttention (3.6.2) splits one W_query/W_key/W_value of d_out 2 into {NUM_HEADS} heads of "
            f"head_dim 1 and mixes them with out_proj: mha[0][{q}] = {vec(ex['mha'][0, q])}, "
            f"{_batch_note(ex, 'mha')}.")
    wrap_cols = tuple(f"h{h}·{d}" for h in range(NUM_HEADS) for d in range(2))
    cards = [card("mha_wrapper_attn_weights", (0, h), f"batch[0], head {h}") for h in range(NUM_HEADS)]
    cards.append(card("mha_wrapper", 0, "batch[0]", cols=wrap_cols))
    cards += [card("mha_attn_weights", (0, h), f"batch[0], head {h}") for h in range(NUM_HEADS)]
    cards += [card("mha_heads", 0, "batch[0]", cols=("h0", "h1")), card("mha", 0, "batch[0]")]
    return BookVariant("multihead", TITLES["multihead"], FORMULAS["multihead"], line, tuple(cards))


def book_variants(query: int = QUERY, dropout: bool = False) -> tuple[BookVariant, ...]:
    """The four variants on the chapter's example, for one query token.

    Parameters
    ----------
    query : int
        The selected token, in [0, 6); the chapter's query is 1 ("journey").
    dropout : bool
        Dropout 0.5 on (the dropout example of 3.5.2 is shown, and the classes run with it).

    Returns
    -------
    tuple of BookVariant
        In the order of :data:`explorer.core.lessons.variants.KEYS`.

    Raises
    ------
    ValueError
        When ``query`` is outside the six tokens.
    """
    ex = chapter3(query, dropout)
    card = _Cards(ex)
    out = (_simplified(ex, card), _self(ex, card), _causal(ex, card), _multihead(ex, card))
    assert tuple(v.key for v in out) == KEYS
    return out


def section_title(section: str) -> str:
    """``"3.3.1 A simple self-attention mechanism without trainable weights"``."""
    return f"{section} {SECTIONS[section]}"
