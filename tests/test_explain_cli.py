"""`python -m model.trace ... --explain`: the explain object, the readable summary, one-line errors."""

import json

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig, load_checkpoint, save_checkpoint
from model.explain import explain
from model.tokens.tokenizer import train_word_tokenizer
from model.trace import main

TEXT = "the cat sat on the mat and the dog"


@pytest.fixture(scope="module")
def ckpt_path(tmp_path_factory):
    tok = train_word_tokenizer(["the cat sat on the mat . the dog sat on the log and the cat ran"], vocab_size=40)
    config = GPTConfig(vocab_size=tok.vocab_size, context_length=16, d_model=16, n_heads=2, n_layers=2, d_mlp=32)
    torch.manual_seed(5)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.safetensors"
    save_checkpoint(path, GPT(config), tok)
    return path


def run_json(capsys, *args):
    assert main(list(args) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)["explain"]


def test_the_explain_object_is_what_explain_computes(ckpt_path, capsys):
    out = run_json(capsys, str(ckpt_path), TEXT, "--explain", "--position", "5", "--target", "dog", "--head", "1",
                   "--top-k", "3")
    ckpt = load_checkpoint(ckpt_path)
    tr = ckpt.model.trace(ckpt.tokenizer.encode(TEXT).ids)
    target = ckpt.tokenizer.token_to_id("dog")
    ex = explain(ckpt.model, tr, 5, target, head=1)
    assert out["position"] == 5 and out["target_id"] == target and out["target"] == "dog"
    assert out["logit"] == pytest.approx(float(tr.logits[5, target]))
    assert out["dla"]["other"] + sum(out["dla"]["sources"]) == pytest.approx(out["logit"], abs=1e-4)
    assert len(out["dla"]["sources"]) == 6 and np.shape(out["dla"]["per_head"]) == (2, 2, 6)
    assert set(out["dla"]["components"]) == set(ex.dla.components)
    np.testing.assert_allclose(out["leave_one_out"], ex.leave_one_out[:5], atol=1e-6)  # j = 0..I-1
    assert [s["stage"] for s in out["logit_lens"]] == [s.stage for s in ex.logit_lens]
    assert len(out["logit_lens"]) == 5 and len(out["logit_lens"][0]["top_k"]) == 3
    assert out["logit_lens"][-1]["kl_to_final"] == pytest.approx(0, abs=1e-6)
    st = out["score_terms"]
    assert st["head"] == 1 and np.shape(st["token_token"]) == (9, 9) and st["pos_pos"][0][1] is None
    total = sum(np.array(st[k][8], dtype=float) for k in ("token_token", "token_pos", "pos_token", "pos_pos", "rest"))
    np.testing.assert_allclose(total, tr.blocks[0].attn_scores[1, 8], atol=1e-4)
    np.testing.assert_allclose(out["first_token_attention"], [b.attn_weights[:, 5, 0] for b in tr.blocks], atol=1e-7)
    knobs = {w["knob"]: w for w in out["what_if"]}
    assert list(knobs) == ["baseline", "no 1/√d_head", "τ = 0.5", "τ = 2", "causal mask off"]
    assert knobs["baseline"]["target_prob"] == pytest.approx(ex.prob, abs=1e-6)
    assert knobs["τ = 0.5"]["mean_attn_entropy_bits"] < knobs["τ = 2"]["mean_attn_entropy_bits"]


def test_defaults_are_the_last_position_and_the_top_token(ckpt_path, capsys):
    out = run_json(capsys, str(ckpt_path), TEXT, "--explain")
    ckpt = load_checkpoint(ckpt_path)
    tr = ckpt.model.trace(ckpt.tokenizer.encode(TEXT).ids)
    assert out["position"] == tr.n_tokens - 1 and out["target_id"] == int(np.argmax(tr.logits[-1]))
    assert len(out["leave_one_out"]) == tr.n_tokens - 1
    hashed = run_json(capsys, str(ckpt_path), TEXT, "--explain", "--target", f"#{out['target_id']}")
    assert hashed["logit"] == out["logit"]


def test_max_sources_hides_at_most_that_many(ckpt_path, capsys):
    out = run_json(capsys, str(ckpt_path), TEXT, "--explain", "--max-sources", "3")
    assert len(out["leave_one_out"]) == 8 and len(out["leave_one_out_computed"]) == 3
    assert [j for j, v in enumerate(out["leave_one_out"]) if v is not None] == out["leave_one_out_computed"]
    assert 0 in out["leave_one_out_computed"]
    assert run_json(capsys, str(ckpt_path), TEXT, "--explain")["leave_one_out_computed"] == list(range(8))


def test_without_json_a_readable_summary(ckpt_path, capsys):
    assert main([str(ckpt_path), TEXT, "--explain", "--target", "cat"]) == 0
    text = capsys.readouterr().out
    assert "why 'cat'" in text and "logit lens" in text and "blocks.1.resid_post" in text
    assert "leave-one-out" in text and "(itself)" in text and "attention on the first token" in text
    assert "token_token" in text and "what if" in text and "τ = 2" in text


@pytest.mark.parametrize("args, words", [
    (["--explain", "--target", "zebra"], "'zebra' is not one token"),
    (["--explain", "--target", "#999"], "the vocabulary has ids 0.."),
    (["--explain", "--position", "9"], "position 9 is out of range"),
    (["--explain", "--head", "2"], "head 2"),
    (["--position", "1"], "go with --explain"),
    (["--max-sources", "4"], "go with --explain"),
    (["--explain", "--max-sources", "0"], "--max-sources must be at least 1"),
])
def test_bad_explain_options_exit_2_with_one_line(ckpt_path, capsys, args, words):
    assert main([str(ckpt_path), TEXT] + args) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_explaining_no_tokens_is_an_error(ckpt_path, capsys):
    assert main([str(ckpt_path), "", "--explain"]) == 2
    assert "no tokens" in capsys.readouterr().err
