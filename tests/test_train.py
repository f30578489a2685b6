"""The training command: data preparation, a short real run, determinism, bad input, Ctrl+C."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import load_checkpoint
from model.training import data
from model.train import log_spaced_steps, lr_at, main
from conftest import SAFETY_NET_S

NAMES = ["lily", "tom", "sue", "ben", "max", "mia"]
THINGS = ["ball", "cat", "dog", "kite", "cake", "box"]


def _story(i: int) -> str:
    name, thing = NAMES[i % 6], THINGS[(i * 5) % 6]
    return (f"once upon a time, {name} had a red {thing}. {name} liked the {thing} a lot.\n\n"
            f"one day, {name} lost the {thing}. {name} was sad. then mom found the {thing}, "
            f"and {name} was happy.")


@pytest.fixture
def texts(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny train file in the train sample's layout and a val file with <|endoftext|> lines."""
    train = tmp_path / "train.txt"
    train.write_text("\n".join(_story(i) for i in range(12)) + "\n", encoding="utf-8")
    val = tmp_path / "val.txt"
    val.write_text("".join(_story(i).title() + "\n<|endoftext|>\n" for i in range(12, 16)),
                   encoding="utf-8")
    return train, val


TINY = ["--d-model", "16", "--d-mlp", "32", "--context-length", "8", "--batch-size", "8",
        "--quiet"]


def _train(texts, out: Path, *extra: str) -> int:
    train, val = texts
    return main(["--corpus", str(train), "--val", str(val), "--out", str(out), *TINY, *extra])


def test_split_stories_both_layouts():
    plain = "a b.\n\nc d.\ne f.\n\n\ng h.\ni j.\n"
    assert data.split_stories(plain) == ["a b.\n\nc d.", "e f.\n\ng h.", "i j."]
    marked = "A b.\nC d.\n\nE.\n<|endoftext|>\nF g.\n<|endoftext|>\n"
    assert data.split_stories(marked) == ["A b.\n\nC d.\n\nE.", "F g."]


def test_repair_text_fixes_the_known_mojibake():
    damaged = "she said, â€œhi!â€ and he didnâ€™t go. donâ€t â€” ok"
    assert data.repair_text(damaged) == "she said, \"hi!\" and he didn't go. don't — ok"


def test_sampler_visits_every_block_once_per_epoch():
    stream = torch.arange(41)
    sampler = data.BlockSampler(stream, 4, 5, torch.Generator().manual_seed(0))
    x, y = sampler.next_batch()
    assert torch.equal(y, x + 1)  # every position's target is the next token
    n_blocks = data.window_starts(41, 4, sampler._order[0].item() % 4).numel()
    seen = [x]
    while sampler.epoch == 1 and sampler._next < sampler._order.numel():
        seen.append(sampler.next_batch()[0])
    starts = torch.cat(seen)[:n_blocks, 0]
    assert starts.unique().numel() == n_blocks


def test_schedules():
    assert log_spaced_steps(1000, 5) == [0, 1, 10, 100, 1000]
    assert log_spaced_steps(3, 4) == [0, 1, 2, 3]
    assert lr_at(0, 100, 1.0, 10, 0.1) == pytest.approx(0.1)
    assert lr_at(10, 100, 1.0, 10, 0.1) == pytest.approx(1.0)
    assert lr_at(100, 100, 1.0, 10, 0.1) == pytest.approx(0.1)


@pytest.mark.slow
def test_short_run_lowers_loss_and_checkpoint_loads_and_traces(texts, tmp_path):
    out = tmp_path / "m.safetensors"
    assert _train(texts, out, "--steps", "60", "--lr", "1e-2", "--snapshots", "3") == 0
    ck = load_checkpoint(out)
    t = ck.training
    assert t["steps"] == 60 and t["command"].startswith("python -m model.train --corpus")
    curve = dict(t["val_curve"])
    assert curve[60] < curve[0] - 1.0, curve  # validation loss clearly down from the start
    assert t["val_loss"] == pytest.approx(curve[60], abs=1e-4)
    assert t["train_loss"] < 2.0 and t["tokens_per_s"] > 0
    assert t["corpus"][0]["sha256"] == hashlib.sha256(texts[0].read_bytes()).hexdigest()
    assert t["val"]["sha256"] == hashlib.sha256(texts[1].read_bytes()).hexdigest()
    assert ck.config.context_length == 8 and ck.config.d_model == 16
    enc = ck.tokenizer.encode("once upon a time, lily had a")
    trace = ck.model.trace(enc.ids)
    assert trace.probs.shape == (len(enc.ids), ck.config.vocab_size)
    assert ck.tokenizer.id_to_token(int(trace.probs[1].argmax())) == "a"  # "upon" -> "a"
    snaps = sorted((tmp_path / "m-snapshots").iterdir())
    assert [p.name for p in snaps] == [f"step-{s:06d}.safetensors" for s in (0, 1, 60)]
    first = load_checkpoint(snaps[0])
    assert first.training["steps"] == 0 and first.training["val_loss"] == pytest.approx(curve[0], abs=1e-4)


def test_same_seed_same_weights(texts, tmp_path):
    paths = [tmp_path / f"{n}.safetensors" for n in ("a", "b", "c")]
    for path, seed in zip(paths, ("1", "1", "2")):
        assert _train(texts, path, "--steps", "5", "--seed", seed) == 0
    a, b, c = (load_checkpoint(p).model.state_dict() for p in paths)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_resume_continues_and_keeps_the_tokenizer(texts, tmp_path, capsys):
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert _train(texts, first, "--steps", "5") == 0
    assert main(["--corpus", str(texts[0]), "--val", str(texts[1]), "--out", str(second),
                 "--resume", str(first), "--steps", "5", "--quiet"]) == 0
    ck = load_checkpoint(second)
    assert ck.training["steps"] == 10 and ck.training["resumed_from"] == str(first)
    assert ck.tokenizer.to_json() == load_checkpoint(first).tokenizer.to_json()
    assert main(["--corpus", str(texts[0]), "--val", str(texts[1]), "--out", str(second),
                 "--resume", str(first), "--d-model", "32", "--quiet"]) == 2
    assert "d_model 16, but the options ask for 32" in capsys.readouterr().err


def test_tokenizer_json_is_reused(texts, tmp_path):
    from model.tokens.tokenizer import word_tokenizer_from_vocab

    words = ["<unk>", "<|endoftext|>", "once", "upon", "a", "time", ",", ".", "lily", "the"]
    path = tmp_path / "tokenizer.json"
    path.write_text(word_tokenizer_from_vocab(words).to_json(), encoding="utf-8")
    out = tmp_path / "m.safetensors"
    assert _train(texts, out, "--steps", "3", "--tokenizer", str(path)) == 0
    ck = load_checkpoint(out)
    assert ck.config.vocab_size == 10 and ck.tokenizer.id_to_token(8) == "lily"
    assert ck.training["val_unk_share"] > 0.5  # most words of the tiny stories are not in it


def _bad_cases(tmp_path: Path, train: Path, val: Path) -> dict[str, tuple[list[str], str]]:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    short = tmp_path / "short.txt"
    short.write_text("a tiny story.\n", encoding="utf-8")
    out = str(tmp_path / "m.safetensors")
    base = ["--val", str(val), "--out", out]
    return {
        "missing": (["--corpus", str(tmp_path / "nope.txt"), *base], "no such file"),
        "empty": (["--corpus", str(empty), *base], "empty"),
        "short": (["--corpus", str(short), *base], "shorter than one block"),
        "no folder": (["--corpus", str(train), "--val", str(val), "--out",
                       str(tmp_path / "no" / "m.safetensors")], "does not exist"),
        "out is a folder": (["--corpus", str(train), "--val", str(val), "--out",
                             str(tmp_path)], "must end in .safetensors"),
        "val is train": (["--corpus", str(train), "--val", str(train), "--out", out],
                         "never validate on training text"),
        "heads": (["--corpus", str(train), *base, "--n-heads", "3"], "must divide d_model"),
        "warmup": (["--corpus", str(train), *base, "--steps", "5", "--warmup", "9"], "--warmup"),
        "resume+tokenizer": (["--corpus", str(train), *base, "--resume", out, "--tokenizer", out],
                             "contradict"),
        "vocab+tokenizer": (["--corpus", str(train), *base, "--tokenizer", str(train),
                             "--vocab-size", "10"], "--vocab-size only applies"),
        "bad resume": (["--corpus", str(train), *base, "--resume", str(train)], "train.txt"),
        "unknown option": (["--corpus", str(train), *base, "--epochs", "3"], "unrecognized"),
        "nan weight decay": (["--corpus", str(train), *base, "--weight-decay", "nan"],
                             "--weight-decay must be a finite number"),
        "inf lr": (["--corpus", str(train), *base, "--lr", "inf"], "--lr must be a finite number"),
    }


def test_bad_input_one_line_exit_2_nothing_written(texts, tmp_path, capsys):
    before = set(tmp_path.rglob("*"))
    for name, (argv, expected) in _bad_cases(tmp_path, *texts).items():
        assert main([*argv, *TINY]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and expected in err, (name, err)
    written = set(tmp_path.rglob("*")) - before
    assert {p.name for p in written} <= {"empty.txt", "short.txt"}


def test_diverging_run_writes_nothing_and_keeps_the_old_checkpoint(texts, tmp_path, capsys):
    """A run whose loss went NaN once saved weights that load_checkpoint refuses, over a good --out."""
    out = tmp_path / "m.safetensors"
    assert _train(texts, out, "--steps", "2") == 0
    before = out.read_bytes()
    capsys.readouterr()
    for steps in ("6", "1"):  # diverges during the run; in the only step (caught before saving)
        code = _train(texts, out, "--steps", steps, "--lr", "1e20", "--warmup", "0", "--grad-clip", "0")
        err = capsys.readouterr().err
        assert code == 1 and "training diverged at step" in err and "nothing written" in err, (steps, err)
        assert out.read_bytes() == before
    load_checkpoint(out)


@pytest.mark.slow
def test_bad_input_from_the_shell(texts, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "model.train", "--corpus", str(tmp_path / "none.txt"),
         "--val", str(texts[1]), "--out", str(tmp_path / "m.safetensors")],
        capture_output=True, text=True, timeout=SAFETY_NET_S,
    )
    assert proc.returncode == 2
    assert proc.stderr == f"error: {tmp_path / 'none.txt'}: no such file\n"
    assert not (tmp_path / "m.safetensors").exists()


def test_ctrl_c_saves_cleanly(texts, tmp_path, monkeypatch, capsys):
    real = data.BlockSampler.next_batch
    calls = []

    def interrupt_on_fifth(self):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(data.BlockSampler, "next_batch", interrupt_on_fifth)
    out = tmp_path / "m.safetensors"
    assert _train(texts, out, "--steps", "50") == 130
    assert "interrupted at step 4 of 50" in capsys.readouterr().err
    ck = load_checkpoint(out)
    assert ck.training["interrupted"] is True and ck.training["steps"] == 4
    assert ck.training["val_loss"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors", "train.txt", "val.txt"]


def test_baselines_on_a_known_stream():
    from model.baselines import baseline_losses, bigram_probs, unigram_probs

    stream = torch.tensor([2, 3, 4] * 50)
    uni = unigram_probs(stream, 6)
    assert uni.sum().item() == pytest.approx(1.0)
    assert uni[0].item() == pytest.approx(1 / 156)  # add-1: (0 + 1) / (150 + 6)
    every_w = torch.arange(6)
    cond = bigram_probs(stream, torch.full((6,), 3), every_w, 6, 0.7)
    assert cond.sum().item() == pytest.approx(1.0)
    assert cond[4].item() == pytest.approx(0.7 + 0.3 * 51 / 156)
    losses = baseline_losses(stream, torch.tensor([2, 3, 4] * 4), 4, 6)
    assert losses["bigram"] < 0.1 < 1.0 < losses["unigram"]  # a cycle is certain given the last token


@pytest.mark.slow
def test_real_sigint_saves_and_exits_130(texts, tmp_path):
    import signal
    import time

    out, snaps = tmp_path / "m.safetensors", tmp_path / "snaps"
    proc = subprocess.Popen(
        [sys.executable, "-m", "model.train", "--corpus", str(texts[0]), "--val", str(texts[1]),
         "--out", str(out), *TINY, "--steps", "1000000", "--snapshots", "3",
         "--snapshot-dir", str(snaps)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + SAFETY_NET_S
    while not (snaps / "step-0000001.safetensors").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=SAFETY_NET_S)
    assert proc.returncode == 130, err
    assert "interrupted at step" in err and "Traceback" not in err
    ck = load_checkpoint(out)
    assert ck.training["interrupted"] is True and ck.training["steps"] >= 1
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_a_text_without_spaces_warns_about_unknown_words_and_bpe_is_the_way(tmp_path, capsys):
    """A CJK corpus trained a word-level tokenizer in which most validation tokens were <unk>, said only
    in the metadata; and --tokenizer with a BPE tokenizer.json (no <unk>) failed with AttributeError."""
    import random

    rng = random.Random(0)
    chars = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现"
    story = lambda: "。".join("".join(rng.choice(chars) for _ in range(12)) for _ in range(6)) + "。"  # noqa: E731
    (tmp_path / "train.txt").write_text("\n\n".join(story() for _ in range(40)), encoding="utf-8")
    (tmp_path / "val.txt").write_text("\n\n".join(story() for _ in range(6)), encoding="utf-8")
    args = ["--corpus", str(tmp_path / "train.txt"), "--val", str(tmp_path / "val.txt"), *TINY, "--steps", "3"]
    assert main([*args, "--out", str(tmp_path / "words.safetensors")]) == 0
    err = capsys.readouterr().err
    share = load_checkpoint(tmp_path / "words.safetensors").training["val_unk_share"]
    assert share >= 0.5 and err.count(f"warning: {share:.0%} of the validation tokens are <unk>") == 2  # start, end
    assert "--tokenizer tokenizer.json" in err
    bpe = Path(__file__).parent / "fixtures" / "arch" / "hf-gpt2" / "tokenizer.json"
    assert main([*args, "--out", str(tmp_path / "bpe.safetensors"), "--tokenizer", str(bpe)]) == 0
    assert load_checkpoint(tmp_path / "bpe.safetensors").training["val_unk_share"] == 0.0
    assert "<unk>" not in capsys.readouterr().err
