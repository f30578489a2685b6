"""The worked example of Raschka, *Build a Large Language Model (From Scratch)*, chapter 3.

Six tokens, "Your journey starts with one step", each a 3-dimensional input embedding (the
chapter's own numbers, section 3.3.1), go through simplified self-attention (3.3), self-attention
with trainable weights (3.4), causal attention with its mask, renormalisation, −∞ trick and dropout
(3.5) and multi-head attention (3.6). The trainable weights are drawn as the chapter draws them:
``torch.manual_seed(seed)``, then ``torch.rand(d_in, d_out)`` or ``nn.Linear(d_in, d_out,
bias=False)`` in the chapter's order (W_query, W_key, W_value; head after head; ``out_proj`` last),
so the same seed gives the same weights and every tensor the chapter prints comes out as printed.
``tests/test_book.py`` checks each against the chapter's notebook (rasbt/LLMs-from-scratch,
``ch03/01_main-chapter-code/ch03.ipynb``, printed with torch 2.4.0) to the printed four decimals.

Everything is float32, as in the chapter. The global torch random state is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Mapping

import numpy as np
import torch
from torch import nn

TOKENS = ("Your", "journey", "starts", "with", "one", "step")
#: The chapter's input embeddings x⁽¹⁾ .. x⁽⁶⁾, one row per token (3.3.1).
INPUTS = ((0.43, 0.15, 0.89), (0.55, 0.87, 0.66), (0.57, 0.85, 0.64),
          (0.22, 0.58, 0.33), (0.77, 0.25, 0.10), (0.05, 0.80, 0.55))
QUERY = 1  # the chapter's query: x⁽²⁾, "journey"
D_IN, D_OUT, NUM_HEADS = 3, 2, 2
SEED = 123  # 3.4.1's W_query/W_key/W_value, SelfAttention_v1, the dropout example, 3.5.3 and 3.6
SEED_V2 = 789  # SelfAttention_v2 (3.4.2), whose weights 3.5.1 reuses
DROPOUT_P = 0.5  # the dropout example's rate (3.5.2)

SECTIONS = {
    "3.3.1": "A simple self-attention mechanism without trainable weights",
    "3.3.2": "Computing attention weights for all input tokens",
    "3.4.1": "Computing the attention weights step by step",
    "3.4.2": "Implementing a compact SelfAttention class",
    "3.5.1": "Applying a causal attention mask",
    "3.5.2": "Masking additional attention weights with dropout",
    "3.5.3": "Implementing a compact causal self-attention class",
    "3.6.1": "Stacking multiple single-head attention layers",
    "3.6.2": "Implementing multi-head attention with weight splits",
}


@dataclass(frozen=True)
class BookTensor:
    """One named tensor of the example.

    Attributes
    ----------
    key : str
        Unique name (the JSON key): the chapter's variable where the chapter names it once;
        a prefix tells apart a name the chapter reuses (``trainable_attn_scores_2``, ``sa_v2_attn_weights``).
    name : str
        The chapter's variable (or printed expression), e.g. ``attn_scores_2``, ``dropout(example)``.
    code : str
        How it is computed, in the chapter's terms.
    section : str
        The chapter's section, e.g. ``"3.3.1"`` (titles in :data:`SECTIONS`).
    value : numpy.ndarray
        float32, read-only; -inf where masked (``masked`` only).
    printed : bool
        Whether the chapter shows its values: printed by the notebook, or (``inputs``) written in
        its code. These are compared with the chapter in the tests.
    """

    key: str
    name: str
    code: str
    section: str
    value: np.ndarray
    printed: bool


@dataclass(frozen=True)
class BookExample:
    """Every named tensor of the chapter's example, in the chapter's order.

    Attributes
    ----------
    query : int
        The query token of the step-by-step parts (3.3.1, 3.4.1), 0-based; the chapter's is 1.
        Their names count from 1 as the chapter does: query 1 gives ``attn_scores_2``.
    dropout : bool
        Whether the classes of 3.5.3 and 3.6 ran with dropout 0.5 (the chapter's code has 0.0).
    tensors : Mapping[str, BookTensor]
        By key.
    """

    query: int
    dropout: bool
    tensors: Mapping[str, BookTensor]

    def __getitem__(self, key: str) -> np.ndarray:
        return self.tensors[key].value


class _Recorder:
    """Collects the tensors in the order they are computed, under one section at a time."""

    def __init__(self) -> None:
        self.tensors: dict[str, BookTensor] = {}
        self.section = ""

    def __call__(self, key: str, value: torch.Tensor, code: str, name: str | None = None,
                 printed: bool = True) -> torch.Tensor:
        array = value.detach().numpy().astype(np.float32, copy=True)
        array.setflags(write=False)
        self.tensors[key] = BookTensor(key, name or key, code, self.section, array, printed)
        return value


def _future(T: int) -> torch.Tensor:
    """(T, T) bool: True above the diagonal, the keys a query may *not* see (the chapter's ``mask.bool()``)."""
    return torch.triu(torch.ones(T, T), diagonal=1).bool()


def _causal_attention(x, w_query, w_key, w_value, dropout: nn.Dropout):
    """Causal self-attention of one head over a batch (3.5.3), scaled by √d_out.

    x (b, T, d_in) -> context vectors (b, T, d_out) and attn_weights (b, T, T), after dropout.
    """
    queries, keys, values = w_query(x), w_key(x), w_value(x)  # (b, T, d_out)
    attn_scores = (queries @ keys.transpose(1, 2)).masked_fill(_future(x.shape[1]), -torch.inf)  # (b, T, T)
    attn_weights = dropout(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1))
    return attn_weights @ values, attn_weights


def _multi_head(x, w_query, w_key, w_value, out_proj, dropout: nn.Dropout, num_heads: int):
    """Multi-head causal attention with weight splits (3.6.2).

    x (b, T, d_in) -> out_proj's output (b, T, d_out), attn_weights (b, num_heads, T, T) and the
    heads' context vectors side by side before ``out_proj`` (b, T, d_out).
    """
    b, T, _ = x.shape
    d_out = w_query.out_features
    head_dim = d_out // num_heads

    def split(m: torch.Tensor) -> torch.Tensor:
        return m.view(b, T, num_heads, head_dim).transpose(1, 2)  # (b, num_heads, T, head_dim)

    queries, keys, values = split(w_query(x)), split(w_key(x)), split(w_value(x))
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(_future(T), -torch.inf)  # (b, num_heads, T, T)
    attn_weights = dropout(torch.softmax(attn_scores / head_dim ** 0.5, dim=-1))
    heads = (attn_weights @ values).transpose(1, 2).reshape(b, T, d_out)  # (b, T, d_out)
    return out_proj(heads), attn_weights, heads


def _simplified(add: _Recorder, inputs: torch.Tensor, q: int) -> None:
    n = q + 1
    add.section = "3.3.1"
    add("inputs", inputs, "torch.tensor(...), one row per token (6, d_in = 3)")
    query = inputs[q]
    scores_q = add(f"attn_scores_{n}", inputs @ query, f"torch.dot(x_i, query) for each x_i, query = inputs[{q}]")
    add(f"attn_weights_{n}_tmp", scores_q / scores_q.sum(), f"attn_scores_{n} / attn_scores_{n}.sum()")
    add(f"attn_weights_{n}_naive", torch.exp(scores_q) / torch.exp(scores_q).sum(dim=0),
        f"exp(attn_scores_{n}) / exp(attn_scores_{n}).sum()")
    weights_q = add(f"attn_weights_{n}", torch.softmax(scores_q, dim=0), f"torch.softmax(attn_scores_{n}, dim=0)")
    add(f"context_vec_{n}", weights_q @ inputs, f"Σ_i attn_weights_{n}[i] · x_i")
    add.section = "3.3.2"
    attn_scores = add("attn_scores", inputs @ inputs.T, "inputs @ inputs.T")
    attn_weights = add("attn_weights", torch.softmax(attn_scores, dim=-1), "torch.softmax(attn_scores, dim=-1)")
    add("all_context_vecs", attn_weights @ inputs, "attn_weights @ inputs")


def _trainable(add: _Recorder, inputs: torch.Tensor, q: int) -> None:
    n = q + 1
    add.section = "3.4.1"
    torch.manual_seed(SEED)
    w_query, w_key, w_value = (torch.rand(D_IN, D_OUT) for _ in range(3))  # the chapter's order
    add("W_query", w_query, f"torch.manual_seed({SEED}); torch.rand(d_in, d_out), first of three", printed=False)
    add("W_key", w_key, "torch.rand(d_in, d_out), second", printed=False)
    add("W_value", w_value, "torch.rand(d_in, d_out), third", printed=False)
    queries = add("queries", inputs @ w_query, "inputs @ W_query", printed=False)
    keys = add("keys", inputs @ w_key, "inputs @ W_key", printed=False)
    values = add("values", inputs @ w_value, "inputs @ W_value", printed=False)
    add(f"query_{n}", queries[q], f"inputs[{q}] @ W_query")
    add(f"attn_score_{n}{n}", queries[q] @ keys[q], f"query_{n}.dot(keys[{q}])")
    scores_q = add(f"trainable_attn_scores_{n}", queries[q] @ keys.T, f"query_{n} @ keys.T", f"attn_scores_{n}")
    weights_q = add(f"trainable_attn_weights_{n}", torch.softmax(scores_q / keys.shape[1] ** 0.5, dim=-1),
                    f"torch.softmax(attn_scores_{n} / d_k**0.5, dim=-1)", f"attn_weights_{n}")
    add(f"trainable_context_vec_{n}", weights_q @ values, f"attn_weights_{n} @ values", f"context_vec_{n}")
    scores = add("trainable_attn_scores", queries @ keys.T, "queries @ keys.T (every query)",
                 "attn_scores", printed=False)
    add("trainable_attn_weights", torch.softmax(scores / keys.shape[1] ** 0.5, dim=-1),
        "torch.softmax(attn_scores / d_k**0.5, dim=-1)", "attn_weights", printed=False)
    add.section = "3.4.2"
    torch.manual_seed(SEED)  # SelfAttention_v1 draws W_query, W_key, W_value again: the same weights
    v1 = [torch.rand(D_IN, D_OUT) for _ in range(3)]
    add("sa_v1", torch.softmax((inputs @ v1[0]) @ (inputs @ v1[1]).T / D_OUT ** 0.5, dim=-1) @ (inputs @ v1[2]),
        f"torch.manual_seed({SEED}); SelfAttention_v1(d_in, d_out)(inputs)", "sa_v1(inputs)")


def _causal(add: _Recorder, inputs: torch.Tensor) -> None:
    add.section = "3.4.2"
    torch.manual_seed(SEED_V2)
    w_query, w_key, w_value = (nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3))
    queries, keys = w_query(inputs), w_key(inputs)
    attn_scores = queries @ keys.T  # (6, 6), unscaled
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    add("sa_v2", weights @ w_value(inputs), f"torch.manual_seed({SEED_V2}); SelfAttention_v2(d_in, d_out)(inputs)",
        "sa_v2(inputs)")
    add.section = "3.5.1"
    add("sa_v2_attn_scores", attn_scores, "sa_v2.W_query(inputs) @ sa_v2.W_key(inputs).T", "attn_scores", printed=False)
    add("sa_v2_attn_weights", weights, "torch.softmax(attn_scores / d_k**0.5, dim=-1)", "attn_weights")
    T = len(inputs)
    mask_simple = add("mask_simple", torch.tril(torch.ones(T, T)), "torch.tril(torch.ones(6, 6))")
    masked_simple = add("masked_simple", weights * mask_simple, "attn_weights * mask_simple")
    add("masked_simple_norm", masked_simple / masked_simple.sum(dim=-1, keepdim=True),
        "masked_simple / masked_simple.sum(dim=-1, keepdim=True)")
    add("mask", _future(T).float(), "torch.triu(torch.ones(6, 6), diagonal=1)", printed=False)
    masked = add("masked", attn_scores.masked_fill(_future(T), -torch.inf),
                 "attn_scores.masked_fill(mask.bool(), -inf)")
    causal = add("causal_attn_weights", torch.softmax(masked / keys.shape[-1] ** 0.5, dim=-1),
                 "torch.softmax(masked / d_k**0.5, dim=-1)", "attn_weights")
    add.section = "3.5.2"
    dropout = nn.Dropout(DROPOUT_P)
    torch.manual_seed(SEED)
    add("dropout_example", dropout(torch.ones(T, T)),
        f"torch.manual_seed({SEED}); nn.Dropout({DROPOUT_P})(torch.ones(6, 6))", "dropout(example)")
    torch.manual_seed(SEED)
    add("dropout_attn_weights", dropout(causal), f"torch.manual_seed({SEED}); dropout(attn_weights)",
        "dropout(attn_weights)")


def _classes(add: _Recorder, inputs: torch.Tensor, p: float) -> None:
    add.section = "3.5.3"
    batch = add("batch", torch.stack((inputs, inputs), dim=0), "torch.stack((inputs, inputs), dim=0)",
                printed=False)
    torch.manual_seed(SEED)
    ca = (*(nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3)), nn.Dropout(p))
    context, weights = _causal_attention(batch, *ca)
    add("causal_context_vecs", context, f"torch.manual_seed({SEED}); CausalAttention(d_in, d_out, 6, {p})(batch)",
        "context_vecs")
    add("causal_attn_weights_batch", weights, "CausalAttention's attn_weights", "attn_weights", printed=False)
    add.section = "3.6.1"
    torch.manual_seed(SEED)
    heads = [(*(nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3)), nn.Dropout(p)) for _ in range(NUM_HEADS)]
    outs = [_causal_attention(batch, *head) for head in heads]
    add("mha_wrapper", torch.cat([c for c, _ in outs], dim=-1),
        f"torch.manual_seed({SEED}); MultiHeadAttentionWrapper(d_in, d_out, 6, {p}, num_heads=2)(batch)",
        "context_vecs")
    add("mha_wrapper_attn_weights", torch.stack([w for _, w in outs], dim=1), "each head's attn_weights",
        "attn_weights", printed=False)
    add.section = "3.6.2"
    torch.manual_seed(SEED)
    w_qkv = [nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3)]
    out_proj = nn.Linear(D_OUT, D_OUT)
    out, weights, heads_out = _multi_head(batch, *w_qkv, out_proj, nn.Dropout(p), NUM_HEADS)
    add("mha_attn_weights", weights, "attn_weights of each head (head_dim = d_out // num_heads = 1)",
        "attn_weights", printed=False)
    add("mha_heads", heads_out, "(attn_weights @ values), heads side by side before out_proj",
        "context_vec", printed=False)
    add("mha", out, f"torch.manual_seed({SEED}); MultiHeadAttention(d_in, d_out, 6, {p}, num_heads=2)(batch)",
        "context_vecs")


@lru_cache(maxsize=16)
def chapter3(query: int = QUERY, dropout: bool = False) -> BookExample:
    """Compute every tensor of the chapter's example.

    Parameters
    ----------
    query : int
        Query token of the step-by-step parts (3.3.1, 3.4.1), in [0, 6); the chapter's is 1
        ("journey"). The other tensors do not depend on it.
    dropout : bool
        Run the classes of 3.5.3 and 3.6 with dropout 0.5 in training mode (the chapter's code with
        0.0 changed to 0.5: same seed, the dropout masks drawn after the weights). The chapter prints
        them with 0.0 (False). The dropout example of 3.5.2 is computed either way.

    Returns
    -------
    BookExample
        Shapes: inputs (6, 3); per-query vectors (6,) or (d_out,); 3.3.2 and 3.5.1 matrices (6, 6);
        W_query/W_key/W_value (3, 2); sa_v1, sa_v2 (6, 2); batch (2, 6, 3); causal_context_vecs and
        mha (2, 6, 2); mha_wrapper (2, 6, 4); per-head weights (2, num_heads, 6, 6).

    Raises
    ------
    ValueError
        When ``query`` is outside the six tokens.
    """
    if not 0 <= query < len(TOKENS):
        raise ValueError(f"query {query} is outside the {len(TOKENS)} tokens of the example")
    add = _Recorder()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        inputs = torch.tensor(INPUTS)
        _simplified(add, inputs, query)
        _trainable(add, inputs, query)
        _causal(add, inputs)
        _classes(add, inputs, DROPOUT_P if dropout else 0.0)
    return BookExample(query, dropout, MappingProxyType(add.tensors))
