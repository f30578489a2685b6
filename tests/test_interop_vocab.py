"""Opening models with GPT-2's vocabulary (the shipped BPE files, tiktoken's cache names), the
foreign tokenizers, Save As into our format and the trace command on foreign files."""

from __future__ import annotations

import functools
import json
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interop_files import FIX, GPT2_DIR, META, NANO, RASCHKA, logits as _logits, offline_gpt2, random_nanogpt as _random_nanogpt, tiktoken_cache as _tiktoken_cache
from model.checkpoint import CheckpointError, NeedsInput, load_any, load_checkpoint, save_as
from model.formats.vocab import char_tokenizer, gpt2_tokenizer, word_vocab_tokenizer


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


@pytest.fixture(autouse=True)
def _gpt2_cache(monkeypatch, tmp_path):
    offline_gpt2(monkeypatch, tmp_path)


# ---------------------------------------------------------------- GPT-2's vocabulary


def test_gpt2_padded_vocabulary_opens_and_round_trips(tmp_path):
    sd = _random_nanogpt(vocab=50304, ctx=8, d=8, layers=1, bias=False)
    torch.save({"model": sd, "model_args": {"n_head": 2, "vocab_size": 50304}}, tmp_path / "ckpt.pt")
    ckpt = load_any(tmp_path / "ckpt.pt")
    assert ckpt.tokenizer.vocab_size == 50257 and ckpt.vocab_padding == 47
    assert ckpt.tokenizer.encode("Hello world").ids == (15496, 995)
    save_as(ckpt, tmp_path / "ours.safetensors")
    again = load_checkpoint(tmp_path / "ours.safetensors")
    assert again.vocab_padding == 47 and again.tokenizer.encode("Hello world").ids == (15496, 995)
    ids = [15496, 995, 50256]
    np.testing.assert_array_equal(_logits(again, ids), _logits(ckpt, ids))


def test_gpt2_files_ship_with_the_project_and_tiktoken_cache_dir_comes_first(tmp_path, monkeypatch):
    sd = _random_nanogpt(vocab=50257, ctx=4, d=8, layers=1, bias=False)
    torch.save({"model": sd, "model_args": {"n_head": 1}}, tmp_path / "ckpt.pt")
    assert load_any(tmp_path / "ckpt.pt").tokenizer.encode("Hello world").ids == (15496, 995)  # the shipped copy
    monkeypatch.setattr("model.formats.vocab.SHIPPED_GPT2_DIR", tmp_path / "not-shipped")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(_tiktoken_cache(tmp_path / "cache")))
    assert load_any(tmp_path / "ckpt.pt").tokenizer.encode("Hello world").ids == (15496, 995)  # the override
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "encoder.json").write_text('{"a": 0}')
    (broken / "vocab.bpe").write_text("#version: 0.2\n")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(broken))
    with pytest.raises(CheckpointError, match="not GPT-2's"):  # looked at first, even when wrong
        load_any(tmp_path / "ckpt.pt")


def test_gpt2_files_missing_says_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setattr("model.formats.vocab.SHIPPED_GPT2_DIR", tmp_path / "not-shipped")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    sd = _random_nanogpt(vocab=50257, ctx=4, d=8, layers=1, bias=False)
    torch.save({"model": sd, "model_args": {"n_head": 1}}, tmp_path / "ckpt.pt")
    with pytest.raises(NeedsInput, match="Set TIKTOKEN_CACHE_DIR to a folder that holds them") as info:
        load_any(tmp_path / "ckpt.pt")
    assert info.value.kind == "vocab" and "nothing is downloaded" in str(info.value)
    assert load_any(tmp_path / "ckpt.pt", vocab_path=GPT2_DIR).tokenizer.vocab_size == 50257


def test_gpt2_tokenizer_is_tiktokens_token_for_token(tmp_path, monkeypatch):
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(_tiktoken_cache(tmp_path / "cache")))  # offline: tiktoken reads these
    ours, theirs = gpt2_tokenizer(GPT2_DIR), tiktoken.get_encoding("gpt2")
    for text in ["Hello world, it's me!\n\n  x", " émoji 🤗 naïve 12345", "<|endoftext|>Once", "a\tb\r\n  "]:
        enc = ours.encode(text)
        assert list(enc.ids) == theirs.encode(text, allowed_special={"<|endoftext|>"})
        assert all(0 <= a <= b <= len(text) for a, b in enc.spans)


# ---------------------------------------------------------------- tokenizers, Save As, CLI


def test_char_tokenizer_spans_every_character_and_skips_unknown_ones():
    tok = char_tokenizer(["\n", " ", "a", "b"])
    enc = tok.encode("ab \n🤗a")
    assert enc.ids == (2, 3, 1, 0, 2) and enc.spans == ((0, 1), (1, 2), (2, 3), (3, 4), (5, 6))
    assert tok.decode([2, 1, 3, 0]) == "a b\n" and tok.unk_id is None


def test_word_vocabulary_with_regex_is_re_findall():
    data = json.loads((FIX / "raschka_word_vocab.json").read_text())
    tok, pattern = word_vocab_tokenizer(data), re.compile(data["tokenizer_regex"])
    stoi = {w: i for i, w in enumerate(data["itos"])}
    for text in ["It's 3 dogs’ toys—naïve â€™", "Lily's DOG didn't run.", "<eos> once"]:
        assert list(tok.encode(text).ids) == [stoi.get(w, 0) for w in pattern.findall(text.lower())]
    book = word_vocab_tokenizer({"itos": ["a", "b", "<|endoftext|>", "<|unk|>"]})  # the book's ch. 2 names
    assert book.encode("A zz b").ids == (0, 3, 1)
    with pytest.raises(ValueError, match="no entry for unknown words"):
        word_vocab_tokenizer({"itos": ["a", "b"], "tokenizer_regex": "[a-z]+"})


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40))
def test_foreign_tokenizers_never_raise_and_spans_stay_in_the_text(text):
    for tok in _foreign_tokenizers():
        enc = tok.encode(text)
        assert len(enc.ids) == len(enc.spans) and all(0 <= a <= b <= len(text) for a, b in enc.spans)


@functools.cache
def _foreign_tokenizers():
    meta = pickle.loads(META.read_bytes())
    words = json.loads((FIX / "raschka_word_vocab.json").read_text())
    return (char_tokenizer([meta["itos"][i] for i in range(65)]), word_vocab_tokenizer(words), gpt2_tokenizer(GPT2_DIR))


@pytest.mark.parametrize("fixture", ["nanogpt", "raschka"])
def test_save_as_gives_our_format_with_identical_logits(tmp_path, fixture):
    ckpt = load_any(NANO, vocab_path=META) if fixture == "nanogpt" else load_any(RASCHKA)
    save_as(ckpt, tmp_path / "m.safetensors")
    again = load_any(tmp_path / "m.safetensors")
    assert again.source_format == "transformer-explorer" and again.config == ckpt.config
    assert again.training["imported_from"]["format"] == ckpt.source_format
    ids = np.load(FIX / f"{fixture}_input_ids.npy")
    np.testing.assert_array_equal(_logits(again, ids), _logits(ckpt, ids))
    text = json.loads((FIX / f"{fixture}_input.json").read_text())["text"]
    assert again.tokenizer.encode(text) == ckpt.tokenizer.encode(text)


def test_trace_command_opens_foreign_files(tmp_path, capsys):
    from model.trace import main

    path = _copy(RASCHKA, tmp_path / "model.pth")
    assert main([str(path), "--ids", "35,40,7"]) == 2
    assert "--n-heads" in capsys.readouterr().err
    assert main([str(path), "--ids", "35,40,7", "--n-heads", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["#35", "#40", "#7"]
    assert np.array(out["tensors"]["blocks.1.attn.attn_weights"]).shape == (2, 3, 3)
    assert main([str(path), "once upon", "--n-heads", "2"]) == 2
    assert "--vocab" in capsys.readouterr().err
    assert main([str(path), "once upon", "--n-heads", "2", "--vocab", str(FIX / "raschka_word_vocab.json")]) == 0
    assert "[0]once [1]upon" in capsys.readouterr().out
    assert main([str(NANO), "First", "--vocab", str(META), "--top-k", "2"]) == 0
    assert "[4]t" in capsys.readouterr().out
