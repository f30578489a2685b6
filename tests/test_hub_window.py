"""Models from the Hugging Face Hub in the app: File ▸ Open from Hugging Face Hub…, the fetch off the GUI
thread with a progress dialog and Cancel, Reload and Open Recent by repository, the command line; all
from the tests' offline hub cache (tests/hub_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from explorer.qt.files.opening import default_save_path
from explorer_helpers import make_window
from model.formats import hub
from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]
MISSING = ("fixtures/missing: not in the local cache and the Hub cannot be reached"
           " (offline mode is on: HF_HUB_OFFLINE=1)")


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs, hub_cache):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


@pytest.fixture
def fetch_threads(monkeypatch):
    """The threads :func:`model.formats.hub.fetch` ran on (the real fetch, recorded)."""
    threads, real = [], hub.fetch

    def recorded(ref, **kwargs):
        threads.append(threading.current_thread())
        return real(ref, **kwargs)

    monkeypatch.setattr(hub, "fetch", recorded)
    return threads


def _menu_action(window, text: str):
    file_menu = window.menuBar().actions()[0].menu()
    return next(a for a in file_menu.actions() if a.text().replace("&", "") == text)


@pytest.mark.slow
def test_open_from_hub_menu_fetches_off_the_gui_thread_and_names_the_model(window, dialogs, fetch_threads):
    dialogs.texts.append("fixtures/hf-gpt-neo")
    _menu_action(window, "Open from Hugging Face Hub…").trigger()
    s = window.session
    assert not dialogs.errors and s.checkpoint.name == "fixtures/hf-gpt-neo"
    assert s.checkpoint.source_format == "hf-gpt-neo"
    assert len(fetch_threads) == 1 and fetch_threads[0] is not threading.main_thread()
    assert [(p.title, p.closed) for p in dialogs.progress] == [("Open from Hugging Face Hub", True)]
    assert "Fetching fixtures/hf-gpt-neo from the Hugging Face Hub" in dialogs.progress[0].text
    assert window.windowTitle().endswith("— fixtures/hf-gpt-neo")
    assert window.files.recent_files() == ["hf:fixtures/hf-gpt-neo"]
    assert "fixtures/hf-gpt-neo" in window.panels["model"].browser.toPlainText()
    # The next time the last repository is proposed; the hf: form is taken as it is.
    dialogs.texts.append("hf:fixtures/hf-llama@v1")
    window.files.on_open_hub()
    assert dialogs.asked[-1][2] == "fixtures/hf-gpt-neo" and s.checkpoint.name == "fixtures/hf-llama@v1"
    assert window.files.recent_files() == ["hf:fixtures/hf-llama@v1", "hf:fixtures/hf-gpt-neo"]


@pytest.mark.slow
def test_reload_and_open_recent_fetch_again_by_repository(window, dialogs, fetch_threads, tmp_path):
    assert window.files.open_checkpoint("hf:fixtures/hf-gpt2")
    first = window.session.checkpoint
    window.files.reload()
    s = window.session
    assert s.checkpoint is not first and s.checkpoint.name == "fixtures/hf-gpt2" and len(fetch_threads) == 2
    assert default_save_path(s.checkpoint, tmp_path) == tmp_path / "hf-gpt2.safetensors"  # not in the cache
    assert window.files.open_checkpoint(Path(__file__).parent / "fixtures" / "arch" / "hf-llama")
    window.files.fill_recent_menu(window.recent_menu)
    assert [a.text() for a in window.recent_menu.actions()][1] == "hf:fixtures/hf-gpt2"
    window.recent_menu.actions()[1].trigger()
    assert s.checkpoint.name == "fixtures/hf-gpt2" and not dialogs.errors and len(fetch_threads) == 3


@pytest.mark.slow
def test_a_missing_repository_or_a_bad_id_is_one_message_and_the_model_stays(window, dialogs, fetch_threads):
    loaded = window.session.checkpoint
    dialogs.texts.append("fixtures/missing")
    window.files.on_open_hub()
    assert dialogs.errors == [("Could not open checkpoint", MISSING)] and len(fetch_threads) == 1
    assert window.session.checkpoint is loaded and window.files.recent_files() == []
    dialogs.texts.append("owner--x/name")  # refused before any fetch
    window.files.on_open_hub()
    assert len(dialogs.errors) == 2 and "'owner--x/name' is not a Hugging Face repository id" in dialogs.errors[1][1]
    assert len(fetch_threads) == 1 and len(dialogs.progress) == 1 and window.session.checkpoint is loaded
    dialogs.texts.append("   ")  # nothing typed: nothing happens
    window.files.on_open_hub()
    assert len(dialogs.errors) == 2 and window.session.checkpoint is loaded


@pytest.mark.slow
def test_cancel_returns_at_once_keeps_the_model_and_stops_the_download(window, dialogs, monkeypatch):
    """A download that reports progress as huggingface_hub does until the relay stops it."""
    ended = threading.Event()
    outcome = []

    def slow_fetch(ref, *, on_progress=None):
        try:
            for step in range(1, 2000):
                on_progress("Fetching 4 files", min(step, 3), 4, "it")
                on_progress("Downloading bytes", step * 1e6, 4e9, "B")
                time.sleep(0.01)
        except hub.FetchCancelled:
            outcome.append("cancelled")
            raise
        finally:
            ended.set()
        outcome.append("finished")

    monkeypatch.setattr(hub, "fetch", slow_fetch)
    dialogs.cancel_after = 6  # updates of the dialog (its text and value per poll)
    loaded = window.session.checkpoint
    assert not window.files.open_checkpoint("hf:owner/big-model")
    box = dialogs.progress[0]
    assert box.closed and box.maximum == 1000 and box.values[-1] > 0
    assert any(t.endswith("MB of 4,000.0 MB") and "3 of 4 files" in t for t in box.texts)
    assert window.session.checkpoint is loaded and not dialogs.errors
    assert "Opening hf:owner/big-model was cancelled" in window.statusBar().currentMessage()
    assert ended.wait(5) and outcome == ["cancelled"]
    assert window.files.recent_files() == []


@pytest.mark.slow
def test_the_command_line_opens_hf_repo_ids(window, dialogs, monkeypatch):
    from explorer.app import _load, parse_args
    from explorer.qt.panels import panel_names

    assert _load(window, parse_args(["hf:fixtures/hf-llama", "--text", "Once upon a time"], panel_names()))
    s = window.session
    assert s.checkpoint.name == "fixtures/hf-llama" and s.text == "Once upon a time" and not dialogs.errors


@pytest.mark.slow
def test_the_command_line_with_a_missing_repository_says_why_in_one_line(tmp_path, hub_cache):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = tmp_path / "x.png"
    r = subprocess.run([sys.executable, "-m", "explorer", "hf:fixtures/missing", "--screenshot", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=SAFETY_NET_S)
    lines = [line for line in r.stderr.splitlines() if line.strip() and "propagateSizeHints" not in line]
    assert r.returncode == 1 and not out.exists()
    assert lines == [f"transformer-explorer: Could not open checkpoint: {MISSING}"]


@pytest.mark.slow
def test_a_hub_reference_round_trips_through_the_recent_files(qtbot, window, dialogs, fetch_threads, tmp_path,
                                                            tiny_checkpoint):
    """Open Recent keeps a Hub model as its hf: text and reads it back as the same HubRef (revision
    included), in a new window on the same settings (the app started again)."""
    from model.formats.refs import HubRef

    ref = HubRef("fixtures/hf-llama", "v1")
    assert window.files.open_checkpoint(ref) and window.session.checkpoint.origin == ref
    assert window.files.open_checkpoint(Path(__file__).parent / "fixtures" / "arch" / "hf-gpt2")
    window.save_settings()
    again = make_window(qtbot, tmp_path, tiny_checkpoint)
    refs = again.files.recent_references()
    assert refs[1] == ref and isinstance(refs[0], Path) and again.files.recent_files()[1] == "hf:fixtures/hf-llama@v1"
    again.files.fill_recent_menu(again.recent_menu)
    again.recent_menu.actions()[1].trigger()  # opened by repository, fetched again
    assert again.session.checkpoint.origin == ref and len(fetch_threads) == 2 and not dialogs.errors
