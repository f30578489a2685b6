"""Start-up in two steps (the window first, then torch, the panels and the model), and the menus of
an installed app: File ▸ Open Shipped Model, Help ▸ About."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import QSettings

from explorer.core.defaults import ASSETS, DEFAULT_CHECKPOINT, DEFAULT_MODEL
from explorer.qt import dialogs as qt_dialogs
from explorer.qt.main_window import STARTING_MENUS, MainWindow
from explorer.qt.panels import PANELS, Lazy
from explorer.qt.settings import LAST_DIR, NEXT_TOKEN_K, WINDOW_GEOMETRY, WINDOW_STATE
from explorer_helpers import make_window
from model.checkpoint import load_any
from model.formats.refs import BuiltinRef, builtin_models

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def test_every_registered_panel_resolves_to_its_class():
    for name, _title, factory in PANELS:
        assert isinstance(factory, Lazy) and factory.resolve().__name__ == factory.name, name


def test_the_starting_window_has_its_docks_and_a_status_line_then_finish_builds_the_rest(qtbot, settings):
    window = MainWindow(settings=settings, starting=True)
    qtbot.addWidget(window)
    window.status.setText("Starting: importing PyTorch…")
    window.show()
    qtbot.waitExposed(window)
    assert set(window.docks) == {name for name, _, _ in PANELS} and window.panels == {}
    assert all(dock.widget() is None and dock.isVisible() for dock in window.docks.values())
    assert [a.text() for a in window.menuBar().actions()] == list(STARTING_MENUS)
    assert not any(a.isEnabled() for a in window.menuBar().actions())
    assert window.session is None and window.files is None
    window.docks["embeddings"].raise_()  # a tab brought forward before the panels exist: nothing to catch up
    window.finish()
    assert set(window.panels) == set(window.docks) and window.session is not None and window.acceptDrops()
    in_view = {"tokens", "generate", "next-token", "embeddings"}  # the panels tabbed behind are built when shown
    assert set(window.panels.built()) == in_view
    assert {name for name, dock in window.docks.items() if dock.widget() is not None} == in_view
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles[0] == "&File" and titles[-1] == "&Help" and all(a.isEnabled() for a in window.menuBar().actions())
    window.files.open_default()
    assert window.session.checkpoint.path == DEFAULT_CHECKPOINT and window.model_note == ""
    assert window.status.text().startswith("tinystories-1L1H")  # the model's status replaced the start's
    window.close()


def test_a_panel_tabbed_out_of_sight_is_built_when_its_dock_is_first_shown_and_draws_the_current_trace(
        qtbot, settings, tiny_checkpoint):
    NEXT_TOKEN_K.write(settings, 7)  # a panel reads its saved settings when it is built
    window = MainWindow(settings=settings, starting=True)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.finish()
    assert set(window.panels.built()) == {"tokens", "generate", "next-token", "attention"}
    window.set_checkpoint(tiny_checkpoint)
    window.session.set_text("the cat sat on the mat")
    trace = window.session.trace
    assert not window.panels.is_built("qkv") and window.docks["qkv"].widget() is None
    window.show_panel("qkv")  # a click on its tab
    assert window.panels.is_built("qkv") and window.docks["qkv"].widget() is not None
    qkv = window.panels["qkv"]
    assert qkv.is_shown() and np.allclose(qkv.heatmaps["q"].image.image, trace.blocks[0].q[0])
    window.show_panel("formula")  # a lesson, drawn on its first showing
    formula = window.panels["formula"]
    assert formula.is_shown() and formula.steps.position == trace.n_tokens - 1
    assert np.allclose(formula.steps.out, trace.blocks[0].head_out[0, -1], atol=1e-6)
    why = window.panels["why"]  # looked up, not shown: built now, drawn when shown
    assert window.panels.is_built("why") and not why.is_shown()
    assert set(window.panels.built()) == {"tokens", "qkv", "attention", "next-token", "generate", "formula", "why"}
    assert window.panels["next-token"].k_wanted == 7
    window.close()
    assert not window.panels.is_built("map")  # saving the settings built nothing


def test_a_starting_window_closed_before_it_is_finished_saves_its_layout(qtbot, settings):
    window = MainWindow(settings=settings, starting=True)
    qtbot.addWidget(window)
    window.show()
    window.close()  # no session to shut down, no panel settings
    assert WINDOW_GEOMETRY.read(settings) is not None and WINDOW_STATE.read(settings) is not None


@pytest.mark.slow
def test_the_window_is_shown_before_torch_is_imported_and_the_trained_default_model_drawn(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "explorer", "--startup-time"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(" after ")[0] for line in lines] == ["window shown", "torch imported", "panels built",
                                                            "model loaded", "model loaded and drawn"]
    assert lines[0].endswith("(torch not imported yet)") and lines[-1].endswith(": tinystories-1L1H")
    seconds = [float(re.search(r"after ([0-9.]+) s", line).group(1)) for line in lines]
    assert seconds == sorted(seconds) and "random model" not in r.stderr


def test_file_open_shipped_model_lists_every_shipped_model_and_opens_it(qtbot, tmp_path, tiny_checkpoint, dialogs):
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    (menu,) = [a.menu() for a in window.menuBar().actions()[0].menu().actions() if a.text() == "Open &Shipped Model"]
    menu.aboutToShow.emit()
    actions = menu.actions()
    assert [a.text().removesuffix(" (default)") for a in actions] == list(builtin_models())
    default = next(a for a in actions if a.text().endswith("(default)"))
    assert default.text() == "tinystories-1L1H (default)"
    assert default.toolTip().startswith("builtin:tinystories-1L1H: 1 block")
    next(a for a in actions if a.text() == "tinystories-4L4H").trigger()
    s = window.session
    assert s.checkpoint.origin == BuiltinRef("tinystories-4L4H") and s.config.n_layers == 4 and not dialogs.errors
    assert window.files.recent_files()[0] == "builtin:tinystories-4L4H"  # by name: it survives an upgrade
    window.files.reload()
    assert s.checkpoint.origin == BuiltinRef("tinystories-4L4H") and window.files.recent_files().count(
        "builtin:tinystories-4L4H") == 1


def test_a_recent_builtin_model_no_longer_shipped_is_pruned(qtbot, tmp_path, tiny_checkpoint):
    from explorer.qt.settings import RECENT_FILES

    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    RECENT_FILES.write(window.settings, ["builtin:retired-model", "builtin:tinystories-1L1H"])
    assert window.files.recent_files() == ["builtin:tinystories-1L1H"]
    assert RECENT_FILES.read(window.settings) == ["builtin:tinystories-1L1H"]


def test_save_as_of_a_shipped_model_proposes_a_file_outside_the_installed_app(tmp_path):
    from explorer.qt.files.opening import default_save_path

    ckpt = load_any(DEFAULT_MODEL)
    assert default_save_path(ckpt, tmp_path) == tmp_path / "tinystories-1L1H.safetensors"
    by_path = load_any(DEFAULT_MODEL.path)  # File ▸ Open of assets/tinystories-1L1H.safetensors
    assert by_path.origin is None and by_path.path.parent.resolve() == ASSETS.resolve()
    assert default_save_path(by_path, tmp_path) == tmp_path / "tinystories-1L1H.safetensors"  # not over the shipped file


def test_save_as_starts_in_the_last_folder_only_when_a_model_may_go_there(qtbot, tmp_path, tiny_checkpoint, dialogs,
                                                                            monkeypatch):
    """After File ▸ Open in assets/ (the folder it starts in), Save As proposed to write into assets/."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    window = make_window(qtbot, tmp_path, load_any(DEFAULT_MODEL))
    LAST_DIR.write(window.settings, str(ASSETS))
    proposed = []
    monkeypatch.setattr(qt_dialogs, "save_file", lambda _parent, _title, directory="", _filter="": proposed.append(directory))
    window.files.on_save_as()
    assert proposed == [str(home / "Documents" / "tinystories-1L1H.safetensors")]
    LAST_DIR.write(window.settings, str(tmp_path))  # a folder a model may go into is kept
    window.files.on_save_as()
    assert proposed[-1] == str(tmp_path / "tinystories-1L1H.safetensors")


def test_help_about_says_the_version_the_default_model_the_versions_and_the_settings_file(
        qtbot, tmp_path, tiny_checkpoint, dialogs):
    from PySide6.QtCore import qVersion

    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    help_menu = window.menuBar().actions()[-1].menu()
    (about,) = help_menu.actions()
    about.trigger()
    ((title, text),) = dialogs.infos
    assert title == "About Transformer Explorer" and text.startswith("Transformer Explorer 0.1.0\n")
    for fact in (f"Default model: builtin:tinystories-1L1H ({DEFAULT_CHECKPOINT})", f"PyTorch {torch.__version__}",
                 f"Qt {qVersion()} (PySide6 ", f"Settings are stored in: {tmp_path / 'settings.ini'}"):
        assert fact in text, fact
