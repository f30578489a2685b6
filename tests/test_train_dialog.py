"""File ▸ Train New Model…: bad choices explained before anything starts; a run in its own
process that ends and opens its model; one whose snapshots stream into the Training panel and
that Cancel stops with SIGINT, saving the model reached. A tiny corpus and shape: seconds each."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from explorer.core.defaults import ASSETS
from explorer.core.train_setup import TrainChoice
from explorer.qt.settings import LAST_DIR, LAST_TRAIN_DIR, documents_folder
from explorer.qt.train.dialog import TrainDialog, open_train_dialog
from explorer_helpers import make_window
from model import load_checkpoint
from model.training.args import log_spaced_steps

WORDS = "the cat sat on a mat and the dog ran to the park with a red ball she was happy he was sad".split()
RUN_MS = 120_000  # an upper bound for a process that takes seconds (a loaded 2-core machine)


@pytest.fixture
def corpus(tmp_path) -> Path:
    """60 short stories of random words, separated by <|endoftext|> lines."""
    rng = random.Random(0)
    stories = [" ".join(rng.choice(WORDS) for _ in range(40)) + " ." for _ in range(60)]
    path = tmp_path / "train.txt"
    path.write_text("\n<|endoftext|>\n".join(stories), encoding="utf-8")
    return path


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    w = make_window(qtbot, tmp_path, tiny_checkpoint)
    yield w
    for dialog in w.findChildren(TrainDialog):  # a failed test leaves no training process behind
        if dialog.run is not None and dialog.run.running:
            dialog.run.process.kill()
            dialog.run.process.waitForFinished(10_000)


def _choice(text: Path, **change) -> TrainChoice:
    fields = dict(corpus=[str(text)], val=None, out=str(text.with_name("tiny.safetensors")), n_layers=1,
                  n_heads=2, d_model=16, context_length=8, steps=30, snapshots=4)
    return TrainChoice(**{**fields, **change})


@pytest.mark.slow
def test_bad_choices_are_explained_before_anything_starts(window, corpus, qtbot):
    dialog = open_train_dialog(window)
    empty = corpus.with_name("empty.txt")
    empty.write_text("\n\n", encoding="utf-8")
    for change, message in (({"corpus": [str(empty)]}, "empty.txt: the file is empty (no text)"),
                            ({"val": str(corpus)}, "is also a --corpus file: never validate on training text"),
                            ({"n_heads": 3}, "n_heads (3) must divide d_model (16)")):
        dialog.set_choice(_choice(corpus, **change))
        assert message in dialog.problem.text() and not dialog.start_button.isEnabled()
        assert dialog.start() is False and dialog.run is None
    assert sorted(p.name for p in corpus.parent.iterdir()) == ["empty.txt", "train.txt"]  # nothing written
    # too short for one block: known only once the run has read the text; the run's own words
    short = corpus.with_name("short.txt")
    short.write_text("the cat .", encoding="utf-8")
    dialog.set_choice(_choice(corpus, val=str(short)))
    assert dialog.start() is True
    qtbot.waitUntil(lambda: dialog.run.exit_code is not None, timeout=RUN_MS)
    assert dialog.run.exit_code == 2 and "shorter than one block" in dialog.problem.text()
    assert not corpus.with_name("tiny.safetensors").exists() and window.session.checkpoint.path is None


@pytest.mark.slow
def test_a_run_ends_and_its_model_opens_with_its_snapshots(window, corpus, qtbot):
    dialog = open_train_dialog(window)
    dialog.set_choice(_choice(corpus))
    assert dialog.problem.text() == "" and dialog.start()
    assert not dialog.start_button.isEnabled() and dialog.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.run.exit_code is not None, timeout=RUN_MS)
    out = corpus.with_name("tiny.safetensors")
    assert dialog.run.exit_code == 0, dialog.run.stderr
    assert dialog.run.log.status == "done" and dialog.run.log.step == 30 and len(dialog.run.log.losses) == 30
    assert dialog.raw.getData()[0].tolist() == list(range(1, 31)) and len(dialog.val_curve.getData()[0]) >= 1
    assert dialog.summary.text().startswith("done: saved") and dialog.start_button.isEnabled()
    assert dialog.out.text() == str(corpus.with_name("tiny-2.safetensors"))  # the next run's own name
    s = window.session
    assert s.checkpoint.path == out and s.config.d_model == 16 and s.config.n_heads == 2
    assert load_checkpoint(out).training["steps"] == 30
    held_out = corpus.with_name("tiny-text")
    assert sorted(p.name for p in held_out.iterdir()) == ["train.txt", "val.txt"]  # a tenth held out
    panel = window.panels["training"]
    assert window.docks["training"].isVisible()
    qtbot.waitUntil(lambda: panel.source.view is not None and panel.source.view.reference is s.checkpoint)
    assert panel.source.view.steps == log_spaced_steps(30, 4) == [0, 1, 5, 30] and panel.stops[-1].index == -1


@pytest.mark.slow
def test_snapshots_stream_in_and_cancel_saves_the_model_reached(window, corpus, qtbot, monkeypatch):
    sent, kill = [], os.kill
    monkeypatch.setattr(os, "kill", lambda pid, sig: (sent.append(sig), kill(pid, sig)))
    dialog = open_train_dialog(window)
    dialog.set_choice(_choice(corpus, steps=200_000, snapshots=30))  # far longer than the test waits
    assert dialog.start()
    panel = window.panels["training"]
    panel.source._timer.setInterval(100)  # look for new snapshots more often than every second
    qtbot.waitUntil(lambda: panel.source.view is not None and len(panel.source.view.snapshots) >= 2
                    and "tokens/s" in dialog.summary.text(), timeout=RUN_MS)
    assert panel.source.following and dialog.run.running and dialog.summary.text().startswith("step ")
    panel.slider.setValue(1)  # scrub what exists so far: the run's snapshot becomes the model shown
    assert window.session.config.d_model == 16 and window.session.checkpoint.path.parent.name == "tiny-snapshots"
    dialog.cancel()
    assert sent == [signal.SIGINT]
    qtbot.waitUntil(lambda: dialog.run.exit_code is not None, timeout=RUN_MS)
    assert dialog.run.exit_code == 130 and dialog.run.log.status == "interrupted", dialog.run.stderr
    out = corpus.with_name("tiny.safetensors")
    saved = load_checkpoint(out)
    assert saved.training["interrupted"] is True and 0 < saved.training["steps"] < 200_000
    assert window.session.checkpoint.path == out and dialog.summary.text().startswith("stopped at step")


@pytest.mark.slow
def test_replacing_a_model_is_asked_first(window, corpus, dialogs):
    dialog = open_train_dialog(window)
    out = corpus.with_name("tiny.safetensors")
    out.write_bytes(b"an earlier model")
    dialog.set_choice(_choice(corpus))
    dialogs.confirm_answer = False
    assert dialog.problem.text() == "" and dialog.start() is False and dialog.run is None
    assert "tiny.safetensors exists" in dialogs.confirms[0][1] and out.read_bytes() == b"an earlier model"
    assert not corpus.with_name("tiny-text").exists()  # nothing split or written


def test_cancel_before_training_starts_ends_the_run_cleanly(window, corpus, qtbot):
    """Cancel in the first seconds (Python starting, torch importing, the text read) ended with "the run
    ended (status -1): KeyboardInterrupt" and left the held-out OUT-text/ folder behind."""
    dialog = open_train_dialog(window)
    dialog.set_choice(_choice(corpus))
    assert dialog.start() and corpus.with_name("tiny-text").is_dir()
    dialog.cancel()  # at once: long before the command's first step
    qtbot.waitUntil(lambda: dialog.run.exit_code is not None, timeout=RUN_MS)
    assert dialog.run.stopped_early and dialog.summary.text() == "stopped before training started: nothing was written."
    assert not corpus.with_name("tiny-text").exists() and not corpus.with_name("tiny.safetensors").exists()


@pytest.mark.parametrize("typed, message", [
    ("/", "names a folder, not a file"),
    ("..", "is a folder; add a file name"),
    ("~", "is a folder; add a file name"),
    ("{dir}/", "names a folder, not a file"),
    ("{dir}", "is a folder; add a file name"),
    ("", "choose where to save the model"),
])
def test_a_save_name_that_is_no_file_is_explained_and_cannot_start(window, corpus, qtbot, typed, message):
    """Typing "/" into "Save the model as" raised ValueError: PosixPath('/') has an empty name (explain)."""
    dialog = open_train_dialog(window)
    dialog.set_choice(_choice(corpus))
    assert dialog.start_button.isEnabled()
    dialog.out.clear()
    qtbot.keyClicks(dialog.out, typed.replace("{dir}", str(corpus.parent)))  # explain() on every key
    assert message in dialog.problem.text() and dialog.problem.isVisibleTo(dialog)
    assert not dialog.start_button.isEnabled()
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)  # disabled: nothing happens
    assert dialog.start() is False and dialog.run is None
    assert sorted(p.name for p in corpus.parent.iterdir()) == ["train.txt"]  # nothing split or written


def test_a_relative_or_home_save_name_is_the_absolute_path_the_run_writes(window, corpus, qtbot, monkeypatch):
    """The run works in the output's folder: a relative name was read from there (folder/folder/name)."""
    monkeypatch.chdir(corpus.parent)
    monkeypatch.setenv("HOME", str(corpus.parent))
    dialog = open_train_dialog(window)
    dialog.set_choice(_choice(corpus))
    for typed in ("mine.safetensors", "~/mine.safetensors"):
        dialog.out.clear()
        qtbot.keyClicks(dialog.out, typed)
        assert dialog.problem.text() == "" and dialog.choice().out == str(corpus.with_name("mine.safetensors"))


def test_the_model_is_proposed_where_the_last_run_went_else_in_documents(window, corpus, qtbot, monkeypatch, tmp_path):
    """The dialog proposed the folder of the last opened checkpoint: assets/ after the shipped model."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert documents_folder() == str(home / "Documents")
    LAST_DIR.write(window.settings, str(ASSETS))  # what File ▸ Open of a shipped model leaves
    LAST_TRAIN_DIR.write(window.settings, str(ASSETS))  # a damaged or hand-edited value: never assets/
    dialog = open_train_dialog(window)
    assert Path(dialog.out.text()) == home / "Documents" / "my-model.safetensors"
    dialog.set_choice(_choice(corpus))
    assert dialog.start()
    assert LAST_TRAIN_DIR.read(window.settings) == str(corpus.parent)  # where this run trains into
    dialog.cancel()
    qtbot.waitUntil(lambda: dialog.run.exit_code is not None, timeout=RUN_MS)
    window.settings.sync()
    again = make_window(qtbot, tmp_path, window.session.checkpoint)  # the same settings file, a later start
    assert Path(open_train_dialog(again).out.text()) == corpus.with_name("my-model.safetensors")
