"""Hugging Face GPT-2 (``gpt2``) and GPT-Neo (``gpt_neo``, the TinyStories models), translated to our GPT.

Both are the course's pre-LayerNorm layout with a learned positional table and (by default) a
GELU MLP with the tanh approximation (``gelu_new``). GPT-2 stores its linears as ``Conv1D``,
weights (in, out), and W_Q, W_K, W_V stacked along the outputs of ``c_attn``. GPT-Neo uses
``nn.Linear`` (out, in), q/k/v without bias, does not scale the scores by 1/√d_head, and gives
each layer global or local attention (``attention_layers``; local: query i sees keys j with
i - window_size < j ≤ i). Older files carry each layer's causal-mask buffers (``attn.bias``,
``attn.masked_bias``, GPT-Neo's ``attn.attention.bias``); they are dropped.
"""

from __future__ import annotations

from typing import Any

import torch

from model.core.config import GPTConfig
from model.formats.base import CheckpointError
from model.formats.common import Keys, make_config
from model.formats.hf.fields import HFConfig, base_prefix, gelu_variant, take_unembed
from model.core.plain import short_repr

GPT2_BUFFERS = (".attn.bias", ".attn.masked_bias")
GPT_NEO_BUFFERS = (".attn.attention.bias", ".attn.attention.masked_bias")
NEO_CONTEXT_NOTE = (
    "max_position_embeddings is 2048 (GPT-Neo's default), which the app uses as the context window; "
    "the TinyStories GPT-Neo models (roneneldan/TinyStories-*) were trained on at most 512 tokens, "
    "so for them positions from 512 on are ones they never learned."
)


def _conv1d(keys: Keys, name: str, d_in: int, d_out: int) -> torch.Tensor:
    """A Conv1D weight (d_in, d_out) as an nn.Linear weight (d_out, d_in)."""
    return keys.take(name, (d_in, d_out)).t().contiguous()


def _layer_norms(keys: Keys, src: str, dst: str, d: int, out: dict) -> None:
    for theirs, ours in (("ln_1", "ln1"), ("ln_2", "ln2")):
        out[f"{dst}{ours}.weight"] = keys.take(f"{src}{theirs}.weight", (d,))
        out[f"{dst}{ours}.bias"] = keys.take(f"{src}{theirs}.bias", (d,))


def _embeddings(cfg: HFConfig, keys: Keys, prefix: str, vocab_key: str, ctx_key: str) -> tuple[dict, int, int, int]:
    """(our tensors, vocab, d_model, context) from ``wte`` and ``wpe``, checked against the config."""
    wte = keys.take_matrix(prefix + "wte.weight")
    vocab, d = wte.shape
    wpe = keys.take_matrix(prefix + "wpe.weight")
    ctx = wpe.shape[0]
    for name, value in ((vocab_key, vocab), (ctx_key, ctx), ("n_embd" if ctx_key == "n_positions" else "hidden_size", d)):
        if cfg.get(name) is not None and cfg.get(name) != value:
            raise cfg.disagrees(name, value)
    if wpe.shape[1] != d:
        raise CheckpointError(f"{keys.path.name}: {prefix}wpe.weight has shape {tuple(wpe.shape)}, expected ({ctx}, {d})")
    return {"tok_emb.weight": wte, "pos_emb.weight": wpe}, vocab, d, ctx


def _n_layers(cfg: HFConfig, keys: Keys, prefix: str, name: str) -> int:
    n = keys.layers(prefix + "h")
    if cfg.get(name) is not None and cfg.get(name) != n:
        raise cfg.disagrees(name, n, " blocks")
    return n


def _finish(cfg: HFConfig, keys: Keys, prefix: str, out: dict, vocab: int, d: int) -> bool:
    out["ln_f.weight"] = keys.take(prefix + "ln_f.weight", (d,))
    out["ln_f.bias"] = keys.take(prefix + "ln_f.bias", (d,))
    tied = take_unembed(cfg, keys, True, out, vocab, d)
    keys.finish()
    return tied


def convert_gpt2(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gpt2`` folder's config and weights as our config, tensors and notes.

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    if cfg.flag("scale_attn_by_inverse_layer_idx", False):
        raise cfg.refuse("scale_attn_by_inverse_layer_idx", "scores divided by the layer number are not supported")
    if cfg.flag("add_cross_attention", False):
        raise cfg.refuse("add_cross_attention", "cross-attention (an encoder-decoder model) is not supported")
    gelu = gelu_variant(cfg)
    prefix = base_prefix(keys, "transformer.", "wte.weight")
    out, vocab, d, ctx = _embeddings(cfg, keys, prefix, "vocab_size", "n_positions")
    n_layers = _n_layers(cfg, keys, prefix, "n_layer")
    n_heads = cfg.positive_int("n_head")
    d_mlp = cfg.positive_int("n_inner", 4 * d)
    for i in range(n_layers):
        src, dst = f"{prefix}h.{i}.", f"blocks.{i}."
        _layer_norms(keys, src, dst, d, out)
        w = _conv1d(keys, src + "attn.c_attn.weight", d, 3 * d)  # (3 d_model, d_model): W_Q, W_K, W_V rows
        b = keys.take(src + "attn.c_attn.bias", (3 * d,))
        for j, name in enumerate(("W_Q", "W_K", "W_V")):
            out[f"{dst}attn.{name}.weight"] = w[j * d:(j + 1) * d].contiguous()
            out[f"{dst}attn.{name}.bias"] = b[j * d:(j + 1) * d].contiguous()
        for theirs, ours, d_in, d_out in (("attn.c_proj", "attn.W_O", d, d), ("mlp.c_fc", "mlp.fc_in", d, d_mlp),
                                          ("mlp.c_proj", "mlp.fc_out", d_mlp, d)):
            out[f"{dst}{ours}.weight"] = _conv1d(keys, f"{src}{theirs}.weight", d_in, d_out)
            out[f"{dst}{ours}.bias"] = keys.take(f"{src}{theirs}.bias", (d_out,))
    tied = _finish(cfg, keys, prefix, out, vocab, d)
    config = make_config(
        keys.path, vocab_size=vocab, context_length=ctx, d_model=d, n_heads=n_heads, n_layers=n_layers,
        d_mlp=d_mlp, gelu=gelu, qkv_bias=True, norm_eps=cfg.number("layer_norm_epsilon", 1e-5),
        scale_scores=cfg.flag("scale_attn_weights", True), tied_unembed=tied,
    )
    return config, out, {}


def neo_attention_layers(cfg: HFConfig, n_layers: int) -> list[str]:
    """Each layer's ``"global"`` or ``"local"``, from ``attention_layers`` or the compressed
    ``attention_types`` ([[["global", "local"], 12]]: the pattern repeated 12 times)."""
    types = cfg.get("attention_types", [[["global", "local"], 12]])
    expanded: list = []
    for item in types if isinstance(types, list) else [None]:
        ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and isinstance(item[1], int)
        if not ok or not 0 <= item[1] <= n_layers:
            raise cfg.refuse("attention_types", "expected a list of [[kinds...], repeats]")
        expanded += item[0] * item[1]
    layers = cfg.get("attention_layers", expanded)
    if "attention_types" in cfg.data and layers != expanded:
        raise cfg.error(f"attention_layers {short_repr(layers)} and attention_types {short_repr(types)} disagree")
    field = "attention_layers" if cfg.get("attention_layers") is not None else "attention_types"
    if not isinstance(layers, list) or len(layers) != n_layers:
        raise cfg.refuse(field, f"expected one entry per layer ({n_layers})")
    if any(kind not in ("global", "local") for kind in layers):
        raise cfg.refuse(field, "entries must be 'global' or 'local'")
    return layers


def convert_gpt_neo(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gpt_neo`` folder's config and weights as our config, tensors and notes.

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    gelu = gelu_variant(cfg)
    prefix = base_prefix(keys, "transformer.", "wte.weight")
    out, vocab, d, ctx = _embeddings(cfg, keys, prefix, "vocab_size", "max_position_embeddings")
    n_layers = _n_layers(cfg, keys, prefix, "num_layers")
    n_heads = cfg.positive_int("num_heads")
    d_mlp = cfg.positive_int("intermediate_size", 4 * d)
    window = cfg.positive_int("window_size", 256)
    windows = tuple(window if kind == "local" else 0 for kind in neo_attention_layers(cfg, n_layers))
    for i in range(n_layers):
        src, dst = f"{prefix}h.{i}.", f"blocks.{i}."
        _layer_norms(keys, src, dst, d, out)
        att = src + "attn.attention."
        for theirs, ours in (("q_proj", "W_Q"), ("k_proj", "W_K"), ("v_proj", "W_V")):
            out[f"{dst}attn.{ours}.weight"] = keys.take(f"{att}{theirs}.weight", (d, d))
        keys.take_linears(out, att, dst + "attn.", [("out_proj", "W_O", (d, d))], bias=True)
        keys.take_linears(out, src + "mlp.", dst + "mlp.",
                          [("c_fc", "fc_in", (d_mlp, d)), ("c_proj", "fc_out", (d, d_mlp))], bias=True)
    tied = _finish(cfg, keys, prefix, out, vocab, d)
    config = make_config(
        keys.path, vocab_size=vocab, context_length=ctx, d_model=d, n_heads=n_heads, n_layers=n_layers,
        d_mlp=d_mlp, gelu=gelu, qkv_bias=False, scale_scores=False, attn_windows=windows,
        norm_eps=cfg.number("layer_norm_epsilon", 1e-5), tied_unembed=tied,
    )
    notes = {"note": NEO_CONTEXT_NOTE} if ctx == 2048 else {}
    return config, out, notes
