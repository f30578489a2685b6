"""The Training panel's and the Train dialog's Qt-free parts: the log step axis, the slider's
stops, following a --log-file, the dialog's choices checked with the command's own checks, and the
cheap text check the command now runs before reading."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.core.train_log import TrainLog, duration
from explorer.core.train_setup import (TrainChoice, check, command_args, default_choice, held_out_paths,
                                       next_free_name, split_for_validation, typed_path)
from explorer.core.training_views import (curve_snapshots, difference_columns, difference_sentence, largest_changes, nearest_index,
                                          slider_stops, spread_indices, step_ticks, step_x)
from model.training import data
from model.training.args import build_parser


def test_the_log_axis_spaces_log_spaced_steps_evenly_and_keeps_step_0():
    steps = [0, 1, 2, 4, 7, 13, 24, 45, 84, 159, 299, 563, 1062, 2000]
    x = step_x(steps)
    assert x[0] == 0 and x[1] == pytest.approx(np.log10(2))
    gaps = np.diff(x[2:])
    assert gaps.max() / gaps.min() < 1.4  # about even from step 2 on (a linear axis: 1,000 times)
    assert [label for _, label in step_ticks(2000)] == ["0", "1", "3", "10", "30", "100", "300", "1,000"]
    assert nearest_index(step_x(90), steps) == 8 and nearest_index(-1.0, steps) == 0
    assert nearest_index(99.0, steps) == 13
    with pytest.raises(ValueError):
        nearest_index(0.0, [])


def test_slider_stops_end_with_the_loaded_model_only_when_it_is_the_run_s():
    stops = slider_stops([0, 5, 10], 10)
    assert [(s.step, s.index) for s in stops] == [(0, 0), (5, 1), (10, 2), (10, -1)]
    assert stops[1].label == "snapshot 2 of 3: step 5" and "the model you opened" in stops[-1].label
    assert [s.index for s in slider_stops([0, 5], None)] == [0, 1]


STORY = "Once upon a time there was a little girl named Lily. She liked to"


def test_the_difference_sentence_names_the_largest_gain_over_the_whole_vocabulary():
    from explorer.core.defaults import DEFAULT_CHECKPOINT
    from model.checkpoint import load_checkpoint
    from model.training.over_training import snapshot_difference
    from model.training.snapshots import load_snapshots

    ck = load_checkpoint(DEFAULT_CHECKPOINT)
    snaps = load_snapshots(DEFAULT_CHECKPOINT.parent / "snapshots", ck).snapshots
    first, last = snaps[0], snaps[-1]
    assert (first.step, last.step) == (0, 2000)
    ids = ck.tokenizer.encode(STORY).ids
    diff = snapshot_difference(first, last, ids)
    rise = last.model.trace(ids).probs[-1] - first.model.trace(ids).probs[-1]  # (vocab_size,)
    best, worst = int(np.argmax(rise)), int(np.argmin(rise))
    assert ck.tokenizer.decode([best]).strip() == "play"  # what --over-training prints: 0.0002 -> 0.397
    sentence = difference_sentence(diff.probs, lambda c: ck.tokenizer.decode([c]).strip())
    assert f"'play' gained most ({rise[best]:+.3f})" in sentence and rise[best] > 0.3
    assert f"lost most ({rise[worst]:+.3f})" in sentence
    cols = difference_columns(diff.probs, 12)
    assert best in cols and worst in cols and len(set(cols.tolist())) == 12  # the map shows the named tokens


def test_no_change_that_rounds_to_zero_is_called_a_gain():
    d = np.zeros((2, 5))
    d[0, 1] = 0.5  # not the last position
    d[-1] = [-0.0002, -0.0001, -0.0003, -0.0004, -0.00005]  # all below zero, and all print as -0.000
    sentence = difference_sentence(d, lambda c: f"t{c}")
    assert "gained" not in sentence and "lost" not in sentence and "-4.0e-04" in sentence
    d[-1, 3] = -0.25
    sentence = difference_sentence(d, lambda c: f"t{c}")
    assert sentence == "After the last token, no token gained and 't3' lost most (-0.250)."
    d[-1, 2] = 0.0004  # +0.000 when printed: still no gain
    assert "no token gained" in difference_sentence(d, lambda c: f"t{c}")
    d[-1] = np.nan
    assert "not numbers" in difference_sentence(d, str) and difference_sentence(np.zeros((0, 5)), str) == ""
    assert difference_columns(np.zeros((1, 3)), 1).tolist() == [0]


def test_largest_changes_orders_by_the_largest_absolute_change_anywhere():
    d = np.zeros((3, 6))
    d[0, 4], d[2, 1], d[1, 5], d[2, 2] = -0.5, 0.3, 0.3, 0.01
    assert largest_changes(d, 3).tolist() == [4, 1, 5]  # ties by id
    assert largest_changes(d, 99).shape == (6,) and largest_changes(np.zeros((0, 0)), 3).size == 0
    d[:, 0] = np.nan  # a snapshot whose logits overflowed: no change to rank, not the largest
    d[1, 3] = np.inf
    assert largest_changes(d, 6).tolist() == [4, 1, 5, 2, 3, 0]


def _lines(*events) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_the_log_is_followed_through_partial_lines():
    log = TrainLog()
    text = _lines({"event": "start", "steps": 100, "tokens_per_step": 256, "out": "m.safetensors",
                   "snapshot_dir": "m-snapshots"},
                  {"event": "step", "step": 1, "loss": 8.0, "lr": 1e-3, "train_s": 0.5},
                  {"event": "snapshot", "step": 1, "path": "m-snapshots/step-000001.safetensors"},
                  {"event": "step", "step": 2, "loss": 7.0, "lr": 1e-3, "train_s": 1.0},
                  {"event": "val", "step": 2, "val_loss": 7.5})
    cut = len(text) - 10
    assert [e["event"] for e in log.feed(text[:cut])] == ["start", "step", "snapshot", "step"]
    assert [e["event"] for e in log.feed(text[cut:] + "not json\n")] == ["val"]
    assert log.bad_lines == 1 and log.step == 2 and log.losses == [(1, 8.0), (2, 7.0)] and log.val == [(2, 7.5)]
    assert log.snapshots == [(1, "m-snapshots/step-000001.safetensors")] and log.snapshot_dir == "m-snapshots"
    assert log.tokens_per_s == pytest.approx(2 * 256 / 1.0)
    assert log.seconds_left == pytest.approx(98 * 0.5)
    assert log.summary() == ("step 2 of 100 · training loss 7.500 · validation loss 7.500 · 512 tokens/s · "
                             "about 49 s left")
    log.feed(_lines({"event": "end", "status": "interrupted", "step": 2, "out": "m.safetensors"}))
    assert log.status == "interrupted" and "left" not in log.summary()
    assert (duration(59.6), duration(200), duration(7322)) == ("1 min 00 s", "3 min 20 s", "2 h 02 min")


@pytest.fixture
def texts(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("\n<|endoftext|>\n".join(f"story {i} : the cat sat on the mat ." for i in range(20)),
                     encoding="utf-8")
    (tmp_path / "empty.txt").write_text(" \n\t\n", encoding="utf-8")
    (tmp_path / "val.txt").write_text("the dog sat on the log .", encoding="utf-8")
    return tmp_path


def test_the_dialog_starts_from_the_command_s_defaults():
    c = default_choice()
    assert (c.n_layers, c.n_heads, c.d_model, c.context_length) == (1, 1, 128, 32)
    assert c.steps == build_parser().get_default("steps") == 1000 and c.snapshots == 14


@pytest.mark.parametrize("change, message", [
    ({"corpus": []}, "choose at least one training text file"),
    ({"corpus": ["empty.txt"]}, "empty.txt: the file is empty (no text)"),
    ({"corpus": ["missing.txt"]}, "missing.txt: no such file"),
    ({"val": "train.txt"}, "is also a --corpus file: never validate on training text"),
    ({"n_heads": 3, "d_model": 16}, "n_heads (3) must divide d_model (16)"),
    ({"steps": 5, "snapshots": 9}, "--snapshots must be between 2 and steps + 1 (6), got 9"),
    ({"out": "model.pt"}, "the name must end in .safetensors"),
    ({"val": "empty.txt"}, "empty.txt: the file is empty (no text)"),
])
def test_bad_choices_are_explained_in_the_command_s_words(texts, change, message):
    fields = {"corpus": ["train.txt"], "val": "val.txt", "out": "m.safetensors", **change}
    for key in ("corpus", "val", "out"):
        if isinstance(fields[key], list):
            fields[key] = [str(texts / p) for p in fields[key]]
        elif fields[key]:
            fields[key] = str(texts / fields[key])
    assert message in check(TrainChoice(**{**default_choice().__dict__, **fields}))
    assert sorted(p.name for p in texts.iterdir()) == ["empty.txt", "train.txt", "val.txt"]  # nothing written


@pytest.mark.parametrize("out, message", [
    ("/", "names a folder, not a file"),
    ("", "choose where to save the model"),
    ("   ", "choose where to save the model"),
    (".", "names a folder, not a file"),
    ("..", "names a folder, not a file"),
    ("{dir}/..", "names a folder, not a file"),
    ("{dir}/", "names a folder, not a file"),
    ("{dir}", "is a folder; add a file name"),
    ("~", "~ means your home folder only to a shell"),
    ("{dir}/.safetensors", "the name must end in .safetensors, after a name"),
    ("{dir}/m\x00.safetensors", "control character"),
    ("{dir}/m\n.safetensors", "control character"),
    ("{dir}/" + "x" * 300 + ".safetensors", "File name too long"),
])
def test_a_name_that_is_no_file_is_explained_without_held_out_or_held_up(texts, out, message):
    """Without a validation file the check asked for the hold-out folder of "/" first: ValueError."""
    out = out.replace("{dir}", str(texts))
    choice = TrainChoice(corpus=[str(texts / "train.txt")], val=None, out=out, steps=30, snapshots=4)
    assert message in check(choice)
    assert sorted(p.name for p in texts.iterdir()) == ["empty.txt", "train.txt", "val.txt"]  # nothing written


def test_typed_paths_are_made_absolute_and_keep_their_trailing_separator(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert typed_path(" m.safetensors ") == str(tmp_path / "m.safetensors")
    assert typed_path("~/m.safetensors") == str(tmp_path / "home" / "m.safetensors")
    assert typed_path("models/") == str(tmp_path / "models") + "/" and typed_path("/") == "/"
    assert typed_path("..") == str(tmp_path.parent) and typed_path("  ") == ""


def test_without_a_validation_file_a_tenth_of_the_stories_is_held_out(texts):
    choice = TrainChoice(corpus=[str(texts / "train.txt")], val=None, out=str(texts / "m.safetensors"), steps=30,
                         snapshots=4)
    assert check(choice) == ""
    train, val = held_out_paths(choice.out)
    argv = command_args(choice, texts / "log.jsonl")
    assert argv[:4] == ["--corpus", str(train), "--val", str(val)]
    assert argv[argv.index("--snapshot-dir") + 1] == str(texts / "m-snapshots") and "--quiet" in argv
    assert split_for_validation(choice.corpus, train, val) == (18, 2)
    assert data.read_stories([val]) == ["story 18 : the cat sat on the mat .", "story 19 : the cat sat on the mat ."]
    assert len(data.read_stories([train])) == 18
    args = build_parser().parse_args(argv)  # what the process gets parses
    assert args.corpus == [str(train)] and args.snapshots == 4
    (texts / "m-snapshots").mkdir()
    (texts / "m-snapshots" / "step-000000.safetensors").write_bytes(b"an earlier run's")
    assert "already holds snapshots of an earlier run" in check(choice)
    assert check(TrainChoice(**{**choice.__dict__, "snapshots": 0})) == ""
    assert next_free_name(choice.out) == str(texts / "m-2.safetensors")  # m-snapshots exists
    (texts / "m-2.safetensors").write_bytes(b"")
    assert next_free_name(texts / "m-2.safetensors") == str(texts / "m-3.safetensors")


def test_the_text_check_reads_only_the_start_and_names_the_fault(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok " * 10 + b"\xff")
    with pytest.raises(data.CorpusError, match=r"bad.txt: not UTF-8 text \(byte 30\)"):
        data.check_text_file(bad)
    cut = tmp_path / "cut.txt"  # a character split across two reads is fine
    cut.write_bytes(b" " * 7 + "é text".encode())
    data.check_text_file(cut, chunk_bytes=8)
    spaces = tmp_path / "spaces.txt"
    spaces.write_bytes(b" \n" * 50)
    with pytest.raises(data.CorpusError, match="the file is empty"):
        data.check_text_file(spaces, chunk_bytes=8)
    with pytest.raises(data.CorpusError, match="not a file"):
        data.check_text_file(tmp_path)


def test_the_log_says_when_the_validation_text_is_mostly_unknown_words():
    from explorer.core.train_log import TrainLog

    log = TrainLog()
    log.feed('{"event": "start", "steps": 10, "tokens_per_step": 8, "val_unk_share": 0.56}\n')
    assert log.val_unk_share == 0.56 and log.summary().endswith("56% of the validation tokens are <unk>")
    quiet = TrainLog()
    quiet.feed('{"event": "start", "steps": 10, "tokens_per_step": 8, "val_unk_share": 0.01}\n')
    assert "<unk>" not in quiet.summary()


def test_a_model_is_proposed_only_into_a_folder_that_can_take_it(tmp_path):
    from explorer.core.defaults import ASSETS
    from explorer.core.save_folder import proposed_save_folder, usable_save_folder

    (tmp_path / "a-file").write_text("x")
    assert usable_save_folder(tmp_path) and not usable_save_folder(ASSETS)
    assert not usable_save_folder(ASSETS / "snapshots") and not usable_save_folder(tmp_path / "a-file")
    for bad in (None, "", tmp_path / "missing", "bad\0name"):
        assert not usable_save_folder(bad)
    assert usable_save_folder(tmp_path, shipped=()) and not usable_save_folder(tmp_path, shipped=(tmp_path.parent,))
    assert proposed_save_folder([str(ASSETS), None, str(tmp_path / "missing"), str(tmp_path)]) == str(tmp_path)
    assert proposed_save_folder([None, str(tmp_path / "missing")]) == str(tmp_path / "missing") and proposed_save_folder([]) == ""


def test_an_even_spread_of_snapshots_keeps_the_first_and_last_without_repeats():
    assert spread_indices(3000, 200)[:3] == [0, 15, 30] and spread_indices(3000, 200)[-1] == 2999
    assert len(set(spread_indices(3000, 200))) == 200
    assert spread_indices(10, 12) == list(range(10)) and spread_indices(0, 5) == []
    assert spread_indices(7, 3) == [0, 3, 6]
    assert curve_snapshots(list(range(14))) == tuple(range(14))
    assert curve_snapshots(list(range(401)), limit=3) == (0, 200, 400)
