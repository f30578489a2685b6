"""`python -m model.trace`: text and JSON output, options, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig, load_checkpoint, save_checkpoint
from model.trace import main
from model.tokens.tokenizer import train_word_tokenizer


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.parametrize("switches", [[], ["--no-pe"], ["--bidirectional"]])
def test_generate_greedy_equals_repeated_argmax_of_the_traces_last_logits(ckpt_path, capsys, switches):
    """With the trace's switches too: --no-pe and --bidirectional generated with the plain model."""
    assert main([str(ckpt_path), "once upon a", "--generate", "8", "--json", *switches]) == 0
    out = json.loads(capsys.readouterr().out)
    ckpt = load_checkpoint(ckpt_path)
    ids = list(ckpt.tokenizer.encode("once upon a").ids)
    options = dict(positional_encoding="--no-pe" not in switches, causal="--bidirectional" not in switches)
    for _ in range(8):  # longer than the context (6): the window slides, as in the trace
        ids.append(int(np.argmax(ckpt.model.trace(ids, **options).logits[-1])))
    gen = out["generated"]
    assert gen["ids"] == ids[3:] and gen["prob"] == [1.0] * 8
    assert gen["tokens"] == [ckpt.tokenizer.display(i) for i in ids[3:]] and gen["how"] == "greedy"
    assert gen["text"] == ckpt.tokenizer.render(ids[3:], "once upon a")[0]  # what follows the input
    assert gen["text"].startswith(" ") and "once upon a" + gen["text"] == ckpt.tokenizer.render(ids)[0]
    assert out["token_ids"] == ids[:3]  # the trace is still the input text's


def test_generate_with_a_seed_repeats_and_another_seed_differs(ckpt_path, capsys):
    runs = []
    for seed in ("5", "5", "6"):
        assert main([str(ckpt_path), "once upon a", "--generate", "12", "--temperature", "2", "--top-p", "0.95",
                     "--top-k", "20", "--seed", seed, "--json"]) == 0
        runs.append(json.loads(capsys.readouterr().out)["generated"])
    assert runs[0]["ids"] == runs[1]["ids"] != runs[2]["ids"]
    assert runs[0]["sampling"] == {"temperature": 2.0, "top_k": 20, "top_p": 0.95, "seed": 5}
    assert len(runs[0]["ids"]) == 12 and all(0 < p <= 1 for p in runs[0]["prob"])


@pytest.mark.parametrize("argv, message", [
    (["--seed", "3"], "go with --generate"),
    (["--generate", "3", "--top-p", "0.9"], "give --temperature above 0"),
    (["--generate", "-1"], "0 or more"),
    (["--generate", "2", "--temperature", "1", "--top-p", "1.5"], "top_p must be in"),
    (["--generate", "2", "--temperature", "1", "--seed", "-1"], "seed must be a whole number 0 or more, got -1"),
])
def test_generate_options_that_do_not_fit_are_refused(ckpt_path, capsys, argv, message):
    assert main([str(ckpt_path), "once upon a"] + argv) == 2
    assert message in capsys.readouterr().err
