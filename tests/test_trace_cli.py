"""`python -m model.trace`: text and JSON output, options, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig, load_checkpoint, save_checkpoint
from model.trace import main
from model.tokenizer import train_word_tokenizer


@pytest.fixture(scope="module")
def ckpt_path(tmp_path_factory):
    tok = train_word_tokenizer(["once upon a time there was a cat . the cat sat"], vocab_size=40)
    config = GPTConfig(vocab_size=tok.vocab_size, context_length=6, d_model=16, n_heads=2, n_layers=2, d_mlp=32)
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.safetensors"
    save_checkpoint(path, GPT(config), tok)
    return path


def test_json_output_matches_the_trace(ckpt_path, capsys):
    assert main([str(ckpt_path), "Once upon a time there was a cat", "--json", "--top-k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    ckpt = load_checkpoint(ckpt_path)
    ids = ckpt.tokenizer.encode("once upon a time there was a cat").ids
    tr = ckpt.model.trace(ids)
    assert out["dropped"] == 2 and out["token_ids"] == list(ids[2:])
    assert out["tokens"] == ["a", "time", "there", "was", "a", "cat"]
    np.testing.assert_allclose(out["tensors"]["probs"], tr.probs, rtol=1e-6)
    np.testing.assert_allclose(out["tensors"]["blocks.1.attn.attn_weights"], tr.blocks[1].attn_weights)
    assert out["tensors"]["blocks.0.attn.attn_scores"][0][0][1] is None  # masked: -inf -> null
    order = np.argsort(-tr.probs[-1], kind="stable")[:3]
    assert [t for t, _ in out["top_k"]] == [ckpt.tokenizer.id_to_token(i) for i in order]
    assert out["top_k"][0][1] == pytest.approx(float(tr.probs[-1, order[0]]))


def test_ids_and_options(ckpt_path, capsys):
    assert main([str(ckpt_path), "--ids", "3,4,5", "--no-pe", "--bidirectional", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tr = load_checkpoint(ckpt_path).model.trace([3, 4, 5], positional_encoding=False, causal=False)
    np.testing.assert_allclose(out["tensors"]["logits"], tr.logits)
    assert np.array(out["tensors"]["pos_emb"]).sum() == 0


def test_text_output_lists_tokens_attention_and_top5(ckpt_path):
    res = subprocess.run(
        [sys.executable, "-m", "model.trace", str(ckpt_path), "the cat sat"],
        capture_output=True, text=True, check=True,
    )
    assert "[0]the [1]cat [2]sat" in res.stdout
    assert res.stdout.count("last position attends to") == 4  # 2 layers x 2 heads
    assert "top 5 next tokens" in res.stdout


def test_text_may_follow_the_options(ckpt_path, capsys):
    assert main([str(ckpt_path), "--top-k", "2", "--json", "the cat sat"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["the", "cat", "sat"] and len(out["top_k"]) == 2


def test_empty_text_is_fine(ckpt_path, capsys):
    assert main([str(ckpt_path), "", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == [] and out["top_k"] == []


@pytest.mark.parametrize("args, message", [
    (["{missing}"], "no such file"),
    (["{bad}"], "the file is empty"),
    (["{ckpt}", "--ids", "1,x"], "--ids takes comma-separated integers"),
    (["{ckpt}", "--ids", "999"], "outside the vocabulary"),
    (["{ckpt}", "the cat", "--ids", "1,2"], "give the text or --ids, not both"),
    (["{ckpt}", "the", "--top-k", "-3"], "--top-k must be 0 or more, got -3"),
])
def test_errors_are_one_line_with_exit_code_2(ckpt_path, tmp_path, args, message):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"")
    names = {"missing": tmp_path / "none.safetensors", "bad": bad, "ckpt": ckpt_path}
    argv = [a.format(**names) for a in args]
    res = subprocess.run([sys.executable, "-m", "model.trace", *argv], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and message in res.stderr
