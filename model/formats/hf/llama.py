"""Hugging Face Llama (``llama``: Llama 2, TinyLlama, SmolLM; and ``mistral`` without a sliding window),
translated to our GPT.

Pre-RMSNorm blocks, rotary position embedding of q and k in the Hugging Face layout (dimension j
turns with j + d_head/2: ``rotate_half``), grouped-query attention (``num_key_value_heads``), a
SwiGLU MLP (``down(silu(gate(h)) * up(h))``: our fc_gate, fc_in, fc_out), no biases unless
``attention_bias`` / ``mlp_bias``, and an untied ``lm_head`` unless ``tie_word_embeddings``.
Only the default RoPE is built: a scaled RoPE (linear, dynamic, llama3, yarn, ...), a head width
other than hidden_size / num_attention_heads, an activation other than SiLU and a binding sliding
window are refused, naming the field. Files from older transformers carry each layer's
``rotary_emb.inv_freq`` buffer; it is dropped (the angles follow from ``rope_theta``).
"""

from __future__ import annotations

from typing import Any

import torch

from model.core.config import MAX_CONTEXT_LENGTH, GPTConfig
from model.formats.common import Keys, make_config
from model.formats.hf.fields import HFConfig, base_prefix, take_unembed
from model.core.plain import finite_number, short_repr

LLAMA_BUFFERS = (".self_attn.rotary_emb.inv_freq",)
ROPE_DEFAULT = 10000.0
MAX_CONTEXT = MAX_CONTEXT_LENGTH  # RoPE's angle table has a row per position


def rope_theta(cfg: HFConfig) -> float:
    """RoPE's base θ from ``rope_parameters`` (transformers 5) or ``rope_theta`` (older files);
    a scaled RoPE (``rope_scaling`` or a ``rope_type`` other than default) is refused."""
    params = cfg.get("rope_parameters")
    scaling = cfg.get("rope_scaling")
    for name, value in (("rope_parameters", params), ("rope_scaling", scaling)):
        if value is None:
            continue
        if not isinstance(value, dict):
            raise cfg.refuse(name, "expected an object")
        kind = value.get("rope_type", value.get("type", "default"))
        if kind != "default":
            raise cfg.error(f"{name}.rope_type = {short_repr(kind)}: only the default RoPE is supported, "
                            "not a scaled one (linear, dynamic, llama3, yarn, ...)")
        factor = value.get("partial_rotary_factor", 1.0)
        if factor != 1.0:
            raise cfg.error(f"{name}.partial_rotary_factor = {short_repr(factor)}: only a RoPE over the whole head is supported")
    cfg.expect("partial_rotary_factor", (1, 1.0), "only a RoPE over the whole head is supported")
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    if theta is None:
        return cfg.number("rope_theta", ROPE_DEFAULT)
    number = finite_number(theta)
    if number is None or not number > 1:
        raise cfg.error(f"rope_parameters.rope_theta = {short_repr(theta)}: expected a number above 1")
    return number


def _check_layout(cfg: HFConfig, d: int, n_heads: int, ctx: int) -> None:
    """Refuse the Llama settings this app does not build."""
    if d % n_heads:
        raise cfg.refuse("num_attention_heads", f"does not divide hidden_size ({d})")
    cfg.expect("hidden_act", ("silu",), "only the SiLU-gated MLP (SwiGLU) is supported")
    if cfg.get("head_dim") is not None and cfg.get("head_dim") != d // n_heads:
        raise cfg.refuse("head_dim", f"only hidden_size / num_attention_heads = {d // n_heads} is supported")
    window = cfg.data.get("sliding_window", 4096 if cfg.model_type == "mistral" else None)  # Mistral's default
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < ctx):
        raise cfg.refuse("sliding_window", f"a sliding window shorter than the context ({ctx}) is not supported")
    layer_types = cfg.get("layer_types", [])
    if not isinstance(layer_types, list) or any(t != "full_attention" for t in layer_types):
        raise cfg.refuse("layer_types", "only full attention in every layer is supported")


def convert_llama(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A Llama-shaped folder's config and weights as our config, tensors and notes.

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    prefix = base_prefix(keys, "model.", "embed_tokens.weight")
    emb = keys.take_matrix(prefix + "embed_tokens.weight")
    vocab, d = emb.shape
    if cfg.get("vocab_size") not in (None, vocab):
        raise cfg.refuse("vocab_size", f"but the weights have {vocab}")
    if cfg.get("hidden_size") not in (None, d):
        raise cfg.refuse("hidden_size", f"but the weights have {d}")
    n_layers = keys.layers(prefix + "layers")
    if cfg.get("num_hidden_layers") not in (None, n_layers):
        raise cfg.refuse("num_hidden_layers", f"but the weights have {n_layers} blocks")
    n_heads = cfg.positive_int("num_attention_heads")
    n_kv = cfg.positive_int("num_key_value_heads", n_heads)
    ctx = cfg.positive_int("max_position_embeddings", 2048)
    if ctx > MAX_CONTEXT:
        raise cfg.refuse("max_position_embeddings", f"more positions than this app builds ({MAX_CONTEXT:,})")
    _check_layout(cfg, d, n_heads, ctx)
    theta = rope_theta(cfg)
    attn_bias, mlp_bias = cfg.flag("attention_bias", False), cfg.flag("mlp_bias", False)
    d_mlp = keys.peek_matrix(f"{prefix}layers.0.mlp.up_proj.weight").shape[0]
    if cfg.get("intermediate_size") not in (None, d_mlp):
        raise cfg.refuse("intermediate_size", f"but the weights have {d_mlp}")
    d_head = d // n_heads
    out: dict[str, torch.Tensor] = {"tok_emb.weight": emb}
    for i in range(n_layers):
        src, dst = f"{prefix}layers.{i}.", f"blocks.{i}."
        out[dst + "ln1.weight"] = keys.take(src + "input_layernorm.weight", (d,))
        out[dst + "ln2.weight"] = keys.take(src + "post_attention_layernorm.weight", (d,))
        keys.take_linears(out, src + "self_attn.", dst + "attn.",
                          [("q_proj", "W_Q", (n_heads * d_head, d)), ("k_proj", "W_K", (n_kv * d_head, d)),
                           ("v_proj", "W_V", (n_kv * d_head, d)), ("o_proj", "W_O", (d, n_heads * d_head))],
                          bias=attn_bias)
        keys.take_linears(out, src + "mlp.", dst + "mlp.",
                          [("gate_proj", "fc_gate", (d_mlp, d)), ("up_proj", "fc_in", (d_mlp, d)),
                           ("down_proj", "fc_out", (d, d_mlp))], bias=mlp_bias)
    out["ln_f.weight"] = keys.take(prefix + "norm.weight", (d,))
    tied = take_unembed(cfg, keys, False, out, vocab, d)
    keys.finish()
    config = make_config(
        keys.path, vocab_size=vocab, context_length=ctx, d_model=d, n_heads=n_heads, n_kv_heads=n_kv,
        n_layers=n_layers, d_mlp=d_mlp, positional="rope", rope_theta=theta, rope_pairs="halves",
        norm="rmsnorm", norm_bias=False, norm_eps=cfg.number("rms_norm_eps", 1e-6), mlp="swiglu",
        qkv_bias=attn_bias, o_bias=attn_bias, mlp_bias=mlp_bias, tied_unembed=tied,
    )
    return config, out, {}
