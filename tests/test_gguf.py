"""GGUF files (llama.cpp's format): exact agreement with transformers' GGUF loader on the fixtures in
tests/fixtures/arch3 (llama in F32, F16, Q8_0, Q4_0; qwen2 in F16, Q8_0), the K-quants against a model
built from gguf-py's dequantisation of the same blocks, llama.cpp's Q/K permutation undone (and
shown to matter), and every refusal naming its key, tensor or type."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.quants import dequantize, quantize
from safetensors.torch import save_file

from gguf_files import ARCH3, KQUANT_FILE, LLAMA, QWEN2, REFERENCED, gguf_file, reference, rewrite
from model.checkpoint import CheckpointError, NeedsInput, ReaderFailure, load_any, load_checkpoint, save_as
from model.formats.gguf import archs
from model.formats.gguf.tensors import unpermute
from model.trace import main as trace_main

Q = GGMLQuantizationType
V = GGUFValueType


def _attention(trace) -> np.ndarray:
    return np.stack([block.attn_weights for block in trace.blocks])  # (n_layers, n_heads, T, T)


@pytest.mark.parametrize(("folder", "type_name"), REFERENCED, ids=[f"{f.name}-{t}" for f, t in REFERENCED])
def test_every_fixture_file_agrees_with_the_reference(folder, type_name):
    ckpt = load_any(gguf_file(folder, type_name))
    ref = reference(folder, type_name)
    ids = ckpt.tokenizer.encode(str(ref["text"])).ids
    assert list(ids) == ref["token_ids"].tolist()  # the text tokenizes exactly (llama's <s> included)
    trace = ckpt.model.trace(ids)
    np.testing.assert_allclose(trace.logits, ref["logits"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(_attention(trace), ref["attn_weights"], rtol=0, atol=1e-5)
    ours = [trace.x] + [block.resid_post for block in trace.blocks[:-1]] + [trace.ln_final]
    np.testing.assert_allclose(np.stack(ours), ref["hidden_states"], rtol=0, atol=1e-4)
    assert ckpt.source_format == "gguf-" + folder.name.removeprefix("gguf-")
    types = {t.kind: t.type_name for t in ckpt.storage.tensors}
    assert types["norms"] == "F32" and types["attention"] == types["MLP"] == types["token embedding"] == type_name


def test_the_configs_follow_each_files_metadata():
    llama, qwen2 = load_any(gguf_file(LLAMA, "F32")).config, load_any(gguf_file(QWEN2, "F16")).config
    assert (llama.n_heads, llama.n_kv_heads, llama.d_mlp, llama.context_length, llama.rope_theta) == (4, 2, 160, 128, 1e4)
    assert (llama.qkv_bias, llama.tied_unembed, llama.rope_pairs, llama.norm, llama.mlp) == (False, True, "halves", "rmsnorm", "swiglu")
    assert (qwen2.d_mlp, qwen2.rope_theta, qwen2.qkv_bias, qwen2.o_bias, qwen2.vocab_size) == (128, 1e6, True, False, 640)
    assert abs(llama.norm_eps - 1e-5) < 1e-12 and abs(qwen2.norm_eps - 1e-6) < 1e-13


def test_the_storage_says_each_tensors_type_and_cost():
    storage = load_any(gguf_file(LLAMA, "Q8_0")).storage
    q = next(t for t in storage.tensors if t.name == "blk.0.attn_q.weight")
    assert (q.type_name, q.block_size, q.block_bytes, q.bits_per_weight, q.n_weights) == ("Q8_0", 32, 34, 8.5, 64 * 64)
    assert storage.stored_bytes == sum(t.n_bytes for t in storage.tensors) < storage.float32_bytes
    assert storage.container == "GGUF" and storage.dequantize_s > 0


def test_q8_0_weights_are_each_blocks_scale_times_its_int8_values():
    """Decoded here from the raw bytes (fp16 d, then 32 int8 q: w = d·q), not with gguf-py's code."""
    raw = next(t for t in GGUFReader(gguf_file(LLAMA, "Q8_0")).tensors if t.name == "blk.1.attn_v.weight")
    blocks = np.asarray(raw.data).reshape(-1, 34)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (blocks, 1)
    q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)  # (blocks, 32)
    expected = (d * q).reshape(32, 64)  # (n_kv_heads · d_head, d_model): rows are ne1, as a Linear's
    model = load_any(gguf_file(LLAMA, "Q8_0")).model
    assert torch.equal(model.blocks[1].attn.W_V.weight, torch.from_numpy(expected))


def _llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """What convert_hf_to_gguf.py's LlamaModel.permute does to q (n_heads) or k (n_kv_heads)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hf_unpermute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Its inverse, written as the fixture's README gives it."""
    return w.reshape(n_heads, w.shape[0] // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.parametrize(("n_heads", "shape"), [(4, (64, 64)), (2, (32, 64)), (4, (64,)), (8, (512, 3))])
def test_unpermute_undoes_llama_cpps_permutation_exactly(n_heads, shape):
    w = np.random.default_rng(n_heads).normal(size=shape).astype(np.float32)
    stored = torch.from_numpy(_llama_cpp_permute(w, n_heads))
    assert torch.equal(unpermute(LLAMA, "attn_q", stored, n_heads), torch.from_numpy(w))
    assert not torch.equal(stored, torch.from_numpy(w))


def test_the_permutation_matters(monkeypatch):
    ref = reference(LLAMA, "F32")
    monkeypatch.setattr(archs, "unpermute", lambda _path, _name, t, _n: t)  # q and k as the file holds them
    logits = load_any(gguf_file(LLAMA, "F32")).model.trace(ref["token_ids"]).logits
    assert np.abs(logits - ref["logits"]).max() > 0.1


def test_qwen2_files_are_not_permuted(monkeypatch):
    calls = []
    monkeypatch.setattr(archs, "unpermute", lambda _path, name, t, _n: calls.append(name) or t)
    load_any(gguf_file(QWEN2, "F16"))
    assert calls == []
    load_any(gguf_file(LLAMA, "F16"))
    assert len(calls) == 4  # attn_q and attn_k of both blocks


def _hf_folder_from_blocks(folder, path) -> None:
    """A Hugging Face Llama folder holding gguf-py's dequantisation of ``path``'s blocks, Q and K rows
    put back with this test's own inverse of the permutation (the HF reader is tested against
    transformers in test_hf_folders.py)."""
    reader = GGUFReader(path)
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("llama.")}
    w = {t.name: torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)) for t in reader.tensors}
    n_heads, n_kv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    state = {"model.embed_tokens.weight": w["token_embd.weight"], "model.norm.weight": w["output_norm.weight"]}
    names = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for i in range(meta["llama.block_count"]):
        for theirs, hf in names.items():
            t = w[f"blk.{i}.{theirs}.weight"]
            if theirs in ("attn_q", "attn_k"):
                t = torch.from_numpy(_hf_unpermute(t.numpy(), n_heads if theirs == "attn_q" else n_kv))
            state[f"model.layers.{i}.{hf}.weight"] = t.contiguous()
    folder.mkdir()
    save_file(state, folder / "model.safetensors")
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 512,
              "hidden_size": meta["llama.embedding_length"], "intermediate_size": meta["llama.feed_forward_length"],
              "num_hidden_layers": meta["llama.block_count"], "num_attention_heads": n_heads,
              "num_key_value_heads": n_kv, "max_position_embeddings": meta["llama.context_length"],
              "rms_norm_eps": meta["llama.attention.layer_norm_rms_epsilon"], "rope_theta": meta["llama.rope.freq_base"],
              "tie_word_embeddings": True, "hidden_act": "silu"}
    (folder / "config.json").write_text(json.dumps(config))


def test_k_quants_agree_with_a_model_built_from_the_dequantised_blocks(tmp_path):
    _hf_folder_from_blocks(tmp_path / "reference", KQUANT_FILE)
    expected = load_any(tmp_path / "reference", allow_no_tokenizer=True).model
    ckpt = load_any(KQUANT_FILE)
    ref = reference(LLAMA, "F32")  # the same vocabulary: the same text gives the same ids
    ids = ckpt.tokenizer.encode(str(ref["text"])).ids
    assert list(ids) == ref["token_ids"].tolist()
    ours, theirs = ckpt.model.trace(ids), expected.trace(ids)
    np.testing.assert_allclose(ours.logits, theirs.logits, rtol=0, atol=1e-4)
    np.testing.assert_allclose(_attention(ours), _attention(theirs), rtol=0, atol=1e-5)
    assert ours.logits.std(-1).min() > 1 and _attention(ours)[:, :, 1:].max(-1).min() < 0.9  # informative
    kinds = {(t.kind, t.type_name) for t in ckpt.storage.tensors}
    assert {("attention", "Q4_K"), ("attention", "Q6_K"), ("MLP", "Q4_K"), ("MLP", "Q6_K"),
            ("token embedding", "Q6_K"), ("norms", "F32")} == kinds
    assert ckpt.training["file type"] == "Q4_K_M"


def test_bf16_weights_are_the_f32_weights_rounded(tmp_path):
    def to_bf16(name, data, qtype):
        return (quantize(data, Q.BF16), Q.BF16) if data.ndim == 2 else (data, qtype)

    path = rewrite(gguf_file(LLAMA, "F32"), tmp_path / "model-BF16.gguf", tensors=to_bf16)
    bf16, f32 = load_any(path), load_any(gguf_file(LLAMA, "F32"))
    a, b = bf16.model.blocks[0].attn.W_Q.weight, f32.model.blocks[0].attn.W_Q.weight
    assert torch.equal(a, b.to(torch.bfloat16).float()) and not torch.equal(a, b)
    assert {t.type_name for t in bf16.storage.tensors if t.kind == "attention"} == {"BF16"}


def test_save_as_reopens_identically(tmp_path):
    ckpt = load_any(gguf_file(QWEN2, "Q8_0"))
    save_as(ckpt, tmp_path / "qwen2.safetensors")
    again = load_checkpoint(tmp_path / "qwen2.safetensors")
    text = str(reference(QWEN2, "Q8_0")["text"])
    assert again.tokenizer.encode(text).ids == ckpt.tokenizer.encode(text).ids
    ids = ckpt.tokenizer.encode(text).ids
    assert np.array_equal(again.model.trace(ids).logits, ckpt.model.trace(ids).logits)
    assert again.training["imported_from"] == {"format": "gguf-qwen2", "file": "model-Q8_0.gguf"}


def test_the_trace_command_opens_a_gguf_file(capsys):
    assert trace_main([str(gguf_file(LLAMA, "Q8_0")), "once upon a time", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "<s>" in out and " once" in out


# ---------------------------------------------------------------- refusals, each naming what it refuses


def _refused(path, pattern: str, **options) -> str:
    with pytest.raises(CheckpointError) as info:
        load_any(path, **options)
    assert not isinstance(info.value, (ReaderFailure, NeedsInput)), (str(info.value), info.value.__cause__)
    message = str(info.value)
    assert message.startswith(path.name + ": ") and "\n" not in message, message
    assert re.search(pattern, message), message
    return message


def test_an_unknown_architecture_is_named_with_the_ones_we_open(tmp_path):
    path = rewrite(gguf_file(LLAMA, "F32"), tmp_path / "gemma.gguf", arch="gemma3")
    _refused(path, r"general.architecture = 'gemma3': not an architecture this app opens from GGUF; "
                   r"it opens llama \(.*\), qwen2 \(.*\) and qwen3 \(Qwen3\)")


def test_an_unsupported_type_is_named(tmp_path):
    def q5(name, data, qtype):
        if name == "blk.0.ffn_up.weight":
            return quantize(np.array(dequantize(data, qtype), dtype=np.float32), Q.Q5_0), Q.Q5_0
        return data, qtype

    path = rewrite(gguf_file(LLAMA, "Q8_0"), tmp_path / "q5.gguf", tensors=q5)
    _refused(path, r"tensor blk.0.ffn_up.weight is stored as Q5_0: this app dequantises F32, F16, BF16, Q8_0, "
                   r"Q4_0, Q4_K and Q6_K$")


@pytest.mark.parametrize(("keys", "pattern"), [
    ({"llama.rope.scaling.type": ("linear", V.STRING)}, r"llama.rope.scaling.type = 'linear': only RoPE without scaling"),
    ({"llama.rope.scaling.factor": (4.0, V.FLOAT32)}, r"llama.rope.scaling.factor = 4.0: only RoPE without scaling"),
    ({"llama.attention.scale": (0.5, V.FLOAT32)}, r"llama.attention.scale = 0.5: a setting this app does not build"),
    ({"llama.expert_count": (8, V.UINT32)}, r"llama.expert_count = 8: mixture-of-experts"),
    ({"llama.attention.head_count": (3, V.UINT32)}, r"llama.attention.head_count = 3: does not divide embedding_length"),
    ({"llama.block_count": (3, V.UINT32)}, r"llama.block_count = 3: but the blocks in the file are 2"),
    ({"llama.rope.dimension_count": (8, V.UINT32)}, r"llama.rope.dimension_count = 8: but RoPE here turns every"),
    ({"llama.attention.value_length": (32, V.UINT32)}, r"llama.attention.value_length = 32: but only values as wide as "
                                                       r"the keys are supported: key_length is 16"),
    ({"llama.attention.key_length": (32, V.UINT32)}, r"llama.rope.dimension_count = 16: but RoPE here turns every "
                                                     r"dimension of a head of width 32"),
    ({"llama.context_length": ("long", V.STRING)}, r"llama.context_length = 'long': expected a whole number"),
    ({"tokenizer.ggml.model": ("bert", V.STRING)}, r"tokenizer.ggml.model = 'bert': not a vocabulary this app builds"),
    ({"tokenizer.ggml.bos_token_id": (600, V.UINT32)}, r"tokenizer.ggml.bos_token_id = 600: not one of the 512 tokens"),
])
def test_a_setting_we_do_not_build_is_named(tmp_path, keys, pattern):
    _refused(rewrite(gguf_file(LLAMA, "F32"), tmp_path / "odd.gguf", set_keys=keys), pattern)


def test_an_unknown_pre_tokenizer_is_named(tmp_path):
    path = rewrite(gguf_file(QWEN2, "F16"), tmp_path / "tekken.gguf", set_keys={"tokenizer.ggml.pre": ("tekken", V.STRING)})
    _refused(path, r"tokenizer.ggml.pre = 'tekken': not a pre-tokenizer this app builds \(it builds gpt-2, .*qwen2")


@pytest.mark.parametrize(("drop", "extra", "pattern"), [
    ("blk.1.ffn_down.weight", None, r"has no blk.1.ffn_down.weight"),
    ("output_norm.weight", None, r"has no output_norm.weight"),
    (None, "rope_freqs.weight", r"rope_freqs.weight: Llama 3's scaled RoPE"),
    (None, "blk.0.attn_extra.weight", r"unexpected tensor\(s\) in a GGUF file: blk.0.attn_extra.weight"),
])
def test_a_missing_or_unexpected_tensor_is_named(tmp_path, drop, extra, pattern):
    def edit(name, data, qtype):
        return None if name == drop else (data, qtype)

    added = {extra: np.ones(8, dtype=np.float32)} if extra else None
    _refused(rewrite(gguf_file(LLAMA, "F32"), tmp_path / "odd.gguf", tensors=edit, add=added), pattern)


def test_a_file_without_a_vocabulary_asks_for_one_or_opens_without(tmp_path):
    path = rewrite(gguf_file(LLAMA, "F32"), tmp_path / "novocab.gguf",
                   drop=("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"))
    with pytest.raises(NeedsInput) as info:
        load_any(path)
    assert info.value.kind == "vocab"
    ckpt = load_any(path, allow_no_tokenizer=True)
    assert ckpt.tokenizer is None and ckpt.source_format == "gguf-llama"


def test_the_header_is_checked_before_the_package_walks_it(tmp_path):
    data = bytearray(gguf_file(LLAMA, "F32").read_bytes())
    (tmp_path / "v9.gguf").write_bytes(data[:4] + struct.pack("<I", 9) + data[8:])
    _refused(tmp_path / "v9.gguf", r"it is GGUF version 9; versions 2, 3 are read")
    (tmp_path / "big.gguf").write_bytes(data[:4] + struct.pack(">I", 3) + data[8:])
    _refused(tmp_path / "big.gguf", r"big-endian GGUF file")
    (tmp_path / "count.gguf").write_bytes(data[:8] + struct.pack("<Q", 2**60) + data[16:])
    _refused(tmp_path / "count.gguf", r"counts 1,152,921,504,606,846,976 tensors")


@pytest.mark.parametrize("path", [gguf_file(LLAMA, "Q4_0"), gguf_file(QWEN2, "F16"), KQUANT_FILE], ids=lambda p: p.name)
def test_the_bounded_reader_reads_what_the_packages_reader_reads(path):
    """model/formats/gguf/file.py replaces two of GGUFReader's private reads (pinned gguf 0.19): the
    result must stay the package's, field by field and tensor by tensor."""
    from model.formats.gguf.file import BoundedReader

    ours, theirs = BoundedReader(path), GGUFReader(path)
    assert type(ours.data) is np.ndarray and list(ours.fields) == list(theirs.fields)
    for key, field in theirs.fields.items():
        assert ours.fields[key].contents() == field.contents() and ours.fields[key].types == field.types, key
    for a, b in zip(ours.tensors, theirs.tensors, strict=True):
        assert (a.name, a.tensor_type, a.n_bytes, a.data_offset) == (b.name, b.tensor_type, b.n_bytes, b.data_offset)
        assert np.array_equal(a.shape, b.shape) and np.array_equal(a.data, b.data) and a.data.dtype == b.data.dtype


def test_a_model_folder_with_a_gguf_file_but_no_weights_says_to_open_that_file(tmp_path):
    folder = tmp_path / "TinyLlama-GGUF"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    for name in ("model-Q8_0.gguf", "model-F16.gguf"):
        (folder / name).write_bytes(gguf_file(LLAMA, name.removeprefix("model-").removesuffix(".gguf")).read_bytes())
    _refused(folder, r"no weights: looked for .*; a GGUF file is a model by itself: open model-F16.gguf "
                     r"\(or the other one\)$")
    assert load_any(folder / "model-F16.gguf").source_format == "gguf-llama"


@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0])
def test_a_qwen3_gguf_is_its_hugging_face_model(tmp_path, qtype):
    """GGUF qwen3 (convert_hf_to_gguf.py's Qwen3Model layout: head_dim in attention.key_length, attn_q_norm and
    attn_k_norm, no permutation), written from tests/fixtures/arch3/hf-qwen3: in F32 it is transformers' model
    of that folder (reference.npz) within float rounding, its text tokenizes to the same ids; in Q8_0 close."""
    from gguf_files import qwen3_from_folder

    folder = ARCH3 / "hf-qwen3"
    path = qwen3_from_folder(folder, tmp_path / f"qwen3-{qtype.name}.gguf", qtype)
    if qtype == Q.F32:  # the stored fixture is this file, byte for byte
        assert path.read_bytes() == (ARCH3 / "gguf-qwen3" / "model-F32.gguf").read_bytes()
    ckpt = load_any(path)
    ref = np.load(folder / "reference.npz")
    assert ckpt.source_format == "gguf-qwen3" and ckpt.training["architecture"] == "qwen3"
    cfg = ckpt.config
    assert (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.qk_norm, cfg.qkv_bias) == (48, 4, 16, "head", False)
    assert list(ckpt.tokenizer.encode(str(ref["text"])).ids) == ref["token_ids"].tolist()
    trace = ckpt.model.trace(ref["token_ids"])
    if qtype == Q.F32:
        np.testing.assert_allclose(trace.logits, ref["logits"], rtol=0, atol=1e-4)
        attn = np.stack([b.attn_weights for b in trace.blocks])
        np.testing.assert_allclose(attn, ref["attn_weights"], rtol=0, atol=1e-5)
    else:
        assert np.abs(trace.logits - ref["logits"]).max() < 0.5
        assert {t.type_name for t in ckpt.storage.tensors if t.kind == "norms"} == {"F32"}
    without = rewrite(path, tmp_path / "no-norm.gguf", tensors=lambda n, d, t: None if n.endswith("attn_q_norm.weight")
                      else (d, t))
    _refused(without, r"has no blk.0.attn_q_norm.weight")
