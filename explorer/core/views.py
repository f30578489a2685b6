"""From a trace to the arrays, labels and colour levels each panel draws (no Qt here).

Every function takes plain numpy arrays or a :class:`model.Trace` and returns plain numpy arrays,
so tests can check exactly what a panel is given. Heatmap arrays are row-major: row i is the
i-th token (query) and is drawn at the top when i = 0.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from model import Encoding, Trace

UNK_TOKEN = "<unk>"


def symmetric_levels(*arrays: np.ndarray, floor: float = 1e-6) -> tuple[float, float]:
    """Colour levels (-m, m) for signed data drawn with a diverging colour map.

    Parameters
    ----------
    *arrays : numpy arrays of any shape
        NaN and infinite entries (masked cells) are ignored.
    floor : float
        Smallest m returned, so constant, all-zero or empty data never gives a zero-width range
        (which would divide by zero when the colours are scaled).

    Returns
    -------
    (float, float)
        (-m, m) with m = max |finite value|, at least ``floor``; (-1, 1) when nothing is finite.
    """
    m = 0.0
    seen = False
    for a in arrays:
        a = np.asarray(a)
        finite = np.isfinite(a)  # in place of a float64 copy: a GPT-2 table is 38M values
        if finite.any():
            seen = True
            m = max(m, float(np.max(np.abs(a), where=finite, initial=0.0)))
    if not seen:
        return (-1.0, 1.0)
    m = max(m, floor)
    return (-m, m)


def masked_as_nan(scores: np.ndarray) -> np.ndarray:
    """A float32 copy of ``scores`` with -inf (masked cells) and any non-finite value as NaN.

    NaN cells are drawn transparent (blank) by the heatmaps.
    """
    out = np.array(scores, dtype=np.float32, copy=True)
    out[~np.isfinite(out)] = np.nan
    return out


@functools.lru_cache(maxsize=8192)  # every panel labels every token on every keystroke (T = 1,024: 4,000 calls)
def token_label(token: str, limit: int = 12) -> str:
    """A short, visible label for an axis tick or chip: whitespace shown, long tokens cut.

    Spaces become "␣", newlines "↵", tabs "→"; GPT-2's byte-level markers "Ġ"/"Ċ" likewise.
    """
    shown = (
        token.replace(" ", "␣").replace("\n", "↵").replace("\t", "→").replace("Ġ", "␣").replace("Ċ", "↵")
    )
    if shown == "":
        shown = "∅"
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def axis_labels(tokens) -> list[str]:
    """Tick labels for heatmap rows/columns: ``"i token"`` for each token, i its position in the trace."""
    return [f"{i} {token_label(t)}" for i, t in enumerate(tokens)]


@dataclass(frozen=True)
class Chip:
    """One token of the text, as the token strip shows it.

    Attributes
    ----------
    token : str            vocabulary entry (``<unk>`` for unknown text).
    token_id : int
    index : int            position in the whole text's encoding.
    position : int | None  row in the trace (None when the token was dropped by the context crop).
    start, end : int       [start, end) character span in the text.
    original : str         the text the token came from.
    is_unk : bool
    """

    token: str
    token_id: int
    index: int
    position: int | None
    start: int
    end: int
    original: str
    is_unk: bool

    @property
    def dropped(self) -> bool:
        """True when the token is outside the context window (not run by the model)."""
        return self.position is None


def token_chips(text: str, encoding: Encoding, context_length: int, unk_id: int | None = None) -> list[Chip]:
    """One :class:`Chip` per token; the first ``len - context_length`` ones are dropped (position None).

    Parameters
    ----------
    text : str                the text that was encoded.
    encoding : model.Encoding its ids, tokens and spans.
    context_length : int      the model's context window.
    unk_id : int, optional    the tokenizer's unknown id; tokens with it (or named ``<unk>``) are unknown.
    """
    n = len(encoding)
    dropped = max(0, n - context_length)
    chips = []
    for i, (tid, tok, (s, e)) in enumerate(zip(encoding.ids, encoding.tokens, encoding.spans)):
        is_unk = (unk_id is not None and tid == unk_id) or tok == UNK_TOKEN
        pos = i - dropped if i >= dropped else None
        chips.append(Chip(tok, int(tid), i, pos, int(s), int(e), text[s:e], is_unk))
    return chips


def crop_note(n_tokens: int, context_length: int) -> str:
    """``"showing the last 32 of 42 tokens"`` when the text is longer than the context, else ``""``."""
    if n_tokens <= context_length:
        return ""
    return f"showing the last {context_length} of {n_tokens} tokens"


def embedding_views(trace: Trace) -> dict[str, np.ndarray]:
    """The three embedding heatmaps: ``e`` (token embedding e_i), ``p`` (positional p_i), ``x = e + p``.

    Returns
    -------
    dict of str -> (T, d_model) float32 arrays, the trace's own arrays.
    """
    return {"e": trace.tok, "p": trace.pos, "x": trace.x}


def embedding_levels(tok_table: np.ndarray, pos_table: np.ndarray | None) -> dict[str, tuple[float, float]]:
    """Fixed symmetric levels per model for the e, p and x heatmaps.

    e uses max |W_E|, p uses max |W_pos| (1 when there is no positional table), and x the sum of
    the two, the largest |e_i + p_i| can be. The levels change only when the model does, so colours
    mean the same thing on every keystroke.
    """
    e = symmetric_levels(tok_table)
    p = symmetric_levels(pos_table) if pos_table is not None and pos_table.size else (-1.0, 1.0)
    x_max = e[1] + (p[1] if pos_table is not None and pos_table.size else 0.0)
    return {"e": e, "p": p, "x": (-x_max, x_max)}


def qkv_views(trace: Trace, layer: int, head: int) -> dict[str, np.ndarray]:
    """q of one query head and the k and v it reads (its key/value head, ``LayerTrace.kv_head``):
    each (T, d_head), rows = tokens; q and k as they enter the scores (rotated, with RoPE)."""
    lt = trace.blocks[layer]
    kv = lt.kv_head(head)
    return {"q": lt.q[head], "k": lt.k[kv], "v": lt.v[kv]}


def head_weight_views(weights: dict[str, np.ndarray], head: int, kv_head: int) -> dict[str, np.ndarray]:
    """W_Q of one query head and the W_K, W_V of its key/value head, each (d_model, d_head).

    ``weights`` is ``Attention.head_weights()`` of the layer; ``kv_head`` is ``Attention.kv_head(head)``.
    """
    return {"q": weights["W_Q"][head], "k": weights["W_K"][kv_head], "v": weights["W_V"][kv_head]}


def attention_views(trace: Trace, layer: int, head: int) -> dict[str, np.ndarray]:
    """One head's attention: ``scores`` (T, T) with masked cells NaN, ``weights`` (T, T) in [0, 1],
    and ``masked`` (T, T) bool, True where the query may not see the key (the trace's ``attn_mask``
    negated: the causal mask and any local window).

    ``scores[i, j]`` = q_i . k_j / sqrt(d_head) (scaled dot-product attention, Vaswani et al. 2017,
    eq. 1) before the softmax; ``weights`` is its row-wise softmax. Row i is query i, column j key j.
    Any other non-finite score (an overflow) is NaN in ``scores`` too, but not ``masked``.
    """
    lt = trace.blocks[layer]
    raw = lt.head_attn_scores(head)  # this head's only (a trace that reused rows computes scores on demand)
    return {"scores": masked_as_nan(raw), "weights": lt.attn_weights[head], "masked": ~lt.attn_mask}  # True = may attend


def head_names(trace: Trace) -> list[str]:
    """The all-heads grid's column names: ``"H0"``, ... and, under grouped-query attention, the
    key/value head each query head reads (``"H2 kv1"``, from ``LayerTrace.kv_head``)."""
    lt = trace.blocks[0]
    grouped = lt.k.shape[0] < lt.q.shape[0]
    return [f"H{h} kv{lt.kv_head(h)}" if grouped else f"H{h}" for h in range(lt.n_heads)]
