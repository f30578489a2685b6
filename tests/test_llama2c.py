"""Opening llama2.c's files: model.bin (versions 0 and 1), ckpt.pt and their folder, exactly.

The fixture (tests/fixtures/arch/llama2c-v0, see its README) was written by llama2.c's own
model.py, train.py and export.py. The other files are written here, following export.py's
``legacy_export`` and ``version1_export`` byte for byte.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from model.checkpoint import CheckpointError, NeedsInput, load_any, load_checkpoint, save_as

FIX = Path(__file__).parent / "fixtures" / "arch" / "llama2c-v0"
REF = np.load(FIX / "reference.npz")
ARGS = {"dim": 64, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": 512, "max_seq_len": 64}
HIDDEN = 172


def _attn(trace) -> np.ndarray:
    return np.stack([b.attn_weights for b in trace.blocks])  # (n_layers, n_heads, T, T)


def _fixture_state() -> dict[str, torch.Tensor]:
    return torch.load(FIX / "ckpt.pt", map_location="cpu", weights_only=True)["model"]


def _floats(f, tensor: torch.Tensor) -> None:
    f.write(tensor.detach().float().contiguous().numpy().astype("<f4").tobytes())


def _layers(state: dict, name: str) -> list[torch.Tensor]:
    return [state[f"layers.{i}.{name}.weight"] for i in range(ARGS["n_layers"])]


def _rope_tables(head_size: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = 1.0 / (10000.0 ** (torch.arange(0, head_size, 2)[: head_size // 2].float() / head_size))
    angles = torch.outer(torch.arange(seq_len), freqs).float()
    return torch.cos(angles), torch.sin(angles)


def _seven_ints(vocab_size: int) -> bytes:
    """The header fields both versions write: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len."""
    a = ARGS
    return struct.pack("<7i", a["dim"], HIDDEN, a["n_layers"], a["n_heads"], a["n_kv_heads"], vocab_size, a["max_seq_len"])


def write_v0(path: Path, state: dict, output: torch.Tensor | None = None) -> Path:
    """export.py's legacy_export; ``output`` given = a separate classifier (negative vocab_size)."""
    a = ARGS
    vocab = a["vocab_size"] if output is None else -a["vocab_size"]
    with open(path, "wb") as f:
        f.write(_seven_ints(vocab))
        _floats(f, state["tok_embeddings.weight"])
        for name in ("attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                     "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
            for t in _layers(state, name):
                _floats(f, t)
        _floats(f, state["norm.weight"])
        for table in _rope_tables(a["dim"] // a["n_heads"], a["max_seq_len"]):
            _floats(f, table)
        if output is not None:
            _floats(f, output)
    return path


def write_v1(path: Path, state: dict, output: torch.Tensor | None = None, version: int = 1) -> Path:
    """export.py's version1_export (256-byte header with magic "ak42" and a shared flag)."""
    a = ARGS
    with open(path, "wb") as f:
        f.write(struct.pack("<I", 0x616B3432) + struct.pack("<i", version))
        f.write(_seven_ints(a["vocab_size"]))
        f.write(struct.pack("B", int(output is None)))
        f.write(b"\0" * (256 - f.tell()))
        weights = [*_layers(state, "attention_norm"), *_layers(state, "ffn_norm"), state["norm.weight"],
                   state["tok_embeddings.weight"]]
        for name in ("attention.wq", "attention.wk", "attention.wv", "attention.wo",
                     "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
            weights += _layers(state, name)
        for t in weights + ([output] if output is not None else []):
            _floats(f, t)
    return path


def _first_pieces(path: Path, n: int) -> bytes:
    """A tokenizer.bin with the first ``n`` pieces of ``path``'s."""
    data = path.read_bytes()
    at = 4
    for _ in range(n):
        at += 8 + struct.unpack_from("<I", data, at + 4)[0]
    return data[:at]


def _with_tokenizer(folder: Path, model: Path) -> Path:
    shutil.copy(FIX / "tokenizer.bin", folder / "tokenizer.bin")
    return model


# ---------------------------------------------------------------- the reference fixture


@pytest.mark.parametrize("name", ["model.bin", "ckpt.pt", "."])
def test_fixture_agrees_with_llama2c(name):
    ckpt = load_any(FIX / name)
    assert ckpt.source_format == "llama2.c"
    trace = ckpt.model.trace(REF["token_ids"])
    assert np.abs(trace.logits - REF["logits"]).max() <= 1e-4
    assert np.abs(_attn(trace) - REF["attn_weights"]).max() <= 1e-5
    assert list(ckpt.tokenizer.encode(str(REF["text"])).ids) == REF["token_ids"].tolist()
    c = ckpt.config
    assert (c.vocab_size, c.context_length, c.d_model, c.n_heads, c.n_kv_heads, c.n_layers, c.d_mlp) == (
        512, 64, 64, 8, 4, 5, 172)
    assert (c.positional, c.rope_pairs, c.rope_theta, c.norm, c.mlp, c.tied_unembed) == (
        "rope", "interleaved", 10000.0, "rmsnorm", "swiglu", True)
    assert not (c.qkv_bias or c.o_bias or c.mlp_bias or c.norm_bias)


def test_ckpt_training_facts_and_the_folder_prefers_it():
    ckpt = load_any(FIX)  # the folder: ckpt.pt has the training facts, model.bin has none
    assert ckpt.path == FIX and ckpt.training["file"] == "ckpt.pt"
    assert ckpt.training["steps"] == 2 and ckpt.training["vocab_source"] == "custom"
    assert ckpt.training["val_loss"] == pytest.approx(7.0452, abs=1e-4)  # best_val_loss, a 0-d tensor
    assert load_any(FIX / "model.bin").training["export"] == "model.bin version 0"


def test_model_bin_and_ckpt_hold_the_same_weights():
    a, b = load_any(FIX / "model.bin").model.state_dict(), load_any(FIX / "ckpt.pt").model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- files written here


def test_untied_v0_has_its_own_classifier(tmp_path):
    state = _fixture_state()
    path = _with_tokenizer(tmp_path, write_v0(tmp_path / "model.bin", state, output=2 * state["tok_embeddings.weight"]))
    ckpt = load_any(path)
    assert not ckpt.config.tied_unembed
    assert torch.equal(ckpt.model.unembed.weight, 2 * state["tok_embeddings.weight"])
    # Twice the classifier gives twice the logits (scaling by 2 is exact in float32).
    assert np.abs(ckpt.model.trace(REF["token_ids"]).logits - 2 * REF["logits"]).max() <= 2e-4


@pytest.mark.parametrize("untied", [False, True])
def test_version1_export(tmp_path, untied):
    state = _fixture_state()
    output = 2 * state["tok_embeddings.weight"] if untied else None
    path = _with_tokenizer(tmp_path, write_v1(tmp_path / "stories.bin", state, output))
    ckpt = load_any(path)
    assert ckpt.config.tied_unembed is not untied
    trace = ckpt.model.trace(REF["token_ids"])
    assert np.abs(trace.logits - (2 if untied else 1) * REF["logits"]).max() <= 2e-4
    assert np.abs(_attn(trace) - REF["attn_weights"]).max() <= 1e-5
    assert ckpt.training["export"] == "model.bin version 1"


def test_version2_is_refused(tmp_path):
    path = write_v1(tmp_path / "model_q80.bin", _fixture_state(), version=2)
    with pytest.raises(CheckpointError, match=r"model_q80.bin: a llama2.c model.bin of version 2 \(weights quantized to int8"):
        load_any(path)


def test_truncated_and_padded_files(tmp_path):
    data = (FIX / "model.bin").read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[:-1000])
    with pytest.raises(CheckpointError, match=r"cut.bin: a llama2.c model.bin \(version 0: dim 64, .*\) should have "
                                              r"1,042,204 bytes but has 1,041,204: cut short"):
        load_any(cut)
    long = tmp_path / "long.bin"
    long.write_bytes(data + b"\0" * 8)
    with pytest.raises(CheckpointError, match="8 bytes more than the header describes"):
        load_any(long)


def test_not_a_model_bin(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(CheckpointError, match="junk.bin: not a checkpoint format this app opens; tried: .*llama2.c"):
        load_any(junk)


def test_a_header_that_sniffs_as_a_pickle(tmp_path):
    """dim 640 is the bytes 80 02 00 00, a pickle's opening: the header still decides."""
    dim, hidden, vocab, seq = 640, 8, 16, 4
    g = torch.Generator().manual_seed(0)
    path = tmp_path / "model.bin"
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, 1, 10, 10, vocab, seq))
        for shape in [(vocab, dim), (dim,), (dim, dim), (dim, dim), (dim, dim), (dim, dim), (dim,),
                      (hidden, dim), (dim, hidden), (hidden, dim), (dim,)]:
            _floats(f, 0.02 * torch.randn(shape, generator=g))
        for table in _rope_tables(64, seq):
            _floats(f, table)
    assert path.read_bytes()[:2] == b"\x80\x02"
    ckpt = load_any(path, allow_no_tokenizer=True)
    assert (ckpt.config.d_model, ckpt.config.n_heads, ckpt.tokenizer) == (640, 10, None)


def test_compiled_ckpt_with_orig_mod_prefixes(tmp_path):
    obj = torch.load(FIX / "ckpt.pt", map_location="cpu", weights_only=True)
    assert obj["model"]["output.weight"].data_ptr() == obj["model"]["tok_embeddings.weight"].data_ptr()  # tied by storage
    obj["model"] = {"_orig_mod." + k: v for k, v in obj["model"].items()}
    path = _with_tokenizer(tmp_path, tmp_path / "ckpt.pt")
    torch.save(obj, path)
    trace = load_any(path).model.trace(REF["token_ids"])
    assert np.abs(trace.logits - REF["logits"]).max() <= 1e-4


def test_model_args_must_agree_with_the_weights(tmp_path):
    obj = torch.load(FIX / "ckpt.pt", map_location="cpu", weights_only=True)
    obj["model_args"]["multiple_of"] = 32  # FeedForward would then be 192 wide, the weights are 172
    torch.save(obj, tmp_path / "ckpt.pt")
    with pytest.raises(CheckpointError, match="model_args says hidden_dim=192 but the weights say 172"):
        load_any(tmp_path / "ckpt.pt")
    torch.save(obj["model"], tmp_path / "state.pt")  # a bare state dict: no heads, no context length
    with pytest.raises(CheckpointError, match="state.pt: a llama2.c model.py state_dict without model_args"):
        load_any(tmp_path / "state.pt")


# ---------------------------------------------------------------- folders and vocabularies


def test_tokenizer_found_where_llama2c_keeps_it(tmp_path):
    """train.py writes out/model.bin; tinystories.py writes data/tok512.bin one folder up. The
    Llama 2 tokenizer.bin (another size) beside the model is passed over."""
    out = tmp_path / "out"
    (tmp_path / "data").mkdir()
    out.mkdir()
    shutil.copy(FIX / "model.bin", out / "model.bin")
    with pytest.raises(NeedsInput) as asked:
        load_any(out / "model.bin")
    assert asked.value.kind == "vocab" and out / "tokenizer.bin" in asked.value.searched
    assert load_any(out / "model.bin", allow_no_tokenizer=True).tokenizer is None
    (out / "tokenizer.bin").write_bytes(_first_pieces(FIX / "tokenizer.bin", 300))  # a 300-piece vocabulary
    shutil.copy(FIX / "tokenizer.bin", tmp_path / "data" / "tok512.bin")
    ckpt = load_any(out)  # the folder
    assert ckpt.tokenizer.encode("once").ids == (1, 402)


def test_vocab_given_by_path(tmp_path):
    shutil.copy(FIX / "model.bin", tmp_path / "stories.bin")
    ckpt = load_any(tmp_path / "stories.bin", vocab_path=FIX / "tokenizer.bin")
    assert list(ckpt.tokenizer.encode(str(REF["text"])).ids) == REF["token_ids"].tolist()


def test_folders_with_several_or_no_models(tmp_path):
    for name in ("a.bin", "b.bin"):
        shutil.copy(FIX / "model.bin", tmp_path / name)
    with pytest.raises(CheckpointError, match=r"several llama2.c models \(a.bin, b.bin\): open one of them"):
        load_any(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="empty: not a checkpoint format this app opens"):
        load_any(empty)


def test_save_as_reopens_identically(tmp_path):
    ckpt = load_any(FIX / "model.bin")
    save_as(ckpt, tmp_path / "stories.safetensors")
    again = load_checkpoint(tmp_path / "stories.safetensors")
    assert again.config == ckpt.config
    ids = REF["token_ids"]
    assert np.array_equal(again.model.trace(ids).logits, ckpt.model.trace(ids).logits)
    for text in (str(REF["text"]), "", "zoé 😀 42  "):
        assert again.tokenizer.encode(text) == ckpt.tokenizer.encode(text)
    assert again.training["imported_from"] == {"format": "llama2.c", "file": "model.bin"}


def test_trace_command_on_a_folder_and_ids_without_a_tokenizer(tmp_path, capsys):
    from model.trace import main

    assert main([str(FIX), str(REF["text"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["token_ids"] == REF["token_ids"].tolist() and out["tokens"][:2] == ["<s>", " once"]
    assert np.abs(np.array(out["tensors"]["logits"]) - REF["logits"]).max() <= 1e-4
    shutil.copy(FIX / "model.bin", tmp_path / "model.bin")  # no tokenizer.bin anywhere near
    assert main([str(tmp_path), "--ids", "1,402,424", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["#1", "#402", "#424"]
    assert np.abs(np.array(out["tensors"]["logits"]) - REF["logits"][:3]).max() <= 1e-4
    assert main([str(tmp_path), "once"]) == 2
    assert "no vocabulary was found" in capsys.readouterr().err
