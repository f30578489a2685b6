"""Direct logit attribution: how much each part of the residual stream adds to one logit.

At position i the logit of target t is LN_f(r_i) · u_t, with r_i the last block's output and
u_t the target's row of the unembedding. With the final norm's scale frozen at its value at i
(σ_i for LayerNorm, the root mean square for RMSNorm), LN_f is linear, so the logit is a sum
over the parts r_i is made of, each dotted with one direction d:

    LayerNorm:  d = w - mean(w),  w = γ ⊙ u_t / σ_i      (the centring moves into d)
    RMSNorm:    d = γ ⊙ u_t / rms_i
    logit = Σ_parts part · d  +  β · u_t                  (β: LayerNorm's shift, if any)

This is TransformerLens's ``apply_ln_to_stack`` (Nanda et al., "direct logit attribution").
The parts: e_i (times the embedding scale, Gemma's √d_model), p_i, per layer every head's
a_ij (v_j − b_V) W_O for every source j, the value bias (Σ_j a_ij) b_V W_O, W_O's bias, the MLP's
output, and the unembedding's bias (Phi). A model that normalises attention's output before adding
it (Gemma, OLMo-2) has that norm frozen the same way at the layer's attn_out_i, so each head's part
goes through it linearly too; the MLP's part is its normalised output. A model that soft-caps its
logits (Gemma 2: c · tanh(z / c)) has the logit before the cap, z, split: the cap is applied to the
sum, not to the parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.tracing.records import Trace


@dataclass(frozen=True)
class DirectLogitAttribution:
    """The target's logit at one position, split into direct contributions (nats of logit).

    Attributes
    ----------
    per_head : (n_layers, n_heads, S) float64
        a_ij (v_j − b_V) W_O through the frozen final norm, dotted with u_t, for source j.
    sources : (S,) float64
        ``per_head`` summed over layers and heads: source token j's direct contribution.
    components : dict of str to float
        Everything that is not a source, by the dotted name of where it comes from (module
        paths, as the trace's names): ``tok_emb``, ``pos_emb`` (with a positional table in use),
        per layer ``blocks.L.attn.b_V`` (with value biases), ``blocks.L.attn.b_O`` (with W_O's
        bias), ``blocks.L.mlp``, and ``ln_f.bias`` (LayerNorm's shift β · u_t, with a shift).
    other : float
        Sum of ``components``.
    logit : float
        The logit split: the trace's, or with a soft-capped output the logit z before the cap;
        ``other + sources.sum()`` equals it up to float32 rounding.
    softcap : float
        c when the model's output is c · tanh(z / c) (the trace's logit is then c · tanh(logit / c)); 0 for none.
    """

    per_head: np.ndarray
    sources: np.ndarray
    components: dict[str, float]
    other: float
    logit: float
    softcap: float = 0.0


def unembed_row(model, target: int) -> np.ndarray:
    """u_t: (d_model,) float64, the unembedding row of ``target`` (tok_emb when tied)."""
    return model.unembed_weight[target].detach().double().cpu().numpy()


def frozen_norm_direction(model, resid: np.ndarray, target: int) -> tuple[np.ndarray, float | None]:
    """(d, shift): the direction d (d_model,) with LN_f(r)·u_t = r·d + shift for r near ``resid``.

    The final norm's scale is taken at ``resid`` (the residual at the position explained) and
    frozen (:meth:`model.core.components.LayerNorm.frozen`); d includes the centring for
    LayerNorm. shift is β·u_t (None without a shift).
    """
    ln_f = model.ln_f.frozen(resid)
    u = unembed_row(model, target)
    return ln_f.direction(u), (float(ln_f.shift @ u) if ln_f.shift is not None else None)


def direct_logit_attribution(model, tr: Trace, position: int, target: int, n_sources: int) -> DirectLogitAttribution:
    """Split trace ``tr``'s logit of ``target`` at ``position`` into direct contributions.

    Parameters
    ----------
    model : GPT
        The model that made ``tr``.
    tr : Trace
    position : int
        The query position i, 0 <= i < T.
    target : int
        A token id.
    n_sources : int
        S, how many source positions to report (i + 1 with the causal mask, else T).

    Returns
    -------
    DirectLogitAttribution
    """
    final = tr.blocks[-1].resid_post if tr.blocks else tr.x
    d, shift = frozen_norm_direction(model, final[position], target)
    ablated = tr.interventions.ablate if tr.interventions is not None else ()
    components: dict[str, float] = {"tok_emb": float(tr.tok_scaled[position].astype(np.float64) @ d)}
    if tr.positional_encoding and model.config.has_pos_table:
        components["pos_emb"] = float(tr.pos[position].astype(np.float64) @ d)
    n_heads, cfg = model.config.n_heads, model.config
    per_head = np.zeros((len(tr.blocks), n_heads, n_sources))
    for li, (block, layer) in enumerate(zip(model.blocks, tr.blocks)):
        w = block.attn.head_weights(("b_V", "b_O"))
        d_attn = d  # the direction in attention's output space: through its norm when it has one
        if block.ln_attn_out is not None:
            post = block.ln_attn_out.frozen(layer.attn_out[position])
            d_attn = post.direction(d)
            if post.shift is not None:
                components[f"blocks.{li}.ln_attn_out.bias"] = float(post.shift @ d)
        ov_d = block.attn.head_out_direction(d_attn)  # (n_heads, d_head): W_O[h] d per head
        b_v = w["b_V"].astype(np.float64)  # (n_kv_heads, d_head), zeros without value biases
        bias_part = 0.0
        for h in range(n_heads):
            if (li, h) in ablated:
                continue
            kv = block.attn.kv_head(h)
            a = layer.attn_weights[h, position, :n_sources].astype(np.float64)  # (S,)
            v = layer.v[kv, :n_sources].astype(np.float64) - b_v[kv]  # (S, d_head): v_j without its bias
            per_head[li, h] = a * (v @ ov_d[h])
            bias_part += a.sum() * float(b_v[kv] @ ov_d[h])
        if cfg.qkv_bias:
            components[f"blocks.{li}.attn.b_V"] = bias_part
        if cfg.o_bias:
            components[f"blocks.{li}.attn.b_O"] = float(w["b_O"].astype(np.float64) @ d_attn)
        mlp = layer.mlp_out if layer.ln_mlp_out is None else layer.ln_mlp_out  # what the residual gets
        components[f"blocks.{li}.mlp"] = float(mlp[position].astype(np.float64) @ d)
    if shift is not None:
        components["ln_f.bias"] = shift
    logit = float(tr.logits[position, target])
    if cfg.unembed_bias:
        components["unembed.bias"] = float(model.unembed.bias[target].detach())
    if cfg.final_softcap:  # split the logit before the cap: z = LN_f(r)·u_t (+ b_t)
        logit = float(tr.ln_final[position].astype(np.float64) @ unembed_row(model, target))
        logit += components.get("unembed.bias", 0.0)
    sources = per_head.sum(axis=(0, 1))
    return DirectLogitAttribution(
        per_head=per_head, sources=sources, components=components,
        other=float(sum(components.values())), logit=logit, softcap=float(cfg.final_softcap),
    )
