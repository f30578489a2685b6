"""What each box of the Model map draws: a small array of its live tensor, its colour scale, and
what it holds in words (no Qt here).

A box draws one token per column, as the chapter draws the computation (every token's column
side by side): a (T, d) tensor is drawn transposed, d down and the tokens across; a per-head
tensor shows the selected head (the key/value head it reads, for k and v under grouped-query
attention); an attention map (query i, key j) keeps its rows and columns; a vocabulary-wide row
(logits, probs) shows the :data:`TOP_K` tokens most likely at the selected position. At most
:data:`MAX_TOKENS` tokens are drawn: beyond that, the window that ends at the selected position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core.model_map.layout import Box
from explorer.core.views import symmetric_levels, token_label
from model.tokens.names import unnamed
from model.tracing.schema import HEADS, MASK, ROWS, SQUARE, array_shape

MAX_TOKENS = 32  # tokens drawn side by side; beyond, the window ending at the selected position
TOP_K = 8  # vocabulary rows drawn for logits and probs
SIGNED, UNIT, BOOL = "signed", "unit", "bool"  # colour scales: symmetric diverging, 0..1, mask


@dataclass(frozen=True)
class BoxImage:
    """The array a box draws and how to read it.

    Attributes
    ----------
    data : (rows, cols) float32   cols are the window's tokens (keys, for an attention map);
                                  NaN marks a masked score.
    levels : (float, float)       the colour scale's ends.
    scale : str                   SIGNED (blue-white-red, symmetric), UNIT (0..1) or BOOL.
    rows : str                    what the rows are ("d_model", "query i", "top 8 of vocab_size").
    head : int or None            the head drawn (per-head tensors), as the tensor numbers it.
    row_names : tuple of str      names of the rows when they are tokens (the top-k vocabulary).
    """

    data: np.ndarray
    levels: tuple[float, float]
    scale: str
    rows: str
    head: int | None = None
    row_names: tuple[str, ...] = ()


def token_window(n_tokens: int, position: int | None, limit: int = MAX_TOKENS) -> tuple[int, int]:
    """(start, stop) of the tokens drawn: all of them up to ``limit``, else the ``limit`` tokens
    that end at ``position`` (the selected one; None: the last)."""
    if n_tokens <= limit:
        return 0, n_tokens
    end = n_tokens if position is None else max(limit, min(int(position) + 1, n_tokens))
    return end - limit, end


def _head_of(box: Box, trace, head: int) -> int:
    """The head index of ``box``'s tensor for query head ``head`` (its kv head for k and v)."""
    if box.row.dims and box.row.dims[0] == "n_kv_heads" and box.layer is not None:
        return trace.blocks[box.layer].kv_head(head)
    return head


def box_image(trace, box: Box, head: int, position: int | None, names=None) -> BoxImage:
    """The array ``box`` draws for the selected ``head`` and ``position`` (None: the last).

    Parameters
    ----------
    trace : model.Trace
    box : Box
    head : int                  the selected query head (clamped to the tensor's heads).
    position : int or None      the selected token row.
    names : callable, optional  ``names(ids) -> list of str``, the tokenizer's names for the
                                top-k vocabulary rows.
    """
    start, stop = token_window(trace.n_tokens, position)
    row, a = box.row, trace[box.key]
    if row.kind == ROWS:
        if row.dims == ("vocab_size",):
            return _top_k(a, start, stop, position, row.attr, names)
        if len(row.dims) == 2:  # a matrix per token (one row per window slot): the selected token's
            at = stop - 1 if position is None else min(int(position), stop - 1)
            data = np.asarray(a[at], dtype=np.float32).T  # (dims[1], dims[0])
            return BoxImage(data, symmetric_levels(data), SIGNED, f"{row.dims[1]} at the selected token, "
                            f"one column per {row.dims[0]}")
        data = np.asarray(a[start:stop], dtype=np.float32).T  # (d_model, w)
        return BoxImage(data, symmetric_levels(data), SIGNED, row.dims[0])
    if row.kind == HEADS:
        h = min(_head_of(box, trace, head), a.shape[0] - 1)
        data = np.asarray(a[h, start:stop], dtype=np.float32).T  # (d_head, w)
        return BoxImage(data, symmetric_levels(data), SIGNED, "d_head", h)
    if row.kind == SQUARE:
        h = min(head, a.shape[0] - 1)
        data = np.array(a[h, start:stop, start:stop], dtype=np.float32)  # (w, w): query i, key j
        data[~np.isfinite(data)] = np.nan  # masked (-inf) cells
        if row.attr == "attn_weights":
            return BoxImage(data, (0.0, 1.0), UNIT, "query i", h)
        return BoxImage(data, symmetric_levels(data), SIGNED, "query i", h)
    data = np.asarray(a[start:stop, start:stop], dtype=np.float32)  # MASK (w, w), 1 = may attend
    return BoxImage(data, (0.0, 1.0), BOOL, "query i")


def _top_k(a, start: int, stop: int, position: int | None, attr: str, names) -> BoxImage:
    """A vocabulary-wide tensor's :data:`TOP_K` rows, most likely at ``position`` first."""
    at = (stop - 1 if position is None else min(int(position), stop - 1))
    vec = np.asarray(a[at], dtype=np.float32)
    k = min(TOP_K, vec.shape[0])
    top = np.argpartition(-vec, k - 1)[:k] if k < vec.shape[0] else np.arange(k)
    top = top[np.argsort(-vec[top], kind="stable")]
    data = np.asarray(a[start:stop][:, top], dtype=np.float32).T  # (k, w)
    labels = tuple(names([int(i) for i in top])) if names is not None else tuple(unnamed(i) for i in top)
    if attr == "probs":
        return BoxImage(data, (0.0, 1.0), UNIT, f"top {k} of vocab_size", None, labels)
    return BoxImage(data, symmetric_levels(data), SIGNED, f"top {k} of vocab_size", None, labels)


def describe_box(box: Box, config, n_tokens: int, image: BoxImage | None = None) -> str:
    """What ``box`` holds, its shape in config names and in numbers, and what is drawn: the hover text."""
    row = box.row
    shape = array_shape(row.kind, row.per_row(config), n_tokens)
    lines = [f"{box.key}: {row.doc}", f"shape {row.shape_doc} = ({', '.join(str(n) for n in shape)})"]
    if image is not None:
        rows = image.rows if len(row.dims) > 1 else f"{image.rows} down, one column per token"
        what = {ROWS: rows, HEADS: "d_head down, one column per token",
                SQUARE: "query i down, key j across", MASK: "query i down, key j across: filled = may attend"}
        drawn = what[row.kind] if image.row_names == () else f"the {image.rows} at the selected token, one column per token"
        if image.head is not None:
            drawn = f"head {image.head}: " + drawn
        scale = {SIGNED: f"colours ±{image.levels[1]:.3g} (this box's largest |value|)", UNIT: "colours 0 to 1",
                 BOOL: ""}[image.scale]
        lines.append("drawn: " + drawn + (f"; {scale}" if scale else ""))
    return "\n".join(lines)


def describe_cell(box: Box, image: BoxImage, r: int, c: int, tokens, start: int) -> str:
    """One cell under the mouse in words: which token(s), which dimension, and the exact value."""
    value = float(image.data[r, c])
    shown = "masked" if np.isnan(value) else f"{value:.4g}"

    def tok(i: int) -> str:
        return f"{start + i} {token_label(tokens[start + i])!r}" if start + i < len(tokens) else str(start + i)

    if box.row.kind in (SQUARE, MASK):
        return f"query {tok(r)} → key {tok(c)}: {shown}"
    if image.row_names:
        return f"{image.row_names[r]!r} at token {tok(c)}: {shown}"
    return f"token {tok(c)}, dimension {r} of {image.rows}: {shown}"
