"""GGUF fixtures for the tests, and variants of them written with gguf-py's own writer.

:func:`rewrite` copies a GGUF file with some metadata entries changed, added or dropped and some
tensors replaced (their type too), so that each refusal and each quirk can be tried on a file
that is otherwise exactly the fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

ARCH3 = Path(__file__).parent / "fixtures" / "arch3"
LLAMA, QWEN2, KQUANTS = ARCH3 / "gguf-llama", ARCH3 / "gguf-qwen2", ARCH3 / "gguf-kquants"
#: (fixture folder, storage type) of every GGUF file with a reference-<TYPE>.npz.
REFERENCED = [(LLAMA, t) for t in ("F32", "F16", "Q8_0", "Q4_0")] + [(QWEN2, t) for t in ("F16", "Q8_0")]
KQUANT_FILE = KQUANTS / "model-Q4_K_M.gguf"


def gguf_file(folder: Path, type_name: str) -> Path:
    return folder / f"model-{type_name}.gguf"


def reference(folder: Path, type_name: str):
    return np.load(folder / f"reference-{type_name}.npz")


#: A tensor replacement: name -> (array, storage type) or None to drop it.
Tensors = Callable[[str, np.ndarray, GGMLQuantizationType], tuple[np.ndarray, GGMLQuantizationType] | None]


def rewrite(src: Path, dst: Path, *, arch: str | None = None, set_keys: dict[str, tuple[Any, GGUFValueType]] | None = None,
            drop: tuple[str, ...] = (), tensors: Tensors | None = None, add: dict[str, np.ndarray] | None = None) -> Path:
    """Copy the GGUF file ``src`` to ``dst``: ``general.architecture`` = ``arch``, the entries of
    ``set_keys`` (key -> (value, type)) set, the keys in ``drop`` left out, each tensor passed
    through ``tensors(name, data, type)`` (its result written as it is; None drops the tensor),
    and the float32 tensors of ``add`` written after them."""
    reader = GGUFReader(src)
    old_arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(dst), arch or old_arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop or key in (set_keys or {}):
            continue
        if arch and key.startswith(old_arch + "."):
            new_key = arch + key[len(old_arch):]
        else:
            new_key = key
        sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(new_key, field.contents(), field.types[0], sub_type=sub)
    for key, (value, vtype) in (set_keys or {}).items():
        sub = None
        if vtype == GGUFValueType.ARRAY:
            sub = GGUFValueType.STRING if isinstance(value[0], str) else GGUFValueType.INT32
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for t in reader.tensors:
        data, qtype = np.array(t.data), t.tensor_type
        replaced = tensors(t.name, data, qtype) if tensors is not None else (data, qtype)
        if replaced is None:
            continue
        data, qtype = replaced
        float_type = qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16)
        writer.add_tensor(t.name, data, raw_dtype=None if float_type else qtype)
    for name, data in (add or {}).items():
        writer.add_tensor(name, data.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def qwen3_from_folder(folder: Path, dst: Path, qtype: GGMLQuantizationType = GGMLQuantizationType.F32) -> Path:
    """A ``qwen3`` GGUF file of a Hugging Face Qwen3 folder, written with gguf-py's writer as llama.cpp's
    ``convert_hf_to_gguf.py`` (``Qwen3Model``) writes one: its keys (``attention.key_length`` and
    ``value_length`` from head_dim), its tensor names (``blk.N.attn_q_norm`` / ``attn_k_norm``), q and k
    not permuted (NEOX-style RoPE), matrices in ``qtype`` (F16 where a row is no whole number of its
    blocks, as llama.cpp falls back) and vectors in F32, and the vocabulary of the
    qwen2 GGUF fixture (the same Qwen2-style BPE as the folder's tokenizer.json)."""
    import json

    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    hf = load_file(folder / "model.safetensors")
    writer = GGUFWriter(str(dst), "qwen3")
    writer.add_name(f"{folder.name} {qtype.name}")
    for key, value in (("block_count", cfg["num_hidden_layers"]), ("context_length", cfg["max_position_embeddings"]),
                       ("embedding_length", cfg["hidden_size"]), ("feed_forward_length", cfg["intermediate_size"]),
                       ("attention.head_count", cfg["num_attention_heads"]),
                       ("attention.head_count_kv", cfg["num_key_value_heads"]),
                       ("attention.key_length", cfg["head_dim"]), ("attention.value_length", cfg["head_dim"])):
        writer.add_uint32(f"qwen3.{key}", value)
    writer.add_float32("qwen3.rope.freq_base", cfg["rope_parameters"]["rope_theta"])
    writer.add_float32("qwen3.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    vocab = GGUFReader(gguf_file(QWEN2, "F16"))
    for key, field in vocab.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, data in sorted(hf.items()):
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            name_out = f"blk.{i}.{parts[rest.rsplit('.', 1)[0]]}.weight"
        else:
            name_out = names[name]
        data = np.ascontiguousarray(data, dtype=np.float32)
        block = gguf.GGML_QUANT_SIZES[qtype][0]
        if data.ndim == 2 and qtype != GGMLQuantizationType.F32 and data.shape[-1] % block == 0:
            writer.add_tensor(name_out, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        elif data.ndim == 2 and qtype != GGMLQuantizationType.F32:  # rows not of whole blocks: F16, as llama.cpp
            writer.add_tensor(name_out, data.astype(np.float16))
        else:
            writer.add_tensor(name_out, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst
