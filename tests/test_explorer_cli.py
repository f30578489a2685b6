"""The ``transformer-explorer`` command in a subprocess: --screenshot, and one-line usage errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from conftest import SAFETY_NET_S, make_tiny_checkpoint
from model import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


SCRIPT = Path(sys.executable).with_name("transformer-explorer")  # the gui-scripts entry point


def run_app(*args, script=False, timeout=SAFETY_NET_S):
    """Run ``python -m explorer`` (or the installed ``transformer-explorer`` script) off-screen."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "explorer"]
    return subprocess.run([*command, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def distinct_colours(image: QImage, step: int = 7) -> int:
    return len({image.pixel(x, y) for x in range(0, image.width(), step) for y in range(0, image.height(), step)})


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory, tiny_tokenizer):
    path = tmp_path_factory.mktemp("ckpt") / "tiny.safetensors"
    ckpt = make_tiny_checkpoint(tiny_tokenizer)
    save_checkpoint(path, ckpt.model, ckpt.tokenizer)
    return path


@pytest.mark.slow
def test_screenshot_of_the_window(tmp_path, tiny_file):
    out = tmp_path / "window.png"
    r = run_app(str(tiny_file), "--text", "the cat sat on the mat", "--screenshot", str(out), "--size", "900x600",
                script=SCRIPT.exists())
    assert r.returncode == 0, r.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (900, 600)
    assert distinct_colours(image) > 50  # heatmaps, text and bars: not a blank image


@pytest.mark.slow
def test_screenshot_of_one_panel(tmp_path):
    out = tmp_path / "attention.png"
    r = run_app("--text", "once upon a time", "--screenshot", str(out), "--panel", "attention", "--size", "500x400")
    assert r.returncode == 0, r.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (500, 400) and distinct_colours(image, 5) > 10


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--screenshot", "x.png", "--panel", "nope"], "unknown panel 'nope'"),
    (["--screenshot", "x.png", "--size", "big"], "--size takes WIDTHxHEIGHT"),
    (["--screenshot", "x.png", "--generate", "3", "--fork", "4"], "--fork K goes with --generate N"),
])
def test_bad_usage_is_one_line_and_exit_2(args, message):
    r = run_app(*args)
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("transformer-explorer: error:")


@pytest.mark.slow
def test_a_dark_screenshot_of_a_generated_forked_story(tmp_path, tiny_file):
    out = tmp_path / "story.png"
    r = run_app(str(tiny_file), "--text", "the cat", "--screenshot", str(out), "--size", "900x600", "--dark",
                "--generate", "4", "--fork", "2")
    assert r.returncode == 0, r.stderr
    image = QImage(str(out))
    lightness = sorted(image.pixelColor(x, y).lightness() for x in range(0, 900, 9) for y in range(0, 600, 9))
    assert lightness[len(lightness) // 2] < 90  # a dark window, not a light one
    assert distinct_colours(image) > 50


@pytest.mark.slow
def test_screenshot_of_a_bad_checkpoint_fails_with_the_message(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 10)
    r = run_app(str(bad), "--screenshot", str(tmp_path / "x.png"))
    assert r.returncode == 1 and "bad.safetensors" in r.stderr and not (tmp_path / "x.png").exists()


@pytest.mark.slow
def test_screenshot_to_an_unwritable_place_is_one_line_and_exit_1(tmp_path):
    """It was a Python traceback (OSError raised out of main)."""
    out = tmp_path / "no" / "such" / "folder" / "x.png"
    r = run_app("--screenshot", str(out), "--size", "200x150")
    lines = [line for line in r.stderr.splitlines() if line.strip() and "propagateSizeHints" not in line]
    assert r.returncode == 1 and "Traceback" not in r.stderr and not out.exists()
    assert lines == [f"transformer-explorer: error: could not write {out}"]


@pytest.mark.slow
def test_no_display_is_a_clear_error_not_an_abort():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    r = subprocess.run([sys.executable, "-m", "explorer"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=SAFETY_NET_S)
    assert r.returncode == 2 and "no display" in r.stderr


@pytest.mark.slow
def test_a_screenshot_of_a_slow_model_shows_the_trace_of_the_text(monkeypatch, tmp_path, tiny_file, qapp):
    """In a screenshot every model is traced before the picture, even one slow enough that the
    app would trace it on the worker thread (every model counts as slow here)."""
    import explorer.app as app_module
    import explorer.qt.scheduling.scheduler as scheduler_module
    from explorer.qt.scheduling.pacing import Pacer

    monkeypatch.setattr(scheduler_module, "ASYNC_MS", 0.0)
    seen = []
    render = app_module._render

    def checked_render(widget, size, out, app):
        s = widget.session
        seen.append((s.text, s.trace.n_tokens if s.trace is not None else None, s.busy, Pacer.of(s).pending))
        render(widget, size, out, app)

    monkeypatch.setattr(app_module, "_render", checked_render)
    out = tmp_path / "slow.png"
    args = [str(tiny_file), "--text", "the cat sat", "--screenshot", str(out), "--size", "800x500"]
    assert app_module.main(args) == 0
    assert seen == [("the cat sat", 3, False, 0)] and out.exists()
