"""Training with repeated segments (--repeat-share, --repeat-random) and snapshots at given steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model import load_checkpoint
from model.training import data
from model.train import main
from test_train import TINY, texts  # noqa: F401 (the fixture)


def test_repeated_text_segments_copy_the_blocks_own_beginning():
    blocks = torch.arange(3 * 33).view(3, 33)
    gen = torch.Generator().manual_seed(0)
    out = data.repeat_segments(blocks, 2 / 3, gen)
    lo, hi = data.repeat_lengths(32)
    assert (lo, hi) == (8, 16)
    for row in range(2):
        b, o = blocks[row], out[row]
        s = next(s for s in range(lo, hi + 1) if torch.equal(o[s:2 * s], b[:s]))
        assert torch.equal(o[:s], b[:s]) and torch.equal(o[2 * s:], b[s:33 - s])  # then its own text goes on
    assert torch.equal(out[2], blocks[2])  # a third of the batch: untouched
    state = gen.get_state()
    assert data.repeat_segments(blocks, 0.0, gen) is blocks and torch.equal(gen.get_state(), state)


def test_random_segments_are_drawn_from_the_ids_given_and_repeated():
    blocks = torch.zeros(4, 65, dtype=torch.long)
    ids = torch.tensor([7, 8, 9])
    out = data.repeat_segments(blocks, 1.0, torch.Generator().manual_seed(1), ids)
    for o in out:
        assert set(o.tolist()) <= {7, 8, 9}
        s = next(s for s in range(8, 33) if torch.equal(o[s:], o[:-s]))  # a period of 8 to 32 tokens
        assert torch.equal(o, o[:s].repeat(65 // s + 1)[:65])


def test_a_run_records_its_repeats_and_saves_the_snapshots_asked_for(texts, tmp_path):  # noqa: F811
    train, val = texts
    out = tmp_path / "m.safetensors"
    code = main(["--corpus", str(train), "--val", str(val), "--out", str(out), *TINY, "--steps", "6",
                 "--repeat-share", "0.5", "--repeat-random", "--snapshot-steps", "0,2,5", "--rope"])
    assert code == 0
    assert load_checkpoint(out).config.positional == "rope"
    facts = load_checkpoint(out).training
    assert facts["repeated_segments"]["share"] == 0.5 and facts["repeated_segments"]["tokens"] == "random"
    folder = out.parent / facts["snapshot_dir"]
    assert sorted(p.name for p in folder.iterdir()) == ["step-000000.safetensors", "step-000002.safetensors",
                                                        "step-000005.safetensors"]


@pytest.mark.parametrize("extra, message", [
    (["--repeat-share", "1.5"], "--repeat-share is a share"),
    (["--repeat-random"], "--repeat-random goes with --repeat-share"),
    (["--snapshot-steps", "3,99"], "--snapshot-steps must lie between 0 and --steps"),
    (["--snapshot-steps", "a,b"], "comma-separated step numbers"),
    (["--rope", "--no-positional-encoding"], "contradict each other"),
])
def test_bad_repeat_and_snapshot_options_are_refused(texts, tmp_path, capsys, extra, message):  # noqa: F811
    train, val = texts
    code = main(["--corpus", str(train), "--val", str(val), "--out", str(tmp_path / "m.safetensors"), *TINY,
                 "--steps", "6", *extra])
    assert code == 2 and message in capsys.readouterr().err
    assert not Path(tmp_path / "m.safetensors").exists()
