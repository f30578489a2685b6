"""Hugging Face Gemma 2 (``gemma2``) and Gemma 3 (``gemma3_text``: Gemma-3-270M, 1B; ``gemma3``: 4B and up,
its language model without its vision tower), translated to our GPT.

Llama-shaped (:func:`model.formats.hf.llama.convert_shaped`) with Gemma's own arithmetic, each part
read from the config with transformers' defaults:

- four RMSNorms per block, each x / rms(x) · (1 + w) (``Gemma2RMSNorm``): ``input_layernorm`` and
  ``post_attention_layernorm`` around attention, ``pre_feedforward_layernorm`` and
  ``post_feedforward_layernorm`` around the MLP;
- the token embedding multiplied by √hidden_size;
- a gated GELU MLP (``hidden_activation``, by default ``gelu_pytorch_tanh``);
- scores multiplied by ``query_pre_attn_scalar``^(-1/2) rather than 1/√head_dim;
- sliding-window layers and global layers (``layer_types``; without it Gemma 2 alternates, sliding
  first, and Gemma 3 repeats ``sliding_window_pattern`` - 1 sliding layers and a global one), the
  window ``sliding_window``;
- Gemma 2: scores soft-capped to c·tanh(s/c) with c = ``attn_logit_softcapping`` before the mask,
  logits with ``final_logit_softcapping`` (null: none);
- Gemma 3: QK-norm (``self_attn.q_norm`` / ``k_norm`` over head_dim, also (1 + w)), a RoPE base per
  layer type (``rope_parameters.sliding_attention`` / ``full_attention``; transformers 4:
  ``rope_local_base_freq`` and ``rope_theta``), ``final_logit_softcapping``. Its
  ``attn_logit_softcapping`` is not applied by transformers' Gemma 3 and is not applied here either
  (the Model panel says so when a file sets it).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from model.core.config import GPTConfig
from model.formats.common import Keys
from model.formats.hf.fields import HFConfig
from model.formats.hf.layers import layer_types, sliding_window, windows
from model.formats.hf.llama import GEMMA_NORMS, Defaults, Sizes, rope_fields, convert_shaped

GEMMA2 = Defaults(context=8192, tied=True, n_kv=4, head_dim=256, act_key="hidden_activation",
                  act="gelu_pytorch_tanh")
GEMMA3 = Defaults(theta=1_000_000.0, context=131072, tied=True, n_kv=4, head_dim=256,
                  act_key="hidden_activation", act="gelu_pytorch_tanh")
GEMMA3_LOCAL_THETA = 10_000.0
SOFTCAP_NOTE = ("attn_logit_softcapping is set in config.json, but transformers' Gemma 3 does not apply it "
                "(only Gemma 2 soft-caps its scores), and neither does this app.")


def _cap(cfg: HFConfig, name: str, default: float | None) -> float:
    """A soft cap c from the config (``default`` when absent), 0 for null (none)."""
    if name not in cfg.data:
        return default or 0.0
    return 0.0 if cfg.data[name] is None else cfg.number(name, 0.0)


def _score_scale(cfg: HFConfig, n: Sizes) -> float | None:
    """query_pre_attn_scalar^(-1/2), or None when it is 1/√d_head itself."""
    scalar = cfg.number("query_pre_attn_scalar", 256)
    scale = scalar ** -0.5
    return None if math.isclose(scale, n.d_head ** -0.5, rel_tol=1e-12) else scale


def _gemma_fields(cfg: HFConfig, n: Sizes, types: list[str]) -> dict[str, Any]:
    """What Gemma 2 and 3 share."""
    bias = cfg.flag("attention_bias", False)
    return {"qkv_bias": bias, "o_bias": bias, "norm_unit_offset": True, "norm_placement": "sandwich",
            "embed_scale": n.d ** 0.5, "score_scale": _score_scale(cfg, n),
            "attn_windows": windows(types, sliding_window(cfg, 4096), n.ctx)}


def _gemma2_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    types = layer_types(cfg, n.n_layers, lambda i: bool((i + 1) % 2))
    return {**_gemma_fields(cfg, n, types), **rope_fields(cfg, n, GEMMA2, types),
            "attn_softcap": _cap(cfg, "attn_logit_softcapping", 50.0),
            "final_softcap": _cap(cfg, "final_logit_softcapping", 30.0)}


def _gemma3_fields(cfg: HFConfig, n: Sizes) -> dict[str, Any]:
    pattern = cfg.positive_int("sliding_window_pattern", cfg.positive_int("_sliding_window_pattern", 6))
    types = layer_types(cfg, n.n_layers, lambda i: bool((i + 1) % pattern))
    return {**_gemma_fields(cfg, n, types), **rope_fields(cfg, n, GEMMA3, types, local_theta=GEMMA3_LOCAL_THETA),
            "qk_norm": "head", "final_softcap": _cap(cfg, "final_logit_softcapping", None)}


def convert_gemma2(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gemma2`` folder as our config, tensors and notes."""
    return convert_shaped(cfg, keys, GEMMA2, GEMMA_NORMS, _gemma2_fields)


def convert_gemma3_text(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gemma3_text`` folder as our config, tensors and notes."""
    config, tensors, notes = convert_shaped(cfg, keys, GEMMA3, GEMMA_NORMS, _gemma3_fields)
    if cfg.get("attn_logit_softcapping") is not None:
        notes = {**notes, "note": SOFTCAP_NOTE}
    return config, tensors, notes


#: Where a Gemma 3 with its vision tower (``Gemma3ForConditionalGeneration``) keeps its language model's
#: tensors (transformers writes ``language_model.model.``; files saved from its in-memory names have
#: ``model.language_model.``), and the parts left out: the vision tower and the multimodal projector.
LANGUAGE_PREFIXES = (("language_model.model.", "model."), ("model.language_model.", "model."),
                     ("language_model.lm_head.", "lm_head."))
VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.")


def convert_gemma3(cfg: HFConfig, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """A ``gemma3`` folder (Gemma 3 4B and larger: a ``gemma3_text`` model in ``text_config`` beside a
    vision tower) as the text model's config, tensors and notes; the vision tower and the multimodal
    projector are left out (named in the notes).

    Raises
    ------
    CheckpointError
        When ``text_config`` is missing or is not a Gemma 3 text model, and as :func:`convert_gemma3_text`.
    """
    text = cfg.get("text_config")
    if not isinstance(text, dict) or text.get("model_type", "gemma3_text") != "gemma3_text":
        raise cfg.refuse("text_config", "expected the object of a gemma3_text model")
    data = {"model_type": "gemma3_text", **text}
    if data.get("tie_word_embeddings") is None:  # said by the outer config only
        data["tie_word_embeddings"] = cfg.get("tie_word_embeddings")
    text_cfg = HFConfig(cfg.folder, data)
    tensors, vision = {}, 0
    for name, t in keys.left.items():
        if name.startswith(VISION_PREFIXES):
            vision += 1
            continue
        for theirs, ours in LANGUAGE_PREFIXES:
            if name.startswith(theirs):
                name = ours + name[len(theirs):]
                break
        tensors[name] = t
    config, ours, notes = convert_gemma3_text(text_cfg, Keys(keys.path, keys.fmt, tensors))
    note = (f"Gemma 3 with a vision tower: its language model is shown; the vision tower and the multimodal "
            f"projector ({vision} tensors) are left out, so images cannot be given.")
    return config, ours, {**notes, "note": f"{notes['note']} {note}" if "note" in notes else note}
