"""Training on several processes (torchrun / DDP), --device, and the --log-file progress lines.

The two-process test starts both ranks itself with the variables torchrun gives its workers
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): torchrun's own agent would be a third
process importing torch on a 2-core machine. That torchrun passes our options through untouched
is checked against its own argument parser.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from model import load_checkpoint
from model.training import data
from model.train import main
from test_train import TINY, _story
from conftest import SAFETY_NET_S

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def texts(tmp_path: Path) -> tuple[Path, Path]:
    train = tmp_path / "train.txt"
    train.write_text("\n".join(_story(i) for i in range(12)) + "\n", encoding="utf-8")
    val = tmp_path / "val.txt"
    val.write_text("".join(_story(i).title() + "\n<|endoftext|>\n" for i in range(12, 16)), encoding="utf-8")
    return train, val


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _step_losses(events: list[dict]) -> list[float]:
    return [e["loss"] for e in events if e["event"] == "step"]


def test_one_process_numbers_are_unchanged_and_logged(texts, tmp_path):
    """The same seed gives the numbers it gave before torchrun support (golden values of main)."""
    out, log = tmp_path / "m.safetensors", tmp_path / "log.jsonl"
    argv = ["--corpus", str(texts[0]), "--val", str(texts[1]), "--out", str(out), *TINY,
            "--steps", "5", "--seed", "7", "--snapshots", "2", "--log-file", str(log)]
    assert main(argv) == 0
    ck = load_checkpoint(out)
    t = ck.training
    assert t["train_loss"] == pytest.approx(3.5338973999023438, rel=1e-5)  # the last step's loss
    assert t["val_loss"] == pytest.approx(3.5297203063964844, rel=1e-5)
    weight_sum = float(sum(v.double().abs().sum() for v in ck.model.state_dict().values()))
    assert weight_sum == pytest.approx(89.9443740067436, rel=1e-5)
    assert t["processes"] == 1 and t["device"] == "cpu" and t["snapshot_dir"] == "m-snapshots"
    events = _log(log)
    assert [e["event"] for e in events] == ["start", "val", "snapshot", *["step"] * 5, "val", "snapshot", "end"]
    assert events[0]["processes"] == 1 and events[0]["tokens_per_step"] == 8 * 8
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4, 5]
    assert _step_losses(events)[-1] == pytest.approx(t["train_loss"], rel=1e-6)
    assert events[-2]["path"] == str(tmp_path / "m-snapshots" / "step-000005.safetensors")
    assert events[-1] == {"event": "end", "status": "done", "step": 5, "out": str(out)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_ranks(argv: list[str], world_size: int) -> list[subprocess.Popen]:
    port = _free_port()
    procs = []
    for rank in range(world_size):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
               "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "model.train", *argv], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def _wait_for_steps(log: Path, n: int, procs: list[subprocess.Popen], timeout: float = SAFETY_NET_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(encoding="utf-8").count('"event": "step"') >= n:
            return
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    for p in procs:
        p.kill()
    raise AssertionError(f"the ranks did not reach step {n}: {[p.communicate() for p in procs]}")


@pytest.mark.slow
def test_two_processes_give_the_losses_of_one_and_ctrl_c_saves_once(texts, tmp_path, monkeypatch):
    """DDP on 2 CPU processes (gloo), batch 7 split 4 + 3: the first 20 global-batch losses equal
    one process's within 1e-4; SIGINT to both ranks stops them after the same step, rank 0
    alone writes the snapshots, the log and one interrupted checkpoint."""
    common = ["--corpus", str(texts[0]), "--val", str(texts[1]), "--d-model", "16", "--d-mlp", "32",
              "--context-length", "8", "--batch-size", "7", "--steps", "1000000", "--snapshots", "3",
              "--lr", "1e-2", "--warmup", "0"]
    one_out, one_log = tmp_path / "one.safetensors", tmp_path / "one.jsonl"
    real = data.BlockSampler.next_batch
    calls = []

    def stop_after_20(self):
        calls.append(1)
        if len(calls) == 21:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(data.BlockSampler, "next_batch", stop_after_20)
    assert main([*common, "--quiet", "--out", str(one_out), "--log-file", str(one_log)]) == 130
    one = _step_losses(_log(one_log))
    assert len(one) == 20

    two_out, two_log = tmp_path / "two.safetensors", tmp_path / "two.jsonl"
    procs = _start_ranks([*common, "--out", str(two_out), "--log-file", str(two_log)], 2)
    _wait_for_steps(two_log, 20, procs)
    for p in procs:
        p.send_signal(signal.SIGINT)  # as a terminal's Ctrl+C reaches every process
    results = [p.communicate(timeout=SAFETY_NET_S) for p in procs]
    assert [p.returncode for p in procs] == [130, 130], results
    (_, err0), (out1, err1) = results
    assert out1 == "" and err1 == "", "rank 1 printed something"
    assert err0.count("interrupted at step") == 1 and "Traceback" not in err0

    events = _log(two_log)
    two = _step_losses(events)
    assert max(abs(a - b) for a, b in zip(one, two[:20])) < 1e-4
    assert events[0]["processes"] == 2 and events[-1]["status"] == "interrupted"
    assert sum(e["event"] == "end" for e in events) == 1
    ck = load_checkpoint(two_out)
    assert ck.training["interrupted"] is True and ck.training["processes"] == 2
    assert ck.training["steps"] == len(two) >= 20
    first = {e["step"]: e["val_loss"] for e in _log(one_log) if e["event"] == "val"}
    second = {e["step"]: e["val_loss"] for e in events if e["event"] == "val"}
    assert second[0] == pytest.approx(first[0], abs=1e-4) and second[1] == pytest.approx(first[1], abs=1e-4)
    assert sorted(p.name for p in (tmp_path / "two-snapshots").iterdir()) == [
        "step-0000000.safetensors", "step-0000001.safetensors"]
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_torchrun_passes_every_option_through():
    """torchrun's parser abbreviates its own options: ``--log`` was taken for ``--log-dir``."""
    from torch.distributed.run import get_args_parser

    from model.training.args import build_parser

    ours = [s for action in build_parser()._actions for s in action.option_strings if s.startswith("--")]
    argv = [x for opt in ours for x in (opt, "1")]
    parsed = get_args_parser().parse_args(["--standalone", "--nproc_per_node", "2", "-m", "model.train", *argv])
    assert parsed.training_script == "model.train" and parsed.training_script_args == argv


def test_device_and_process_count_checks(texts, tmp_path, monkeypatch, capsys):
    base = ["--corpus", str(texts[0]), "--val", str(texts[1]), "--out", str(tmp_path / "m.safetensors"), *TINY]
    if not torch.cuda.is_available():
        assert main([*base, "--device", "cuda"]) == 2
        expected = "error: --device cuda: torch sees no CUDA GPU here (use --device cpu or auto)\n"
        assert capsys.readouterr().err == expected
    assert main([*base, "--device", "gpu"]) == 2
    assert "invalid choice: 'gpu'" in capsys.readouterr().err
    assert main([*base, "--log-file", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: --log-file {tmp_path}: is a folder\n"
    assert main([*base, "--log-file", str(texts[1])]) == 2
    assert "would overwrite an input or --out" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "16")
    assert main(base) == 2  # batch 8 on 16 processes
    assert "--batch-size 8 is smaller than the number of processes (16)" in capsys.readouterr().err
    assert not (tmp_path / "m.safetensors").exists()
