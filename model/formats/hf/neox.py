"""Hugging Face GPT-NeoX (``gpt_neox``: EleutherAI's Pythia suite) and Phi (``phi``: phi-1, phi-1.5,
phi-2), translated to our GPT: the families whose attention and MLP run side by side, with partial rotary.

GPT-NeoX: per layer ``input_layernorm`` and ``post_attention_layernorm`` (LayerNorms with biases),
attention ``query_key_value`` fused **per head** (its rows are [q_0, k_0, v_0, q_1, k_1, v_1, ...],
each d_head wide: transformers views the output as (…, n_heads, 3 · d_head) and chunks the last
axis), ``dense`` (W_O), ``mlp.dense_h_to_4h`` / ``dense_4h_to_h``; with ``use_parallel_residual``
(the default) x + Attn(LN1(x)) + MLP(LN2(x)), else the sequential block; ``embed_out`` untied
unless ``tie_word_embeddings``; biases on q/k/v and W_O with ``attention_bias`` (default true).

Phi: one ``input_layernorm`` feeding attention and the MLP together, x + Attn(LN(x)) + MLP(LN(x));
``q_proj``, ``k_proj``, ``v_proj``, ``dense``, ``fc1``, ``fc2`` and ``lm_head`` all with biases;
``final_layernorm``; optional ``qk_layernorm`` (LayerNorms over each head's q and k).

Both turn only the first ``int(d_head · partial_rotary_factor)`` dimensions of each head (transformers
5: ``rope_parameters.partial_rotary_factor``; 4: ``rotary_pct`` for GPT-NeoX, default 0.25, and
``partial_rotary_factor`` for Phi, default 0.5), in halves (``rotate_half`` on that part); the base
is ``rope_parameters.rope_theta`` (4: ``rotary_emb_base`` / ``rope_theta``). Older files' causal-mask
and ``inv_freq`` buffers are dropped.
"""

from __future__ import annotations

from typing import Any

import torch

from model.core.config import GPTConfig
from model.formats.common import Keys, make_config
from model.formats.hf.fields import (
    HFConfig, base_prefix, context_length, gelu_variant, layer_sizes, mlp_width, take_unembed,
)
from model.formats.hf.rope import rope_settings

NEOX_BUFFERS = (".attention.bias", ".attention.masked_bias", ".attention.rotary_emb.inv_freq")
PHI_BUFFERS = (".self_attn.rotary_emb.inv_freq",)


def _common(cfg: HFConfig, keys: Keys, prefix: str, embedding: str, first_mlp: str) -> tuple[dict, torch.Tensor]:
    """The sizes checked between the config and the weights (vocab, d, n_layers, n_heads, ctx, d_mlp)
    and the token embedding (``prefix + embedding``, taken)."""
    emb = keys.take_matrix(prefix + embedding)
    vocab, d, n_layers = layer_sizes(cfg, keys, prefix, emb)
    n_heads = cfg.positive_int("num_attention_heads")
    if d % n_heads:
        raise cfg.refuse("num_attention_heads", f"does not divide hidden_size ({d})")
    sizes = {"vocab": vocab, "d": d, "n_layers": n_layers, "n_heads": n_heads, "ctx": context_length(cfg, 2048),
             "d_mlp": mlp_width(cfg, keys, f"{prefix}layers.0.mlp.{first_mlp}.weight")}
    return sizes, emb


def split_per_head(w: torch.Tensor, n_heads: int, d_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPT-NeoX's fused ``query_key_value`` weight (3 · d_model, d_model) or bias (3 · d_model,) as
    W_Q, W_K, W_V: its rows are per head [q_h, k_h, v_h], each d_head rows (not [Q, K, V])."""
    per_head = w.reshape(n_heads, 3, d_head, *w.shape[1:])  # (n_heads, 3, d_head, ...)
    return tuple(per_head[:, j].reshape(n_heads * d_head, *w.shape[1:]).contiguous() for j in range(3))


def _neox_layer(keys: Keys, src: str, dst: str, s: dict, d_mlp: int, attn_bias: bool) -> dict[str, torch.Tensor]:
    d, n, dh = s["d"], s["n_heads"], s["d"] // s["n_heads"]
    out: dict[str, torch.Tensor] = {}
    for theirs, ours in (("input_layernorm", "ln1"), ("post_attention_layernorm", "ln2")):
        for part in ("weight", "bias"):
            out[f"{dst}{ours}.{part}"] = keys.take(f"{src}{theirs}.{part}", (d,))
    parts = ("weight", "bias") if attn_bias else ("weight",)
    for part in parts:
        fused = keys.take(f"{src}attention.query_key_value.{part}", (3 * d, d) if part == "weight" else (3 * d,))
        for name, t in zip(("W_Q", "W_K", "W_V"), split_per_head(fused, n, dh)):
            out[f"{dst}attn.{name}.{part}"] = t
    keys.take_linears(out, src + "attention.", dst + "attn.", [("dense", "W_O", (d, d))], bias=attn_bias)
    keys.take_linears(out, src + "mlp.", dst + "mlp.", [("dense_h_to_4h", "fc_in", (d_mlp, d)),
                                                        ("dense_4h_to_h", "fc_out", (d, d_mlp))], bias=True)
    return out


def _rotary(cfg: HFConfig, d_head: int, default_factor: float) -> dict[str, Any]:
    rope = rope_settings(cfg, 10000.0, default_factor)
    return {"positional": "rope", "rope_pairs": "halves", "rope_theta": rope.theta(""),
            "rotary_dims": rope.rotary_dims(cfg, d_head)}


def convert_gpt_neox(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gpt_neox`` folder (Pythia) as our config, tensors and notes.

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    gelu = gelu_variant(cfg, "hidden_act")
    prefix = base_prefix(keys, "gpt_neox.", "embed_in.weight")
    s, emb = _common(cfg, keys, prefix, "embed_in.weight", "dense_h_to_4h")
    d, d_head, d_mlp = s["d"], s["d"] // s["n_heads"], s["d_mlp"]
    attn_bias = cfg.flag("attention_bias", True)
    out: dict[str, torch.Tensor] = {"tok_emb.weight": emb}
    for i in range(s["n_layers"]):
        out.update(_neox_layer(keys, f"{prefix}layers.{i}.", f"blocks.{i}.", s, d_mlp, attn_bias))
    for part in ("weight", "bias"):
        out[f"ln_f.{part}"] = keys.take(f"{prefix}final_layer_norm.{part}", (d,))
    tied = take_unembed(cfg, keys, False, out, s["vocab"], d, name="embed_out.weight")
    keys.finish()
    config = make_config(
        keys.path, vocab_size=s["vocab"], context_length=s["ctx"], d_model=d, n_heads=s["n_heads"],
        n_layers=s["n_layers"], d_mlp=d_mlp, gelu=gelu, qkv_bias=attn_bias, o_bias=attn_bias, mlp_bias=True,
        norm_eps=cfg.number("layer_norm_eps", 1e-5), tied_unembed=tied,
        block_layout="parallel" if cfg.flag("use_parallel_residual", True) else "sequential",
        **_rotary(cfg, d_head, 0.25),
    )
    return config, out, {}


def convert_phi(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``phi`` folder (phi-1.5, phi-2) as our config, tensors and notes.

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    gelu = gelu_variant(cfg, "hidden_act")
    prefix = base_prefix(keys, "model.", "embed_tokens.weight")
    s, emb = _common(cfg, keys, prefix, "embed_tokens.weight", "fc1")
    d, n, d_mlp = s["d"], s["n_heads"], s["d_mlp"]
    d_head = cfg.positive_int("head_dim", d // n)
    n_kv = cfg.positive_int("num_key_value_heads", n)
    qk_norm = cfg.flag("qk_layernorm", False)
    out: dict[str, torch.Tensor] = {"tok_emb.weight": emb}
    for i in range(s["n_layers"]):
        out.update(_phi_layer(keys, f"{prefix}layers.{i}.", f"blocks.{i}.", d, (n * d_head, n_kv * d_head, d_head),
                              d_mlp, qk_norm))
    for part in ("weight", "bias"):
        out[f"ln_f.{part}"] = keys.take(f"{prefix}final_layernorm.{part}", (d,))
    tied = take_unembed(cfg, keys, False, out, s["vocab"], d)
    if not tied:
        out["unembed.bias"] = keys.take("lm_head.bias", (s["vocab"],))
    else:
        keys.take_opt("lm_head.bias")
    keys.finish()
    config = make_config(
        keys.path, vocab_size=s["vocab"], context_length=s["ctx"], d_model=d, n_heads=n, n_kv_heads=n_kv,
        d_head=d_head, n_layers=s["n_layers"], d_mlp=d_mlp, gelu=gelu, qkv_bias=True, o_bias=True, mlp_bias=True,
        norm_eps=cfg.number("layer_norm_eps", 1e-5), tied_unembed=tied, unembed_bias=not tied,
        block_layout="parallel_one_norm", qk_norm="head" if qk_norm else "none", **_rotary(cfg, d_head, 0.5),
    )
    return config, out, {}


def _phi_layer(keys: Keys, src: str, dst: str, d: int, widths: tuple[int, int, int], d_mlp: int,
               qk_norm: bool) -> dict[str, torch.Tensor]:
    q_rows, kv_rows, d_head = widths
    out: dict[str, torch.Tensor] = {}
    for part in ("weight", "bias"):
        out[f"{dst}ln1.{part}"] = keys.take(f"{src}input_layernorm.{part}", (d,))
    keys.take_linears(out, src + "self_attn.", dst + "attn.",
                      [("q_proj", "W_Q", (q_rows, d)), ("k_proj", "W_K", (kv_rows, d)), ("v_proj", "W_V", (kv_rows, d)),
                       ("dense", "W_O", (d, q_rows))], bias=True)
    if qk_norm:
        for theirs, ours in (("q_layernorm", "q_norm"), ("k_layernorm", "k_norm")):
            for part in ("weight", "bias"):
                out[f"{dst}attn.{ours}.{part}"] = keys.take(f"{src}self_attn.{theirs}.{part}", (d_head,))
    keys.take_linears(out, src + "mlp.", dst + "mlp.", [("fc1", "fc_in", (d_mlp, d)), ("fc2", "fc_out", (d, d_mlp))],
                      bias=True)
    return out
