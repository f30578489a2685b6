"""The app installed as users install it: the wheel, in a fresh venv outside the source tree.

Before the shipped files were package data this failed: the installed app opened "seeded random
model (untrained): the default checkpoint was not found" and Qt printed ``Cannot open file
'…/site-packages/assets/icons/transformer-explorer.svg'``. tools/wheel_smoke.py does the work (it
needs pip to reach a package index for torch and the dependencies, as the README's install does).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("wheel_smoke", REPO / "tools" / "wheel_smoke.py")
wheel_smoke = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(wheel_smoke)  # tools/ is not a package: the script, loaded by its path


def test_the_files_a_wheel_must_hold_are_every_tracked_asset_but_the_screenshots():
    wanted = wheel_smoke.tracked_assets(REPO)
    assert "tinystories-1L1H.safetensors" in wanted and "gpt2-bpe/vocab.bpe" in wanted and "__init__.py" in wanted
    assert "icons/transformer-explorer.svg" in wanted and not any(n.startswith("screenshot") for n in wanted)


def test_a_wheel_that_lacks_an_asset_is_reported(tmp_path):
    wheel = tmp_path / "transformer_explorer-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("transformer_explorer_assets/__init__.py", "")
    assert wheel_smoke.wheel_problems(wheel, ["__init__.py", "icons/transformer-explorer.svg"]) == [
        f"{wheel.name} lacks assets/icons/transformer-explorer.svg"]


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_opens_the_trained_default_model_and_misses_no_file():
    with tempfile.TemporaryDirectory(prefix="te-wheel-") as work:  # a venv of about 1.3 GB: removed at once
        r = subprocess.run([sys.executable, str(REPO / "tools" / "wheel_smoke.py"), work],
                           capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "transformer_explorer-0.1.0-py3-none-any.whl:" in r.stdout and "all checks passed" in r.stdout
