"""The code's own checks, run as tests so that CI runs them: import-linter's contracts and ruff."""

import subprocess
import sys
from pathlib import Path

from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    """model never imports explorer; explorer.core is Qt-free; app > qt > core > model; model's wings;
    formats and training apart; panels never import other panels."""
    exe = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in ("explorer.core is Qt-free", "app > qt > core > model", "model's wings",
                     "training never imports a checkpoint format", "checkpoint formats never import training",
                     "panels never import other panels", "explorer.qt: main window > panels"):
        assert contract in result.stdout
    assert "BROKEN" not in result.stdout


def test_the_house_has_rooms():
    """At most 12 top-level modules in model/ and 15 in explorer/qt/ (the rest live in wings)."""
    def modules(folder):
        return sorted(p.name for p in (ROOT / folder).glob("*.py"))

    assert len(modules("model")) <= 12, modules("model")
    assert len(modules("explorer/qt")) <= 15, modules("explorer/qt")


def test_ruff_finds_nothing():
    """The rules in pyproject.toml's [tool.ruff.lint]: unused imports and names, likely bugs, style."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stdout + result.stderr
