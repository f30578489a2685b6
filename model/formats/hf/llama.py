"""Llama-shaped Hugging Face families, translated to our GPT: ``llama`` (Llama 2, TinyLlama, SmolLM),
``mistral``, ``qwen2`` (Qwen2, Qwen2.5), ``qwen3``, ``smollm3`` and ``olmo2`` (Gemma is
:mod:`model.formats.hf.gemma`, built on the same converter).

All store ``model.embed_tokens``, per layer ``self_attn.{q,k,v,o}_proj`` and a gated MLP
``mlp.{gate,up,down}_proj`` (``down(act(gate(h)) * up(h))``: our fc_gate, fc_in, fc_out; SiLU is
SwiGLU, a GELU is a gated GELU), RMSNorms, ``model.norm``, and an ``lm_head`` unless
``tie_word_embeddings``. RoPE turns q and k in the Hugging Face layout (dimension j with
j + d_head/2: ``rotate_half``). What differs is read from each family's keys, with transformers'
defaults for keys a file leaves out (:class:`Defaults`):

- llama, mistral: biases where ``attention_bias`` / ``mlp_bias``; Mistral's ``sliding_window`` in
  every layer;
- qwen2: biases on q, k and v only (never W_O); ``sliding_window`` only with ``use_sliding_window``
  and in the layers ``layer_types`` (or ``max_window_layers``) make sliding;
- qwen3: as Qwen2 without the fixed biases (``attention_bias``), with ``head_dim`` stated and
  QK-norm: ``self_attn.q_norm`` / ``k_norm`` over each head's d_head, before RoPE;
- smollm3: Llama with ``no_rope_layers`` (1 = RoPE, 0 = none; every 4th layer by default);
- olmo2: norms after attention and after the MLP and none before (``post_attention_layernorm``,
  ``post_feedforward_layernorm``), QK-norm over the whole projection width before the head split.

A head width other than hidden_size / num_attention_heads is built wherever the config states it
(``head_dim``). A scaled RoPE (``rope_type`` other than default), a partial rotary factor, an
activation we do not build, bidirectional attention are refused, naming the field. Files from older
transformers carry each layer's ``rotary_emb.inv_freq`` buffer; it is dropped (the angles follow
from the config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from model.core.config import GPTConfig
from model.formats.common import Keys, make_config
from model.formats.hf.fields import (
    GELU_NAMES, HFConfig, base_prefix, context_length, layer_sizes, mlp_width, take_unembed,
)
from model.formats.hf.layers import SLIDING, layer_types, sliding_window, windows
from model.formats.hf.rope import rope_settings

LLAMA_BUFFERS = (".self_attn.rotary_emb.inv_freq",)
#: Their norm names -> ours: pre-norm (Llama), the four of Gemma, and OLMo-2's two after the branches.
LLAMA_NORMS = (("input_layernorm", "ln1"), ("post_attention_layernorm", "ln2"))
GEMMA_NORMS = (("input_layernorm", "ln1"), ("post_attention_layernorm", "ln_attn_out"),
               ("pre_feedforward_layernorm", "ln2"), ("post_feedforward_layernorm", "ln_mlp_out"))
OLMO2_NORMS = (("post_attention_layernorm", "ln_attn_out"), ("post_feedforward_layernorm", "ln_mlp_out"))


@dataclass(frozen=True)
class Defaults:
    """A family's values for keys its config may leave out (transformers' config class defaults).

    ``n_kv`` None means num_attention_heads; ``head_dim`` None means hidden_size // num_attention_heads.
    """

    theta: float = 10000.0
    context: int = 2048
    eps: float = 1e-6
    tied: bool = False
    n_kv: int | None = None
    head_dim: int | None = None
    act_key: str = "hidden_act"
    act: str = "silu"
    window: int | None = None


@dataclass(frozen=True)
class Sizes:
    """What the weights and the config say of the model's sizes."""

    vocab: int
    d: int
    n_layers: int
    n_heads: int
    n_kv: int
    d_head: int
    ctx: int
    d_mlp: int


def gated_mlp(cfg: HFConfig, key: str, default: str) -> dict[str, str]:
    """Our ``mlp`` and ``gelu`` for a gated MLP's activation: SiLU is SwiGLU; a GELU (exact or tanh)
    a gated GELU (Gemma's ``gelu_pytorch_tanh``).

    Raises
    ------
    CheckpointError
        For another activation, naming it.
    """
    act = cfg.get(key, default)
    if act == "silu":
        return {"mlp": "swiglu"}
    if isinstance(act, str) and act in GELU_NAMES:
        return {"mlp": "geglu", "gelu": GELU_NAMES[act]}
    raise cfg.refuse(key, f"the gated MLP is built with silu or a GELU ({', '.join(GELU_NAMES)}), not this")


def _sizes(cfg: HFConfig, keys: Keys, prefix: str, emb: torch.Tensor, defaults: Defaults) -> Sizes:
    """The sizes, each checked between the config and the weights (naming the field)."""
    vocab, d, n_layers = layer_sizes(cfg, keys, prefix, emb)
    n_heads = cfg.positive_int("num_attention_heads")
    n_kv = cfg.positive_int("num_key_value_heads", defaults.n_kv or n_heads)
    if defaults.head_dim is None and cfg.get("head_dim") is None and d % n_heads:
        raise cfg.refuse("num_attention_heads", f"does not divide hidden_size ({d}) and no head_dim is given")
    d_head = cfg.positive_int("head_dim", defaults.head_dim or d // n_heads)
    ctx = context_length(cfg, defaults.context)
    d_mlp = mlp_width(cfg, keys, f"{prefix}layers.0.mlp.up_proj.weight")
    return Sizes(vocab, d, n_layers, n_heads, n_kv, d_head, ctx, d_mlp)


def rope_fields(cfg: HFConfig, n: Sizes, defaults: Defaults, types: list[str], local_theta: float | None = None) -> dict:
    """The RoPE fields for layers of ``types``: one base for every layer, or one per layer type
    (Gemma 3); whole heads only (refused otherwise, naming the factor)."""
    rope = rope_settings(cfg, defaults.theta, local_theta=local_theta)
    if rope.partial_rotary_factor != 1:
        raise cfg.error(f"partial_rotary_factor = {rope.partial_rotary_factor:g}: this family turns whole heads "
                        "(transformers applies no partial rotary to it)")
    thetas = tuple(rope.theta(t) for t in types)
    if len(set(thetas)) == 1:
        return {"rope_theta": thetas[0]}
    return {"rope_theta": rope.theta("full_attention"), "rope_thetas": thetas}


def convert_shaped(cfg: HFConfig, keys: Keys, defaults: Defaults, norms: tuple,
                   fields: Callable[[HFConfig, Sizes], dict[str, Any]]) -> tuple[GPTConfig, dict, dict]:
    """A Llama-shaped folder as our config, tensors and notes: ``norms`` (their name, ours) per
    layer, ``fields(cfg, sizes)`` the family's own GPTConfig fields (biases, windows, RoPE, ...).

    Raises
    ------
    CheckpointError
        For a setting this app does not build (naming the field) or weights that do not fit.
    """
    if cfg.flag("use_bidirectional_attention", False):
        raise cfg.refuse("use_bidirectional_attention", "only causal (decoder) attention is supported")
    prefix = base_prefix(keys, "model.", "embed_tokens.weight")
    emb = keys.take_matrix(prefix + "embed_tokens.weight")
    n = _sizes(cfg, keys, prefix, emb, defaults)
    own = {"mlp_bias": False, **gated_mlp(cfg, defaults.act_key, defaults.act), **fields(cfg, n)}
    own.setdefault("o_bias", own.get("qkv_bias", False))
    out: dict[str, torch.Tensor] = {"tok_emb.weight": emb}
    for i in range(n.n_layers):
        out.update(_layer(keys, f"{prefix}layers.{i}.", f"blocks.{i}.", n, norms, own))
    out["ln_f.weight"] = keys.take(prefix + "norm.weight", (n.d,))
    tied = take_unembed(cfg, keys, defaults.tied, out, n.vocab, n.d)
    keys.finish()
    config = make_config(
        keys.path, vocab_size=n.vocab, context_length=n.ctx, d_model=n.d, n_heads=n.n_heads, n_kv_heads=n.n_kv,
        d_head=n.d_head, n_layers=n.n_layers, d_mlp=n.d_mlp, positional="rope", rope_pairs="halves",
        norm="rmsnorm", norm_bias=False, norm_eps=cfg.number("rms_norm_eps", defaults.eps), tied_unembed=tied,
        **{"qkv_bias": False, **own},
    )
    return config, out, {}


def _layer(keys: Keys, src: str, dst: str, n: Sizes, norms: tuple, own: dict) -> dict[str, torch.Tensor]:
    """One layer's tensors under our names."""
    out: dict[str, torch.Tensor] = {}
    for theirs, ours in norms:
        out[f"{dst}{ours}.weight"] = keys.take(f"{src}{theirs}.weight", (n.d,))
    q_rows, kv_rows = n.n_heads * n.d_head, n.n_kv * n.d_head
    attn = [("q_proj", "W_Q", (q_rows, n.d)), ("k_proj", "W_K", (kv_rows, n.d)), ("v_proj", "W_V", (kv_rows, n.d))]
    keys.take_linears(out, src + "self_attn.", dst + "attn.", attn, bias=own.get("qkv_bias", False))
    keys.take_linears(out, src + "self_attn.", dst + "attn.", [("o_proj", "W_O", (n.d, q_rows))], bias=own["o_bias"])
    qk = {"head": (n.d_head, n.d_head), "full": (q_rows, kv_rows)}.get(own.get("qk_norm", "none"))
    if qk is not None:
        out[dst + "attn.q_norm.weight"] = keys.take(src + "self_attn.q_norm.weight", (qk[0],))
        out[dst + "attn.k_norm.weight"] = keys.take(src + "self_attn.k_norm.weight", (qk[1],))
    keys.take_linears(out, src + "mlp.", dst + "mlp.",
                      [("gate_proj", "fc_gate", (n.d_mlp, n.d)), ("up_proj", "fc_in", (n.d_mlp, n.d)),
                       ("down_proj", "fc_out", (n.d, n.d_mlp))], bias=own["mlp_bias"])
    return out


def _windows_from_types(cfg: HFConfig, n: Sizes, enabled: bool, derive: Callable[[int], bool]) -> tuple[list, dict]:
    """(layer types, the attn_windows field) for a family whose sliding layers need ``enabled``."""
    types = layer_types(cfg, n.n_layers, derive)
    window = sliding_window(cfg, None) if enabled else 0
    return types, {"attn_windows": windows(types, window, n.ctx)}


def _llama_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    types = ["full_attention"] * n.n_layers  # transformers' Llama and Mistral have no layer types
    bias = cfg.flag("attention_bias", False)
    fields = {"qkv_bias": bias, "o_bias": bias, "mlp_bias": cfg.flag("mlp_bias", False)}
    if cfg.model_type == "mistral":  # Mistral's window is in every layer (null: none)
        fields["attn_windows"] = windows([SLIDING] * n.n_layers, sliding_window(cfg, 4096), n.ctx)
    return {**fields, **rope_fields(cfg, n, LLAMA, types)}


def _qwen_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    use = cfg.flag("use_sliding_window", False)
    first = cfg.positive_int("max_window_layers", 28) if cfg.get("max_window_layers") != 0 else 0
    types, win = _windows_from_types(cfg, n, use, lambda i: use and i >= first)
    if cfg.model_type == "qwen2":  # transformers' Qwen2Attention: q, k, v with biases, W_O without
        fields = {"qkv_bias": True, "o_bias": False}
    else:
        bias = cfg.flag("attention_bias", False)
        fields = {"qkv_bias": bias, "o_bias": bias, "qk_norm": "head"}
    return {**fields, **win, **rope_fields(cfg, n, QWEN, types)}


def _smollm3_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    interval = cfg.positive_int("no_rope_layer_interval", 4)
    rope_on = cfg.get("no_rope_layers", [int((i + 1) % interval != 0) for i in range(n.n_layers)])
    if not isinstance(rope_on, list) or len(rope_on) != n.n_layers or any(v not in (0, 1) for v in rope_on):
        raise cfg.refuse("no_rope_layers", f"expected {n.n_layers} entries of 1 (RoPE) or 0 (no RoPE)")
    use = cfg.flag("use_sliding_window", False)
    types, win = _windows_from_types(cfg, n, use, lambda i: use and not rope_on[i])
    bias = cfg.flag("attention_bias", False)
    return {"qkv_bias": bias, "o_bias": bias, "mlp_bias": cfg.flag("mlp_bias", False), **win,
            "nope_layers": tuple(i for i, on in enumerate(rope_on) if not on), **rope_fields(cfg, n, SMOLLM3, types)}


def _olmo2_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    bias = cfg.flag("attention_bias", False)
    return {"qkv_bias": bias, "o_bias": bias, "qk_norm": "full", "norm_placement": "post",
            **rope_fields(cfg, n, OLMO2, ["full_attention"] * n.n_layers)}


LLAMA = Defaults()
QWEN = Defaults(context=32768)
SMOLLM3 = Defaults(theta=2_000_000.0, context=32768, tied=True, n_kv=4)
OLMO2 = Defaults(eps=1e-5)


def convert_llama(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``llama`` or ``mistral`` folder as our config, tensors and notes."""
    mistral = cfg.model_type == "mistral"
    defaults = Defaults(context=131072, n_kv=8) if mistral else LLAMA
    return convert_shaped(cfg, keys, defaults, LLAMA_NORMS, _llama_fields)


def convert_qwen(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``qwen2`` or ``qwen3`` folder as our config, tensors and notes."""
    return convert_shaped(cfg, keys, QWEN, LLAMA_NORMS, _qwen_fields)


def convert_smollm3(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``smollm3`` folder as our config, tensors and notes."""
    return convert_shaped(cfg, keys, SMOLLM3, LLAMA_NORMS, _smollm3_fields)


def convert_olmo2(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """An ``olmo2`` folder as our config, tensors and notes."""
    return convert_shaped(cfg, keys, OLMO2, OLMO2_NORMS, _olmo2_fields)
