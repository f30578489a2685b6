"""``transformer-explorer`` in a subprocess: the Model map's screenshot for the default model, the
4-layer model and a Llama-shaped fixture; every step of the shipped chapter tour with
``--tour FILE --tour-step N --screenshot``; a bad tour and the usage errors."""

import tomllib

import pytest
from PySide6.QtGui import QImage

from test_explorer_cli import ROOT, distinct_colours, run_app

CHAPTER = ROOT / "assets" / "tours" / "chapter.toml"
STEPS = len(tomllib.loads(CHAPTER.read_text(encoding="utf-8"))["step"])
TEXT = "once upon a time there was a little girl named lily . she liked to play"


@pytest.mark.slow
@pytest.mark.parametrize("model", [None, "assets/tinystories-4L4H.safetensors", "tests/fixtures/arch/hf-llama"],
                         ids=["default", "4L4H", "hf-llama"])
def test_the_map_screenshot_of_each_architecture(tmp_path, model):
    out = tmp_path / "map.png"
    r = run_app(*([model] if model else []), "--text", TEXT, "--screenshot", str(out), "--panel", "map",
                "--size", "1000x800")
    assert r.returncode == 0, r.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1000, 800) and distinct_colours(image) > 200


@pytest.mark.slow
@pytest.mark.parametrize("step", range(1, STEPS + 1))
def test_every_step_of_the_chapter_tour_renders(tmp_path, step):
    out = tmp_path / f"step{step}.png"
    r = run_app("--tour", str(CHAPTER), "--tour-step", str(step), "--screenshot", str(out), "--size", "1400x900")
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    assert QImage(str(out)).width() == 1400


@pytest.mark.slow
def test_a_bad_tour_or_step_fails_with_one_message(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "bad"\n[[step]]\ntitle = "x"\npanel = "nope"\nsay = "hi"\n', encoding="utf-8")
    r = run_app("--tour", str(bad), "--screenshot", str(tmp_path / "x.png"))
    assert r.returncode == 1 and "unknown panel 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = run_app("--tour", str(CHAPTER), "--tour-step", str(STEPS + 1), "--screenshot", str(tmp_path / "x.png"))
    assert r.returncode == 1 and f"the tour has {STEPS} steps; there is no step {STEPS + 1}" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--tour-step", "2"], "--tour-step N goes with --tour FILE"),
    (["--tour", "x.toml", "--tour-step", "0"], "N >= 1"),
    (["--tour", "x.toml", "--screenshot", "x.png", "--panel", "map"], "does not go with --panel"),
])
def test_tour_usage_errors_are_one_line(args, message, capsys):
    from explorer.app import parse_args
    from explorer.qt.panels import panel_names

    with pytest.raises(SystemExit) as info:
        parse_args(args, panel_names())
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1
