"""The layer-0 score's four terms, and how much attention goes to the first token.

With a learned positional table, block 0's input is x_i = e_i + p_i. Freeze the first norm's
scale per token (σ_i of LayerNorm, rms_i of RMSNorm) and the norm is linear in x_i:

    LN1(x_i) = γ ⊙ (e_i − mean e_i)/σ_i  +  γ ⊙ (p_i − mean p_i)/σ_i  +  β
             =          t_i (token)      +        s_i (position)      +  c

(RMSNorm: no centring and no β.) So q_i = t_i W_Q + s_i W_Q + (c W_Q + b_Q), likewise k_j, and
each score attn_scale · q_i·k_j is a sum of five T × T maps: token·token, token·position,
position·token, position·position and the rest (every product with c or a bias). This is exact
for the recorded scores, not an approximation: the scale really is per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.tracing.records import Trace

TERMS = ("token_token", "token_pos", "pos_token", "pos_pos", "rest")

ROPE_NOTE = ("does not apply to RoPE: no position vector is added to the input, so LN1's output has "
             "no position part to split off; position enters by rotating q_i and k_j inside every "
             "layer, and a score depends on it only through i − j (see the positional lesson)")
NONE_NOTE = ("does not apply: the model has no positional encoding (x_i = e_i), so every score is "
             "token·token plus bias terms")
OFF_NOTE = ("does not apply: the positional encoding is switched off in this trace (x_i = e_i), so "
            "there is no position part")
LINEAR_NOTE = ("does not apply to this model: {why}, so q_i·k_j is not a sum of token and position terms")


@dataclass(frozen=True)
class ScoreTerms:
    """Layer 0's attn_scores for one head as five maps, each (T, T), NaN where attn_mask is False.

    Attributes
    ----------
    head : int
        The query head (its key head is the model's ``kv_head(head)``).
    maps : dict of str to ndarray (T, T) float64
        ``token_token``, ``token_pos``, ``pos_token``, ``pos_pos``, ``rest`` (q-side part first);
        their sum is ``attn_scores`` of layer 0, head ``head``, wherever attention is allowed.
    shares : dict of str to float
        Each map's Σ|value| over the allowed cells, as a fraction of all five's (they sum to 1).
    """

    head: int
    maps: dict[str, np.ndarray]
    shares: dict[str, float]


def score_terms_note(model, tr: Trace) -> str:
    """"" when :func:`score_terms` applies to this model and trace, else why not (one sentence)."""
    cfg = model.config
    kind = cfg.positional
    if kind == "rope":
        return ROPE_NOTE
    if kind == "none":
        return NONE_NOTE
    if not tr.positional_encoding:
        return OFF_NOTE
    why = [w for flag, w in ((cfg.norm_placement == "post", "no norm comes before attention to freeze"),
                             (cfg.qk_norm != "none", "QK-norm normalises q and k after the projection"),
                             (bool(cfg.attn_softcap), "the scores are soft-capped (c·tanh(s/c))")) if flag]
    return LINEAR_NOTE.format(why="; ".join(why)) if why else ""


def score_terms(model, tr: Trace, head: int = 0) -> ScoreTerms:
    """Split layer 0's scores of ``head`` into token and position terms.

    Parameters
    ----------
    model : GPT
        The model that made ``tr``; it must have a learned positional table.
    tr : Trace
        Run with positional encoding on.
    head : int
        Query head of layer 0, 0 <= head < n_heads.

    Returns
    -------
    ScoreTerms

    Raises
    ------
    ValueError
        When the split does not apply (:func:`score_terms_note` says why) or the head is out of range.
    """
    note = score_terms_note(model, tr)
    if note:
        raise ValueError(note)
    if not 0 <= head < model.config.n_heads:
        raise ValueError(f"head {head} is out of range (0..{model.config.n_heads - 1})")
    block, layer = model.blocks[0], tr.blocks[0]
    kv = block.attn.kv_head(head)
    e, p = tr.tok_scaled.astype(np.float64), tr.pos.astype(np.float64)
    ln1 = block.ln1.frozen(e + p)  # LN1 with each token's scale (1/σ_i, 1/rms_i) frozen
    c = ln1.shift if ln1.shift is not None else np.zeros_like(ln1.gain)
    # Products in torch, not numpy: numpy's threaded BLAS stalls for milliseconds on a busy machine.
    t, s, c = (torch.from_numpy(a) for a in (ln1.linear(e), ln1.linear(p), c))  # (T, d_model) twice, (d_model,)
    w = block.attn.head_weights(("W_Q", "b_Q", "W_K", "b_K"))
    W_Q, b_Q, W_K, b_K = (torch.from_numpy(w[name][i]).double() for name, i in
                          (("W_Q", head), ("b_Q", head), ("W_K", kv), ("b_K", kv)))  # (d_model, d_head), (d_head,)
    qt, qs, qc = t @ W_Q, s @ W_Q, c @ W_Q + b_Q  # (T, d_head), (T, d_head), (d_head,)
    kt, ks, kc = t @ W_K, s @ W_K, c @ W_K + b_K
    scale = layer.attn_scale
    maps = {
        "token_token": scale * qt @ kt.T,  # (T, T)
        "token_pos": scale * qt @ ks.T,
        "pos_token": scale * qs @ kt.T,
        "pos_pos": scale * qs @ ks.T,
        "rest": scale * (qc @ (kt + ks).T + ((qt + qs) @ kc)[:, None] + qc @ kc),
    }
    maps = {name: m.numpy() for name, m in maps.items()}
    allowed = layer.attn_mask
    totals = {name: float(np.abs(m[allowed]).sum()) for name, m in maps.items()}
    whole = sum(totals.values()) or 1.0
    for m in maps.values():
        m[~allowed] = np.nan
    return ScoreTerms(head=head, maps=maps, shares={name: v / whole for name, v in totals.items()})


def first_token_attention(tr: Trace, position: int) -> np.ndarray:
    """(n_layers, n_heads): the weight of query ``position`` on key 0, in [0, 1]."""
    if not tr.blocks:
        return np.zeros((0, 0))
    return np.stack([layer.attn_weights[:, position, 0] for layer in tr.blocks]).astype(np.float64)


def heads_on(tr: Trace) -> np.ndarray:
    """(n_layers, n_heads) bool: True for each head the trace's interventions leave on (a head
    switched off still has attention weights, but its output is zeroed: it reads nothing)."""
    on = np.ones((len(tr.blocks), tr.blocks[0].attn_weights.shape[0] if tr.blocks else 0), dtype=bool)
    for layer, head in getattr(tr.interventions, "ablate", ()):
        if layer < on.shape[0] and head < on.shape[1]:
            on[layer, head] = False
    return on


def first_token_mean(tr: Trace) -> float:
    """Mean weight on key 0 over every layer and head that is on (:func:`heads_on`) and query
    1..T-1 (query 0 can only see itself); NaN with fewer than 2 tokens or every head off. The
    "attention sink" of Xiao et al. 2023."""
    on = heads_on(tr)
    if tr.n_tokens < 2 or not on.any():
        return float("nan")
    weights = np.stack([layer.attn_weights[:, 1:, 0].mean(axis=1) for layer in tr.blocks])  # (n_layers, n_heads)
    return float(weights[on].mean())
