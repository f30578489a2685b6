"""Hugging Face model folders (GPT-2, GPT-Neo, Llama): exact agreement with transformers' own outputs
(tests/fixtures/arch, written by transformers 5.24), and the files people have: mask buffers, base-model
names, pytorch_model.bin, shards, a tied Llama, older config keys, and every refusal naming its field."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_reference import assert_agrees
from model.checkpoint import CheckpointError, NeedsInput, load_any, load_checkpoint, save_as
from model.trace import main as trace_main

ARCH = Path(__file__).parent / "fixtures" / "arch"
FIXTURES = ("hf-gpt2", "hf-gpt-neo", "hf-llama")


def _reference(name: str):
    return np.load(ARCH / name / "reference.npz")


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(ARCH / name, tmp_path / name))


def _edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def _check_logits(ckpt, name: str) -> None:
    ref = _reference(name)
    np.testing.assert_allclose(ckpt.model.trace(ref["token_ids"]).logits, ref["logits"], rtol=0, atol=1e-4)


# ---------------------------------------------------------------- the reference fixtures


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_agrees_with_transformers(name):
    ckpt = load_any(ARCH / name)
    assert_agrees(ckpt, _reference(name))  # ids, logits, attention, hidden states (tests/hf_reference.py)
    assert ckpt.source_format == name and ckpt.path == ARCH / name and ckpt.name == name


def test_the_configs_say_what_each_family_is():
    gpt2, neo, llama = (load_any(ARCH / name).config for name in FIXTURES)
    assert (gpt2.gelu, gpt2.qkv_bias, gpt2.scale_scores, gpt2.tied_unembed) == ("tanh", True, True, True)
    assert (neo.scale_scores, neo.attn_windows, neo.qkv_bias, neo.d_mlp) == (False, (0, 8, 0, 8), False, 128)
    assert (llama.positional, llama.rope_pairs, llama.norm, llama.mlp) == ("rope", "halves", "rmsnorm", "swiglu")
    assert (llama.n_heads, llama.n_kv_heads, llama.tied_unembed, llama.o_bias) == (4, 2, False, False)


@pytest.mark.parametrize("name", FIXTURES)
def test_save_as_reopens_identically(tmp_path, name):
    ckpt = load_any(ARCH / name)
    out = tmp_path / f"{name}.safetensors"
    save_as(ckpt, out)
    again = load_checkpoint(out)
    assert again.config == ckpt.config and again.tokenizer.to_json() == ckpt.tokenizer.to_json()
    assert again.tokenizer.kind == ckpt.tokenizer.kind and again.tokenizer.prefix_ids == ckpt.tokenizer.prefix_ids
    text = str(_reference(name)["text"])
    assert again.tokenizer.encode(text) == ckpt.tokenizer.encode(text)
    ids = _reference(name)["token_ids"]
    np.testing.assert_array_equal(again.model.trace(ids).logits, ckpt.model.trace(ids).logits)
    assert again.training["imported_from"] == {"format": name, "file": name}
    assert again.training["model_type"] == ckpt.training["model_type"]


def test_a_config_json_or_weight_file_stands_for_its_folder():
    for path in (ARCH / "hf-llama" / "config.json", ARCH / "hf-gpt2" / "model.safetensors"):
        ckpt = load_any(path)
        assert ckpt.path == path.parent and ckpt.source_format == f"{path.parent.name}"


def test_trace_cli_takes_a_folder_and_shows_readable_tokens(capsys):
    assert trace_main([str(ARCH / "hf-gpt2"), "once upon a time", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["on", "ce", " upon", " a", " time"]
    assert trace_main([str(ARCH / "hf-llama" / "config.json"), "once upon", "--top-k", "2"]) == 0
    assert "[0]<s> [1] once [2] upon" in capsys.readouterr().out


def test_a_folder_without_tokenizer_files_asks_for_one_and_ids_still_work(tmp_path, capsys):
    folder = _copy(tmp_path, "hf-llama")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(NeedsInput) as info:
        load_any(folder)
    assert info.value.kind == "vocab" and folder / "tokenizer.json" in info.value.searched
    assert load_any(folder, allow_no_tokenizer=True).tokenizer is None
    assert trace_main([str(folder), "--ids", "1,444,468", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == ["#1", "#444", "#468"]
    ckpt = load_any(folder, vocab_path=ARCH / "hf-llama" / "tokenizer.json")
    assert ckpt.tokenizer.encode("once").ids == (1, 444)


# ---------------------------------------------------------------- files people have


def test_old_gpt2_bin_with_mask_buffers_and_base_names(tmp_path):
    """transformers 3/4 saved each layer's causal mask (attn.bias, attn.masked_bias) and, for the hub's own
    gpt2, the base model's names (h.0..., wte) with no LM head; it is tied all the same."""
    folder = _copy(tmp_path, "hf-gpt2")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    old = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    for i in range(2):
        old[f"h.{i}.attn.bias"] = torch.tril(torch.ones(64, 64, dtype=torch.uint8)).view(1, 1, 64, 64)
        old[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(old, folder / "pytorch_model.bin")
    ckpt = load_any(folder)
    _check_logits(ckpt, "hf-gpt2")
    assert ckpt.training["weights"] == "pytorch_model.bin"


def test_sharded_safetensors_index(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:9], "model-00002-of-00002.safetensors": names[9:]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, folder / shard, metadata={"format": "pt"})
    index = {"metadata": {"total_size": 0}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    ckpt = load_any(folder)
    _check_logits(ckpt, "hf-llama")
    assert ckpt.training["shards"] == 2
    assert load_any(folder / "model-00002-of-00002.safetensors").path == folder  # a shard stands for its folder
    index["weight_map"]["lm_head.weight"] = "../model-00001-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="not a file in this folder"):
        load_any(folder)


def test_sharded_gpt_neo_bin_with_its_mask_buffers(tmp_path):
    folder = _copy(tmp_path, "hf-gpt-neo")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    for i in range(4):
        tensors[f"transformer.h.{i}.attn.attention.bias"] = torch.tril(torch.ones(1, 1, 64, 64, dtype=torch.bool))
        tensors[f"transformer.h.{i}.attn.attention.masked_bias"] = torch.tensor(-1e9)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"]  # older files stored the tied head too
    names = sorted(tensors)
    weight_map = {k: f"pytorch_model-0000{1 + (j % 2)}-of-00002.bin" for j, k in enumerate(names)}
    for shard in set(weight_map.values()):
        torch.save({k: tensors[k] for k in names if weight_map[k] == shard}, folder / shard)
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    _check_logits(load_any(folder), "hf-gpt-neo")


def test_llama_from_older_transformers(tmp_path):
    """A top-level rope_theta, rope_scaling null and each layer's rotary_emb.inv_freq buffer."""
    folder = _copy(tmp_path, "hf-llama")
    _edit_config(folder, rope_parameters=None, rope_theta=10000.0, rope_scaling=None, head_dim=None)
    tensors = load_file(folder / "model.safetensors")
    for i in range(2):
        tensors[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8)
    save_file(tensors, folder / "model.safetensors")
    _check_logits(load_any(folder), "hf-llama")


def test_a_tied_llama_without_lm_head(tmp_path):
    """SmolLM-style: tie_word_embeddings true and no lm_head.weight; the logits use the embedding table."""
    folder = _copy(tmp_path, "hf-llama")
    _edit_config(folder, tie_word_embeddings=True, model_type="smol_custom")  # the architecture says Llama
    tensors = load_file(folder / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, folder / "model.safetensors")
    ckpt = load_any(folder)
    assert ckpt.config.tied_unembed and ckpt.source_format == "hf-llama"
    trace = ckpt.model.trace(_reference("hf-llama")["token_ids"])
    expected = trace.ln_final @ tensors["model.embed_tokens.weight"].numpy().T
    np.testing.assert_allclose(trace.logits, expected, rtol=0, atol=1e-5)
    _edit_config(folder, tie_word_embeddings=False)
    with pytest.raises(CheckpointError, match="tie_word_embeddings is false but the weights have no lm_head.weight"):
        load_any(folder)


def test_gpt_neo_at_2048_positions_says_tinystories_trained_at_512(tmp_path):
    folder = _copy(tmp_path, "hf-gpt-neo")
    tensors = load_file(folder / "model.safetensors")
    wpe = tensors["transformer.wpe.weight"]
    tensors["transformer.wpe.weight"] = torch.cat([wpe, torch.zeros(2048 - wpe.shape[0], wpe.shape[1])])
    save_file(tensors, folder / "model.safetensors")
    _edit_config(folder, max_position_embeddings=2048)
    ckpt = load_any(folder)
    assert ckpt.config.context_length == 2048 and "512" in ckpt.training["note"]
    _check_logits(ckpt, "hf-gpt-neo")
    assert "note" not in load_any(ARCH / "hf-gpt-neo").training


def test_gpt2_vocab_and_merges_without_tokenizer_json(tmp_path):
    folder = _copy(tmp_path, "hf-gpt2")
    (folder / "tokenizer.json").unlink()
    ckpt = load_any(folder)
    ref = _reference("hf-gpt2")
    assert list(ckpt.tokenizer.encode(str(ref["text"])).ids) == ref["token_ids"].tolist()
    assert ckpt.tokenizer.kind == "byte-level BPE" and ckpt.tokenizer.token_to_id("<|endoftext|>") == 6000
    assert ckpt.tokenizer.encode("a<|endoftext|>").ids == (64, 6000)


def test_add_bos_token_in_tokenizer_config_decides_the_bos(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "add_bos_token": False}))
    assert load_any(folder).tokenizer.encode("once").ids[0] != 1
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "add_bos_token": True}))
    assert load_any(folder).tokenizer.encode("once").ids[0] == 1
    gpt2 = _copy(tmp_path, "hf-gpt2")
    (gpt2 / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>", "add_bos_token": True}))
    ckpt = load_any(gpt2)
    assert ckpt.tokenizer.encode("a").ids == (6000, 64) and ckpt.tokenizer.prefix_ids == (6000,)


# ---------------------------------------------------------------- refusals, each naming what it refuses


@pytest.mark.parametrize("name, changes, message", [
    ("hf-llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}},
     "rope_parameters.rope_type = 'llama3': only the default RoPE"),
    ("hf-llama", {"rope_parameters": None, "rope_scaling": {"type": "linear", "factor": 2.0}},
     "rope_scaling.rope_type = 'linear'"),
    ("hf-llama", {"hidden_act": "relu"}, "hidden_act = 'relu': the gated MLP is built with silu or a GELU"),
    ("hf-llama", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
     "partial_rotary_factor = 0.5: this family turns whole heads"),
    ("hf-llama", {"num_hidden_layers": 3}, "num_hidden_layers = 3: but model.safetensors has 2 blocks"),
    ("hf-gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx = True"),
    ("hf-gpt2", {"activation_function": "relu"}, "activation_function = 'relu': not supported"),
    ("hf-gpt-neo", {"attention_types": [[["global", "sparse"], 2]], "attention_layers": None},
     "attention_types = [[['global', 'sparse'], 2]]: entries must be 'global' or 'local'"),
])
def test_settings_we_do_not_build_are_refused_by_name(tmp_path, name, changes, message):
    folder = _copy(tmp_path, name)
    _edit_config(folder, **changes)
    with pytest.raises(CheckpointError, match="^" + re.escape(f"{name}: config.json: {message}")):
        load_any(folder)


def test_mistral_without_sliding_window_is_llama_shaped(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    _edit_config(folder, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=None)
    config = json.loads((folder / "config.json").read_text())
    config["sliding_window"] = None  # mistral's config says null for no window
    (folder / "config.json").write_text(json.dumps(config))
    ckpt = load_any(folder)
    assert ckpt.source_format == "hf-mistral"
    _check_logits(ckpt, "hf-llama")


def test_an_unknown_model_type_names_it_and_the_families_we_open(tmp_path, capsys):
    folder = _copy(tmp_path, "hf-gpt2")
    _edit_config(folder, model_type="bert", architectures=["BertForMaskedLM"])
    with pytest.raises(CheckpointError) as info:
        load_any(folder)
    message = str(info.value)
    assert message.startswith("hf-gpt2: model_type 'bert' (BertForMaskedLM) is not a model family this app opens")
    assert all(family in message for family in ("gpt2", "gpt_neo", "gpt_neox", "llama", "mistral", "qwen2", "qwen3",
                                                "gemma2", "gemma3_text", "phi", "olmo2", "smollm3"))
    assert trace_main([str(folder), "hello"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_folders_that_are_not_models(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="empty: not a checkpoint format this app opens; .*notes.txt"):
        load_any(empty)
    folder = _copy(tmp_path, "hf-gpt2")
    (folder / "model.safetensors").unlink()
    (folder / "tf_model.h5").write_bytes(b"\x89HDF")
    with pytest.raises(CheckpointError, match="no weights: looked for model.safetensors, .*tf_model.h5"):
        load_any(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="hf-gpt2: config.json is not readable JSON"):
        load_any(folder)


def test_a_tokenizer_of_another_size_is_refused(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    shutil.copy(ARCH / "hf-gpt2" / "tokenizer.json", folder / "tokenizer.json")
    with pytest.raises(CheckpointError, match="the vocabulary has 6001 tokens but the model's embedding table has 512"):
        load_any(folder)
