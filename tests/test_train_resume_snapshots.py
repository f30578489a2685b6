"""``--resume`` into the first run's snapshot folder (the default when ``--out`` is the same file): the
first run's snapshots stay as they were, and each new file is named by the total step it records (the
second run wrote its steps 10, 11 and 20 over step-000000, -000001 and -000010)."""

from __future__ import annotations

from pathlib import Path

from model.checkpoint import read_header
from model.train import main

STORY = "once upon a time lily had a red ball . she liked the ball a lot . one day she lost it ."
TINY = ["--d-model", "16", "--d-mlp", "32", "--context-length", "8", "--batch-size", "4", "--quiet"]


def _run(tmp_path: Path, *extra: str) -> int:
    (tmp_path / "train.txt").write_text("\n\n".join([STORY] * 8), encoding="utf-8")
    (tmp_path / "val.txt").write_text("\n\n".join([STORY.upper()] * 3), encoding="utf-8")
    return main(["--corpus", str(tmp_path / "train.txt"), "--val", str(tmp_path / "val.txt"),
                 "--out", str(tmp_path / "m.safetensors"), *TINY, *extra])


def _steps(folder: Path) -> dict[str, int]:
    return {p.name: read_header(p).training["steps"] for p in sorted(folder.iterdir())}


def test_resuming_into_the_same_snapshot_folder_keeps_the_first_runs_files(tmp_path, capsys):
    folder = tmp_path / "m-snapshots"  # the default for --out m.safetensors, in both runs
    assert _run(tmp_path, "--steps", "10", "--snapshots", "3") == 0
    first = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert _steps(folder) == {"step-000000.safetensors": 0, "step-000001.safetensors": 1, "step-000010.safetensors": 10}
    assert _run(tmp_path, "--steps", "10", "--snapshots", "3", "--resume", str(tmp_path / "m.safetensors")) == 0
    assert _steps(folder) == {"step-000000.safetensors": 0, "step-000001.safetensors": 1, "step-000010.safetensors": 10,
                              "step-000011.safetensors": 11, "step-000020.safetensors": 20}  # its step 0 is step 10
    assert all((folder / name).read_bytes() == data for name, data in first.items())  # nothing written over
    capsys.readouterr()
    assert _run(tmp_path, "--steps", "10", "--snapshots", "3") == 2  # a new run into that folder: refused
    err = capsys.readouterr().err
    assert f"--snapshot-dir {folder} already holds step-000000.safetensors (step 0 of an earlier run)" in err
    assert all((folder / name).read_bytes() == data for name, data in first.items())
