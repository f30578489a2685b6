"""Our .safetensors checkpoint: exact round trip, and one clear error for every bad file."""

import json
import os
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from model import GPT, GPTConfig, CheckpointError, load_checkpoint, save_checkpoint
from model.tokens.tokenizer import train_word_tokenizer


@pytest.fixture(scope="module")
def tok():
    return train_word_tokenizer(["the cat sat on the mat . a dog ran"], vocab_size=32)


@pytest.fixture
def config(tok):
    return GPTConfig(vocab_size=tok.vocab_size, context_length=8, d_model=16, n_heads=2, n_layers=2, d_mlp=32)


@pytest.fixture
def saved(tmp_path, tok, config):
    torch.manual_seed(1)
    model = GPT(config).eval()
    path = tmp_path / "tiny.safetensors"
    save_checkpoint(path, model, tok, training={"steps": 3, "val_loss": 2.5})
    return path, model


def test_round_trip_is_bitwise(saved, tok):
    path, model = saved
    ckpt = load_checkpoint(path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(ckpt.model.state_dict()[name], tensor), name
    ids = tok.encode("the cat sat on the mat").ids
    np.testing.assert_array_equal(ckpt.model.trace(ids).logits, model.trace(ids).logits)
    assert ckpt.training == {"steps": 3, "val_loss": 2.5}
    assert ckpt.tokenizer.encode("the dog").ids == tok.encode("the dog").ids
    assert ckpt.name == "tiny" and ckpt.config == model.config
    assert not ckpt.model.training


def test_loading_leaves_torch_rng_alone(saved):
    path, _ = saved
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    load_checkpoint(path)
    assert torch.equal(torch.rand(3), expected)


def test_tied_weights_are_stored_once(saved):
    path, _ = saved
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        assert "unembed.weight" not in f.keys() and "tok_emb.weight" in f.keys()


@pytest.mark.slow
def test_float16_snapshot_loads_as_float32(tmp_path, saved, tok):
    _, model = saved
    path = tmp_path / "half.safetensors"
    save_checkpoint(path, model, tok, dtype=torch.float16)
    ckpt = load_checkpoint(path)
    assert ckpt.model.tok_emb.weight.dtype == torch.float32
    torch.testing.assert_close(ckpt.model.tok_emb.weight, model.tok_emb.weight, atol=1e-3, rtol=1e-3)


def _rewrite(path, out, tensors=None, metadata=None):
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
        ts = {k: f.get_tensor(k) for k in f.keys()}
    if tensors:
        ts = tensors(ts)
    if metadata:
        meta = metadata(meta)
    save_file(ts, str(out), metadata=meta)
    return out


def _bad_files(tmp_path, path):
    data = path.read_bytes()
    cases = {}
    (tmp_path / "empty.safetensors").write_bytes(b"")
    cases["empty"] = (tmp_path / "empty.safetensors", "empty")
    (tmp_path / "trunc.safetensors").write_bytes(data[: len(data) // 2])
    cases["truncated"] = (tmp_path / "trunc.safetensors", "not a readable safetensors file")
    (tmp_path / "text.safetensors").write_text("hello, I am a text file\n")
    cases["text"] = (tmp_path / "text.safetensors", "not a readable safetensors file")
    (tmp_path / "image.safetensors").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    cases["png"] = (tmp_path / "image.safetensors", "not a readable safetensors file")
    cases["missing"] = (tmp_path / "nope.safetensors", "no such file")
    cases["foreign"] = (
        _rewrite(path, tmp_path / "foreign.safetensors", metadata=lambda m: {"format": "pt"}),
        "not a Transformer Explorer checkpoint",
    )
    cases["version"] = (
        _rewrite(path, tmp_path / "v9.safetensors", metadata=lambda m: {**m, "format_version": "9"}),
        "format version '9' is not supported",
    )
    cases["config"] = (
        _rewrite(path, tmp_path / "cfg.safetensors",
                 metadata=lambda m: {**m, "config": json.dumps({**json.loads(m["config"]), "n_heads": 3})}),
        "bad config: n_heads",
    )
    cases["vocab"] = (
        _rewrite(path, tmp_path / "vocab.safetensors",
                 metadata=lambda m: {**m, "tokenizer": train_word_tokenizer(["a b c d e"], 7).to_json()}),
        "the tokenizer has 7 words but the embedding table has 11 rows",
    )
    cases["missing tensor"] = (
        _rewrite(path, tmp_path / "miss.safetensors",
                 tensors=lambda t: {k: v for k, v in t.items() if k != "ln_f.bias"}),
        r"missing tensor\(s\): ln_f.bias",
    )
    cases["unexpected"] = (
        _rewrite(path, tmp_path / "extra.safetensors", tensors=lambda t: {**t, "extra.weight": torch.zeros(2)}),
        r"unexpected tensor\(s\): extra.weight",
    )
    cases["shape"] = (
        _rewrite(path, tmp_path / "shape.safetensors", tensors=lambda t: {**t, "ln_f.bias": torch.zeros(3)}),
        r"tensor ln_f.bias has shape \(3,\), the config implies \(16,\)",
    )
    cases["dtype"] = (
        _rewrite(path, tmp_path / "int.safetensors",
                 tensors=lambda t: {**t, "ln_f.bias": torch.zeros(16, dtype=torch.int32)}),
        "tensor ln_f.bias has dtype torch.int32, expected a float type",
    )
    cases["nan"] = (
        _rewrite(path, tmp_path / "nan.safetensors",
                 tensors=lambda t: {**t, "ln_f.bias": torch.full((16,), float("nan"))}),
        "tensor ln_f.bias holds NaN or infinite values",
    )
    header = b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 99]}}'
    (tmp_path / "lying.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    cases["lying header"] = (tmp_path / "lying.safetensors", "not a readable safetensors file")
    return cases


def test_every_bad_file_raises_one_clear_error(tmp_path, saved):
    path, _ = saved
    for kind, (bad, message) in _bad_files(tmp_path, path).items():
        with pytest.raises(CheckpointError, match=message) as info:
            load_checkpoint(bad)
        assert str(info.value).startswith(bad.name + ":"), kind


def test_file_cut_inside_its_header_says_so(tmp_path, saved):
    """It was "not a checkpoint format this app opens" (the header length exceeded the file)."""
    from model.checkpoint import load_any

    data = saved[0].read_bytes()
    for size in (9, 100, 1000):
        cut = tmp_path / f"cut{size}.safetensors"
        cut.write_bytes(data[:size])
        with pytest.raises(CheckpointError, match=f"cut{size}.safetensors: a safetensors file cut short"):
            load_any(cut)


def test_training_facts_that_are_not_an_object_load_as_none(tmp_path, saved):
    """A JSON list, string or null as training facts once reached the model panel, which needs a dict."""
    path, _ = saved
    for i, facts in enumerate(("[1, 2]", '"a string"', "null")):
        bad = _rewrite(path, tmp_path / f"facts{i}.safetensors", metadata=lambda m, f=facts: {**m, "training": f})
        assert load_checkpoint(bad).training == {}
    assert load_checkpoint(path).training == {"steps": 3, "val_loss": 2.5}


def test_unwritable_target_leaves_nothing(tmp_path, saved, tok):
    _, model = saved
    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "no" / "such" / "dir.safetensors", model, tok)
    target = tmp_path / "x.safetensors"
    target.write_bytes(b"old")
    save_checkpoint(target, model, tok)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    load_checkpoint(target)
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600
