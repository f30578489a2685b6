"""Ctrl+C while ``python -m model.train`` starts: held back while torch imports, then one line and
status 130 (it was a 17- to 58-line traceback, status -2, or an abort, status -6, in the first seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model.training.interrupts import STARTING_INTERRUPTED, held_interrupts

ROOT = Path(__file__).resolve().parents[1]


def test_an_interrupt_is_held_until_the_block_ends():
    reached = []
    with pytest.raises(KeyboardInterrupt), held_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0)  # Python runs its handler here; the block goes on
        reached.append(True)
    assert reached == [True] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.3, 1.0])
def test_ctrl_c_while_the_command_starts_is_one_line_and_status_130(tmp_path, after_s):
    """The delay only picks a moment (importing torch, or reading the text); any moment must end so."""
    for name in ("train.txt", "val.txt"):
        (tmp_path / name).write_text("\n\n".join("the cat sat on the mat and ran ." for _ in range(40)), encoding="utf-8")
    cmd = [sys.executable, "-m", "model.train", "--corpus", str(tmp_path / "train.txt"), "--val",
           str(tmp_path / "val.txt"), "--out", str(tmp_path / "m.safetensors"), "--steps", "100000", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 130 and "interrupted at step" in err:  # a fast machine had started training: saved
        assert (tmp_path / "m.safetensors").is_file()
        return
    assert proc.returncode == 130 and err.strip() == STARTING_INTERRUPTED, err
    assert not (tmp_path / "m.safetensors").exists()


def test_ctrl_c_while_the_optimizer_is_made_is_one_line_and_status_130(tmp_path, monkeypatch, capsys):
    """Making the optimizer imports torch._dynamo (a second or more on a busy machine): a SIGINT
    there (in CI, 1.0 s after start) ended with a traceback and status -2, past the held import."""
    import model.training.loop as loop
    from model import train as train_cli

    made = []

    def make_optimizer(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0)  # the handler runs here
        made.append(True)
        return original(*args, **kwargs)

    original = loop.make_optimizer
    monkeypatch.setattr(loop, "make_optimizer", make_optimizer)
    for name in ("train.txt", "val.txt"):
        (tmp_path / name).write_text("\n\n".join("the cat sat on the mat and ran ." for _ in range(40)), encoding="utf-8")
    status = train_cli.main(["--corpus", str(tmp_path / "train.txt"), "--val", str(tmp_path / "val.txt"),
                             "--out", str(tmp_path / "m.safetensors"), "--steps", "5", "--quiet"])
    assert made == [True] and status == 130
    assert capsys.readouterr().err.strip() == STARTING_INTERRUPTED
    assert not (tmp_path / "m.safetensors").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
