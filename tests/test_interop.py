"""Opening nanoGPT and LLMs-from-scratch checkpoints: exact agreement with the reference code,
and every awkward file people have (prefixes, mask buffers, biases, CUDA, pickles that run code)."""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from interop_files import FIX, META, NANO, RASCHKA, logits as _logits, offline_gpt2, random_nanogpt as _random_nanogpt
from model.checkpoint import CheckpointError, NeedsInput, load_any
from model.formats.common import propose_n_heads
from model.formats.pickled.nanogpt import strip_prefixes
from model.formats.pickled.safe_pickle import referenced_globals



@pytest.fixture(autouse=True)
def _gpt2_cache(monkeypatch, tmp_path):
    offline_gpt2(monkeypatch, tmp_path)


def _stack_attn(trace) -> np.ndarray:
    return np.stack([b.attn_weights for b in trace.blocks])  # (n_layers, n_heads, T, T)


# ---------------------------------------------------------------- the reference fixtures


@pytest.mark.parametrize("stem, ref", [("ckpt_nanogpt", "nanogpt"), ("ckpt_raschka", "raschka")])
def test_fixtures_agree_with_reference_code(stem, ref):
    path = NANO if ref == "nanogpt" else RASCHKA
    ckpt = load_any(path, vocab_path=META if ref == "nanogpt" else None)
    ids = np.load(FIX / f"{ref}_input_ids.npy")
    trace = ckpt.model.trace(ids)
    ref_logits, ref_attn = np.load(FIX / f"{stem}_ref_logits.npy"), np.load(FIX / f"{stem}_ref_attn.npy")
    assert trace.logits.shape == ref_logits.shape and _stack_attn(trace).shape == ref_attn.shape
    assert np.abs(trace.logits - ref_logits).max() <= 1e-5
    assert np.abs(_stack_attn(trace) - ref_attn).max() <= 1e-6
    text = json.loads((FIX / f"{ref}_input.json").read_text())["text"]
    assert list(ckpt.tokenizer.encode(text).ids) == ids.tolist()
    assert ckpt.source_format == {"nanogpt": "nanogpt", "raschka": "llms-from-scratch"}[ref]


def test_nanogpt_config_and_training_facts():
    ckpt = load_any(NANO, vocab_path=META)
    c = ckpt.config
    assert (c.vocab_size, c.context_length, c.d_model, c.n_heads, c.n_layers, c.d_mlp) == (65, 32, 64, 1, 1, 256)
    assert (c.qkv_bias, c.o_bias, c.mlp_bias, c.norm_bias) == (False, False, False, False)
    assert (c.gelu, c.tied_unembed) == ("exact", True)
    assert ckpt.training["steps"] == 200 and ckpt.training["dataset"] == "shakespeare_char"
    assert ckpt.training["val_loss"] == pytest.approx(2.6128, abs=1e-3)


def test_meta_pkl_found_beside_and_under_data(tmp_path):
    beside = tmp_path / "a"
    beside.mkdir()
    shutil.copy(NANO, beside / "ckpt.pt")
    shutil.copy(META, beside / "meta.pkl")
    assert load_any(beside / "ckpt.pt").tokenizer.vocab_size == 65
    out = tmp_path / "nanoGPT" / "out-shakespeare-char"
    out.mkdir(parents=True)
    shutil.copy(NANO, out / "ckpt.pt")
    (tmp_path / "nanoGPT" / "data" / "shakespeare_char").mkdir(parents=True)
    shutil.copy(META, tmp_path / "nanoGPT" / "data" / "shakespeare_char" / "meta.pkl")
    ckpt = load_any(out / "ckpt.pt")
    assert ckpt.tokenizer.encode("Hi!\n").ids == (20, 47, 2, 0)
    (tmp_path / "tokenizer.json").write_text(ckpt.tokenizer.to_json())
    assert load_any(NANO, vocab_path=tmp_path / "tokenizer.json").tokenizer.encode("Hi!\n").ids == (20, 47, 2, 0)


def test_missing_meta_pkl_asks_for_the_vocabulary(tmp_path):
    shutil.copy(NANO, tmp_path / "ckpt.pt")
    with pytest.raises(NeedsInput) as info:
        load_any(tmp_path / "ckpt.pt")
    need = info.value
    assert need.kind == "vocab" and need.path == tmp_path / "ckpt.pt"
    assert tmp_path.resolve() / "meta.pkl" in need.searched
    assert "data/shakespeare_char/meta.pkl" in str(need) and "65 tokens" in str(need)
    ckpt = load_any(tmp_path / "ckpt.pt", allow_no_tokenizer=True)
    assert ckpt.tokenizer is None
    ids = np.load(FIX / "nanogpt_input_ids.npy")
    np.testing.assert_allclose(_logits(ckpt, ids), np.load(FIX / "ckpt_nanogpt_ref_logits.npy"), atol=1e-5)


def test_raschka_n_heads_from_sidecar_argument_or_question(tmp_path):
    path = tmp_path / "model.pth"
    shutil.copy(RASCHKA, path)
    with pytest.raises(NeedsInput) as info:
        load_any(path, allow_no_tokenizer=True)
    assert info.value.kind == "n_heads" and info.value.proposed == 1
    assert info.value.choices == (1, 2, 4, 8, 16, 32, 64) and "model.json" in str(info.value)
    ids = np.load(FIX / "raschka_input_ids.npy")
    ref = np.load(FIX / "ckpt_raschka_ref_logits.npy")
    by_arg = load_any(path, n_heads=2, allow_no_tokenizer=True)
    assert np.abs(_logits(by_arg, ids) - ref).max() <= 1e-5
    wrong = load_any(path, n_heads=4, allow_no_tokenizer=True)  # loads, but computes other numbers
    assert np.abs(_logits(wrong, ids) - ref).max() > 1e-3
    shutil.copy(FIX / "ckpt_raschka_config.json", tmp_path / "model.json")
    by_sidecar = load_any(path, n_heads=4, allow_no_tokenizer=True)  # the sidecar wins
    assert by_sidecar.config.n_heads == 2
    with pytest.raises(CheckpointError, match="n_heads 3 .given. does not divide d_model 64"):
        load_any(_copy(RASCHKA, tmp_path / "b" / "m.pth"), n_heads=3, allow_no_tokenizer=True)
    (tmp_path / "model.json").write_text(json.dumps({"n_heads": 2, "emb_dim": 128}))
    with pytest.raises(CheckpointError, match="model.json says emb_dim=128 but the weights say 64"):
        load_any(path, allow_no_tokenizer=True)


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


def test_n_heads_proposals():
    assert [propose_n_heads(d) for d in (768, 1024, 1280, 1600)] == [12, 16, 20, 25]
    assert propose_n_heads(256) == 4 and propose_n_heads(64) == 1 and propose_n_heads(96) == 1


def test_model_and_optimizer_wrapper_and_extension_do_not_matter(tmp_path):
    state = torch.load(RASCHKA, weights_only=True)
    path = tmp_path / "weights.bin"
    torch.save({"model_state_dict": state, "optimizer_state_dict": {"state": {}, "param_groups": []}}, path)
    shutil.copy(FIX / "ckpt_raschka_config.json", tmp_path / "weights.json")
    ckpt = load_any(path, vocab_path=FIX / "raschka_word_vocab.json")
    ids = np.load(FIX / "raschka_input_ids.npy")
    assert np.abs(_logits(ckpt, ids) - np.load(FIX / "ckpt_raschka_ref_logits.npy")).max() <= 1e-5


def test_a_foreign_state_dict_in_a_safetensors_file_opens(tmp_path):
    from safetensors.torch import save_file

    state = torch.load(RASCHKA, weights_only=True)
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "model.safetensors")
    ckpt = load_any(tmp_path / "model.safetensors", n_heads=2, vocab_path=FIX / "raschka_word_vocab.json")
    assert ckpt.source_format == "llms-from-scratch"
    ids = np.load(FIX / "raschka_input_ids.npy")
    assert np.abs(_logits(ckpt, ids) - np.load(FIX / "ckpt_raschka_ref_logits.npy")).max() <= 1e-5


# ---------------------------------------------------------------- files the tests make


def _nano_ckpt(**changes) -> dict:
    ck = torch.load(NANO, map_location="cpu", weights_only=True)
    ck.update(changes)
    return ck


@pytest.mark.parametrize("prefix", ["_orig_mod.", "module.", "module._orig_mod."])
def test_compile_and_ddp_prefixes_and_mask_buffers(tmp_path, prefix):
    ck = _nano_ckpt()
    state = {prefix + k: v for k, v in ck["model"].items()}
    state[prefix + "transformer.h.0.attn.bias"] = torch.ones(32, 32).tril().view(1, 1, 32, 32)
    torch.save({**ck, "model": state}, tmp_path / "ckpt.pt")
    ckpt = load_any(tmp_path / "ckpt.pt", vocab_path=META)
    ids = np.load(FIX / "nanogpt_input_ids.npy")
    assert np.abs(_logits(ckpt, ids) - np.load(FIX / "ckpt_nanogpt_ref_logits.npy")).max() <= 1e-5


def test_prefixes_are_stripped_at_the_start_only():
    out = strip_prefixes(Path("x"), {"_orig_mod.a.module.b": 1, "module.c._orig_mod.d": 2})
    assert out == {"a.module.b": 1, "c._orig_mod.d": 2}


def _layer_norm(x, w, b, eps=1e-5):
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * w + (0 if b is None else b)


def _attend(q, k, v, n_heads):
    T, d = q.shape
    q, k, v = (t.view(T, n_heads, d // n_heads).transpose(0, 1) for t in (q, k, v))  # (H, T, dh)
    s = q @ k.transpose(1, 2) / math.sqrt(d // n_heads)
    s = s.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
    w = torch.softmax(s, -1)
    return (w @ v).transpose(0, 1).reshape(T, d), w


def _nanogpt_reference(sd, n_heads, ids):
    """nanoGPT's forward, written from its model.py's equations on its own key names."""
    g = lambda k: sd.get(k)  # noqa: E731
    lin = lambda x, name: F.linear(x, g(name + ".weight"), g(name + ".bias"))  # noqa: E731
    x = g("transformer.wte.weight")[ids] + g("transformer.wpe.weight")[: len(ids)]
    i = 0
    while f"transformer.h.{i}.ln_1.weight" in sd:
        p = f"transformer.h.{i}."
        h = _layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"))
        q, k, v = lin(h, p + "attn.c_attn").split(x.shape[1], dim=-1)
        y, _ = _attend(q, k, v, n_heads)
        x = x + lin(y, p + "attn.c_proj")
        h = _layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"))
        x = x + lin(F.gelu(lin(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        i += 1
    return _layer_norm(x, g("transformer.ln_f.weight"), g("transformer.ln_f.bias")) @ g("lm_head.weight").T


@pytest.mark.parametrize("bias", [True, False])
def test_nanogpt_with_and_without_bias_matches_its_equations(tmp_path, bias):
    sd = _random_nanogpt(bias=bias)
    args = dict(n_layer=2, n_head=4, n_embd=32, block_size=16, bias=bias, vocab_size=50, dropout=0.0)
    torch.save({"model": sd, "model_args": args, "config": {"dataset": "none"}, "iter_num": 5}, tmp_path / "c.pt")
    ckpt = load_any(tmp_path / "c.pt", allow_no_tokenizer=True)
    assert (ckpt.config.qkv_bias, ckpt.config.o_bias, ckpt.config.mlp_bias, ckpt.config.norm_bias) == (bias,) * 4
    ids = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8])
    ref = _nanogpt_reference(sd, 4, ids).numpy()
    assert np.abs(_logits(ckpt, ids.numpy()) - ref).max() <= 1e-5


def test_bare_nanogpt_state_dict_needs_n_heads(tmp_path):
    sd = _random_nanogpt()
    torch.save(sd, tmp_path / "sd.pt")
    with pytest.raises(NeedsInput) as info:
        load_any(tmp_path / "sd.pt", allow_no_tokenizer=True)
    assert info.value.kind == "n_heads" and info.value.proposed == 1
    ckpt = load_any(tmp_path / "sd.pt", n_heads=4, allow_no_tokenizer=True)
    ids = torch.tensor([7, 7, 0, 49])
    assert np.abs(_logits(ckpt, ids.numpy()) - _nanogpt_reference(sd, 4, ids).numpy()).max() <= 1e-5


def test_untied_lm_head_becomes_our_unembed(tmp_path):
    sd = _random_nanogpt(bias=False)
    sd["lm_head.weight"] = sd["lm_head.weight"] + 0.5
    torch.save({"model": sd, "model_args": {"n_head": 2}}, tmp_path / "c.pt")
    ckpt = load_any(tmp_path / "c.pt", allow_no_tokenizer=True)
    assert not ckpt.config.tied_unembed
    ids = torch.tensor([1, 2, 3])
    assert np.abs(_logits(ckpt, ids.numpy()) - _nanogpt_reference(sd, 2, ids).numpy()).max() <= 1e-5


def _raschka_reference(sd, n_heads, ids):
    """The book's GPTModel forward (ch. 4), on its own key names; GELU is the tanh form."""
    g = sd.get
    lin = lambda x, n: F.linear(x, g(n + ".weight"), g(n + ".bias"))  # noqa: E731
    gelu = lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # noqa: E731
    x = g("tok_emb.weight")[ids] + g("pos_emb.weight")[: len(ids)]
    i = 0
    while f"trf_blocks.{i}.norm1.scale" in sd:
        p = f"trf_blocks.{i}."
        h = _layer_norm(x, g(p + "norm1.scale"), g(p + "norm1.shift"))
        y, _ = _attend(lin(h, p + "att.W_query"), lin(h, p + "att.W_key"), lin(h, p + "att.W_value"), n_heads)
        x = x + lin(y, p + "att.out_proj")
        h = _layer_norm(x, g(p + "norm2.scale"), g(p + "norm2.shift"))
        x = x + lin(gelu(lin(h, p + "ff.layers.0")), p + "ff.layers.2")
        i += 1
    return _layer_norm(x, g("final_norm.scale"), g("final_norm.shift")) @ g("out_head.weight").T


def test_raschka_with_qkv_bias_matches_its_equations(tmp_path):
    sd = dict(torch.load(RASCHKA, weights_only=True))
    gen = torch.Generator().manual_seed(1)
    for i in range(2):
        for name in ("W_query", "W_key", "W_value"):
            sd[f"trf_blocks.{i}.att.{name}.bias"] = torch.randn(64, generator=gen) * 0.3
    torch.save(sd, tmp_path / "gpt.pth")
    (tmp_path / "gpt.json").write_text(json.dumps({"n_heads": 2, "qkv_bias": True, "emb_dim": 64}))
    ckpt = load_any(tmp_path / "gpt.pth", allow_no_tokenizer=True)
    assert ckpt.config.qkv_bias and ckpt.config.gelu == "tanh" and not ckpt.config.tied_unembed
    ids = torch.as_tensor(np.load(FIX / "raschka_input_ids.npy"))
    assert np.abs(_logits(ckpt, ids.numpy()) - _raschka_reference(sd, 2, ids).numpy()).max() <= 1e-5
    (tmp_path / "gpt.json").write_text(json.dumps({"n_heads": 2, "qkv_bias": False}))
    with pytest.raises(CheckpointError, match="says qkv_bias=False but the weights say True"):
        load_any(tmp_path / "gpt.pth", allow_no_tokenizer=True)


def test_state_dict_saved_on_a_cuda_device_opens_on_the_cpu(tmp_path):
    """No GPU here: torch.save is made to tag the storages "cuda:0", exactly as a CUDA save does.
    A plain torch.load then fails for want of CUDA; load_any maps the tensors to the CPU."""
    from torch import serialization

    def cuda_tag(storage):
        return "cuda:0" if storage.device.type == "cpu" else None

    serialization.register_package(0, cuda_tag, lambda obj, location: None)
    try:
        torch.save(_nano_ckpt(), tmp_path / "ckpt.pt")
    finally:
        serialization._package_registry[:] = [e for e in serialization._package_registry if e[1] is not cuda_tag]
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(tmp_path / "ckpt.pt", weights_only=True)
    ckpt = load_any(tmp_path / "ckpt.pt", vocab_path=META)
    assert ckpt.model.tok_emb.weight.device.type == "cpu"
    ids = np.load(FIX / "nanogpt_input_ids.npy")
    assert np.abs(_logits(ckpt, ids) - np.load(FIX / "ckpt_nanogpt_ref_logits.npy")).max() <= 1e-5


class _Evil:
    """Unpickling this would create a file: proof of code execution if it ever happens."""

    def __init__(self, marker: Path, how: str) -> None:
        self.marker, self.how = marker, how

    def __reduce__(self):
        if self.how == "system":
            return os.system, (f"touch '{self.marker}'",)
        return open, (str(self.marker), "w")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("how", ["system", "open"])
@pytest.mark.parametrize("writer", ["zip", "legacy", "pickle"])
def test_a_pickle_that_runs_code_is_refused_and_never_runs(tmp_path, how, writer):
    marker = tmp_path / "MARKER"
    payload = {"model": {"transformer.wte.weight": torch.zeros(2, 2)}, "x": _Evil(marker, how)}
    path = tmp_path / "ckpt.pt"
    if writer == "pickle":
        path.write_bytes(pickle.dumps(payload, protocol=4))
    else:
        torch.save(payload, path, _use_new_zipfile_serialization=writer == "zip")
    with pytest.raises(CheckpointError, match=r"refused: the file asks Python to call .*Nothing in it was run"):
        load_any(path)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_globals_a_pickle_asks_for_are_read_without_running_it(tmp_path, protocol):
    marker = tmp_path / "MARKER"
    data = pickle.dumps({"a": "x", "b": ["x", _Evil(marker, "system")]}, protocol=protocol)
    assert referenced_globals(data) == [f"{os.system.__module__}.system"]
    assert not marker.exists()


def test_a_meta_pkl_that_runs_code_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "MARKER"
    shutil.copy(NANO, tmp_path / "ckpt.pt")
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"itos": _Evil(marker, "system")}))
    with pytest.raises(CheckpointError, match=r"meta.pkl: refused: it asks for (posix|nt).system"):
        load_any(tmp_path / "ckpt.pt")
    assert not marker.exists()
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"itos": {0: "a"}, "scale": 1.5}))
    with pytest.raises(CheckpointError, match="refused: it holds a value of type float"):
        load_any(tmp_path / "ckpt.pt")


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok_emb = torch.nn.Embedding(4, 2)


def test_a_whole_pickled_model_is_refused_asking_for_its_state_dict(tmp_path):
    torch.save(TinyNet(), tmp_path / "model.pth")
    with pytest.raises(CheckpointError, match=re.escape("torch.save(model.state_dict(), 'model.pth')")) as info:
        load_any(tmp_path / "model.pth")
    assert "TinyNet" in str(info.value) and "not a state_dict" in str(info.value)


def test_vocabulary_of_another_size_is_refused_naming_both_numbers(tmp_path):
    with pytest.raises(CheckpointError,
                       match="the vocabulary has 500 tokens but the model's embedding table has 65 rows"):
        load_any(NANO, vocab_path=FIX / "raschka_word_vocab.json")
    shutil.copy(NANO, tmp_path / "ckpt.pt")
    meta = pickle.loads(META.read_bytes())
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"itos": {i: c for i, c in meta["itos"].items() if i < 64}}))
    with pytest.raises(CheckpointError, match="has 64 tokens but .* 65 rows"):
        load_any(tmp_path / "ckpt.pt")


def test_unknown_layouts_say_what_was_tried(tmp_path):
    torch.save({"encoder.weight": torch.zeros(2), "decoder.bias": torch.zeros(2)}, tmp_path / "x.pt")
    expected = ("tried: Transformer Explorer .*nanoGPT.*LLMs-from-scratch.*"
                "first keys found: encoder.weight, decoder.bias")
    with pytest.raises(CheckpointError, match=expected):
        load_any(tmp_path / "x.pt")
    (tmp_path / "junk.pt").write_bytes(b"hello, this is not a model")
    with pytest.raises(CheckpointError, match="junk.pt: not a checkpoint format this app opens"):
        load_any(tmp_path / "junk.pt")
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="it holds a list"):
        load_any(tmp_path / "list.pt")
