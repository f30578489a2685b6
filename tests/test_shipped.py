"""The shipped files as package data, and the shipped models by name (``builtin:NAME``).

Every shipped file is found through one function (``transformer_explorer_assets.path``), which in
this editable install is the repository's ``assets/`` folder; ``tests/test_wheel.py`` checks the
same from a wheel installed elsewhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import transformer_explorer_assets as shipped
from explorer.core.about import shipped_models, summarise, version, version_line
from explorer.core.defaults import DEFAULT_CHECKPOINT, DEFAULT_MODEL, open_default
from model import GPTConfig
from model.checkpoint import CheckpointError, load_any, load_checkpoint
from model.formats.refs import BuiltinRef, HubRef, as_reference, builtin_models, parse_reference, reference_text

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "assets"


def test_the_shipped_files_are_the_assets_folder_found_through_the_package():
    from explorer.qt.main_window import ICON
    from explorer.qt.panels.lessons.positional.panel import TWIN
    from model.formats.vocab import SHIPPED_GPT2_DIR

    assert shipped.folder() == ASSETS and shipped.path("icons") == ASSETS / "icons"
    for path in (ICON, TWIN, SHIPPED_GPT2_DIR / "encoder.json", SHIPPED_GPT2_DIR / "vocab.bpe", DEFAULT_CHECKPOINT):
        assert path.is_file() and ASSETS in path.parents, path


def test_the_positional_lessons_twin_is_the_shipped_model_without_positional_encoding():
    """TWIN pointed at explorer/qt/assets/ (a folder that does not exist): the lesson never offered it."""
    from explorer.qt.panels.lessons.positional.panel import TWIN, TWIN_OF

    assert TWIN == ASSETS / "tinystories-1L1H-nope.safetensors" and TWIN_OF == DEFAULT_CHECKPOINT.name
    assert load_checkpoint(TWIN).config.positional == "none"


def test_the_lesson_offers_the_twin_beside_the_shipped_default_model(qtbot, tmp_path, dialogs):
    from explorer_helpers import make_window

    window = make_window(qtbot, tmp_path, load_any(DEFAULT_MODEL))
    window.session.set_text("once upon a time")
    window.docks["positional"].raise_()
    panel = window.panels["positional"]
    qtbot.waitUntil(panel.twin_button.isVisible)
    panel.twin_button.click()
    assert window.session.checkpoint.path == ASSETS / "tinystories-1L1H-nope.safetensors"
    assert window.session.config.positional == "none" and not dialogs.errors


def test_builtin_names_are_the_checkpoint_files_present(monkeypatch, tmp_path):
    on_disk = sorted(p.stem for p in ASSETS.glob("*.safetensors"))
    assert list(builtin_models()) == on_disk and "tinystories-1L1H" in on_disk
    shutil.copyfile(DEFAULT_CHECKPOINT, tmp_path / "a-new-model.safetensors")  # a model added: no code to change
    (tmp_path / "snapshots").mkdir()
    monkeypatch.setattr(shipped, "folder", lambda: tmp_path)
    assert builtin_models() == {"a-new-model": tmp_path / "a-new-model.safetensors"}
    assert parse_reference("builtin:a-new-model").path == tmp_path / "a-new-model.safetensors"


@pytest.mark.parametrize("text, ref", [
    ("builtin:tinystories-4L4H", BuiltinRef("tinystories-4L4H")),
    ("  builtin:tinystories-1L1H ", BuiltinRef("tinystories-1L1H")),
    ("./builtin:tinystories-1L1H", Path("./builtin:tinystories-1L1H")),  # a file of that name
    ("hf:roneneldan/TinyStories-1M", HubRef("roneneldan/TinyStories-1M")),
])
def test_builtin_references_are_read_once_from_text(text, ref):
    assert parse_reference(text) == ref and as_reference(text) == ref
    assert parse_reference(reference_text(ref)) == ref


@pytest.mark.parametrize("text", ["builtin:", "builtin:nope", "builtin:../tinystories-1L1H", "builtin:snapshots"])
def test_an_unknown_builtin_name_is_refused_with_the_names_there_are(text):
    with pytest.raises(CheckpointError, match="no model of that name is shipped") as info:
        parse_reference(text)
    assert "builtin:tinystories-1L1H," in str(info.value)


def test_a_builtin_model_opens_by_name_wherever_a_checkpoint_is_taken():
    for ckpt in (load_any("builtin:tinystories-4L4H"), load_checkpoint("builtin:tinystories-4L4H"),
                 load_any(BuiltinRef("tinystories-4L4H"))):
        assert ckpt.origin == BuiltinRef("tinystories-4L4H") and ckpt.reference == ckpt.origin
        assert ckpt.path == ASSETS / "tinystories-4L4H.safetensors" and ckpt.name == "tinystories-4L4H"
        assert (ckpt.config.n_layers, ckpt.config.n_heads) == (4, 4)


def test_the_default_model_is_opened_by_its_builtin_name():
    ckpt, note = open_default()
    assert note == "" and ckpt.origin == DEFAULT_MODEL and ckpt.path == DEFAULT_CHECKPOINT


def test_the_trace_command_takes_a_builtin_model(capsys):
    from model.trace import main

    assert main(["builtin:tinystories-1L1H", "once upon a", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["top_k"][0][0] == "time"
    assert main(["builtin:nope", "x"]) == 2
    assert "builtin:nope: no model of that name is shipped" in capsys.readouterr().err


def test_the_shipped_models_are_described_from_their_headers():
    models = {m.ref.name: m for m in shipped_models(DEFAULT_MODEL)}
    assert list(models) == list(builtin_models())
    assert models["tinystories-1L1H"].summary == (
        "1 block, 1 head, d_model 128, context 32 tokens, vocabulary 4,096, learned positions; "
        "validation loss 3.11 after 2,000 steps (the default)")
    assert "4 blocks, 4 heads" in models["tinystories-4L4H"].summary
    assert "no positional encoding" in models["tinystories-1L1H-nope"].summary
    rope = GPTConfig(vocab_size=10, context_length=8, d_model=8, n_heads=2, n_layers=2, d_mlp=8, positional="rope")
    assert summarise(rope, {}) == "2 blocks, 2 heads, d_model 8, context 8 tokens, vocabulary 10, RoPE"


def test_a_damaged_shipped_file_is_listed_with_the_reason(monkeypatch, tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(b"not a checkpoint")
    monkeypatch.setattr(shipped, "folder", lambda: tmp_path)
    (model,) = shipped_models()
    assert model.ref.name == "broken" and model.summary.startswith("cannot be read")


def test_version_and_list_models_print_and_exit(capsys):
    from explorer.app import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == version_line() and version() == "0.1.0"  # pyproject.toml's version
    assert main(["--list-models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [f"builtin:{n}" for n in builtin_models()]
    assert lines[0].endswith("(the default)") and lines[0].startswith("builtin:tinystories-1L1H ")


def test_the_window_and_the_registry_import_no_torch():
    """What the app shows before torch is imported: the main window's module, the panel names, the
    settings, the shipped files' finder (and model.formats.refs, which the settings use)."""
    code = ("import sys; import explorer.qt.main_window, explorer.qt.panels, explorer.desktop, model.formats.refs; "
            "print(sorted(m for m in ('torch', 'numpy', 'pyqtgraph') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "[]"


def test_the_model_package_names_its_public_names_once():
    import model

    assert model.__all__ == sorted(model._HOMES)
    for name in model.__all__:
        assert getattr(model, name).__name__ == name
    with pytest.raises(AttributeError):
        _ = model.no_such_name
