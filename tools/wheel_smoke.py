"""Build the wheel, install it in a fresh venv outside the source tree, and use it as a user would.

    python tools/wheel_smoke.py WORKDIR          # from a source tree: build, install, check (tests/test_wheel.py)
    python tools/wheel_smoke.py --check         # inside the fresh venv, in an empty folder (run by the above)

The first form builds the wheel (``pip wheel --no-deps``) into WORKDIR/dist, checks that it holds
every file git tracks in ``assets/`` (the README's screenshots aside), makes WORKDIR/venv, installs
``torch==2.13.0`` and the wheel there, and runs the second form with that venv's Python in the empty
folder WORKDIR/run. The second form checks, with nothing of the source tree importable: the packages
come from the venv; ``python -m model.trace builtin:tinystories-1L1H "once upon a" --json`` predicts
"time"; ``--list-models`` lists the default; ``--screenshot`` draws the trained default model
(offscreen) and Qt prints no "Cannot open file"; ``--startup-time`` opens the trained default model;
``--install-desktop`` writes an entry that runs this venv's command. Each failure is one line on
stderr; the exit status is the number of failures (0: all good).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

PACKAGE = "transformer_explorer_assets"
NOT_SHIPPED = ("screenshot",)  # assets/screenshot*.png: the README's pictures stay out of the wheel
TORCH = "torch==2.13.0"
BAD_QT_MESSAGES = ("Cannot open file", "random model")  # a missing file; the default model not found


def tracked_assets(root: Path) -> list[str]:
    """The files git tracks in ``assets/`` that the wheel must hold, relative to ``assets/``."""
    out = subprocess.run(["git", "ls-files", "assets"], cwd=root, capture_output=True, text=True, check=True).stdout
    names = [line.removeprefix("assets/") for line in out.splitlines() if line]
    return [n for n in names if not n.startswith(NOT_SHIPPED)]


def wheel_problems(wheel: Path, wanted: list[str]) -> list[str]:
    """What the wheel lacks of ``wanted`` (one line each; [] when nothing is missing)."""
    with zipfile.ZipFile(wheel) as z:
        held = {n.removeprefix(PACKAGE + "/") for n in z.namelist() if n.startswith(PACKAGE + "/")}
    return [f"{wheel.name} lacks assets/{name}" for name in wanted if name not in held]


def build_and_install(root: Path, work: Path) -> Path:
    """The wheel built from ``root`` into ``work/dist`` and installed, with torch, in ``work/venv``;
    the venv's Python."""
    python = work / "venv" / "bin" / "python"
    steps = [("build the wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(root),
                                  "-w", str(work / "dist")]),
             ("make a venv", [sys.executable, "-m", "venv", str(work / "venv")]),
             (f"install {TORCH}", [str(python), "-m", "pip", "install", "-q", TORCH]),
             ("install the wheel", [str(python), "-m", "pip", "install", "-q", "WHEEL"])]
    for what, command in steps:
        t0 = time.perf_counter()
        if command[-1] == "WHEEL":
            (wheel,) = (work / "dist").glob("transformer_explorer-*.whl")
            command[-1] = str(wheel)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        print(f"wheel smoke: {what}: {time.perf_counter() - t0:.0f} s", flush=True)
    return python


def main_build(root: Path, work: Path) -> int:
    """The first form (see the module docstring); the exit status."""
    python = build_and_install(root, work)
    (wheel,) = (work / "dist").glob("transformer_explorer-*.whl")
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB")
    problems = wheel_problems(wheel, tracked_assets(root))
    for line in problems:
        print(f"wheel smoke: {line}", file=sys.stderr)
    (work / "run").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    checked = subprocess.run([str(python), str(Path(__file__).resolve()), "--check"], cwd=work / "run", env=env)
    return len(problems) + checked.returncode


# ---- inside the fresh venv ---------------------------------------------------------------------------
def _run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=600, env=env)


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    return struct.unpack(">II", head[16:24]) if head[:8] == b"\x89PNG\r\n\x1a\n" else (0, 0)


def check_installed() -> list[str]:
    """The second form's checks, in the current (empty) folder; what failed, one line each."""
    import explorer
    import model
    import transformer_explorer_assets

    fails = []
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for module in (model, explorer, transformer_explorer_assets):
        if site not in Path(module.__file__).resolve().parents:
            fails.append(f"{module.__name__} comes from {module.__file__}, not from the venv ({site})")
    bin_dir = Path(sys.executable).parent
    app = str(bin_dir / "transformer-explorer")
    traced = _run(sys.executable, "-m", "model.trace", "builtin:tinystories-1L1H", "once upon a", "--json")
    top = json.loads(traced.stdout)["top_k"][0][0] if traced.returncode == 0 else traced.stderr.strip()
    if top != "time":
        fails.append(f"model.trace builtin:tinystories-1L1H 'once upon a': top-1 {top!r}, not 'time'")
    listed = _run(app, "--list-models").stdout
    if "builtin:tinystories-1L1H " not in listed or "(the default)" not in listed:
        fails.append(f"--list-models does not list the default model: {listed!r}")
    home = Path(tempfile.mkdtemp(prefix="te-smoke-"))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_DATA_HOME": str(home / "data")}
    shot = _run(app, "--screenshot", "out.png", env=env)
    bad = [line for line in shot.stderr.splitlines() if any(m in line for m in BAD_QT_MESSAGES)]
    if shot.returncode != 0 or bad or _png_size(Path("out.png")) != (1400, 900):
        fails.append(f"--screenshot out.png: exit {shot.returncode}, {bad or shot.stderr.strip()[-300:]!r}")
    started = _run(app, "--startup-time", env=env).stdout
    drawn = next((line for line in started.splitlines() if line.startswith("model loaded and drawn")), "")
    if not drawn.endswith(": tinystories-1L1H"):
        fails.append(f"--startup-time did not draw the trained default model: {started!r}")
    _run(app, "--install-desktop", env=env)
    entry = home / "data" / "applications" / "transformer-explorer.desktop"
    if not entry.is_file() or f"Exec={app} %f" not in entry.read_text():
        fails.append(f"--install-desktop: {entry} missing or not running {app}")
    return fails


def main(argv: list[str]) -> int:
    """The exit status: the number of failures."""
    if argv == ["--check"]:
        fails = check_installed()
        for line in fails:
            print(f"wheel smoke: {line}", file=sys.stderr)
        print("wheel smoke: all checks passed" if not fails else f"wheel smoke: {len(fails)} check(s) failed")
        return len(fails)
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    return main_build(Path(__file__).resolve().parents[1], Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
