"""Snapshots of a run (model.training.snapshots), curves over training (model.training.over_training) and the
``python -m model.trace ... --over-training`` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_checkpoint
from model import load_checkpoint, save_checkpoint
from model.checkpoint import Checkpoint
from model.training.over_training import attention_stats, curves_over_training, snapshot_difference
from model.training.snapshots import SnapshotError, load_snapshots, snapshot_folder_for, snapshots_for
from model.trace import main as trace_main

ASSETS = Path(__file__).resolve().parents[1] / "assets"


@pytest.fixture(scope="module")
def shipped():
    """The default model and its 14 shipped snapshots, loaded once."""
    ck = load_checkpoint(ASSETS / "tinystories-1L1H.safetensors")
    return ck, snapshots_for(ck)


def test_the_default_model_finds_its_shipped_snapshots(shipped):
    ck, snaps = shipped
    assert snapshot_folder_for(ck) == (ASSETS / "snapshots").resolve()  # from its recorded command
    assert snaps.steps == [0, 1, 2, 4, 7, 13, 24, 45, 84, 159, 299, 563, 1062, 2000]
    assert snaps.skipped == [] and snaps.folder == (ASSETS / "snapshots").resolve()
    assert all(s.checkpoint.tokenizer is ck.tokenizer for s in snaps)  # one shared vocabulary
    assert snaps.val_curve[0] == (0, pytest.approx(8.34961)) and snaps.val_curve[-1] == (2000, pytest.approx(3.1065))
    assert snaps.index_at(100) == 8 and snaps.index_at(-5) == 0 and snaps.index_at(10**6) == 13


def test_when_time_became_the_top_prediction(shipped):
    """The README's sentence: "time" after "once upon a" is top-1 from the snapshot of step 84 on."""
    ck, snaps = shipped
    curves = curves_over_training(snaps, ck.tokenizer.encode("once upon a").ids)
    tops = [ck.tokenizer.id_to_token(int(i)) for i in curves.top1]
    first = next(k for k in range(len(tops)) if all(t == "time" for t in tops[k:]))
    assert curves.steps[first] == 84 and tops[first - 1] == "."
    assert curves.target_kind == "final top-1" and ck.tokenizer.id_to_token(curves.target_id) == "time"
    assert curves.target_prob[first] == pytest.approx(0.0686, abs=1e-3)
    assert curves.top1_changed.tolist() == [k in (5, first) for k in range(14)]


def _save(path: Path, ck: Checkpoint, training: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, ck.model, ck.tokenizer, training=training)


@pytest.fixture
def run_folder(tmp_path, tiny_tokenizer):
    """A run of 5 tiny snapshots in a jumbled layout, and files that do not belong to it."""
    from model.tokens.tokenizer import word_tokenizer_from_vocab

    folder = tmp_path / "run"
    curve = [[0, 4.2], [2, 4.1], [10, 3.9], [30, 3.5]]
    _save(folder / "b.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=30), {"steps": 30, "val_curve": curve})
    # the facts beat the name:
    _save(folder / "a-100.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=2), {"steps": 2})
    _save(folder / "snap-10.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=10), {})  # step from the name
    _save(folder / "iter-40" / "ckpt.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=40), {})
    _save(folder / "c.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=0), {"steps": 0})
    _save(folder / "wide.safetensors", make_tiny_checkpoint(tiny_tokenizer, d_model=32), {"steps": 5})
    words = [tiny_tokenizer.id_to_token(i) for i in range(tiny_tokenizer.vocab_size)]
    words[-2:] = words[-1], words[-2]  # the same words, two of them swapped
    other = make_tiny_checkpoint(word_tokenizer_from_vocab(words))
    _save(folder / "other-vocab.safetensors", other, {"steps": 6})
    _save(folder / "final.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=99), {})
    _save(folder / "zz-again.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=3), {"steps": 10})
    (folder / "broken.pt").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "notes.txt").write_text("not a checkpoint", encoding="utf-8")
    (folder / ".b.safetensors.x1.tmp").write_bytes(b"half written")
    return folder


def test_a_folder_is_ordered_by_step_and_misfits_are_skipped(run_folder):
    snaps = load_snapshots(run_folder)
    assert snaps.steps == [0, 2, 10, 30, 40]
    assert [s.path.name for s in snaps] == ["c.safetensors", "a-100.safetensors", "snap-10.safetensors",
                                             "b.safetensors", "ckpt.safetensors"]
    reasons = {s.path.name: s.reason for s in snaps.skipped}
    assert sorted(reasons) == ["broken.pt", "final.safetensors", "other-vocab.safetensors",
                               "wide.safetensors", "zz-again.safetensors"]
    assert reasons["wide.safetensors"] == "d_model 32 where the run has 16"
    assert reasons["other-vocab.safetensors"].startswith("another vocabulary")
    assert reasons["final.safetensors"] == "no training step in the file or in its name"
    assert reasons["zz-again.safetensors"] == "step 10 again (already snap-10.safetensors)"
    assert "broken.pt" not in reasons["broken.pt"] and reasons["broken.pt"]
    assert snaps.val_curve == [(0, 4.2), (2, 4.1), (10, 3.9), (30, 3.5)]  # of the highest step that has one
    assert len({id(s.checkpoint.tokenizer) for s in snaps}) == 1

    wide = load_checkpoint(run_folder / "wide.safetensors")
    against = load_snapshots(run_folder, reference=wide)
    assert against.steps == [5] and "d_model 16 where the model has 32" in [s.reason for s in against.skipped]


def test_refresh_picks_up_new_snapshots_in_order(run_folder, tiny_tokenizer):
    snaps = load_snapshots(run_folder)
    assert snaps.refresh() == []
    _save(run_folder / "step-000020.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=20), {"steps": 20})
    new = snaps.refresh()
    assert [s.step for s in new] == [20] and snaps.steps == [0, 2, 10, 20, 30, 40]
    with pytest.raises(SnapshotError, match="no such folder"):
        load_snapshots(run_folder / "nope")


def test_snapshot_folder_for_each_way_of_recording_it(tmp_path, tiny_tokenizer):
    ck = make_tiny_checkpoint(tiny_tokenizer)
    ck.path = tmp_path / "m.safetensors"
    assert snapshot_folder_for(ck) is None
    (tmp_path / "m-snapshots").mkdir()
    assert snapshot_folder_for(ck) == tmp_path / "m-snapshots"
    (tmp_path / "kept").mkdir()
    ck.training = {"command": "python -m model.train --out runs/m.safetensors --snapshot-dir runs/kept --snapshots 3"}
    assert snapshot_folder_for(ck) == tmp_path / "kept"
    (tmp_path / "recorded").mkdir()
    ck.training["snapshot_dir"] = "recorded"
    assert snapshot_folder_for(ck) == tmp_path / "recorded"


def _attention_reference(a: np.ndarray) -> tuple[float, float, float, float]:
    """Entropy, first, previous, self of one head's (T, T) weights, by plain loops."""
    rows = range(1, a.shape[0])
    ent = np.mean([-sum(w * np.log(w) for w in a[i, : i + 1] if w > 0) for i in rows])
    return (ent, np.mean([a[i, 0] for i in rows]), np.mean([a[i, i - 1] for i in rows]),
            np.mean([a[i, i] for i in rows]))


@pytest.mark.parametrize("text, position", [("the cat sat on the mat .", 2),
                                            ("the dog sat on the log . a cat and a dog", None)])
def test_curves_equal_what_each_snapshots_trace_gives(run_folder, tiny_tokenizer, text, position):
    snaps = load_snapshots(run_folder)
    ids = tiny_tokenizer.encode(text).ids
    curves = curves_over_training(snaps, ids, position=position, val_curve=snaps.val_curve)
    traces = [s.model.trace(ids) for s in snaps]
    run = traces[0].token_ids
    assert curves.dropped == max(0, len(ids) - 8) and curves.token_ids.tolist() == run.tolist()
    pos = len(run) - 1 if position is None else position
    target = run[pos + 1] if pos < len(run) - 1 else int(traces[-1].probs[pos].argmax())
    assert curves.target_id == target and curves.position == pos
    for k, tr in enumerate(traces):
        nll = [-np.log(tr.probs[i, run[i + 1]]) for i in range(len(run) - 1)]
        assert curves.loss_on_text[k] == pytest.approx(np.mean(nll), rel=1e-5)
        assert curves.target_prob[k] == pytest.approx(tr.probs[pos, target], rel=1e-5)
        assert curves.top1[k] == tr.probs[pos].argmax()
        assert curves.top1_prob[k] == pytest.approx(tr.probs[pos].max(), rel=1e-5)
        for li, block in enumerate(tr.blocks):
            for h in range(block.attn_weights.shape[0]):
                want = _attention_reference(block.attn_weights[h].astype(np.float64))
                got = (curves.attn_entropy[k, li, h], curves.attn_first[k, li, h],
                       curves.attn_prev[k, li, h], curves.attn_self[k, li, h])
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert curves.val_curve.tolist() == [[0, 4.2], [2, 4.1], [10, 3.9], [30, 3.5]]


def test_curves_on_odd_input(run_folder, tiny_tokenizer):
    snaps = load_snapshots(run_folder)
    empty = curves_over_training(snaps, [])
    assert empty.position == -1 and np.isnan(empty.loss_on_text).all() and (empty.top1 == -1).all()
    one = curves_over_training(snaps, [3])
    assert np.isnan(one.loss_on_text).all() and np.isnan(one.attn_entropy).all() and one.target_kind == "final top-1"
    given = curves_over_training(snaps, [3, 4, 5], position=0, target_id=7)
    assert given.target_kind == "given" and given.target_id == 7
    for bad in (dict(position=3), dict(target_id=10_000)):
        with pytest.raises(ValueError):
            curves_over_training(snaps, [3, 4, 5], **bad)


def test_attention_stats_of_uniform_causal_attention():
    T = 5
    a = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # row i: 1/(i+1) on keys 0..i
    stats = attention_stats(a[None])
    i = np.arange(1, T)
    assert stats["entropy"][0] == pytest.approx(np.mean(np.log(i + 1)))
    for key in ("first", "prev", "self"):
        assert stats[key][0] == pytest.approx(np.mean(1 / (i + 1)))


def test_difference_is_later_minus_earlier(run_folder, tiny_tokenizer):
    snaps = load_snapshots(run_folder)
    ids = tiny_tokenizer.encode("the cat sat on the mat").ids
    diff = snapshot_difference(snaps[1], snaps[3], ids)
    a, b = snaps[1].model.trace(ids), snaps[3].model.trace(ids)
    assert (diff.earlier_step, diff.later_step) == (2, 30)
    np.testing.assert_allclose(diff.attn_weights[1], b.blocks[1].attn_weights - a.blocks[1].attn_weights)
    np.testing.assert_allclose(diff.probs, b.probs - a.probs)
    assert np.abs(diff.probs).max() > 1e-3


def test_trace_over_training_json(run_folder, tiny_tokenizer, capsys):
    assert trace_main([str(run_folder), "the cat sat on", "--over-training", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    snaps = load_snapshots(run_folder)
    curves = curves_over_training(snaps, tiny_tokenizer.encode("the cat sat on").ids)
    assert [r["step"] for r in rows] == [0, 2, 10, 30, 40]
    assert [r["loss_on_text"] for r in rows] == pytest.approx(curves.loss_on_text.tolist())
    assert [r["target_prob"] for r in rows] == pytest.approx(curves.target_prob.tolist())
    assert rows[0]["target"] == tiny_tokenizer.id_to_token(curves.target_id) and rows[0]["position"] == 3
    assert rows[1]["val_loss"] == 4.1 and rows[4]["val_loss"] is None
    assert len(rows[0]["heads"]) == 4 and rows[2]["heads"][3]["layer"] == 1 and rows[2]["heads"][3]["head"] == 1
    assert rows[2]["heads"][3]["entropy"] == pytest.approx(curves.attn_entropy[2, 1, 1])
    err = captured.err  # the files left out, said (they were named only when none was usable)
    assert err.startswith(f"note: 5 files of {run_folder} skipped (not snapshots of this run), 5 used: ")
    assert "final.safetensors: no training step in the file or in its name" in err and err.count("\n") == 1
    assert trace_main([str(run_folder), "the cat", "--over-training"]) == 0  # the table
    assert "L1H1 ent/prev" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["{folder}/nope", "a"], "no such file"),
    (["{folder}/b.safetensors", "a"], "no snapshot folder found"),
    (["{folder}", "the cat", "--target", "zebra"], "'zebra' is not one token"),
    (["{folder}", "the cat", "--position", "5"], "position 5 is outside the 2 tokens"),
    (["{folder}", "the cat", "--ids", "1,2"], "not both"),
])
def test_trace_over_training_bad_input(run_folder, capsys, argv, message):
    argv = [a.format(folder=run_folder) for a in argv]
    assert trace_main([*argv, "--over-training", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err


def test_nanogpt_checkpoints_of_one_run(tmp_path, capsys):
    """nanoGPT overwrites out_dir/ckpt.pt; kept copies in subfolders are ordered by iter_num."""
    import shutil

    import torch

    fixtures = Path(__file__).parent / "fixtures" / "interop"
    folder = tmp_path / "out-shakespeare-char"
    original = torch.load(fixtures / "ckpt_nanogpt.pt", map_location="cpu", weights_only=True)
    for name, iters, scale in (("late", 200, 1.0), ("early", 50, 0.5)):
        obj = {k: v for k, v in original.items() if k != "optimizer"}
        obj["iter_num"] = iters
        obj["model"] = {k: v * scale for k, v in original["model"].items()}
        (folder / name).mkdir(parents=True)
        torch.save(obj, folder / name / "ckpt.pt")
    (folder / "data" / "shakespeare_char").mkdir(parents=True)
    shutil.copy(fixtures / "nanogpt_shakespeare_char_meta.pkl", folder / "data" / "shakespeare_char" / "meta.pkl")
    snaps = load_snapshots(folder)
    assert snaps.steps == [50, 200] and snaps.skipped == [] and snaps.val_curve == []
    assert snaps[0].checkpoint.source_format == "nanogpt" and snaps[0].checkpoint.tokenizer is not None
    assert trace_main([str(folder), "ROMEO:", "--over-training", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in rows] == [50, 200] and rows[0]["loss_on_text"] != rows[1]["loss_on_text"]


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "module._orig_mod."])
def test_a_hand_made_snapshot_of_a_ddp_or_compiled_model_is_read_by_its_plain_names(tmp_path, tiny_tokenizer, prefix):
    """A file made from a DDP-wrapped model's state_dict() was refused as "missing tensor(s): blocks.0.…"."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    ck = make_tiny_checkpoint(tiny_tokenizer, seed=7)
    plain = tmp_path / "plain.safetensors"
    _save(plain, ck, {"steps": 7})
    with safe_open(str(plain), framework="pt") as f:
        metadata, tensors = f.metadata(), {prefix + k: f.get_tensor(k) for k in f.keys()}
    (tmp_path / "run").mkdir()
    save_file(tensors, tmp_path / "run" / "step-7.safetensors", metadata=metadata)
    snaps = load_snapshots(tmp_path / "run")
    assert snaps.steps == [7] and not snaps.skipped
    ids = tiny_tokenizer.encode("the cat sat").ids
    np.testing.assert_array_equal(snaps[0].model.trace(ids).logits, load_checkpoint(plain).model.trace(ids).logits)


def test_a_folder_is_listed_by_its_headers_and_weights_are_read_on_use(run_folder, tiny_tokenizer):
    """3,000 snapshots loaded whole and kept took 69 s and 545 MB to list: our files are listed by
    their headers, read when used, and the loaded ones kept within a budget."""
    snaps = load_snapshots(run_folder)
    ours = [s for s in snaps if s.path.suffix == ".safetensors"]
    assert ours and not any(s.loaded for s in ours) and snaps.kept.loaded_bytes == 0
    assert snaps.tokenizer is not None and snaps.tokenizer.to_json() == tiny_tokenizer.to_json()
    ids = tiny_tokenizer.encode("the cat sat on").ids
    one = sum(p.numel() * 4 for p in snaps[0].model.parameters())  # read now
    snaps.kept.budget = 2 * one  # room for two
    curves = curves_over_training(snaps, ids)
    assert sum(s.loaded for s in snaps) == 2 and snaps.kept.loaded_bytes == 2 * one
    for k, s in enumerate(snaps):  # the numbers of weights read again equal those of a file opened whole
        direct = load_checkpoint(s.path).model.trace(ids)
        assert curves.loss_on_text[k] == pytest.approx(float(-np.mean([np.log(direct.probs[i, ids[i + 1]])
                                                                         for i in range(len(ids) - 1)])), rel=1e-5)
    assert snaps[0].checkpoint.tokenizer is snaps.tokenizer  # one tokenizer object for the run
