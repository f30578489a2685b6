"""The code's own checks, run as tests so that CI runs them: import-linter's contracts and ruff."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    """model never imports explorer; explorer.core is Qt-free; app > qt > core > model; model's layers."""
    exe = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in ("explorer.core is Qt-free", "app > qt > core > model", "model's own layers"):
        assert contract in result.stdout and "BROKEN" not in result.stdout


def test_ruff_finds_nothing():
    """The rules in pyproject.toml's [tool.ruff.lint]: unused imports and names, likely bugs, style."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
