"""What a Hugging Face folder's files hold, said and used as they are: a stored head that differs from
the embedding (transformers#42612), a weight file beside a sharded index (sglang#32279), links to files
that were never downloaded (huggingface_hub#1222), a personal path in ``_name_or_path``, and GPT-2's
files offered (asked, not assumed) for a 50,257-row model without tokenizer files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from explorer_helpers import Questions, make_window
from model.checkpoint import CheckpointError, NeedsInput, load_any, save_as
from model.formats.vocab import SHIPPED_GPT2_DIR
from model.trace import main as trace_main

ARCH = Path(__file__).parent / "fixtures" / "arch"


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(ARCH / name, tmp_path / name))


def _config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _logits(ckpt, ids=(1, 444, 468, 301)):
    return ckpt.model.trace(list(ids)).logits


def test_a_stored_head_that_differs_from_the_embedding_is_used_and_said(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    _config(folder, tie_word_embeddings=True)
    tensors = load_file(folder / "model.safetensors")
    ckpt = load_any(folder)
    assert not ckpt.config.tied_unembed
    trace = ckpt.model.trace([1, 444, 468, 301])
    np.testing.assert_allclose(trace.logits, trace.ln_final @ tensors["lm_head.weight"].numpy().T, atol=1e-5)
    np.testing.assert_allclose(trace.logits, _logits(load_any(ARCH / "hf-llama")), atol=1e-6)
    note = ckpt.training["unembedding"]
    assert "tie_word_embeddings (true)" in note and "model.safetensors holds an lm_head.weight" in note
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()  # the same values: tied, no note
    save_file(tensors, folder / "model.safetensors")
    same = load_any(folder)
    assert same.config.tied_unembed and "unembedding" not in same.training


def _shard(folder: Path, tensors: dict, names: list[str], n: int = 2) -> None:
    """Write ``names`` as ``n`` shards and their index."""
    parts = [names[i::n] for i in range(n)]
    weight_map = {}
    for i, part in enumerate(parts, 1):
        shard = f"model-{i:05d}-of-{n:05d}.safetensors"
        save_file({k: tensors[k] for k in part}, folder / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def test_a_weight_file_beside_a_sharded_index_is_named_and_compared(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    _shard(folder, tensors, names)
    save_file({k: v for k, v in tensors.items() if ".layers.1." not in k}, folder / "model.safetensors")  # partial
    ckpt = load_any(folder)  # was: "num_hidden_layers = 2: but the weights have 1 blocks", naming neither file
    assert ckpt.training["weights"] == "model.safetensors.index.json" and ckpt.training["shards"] == 2
    assert "model.safetensors beside it holds only 12 of the 21 tensors and was not read" in ckpt.training["weights note"]
    np.testing.assert_allclose(_logits(ckpt), _logits(load_any(ARCH / "hf-llama")), atol=1e-6)
    other = {k: v + 1.0 for k, v in tensors.items()}
    save_file(other, folder / "model.safetensors")  # complete, other values: read as transformers reads it, and said
    ckpt = load_any(folder)
    assert ckpt.training["weights"] == "model.safetensors"
    assert "hold different values (first: lm_head.weight)" in ckpt.training["weights note"]
    (folder / "model.safetensors.index.json").unlink()
    _config(folder, num_hidden_layers=3)
    with pytest.raises(CheckpointError, match=r"num_hidden_layers = 3: but model.safetensors has 2 blocks"):
        load_any(folder)


def test_files_that_are_links_to_nothing_are_named_as_not_downloaded(tmp_path):
    folder = _copy(tmp_path, "hf-llama")
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).unlink()
        os.symlink(tmp_path / "blobs" / name, folder / name)
    with pytest.raises(CheckpointError, match=r"^hf-llama: model.safetensors is a symbolic link that leads nowhere "
                                              r".*not downloaded"):
        load_any(folder)  # was: "no weights: looked for model.safetensors, ..."
    (folder / "model.safetensors").unlink()
    shutil.copy(ARCH / "hf-llama" / "model.safetensors", folder)
    with pytest.raises(NeedsInput, match=r"tokenizer.json: a symbolic link that leads nowhere.*not downloaded"):
        load_any(folder)
    os.symlink(tmp_path / "blobs" / "tokenizer_config.json", folder / "special_tokens_map.json")
    with pytest.raises(CheckpointError, match=r"special_tokens_map.json is a symbolic link that leads nowhere"):
        load_any(folder)


def test_a_personal_path_in_name_or_path_is_neither_shown_nor_saved(tmp_path):
    folder = _copy(tmp_path, "hf-gpt-neo")
    _config(folder, _name_or_path="/home/alice/models/TinyStories-1M")
    ckpt = load_any(folder)
    assert "name_or_path" not in ckpt.training
    save_as(ckpt, tmp_path / "neo.safetensors")
    assert b"alice" not in (tmp_path / "neo.safetensors").read_bytes()
    _config(folder, _name_or_path="roneneldan/TinyStories-1M")
    assert load_any(folder).training["name_or_path"] == "roneneldan/TinyStories-1M"


@pytest.fixture
def gpt2_sized(tmp_path):
    """An HF GPT-2 folder of GPT-2's 50,257 rows without tokenizer files."""
    folder = _copy(tmp_path, "hf-gpt2")
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (folder / name).unlink()
    tensors = load_file(folder / "model.safetensors")
    wte = tensors["transformer.wte.weight"]
    torch.manual_seed(0)
    tensors["transformer.wte.weight"] = torch.cat([wte, 0.02 * torch.randn(50257 - wte.shape[0], wte.shape[1])])
    save_file(tensors, folder / "model.safetensors")
    _config(folder, vocab_size=50257)
    return folder


def test_a_gpt2_sized_folder_is_offered_gpt2s_files_with_a_true_hint(gpt2_sized, capsys, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    with pytest.raises(NeedsInput) as info:
        load_any(gpt2_sized)
    message = str(info.value)
    assert info.value.suggested == SHIPPED_GPT2_DIR and "need not be GPT-2's" in message
    assert "were not found" not in message and "TIKTOKEN_CACHE_DIR" not in message  # the files are there
    assert trace_main([str(gpt2_sized), "Hello world"]) == 2
    assert f"--vocab {SHIPPED_GPT2_DIR}" in capsys.readouterr().err
    ckpt = load_any(gpt2_sized, vocab_path=info.value.suggested)
    assert ckpt.tokenizer.encode("Hello world").ids == (15496, 995)


def test_the_window_asks_and_offers_gpt2s_files_first(qtbot, tmp_path, tiny_checkpoint, gpt2_sized, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    questions = Questions().install(monkeypatch)
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    questions.choices.append(0)  # "Use GPT-2's tokenizer"
    assert window.files.open_checkpoint(gpt2_sized)
    assert [q.split(":")[0] for q in questions.asked] == ["ask_choice"] and "need not be GPT-2's" in questions.asked[0]
    assert window.session.tokenizer.vocab_size == 50257 and questions.errors == []
