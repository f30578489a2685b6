"""A damaged settings file never stops the app: every stored value is checked for type and range."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QSettings

from conftest import make_tiny_checkpoint
from explorer.qt import settings as stored
from explorer.qt.files.opening import recall, settings_key
from explorer_helpers import make_window
from model import save_checkpoint
from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]

# What a crash, another version or a hand edit can leave in the INI file, one kind per key.
DAMAGED = r"""[General]
recent_files=@ByteArray(\x80\x81junk)
last_dir=@ByteArray(/tmp)
last_export_dir=1, 2, 3
int_huge=99999999999999999999
int_superscript=²
int_float=2.5
int_bool=true
int_size=@Size(3 4)
int_ok=7
float_inf=inf
float_nan=nan
float_text=hot
float_neg=-3
float_ok=0.25
bool_text=maybe
bool_ok=false
str_list=a, b
str_rect=@Rect(1 2 3 4)
str_nul="a\0b"
list_invalid=@Invalid()
list_mixed=a, @Invalid()

[window]
geometry=@Size(10 10)
state=1, 2

[next_token]
k=99999999999999999999
temperature=inf
"""


@pytest.fixture
def damaged(tmp_path) -> Path:
    path = tmp_path / "settings.ini"
    path.write_text(DAMAGED, encoding="utf-8")
    return path


def _ini(path: Path) -> QSettings:
    return QSettings(str(path), QSettings.Format.IniFormat)


@pytest.mark.parametrize("key, expected", [
    ("int_huge", 5), ("int_superscript", 5), ("int_float", 5), ("int_bool", 5), ("int_size", 5),
    ("missing", 5), ("int_ok", 7),
])
def test_read_int_falls_back_for_every_kind_of_damage(damaged, key, expected):
    assert stored.read_int(_ini(damaged), key, 5, 1, 100) == expected


def test_read_int_checks_the_range(damaged):
    assert stored.read_int(_ini(damaged), "int_ok", 5, 1, 6) == 5
    assert stored.read_int(_ini(damaged), "int_ok", 5, 8, 9) == 5


@pytest.mark.parametrize("key, expected", [
    ("float_inf", 1.0), ("float_nan", 1.0), ("float_text", 1.0), ("float_neg", 1.0), ("int_size", 1.0),
    ("int_bool", 1.0), ("float_ok", 0.25), ("int_ok", 7.0),
])
def test_read_float_takes_only_finite_numbers_in_range(damaged, key, expected):
    assert stored.read_float(_ini(damaged), key, 1.0, 0.0, 10.0) == expected


def test_read_bool_str_bytes_and_lists(damaged):
    s = _ini(damaged)
    assert stored.read_bool(s, "bool_text", True) is True and stored.read_bool(s, "bool_ok", True) is False
    assert stored.read_bool(s, "int_ok", False) is False
    assert stored.read_str(s, "str_list", "d") == "d" and stored.read_str(s, "str_rect", "d") == "d"
    assert stored.read_str(s, "str_nul", "d") == "d" and stored.read_str(s, "bool_text") == "maybe"
    assert stored.read_bytes(s, "window/geometry") is None and stored.read_bytes(s, "recent_files") is not None
    assert stored.read_str_list(s, "recent_files", 8) == []
    assert stored.read_str_list(s, "str_list", 8) == ["a", "b"] and stored.read_str_list(s, "str_list", 1) == ["a"]
    assert stored.read_str_list(s, "bool_text", 8) == ["maybe"] and stored.read_str_list(s, "list_invalid", 8) == []
    assert stored.read_folder(s, "last_dir", "home") == "home" and stored.read_folder(s, "last_export_dir", "h") == "h"


def test_values_set_in_this_run_read_back_as_stored(tmp_path):
    s = _ini(tmp_path / "fresh.ini")
    s.setValue("k", 12)
    s.setValue("t", 0.5)
    s.setValue("flag", True)
    s.setValue("files", ["/a", "/b"])
    assert stored.read_int(s, "k", 1, 1, 99) == 12 and stored.read_float(s, "t", 1.0, 0, 1) == 0.5
    assert stored.read_bool(s, "flag", False) is True and stored.read_str_list(s, "files", 8) == ["/a", "/b"]
    s.sync()
    again = _ini(tmp_path / "fresh.ini")  # from the file: strings
    assert stored.read_int(again, "k", 1, 1, 99) == 12 and stored.read_bool(again, "flag", False) is True


@pytest.fixture
def good_file(tmp_path, tiny_tokenizer):
    path = tmp_path / "tiny.safetensors"
    ckpt = make_tiny_checkpoint(tiny_tokenizer, seed=7, n_layers=1, n_heads=1)
    save_checkpoint(path, ckpt.model, ckpt.tokenizer)
    return path


@pytest.mark.slow
def test_the_window_starts_on_defaults_from_a_damaged_file(qtbot, tmp_path, damaged, tiny_checkpoint, dialogs,
                                                             good_file):
    """recent_files as a byte array raised TypeError on opening a file (and in Open Recent);
    next_token/k=99999999999999999999 raised OverflowError in MainWindow()."""
    window = make_window(qtbot, tmp_path, tiny_checkpoint)  # reads tmp_path / "settings.ini", the damaged file
    panel = window.panels["next-token"]
    assert panel.k_box.value() == 10 and panel.k_wanted == 10 and panel.temperature_box.value() == 1.0
    assert window.docks["attention"].isVisible() and window.session.trace is not None
    assert window.files.recent_files() == []
    window.files.fill_recent_menu(window.recent_menu)
    assert not window.recent_menu.isEnabled()
    assert window.files.open_checkpoint(good_file) and not dialogs.errors
    assert window.files.recent_files() == [str(good_file.resolve())]
    window.files.fill_recent_menu(window.recent_menu)
    assert [a.text() for a in window.recent_menu.actions()] == [str(good_file.resolve())]
    window.files.on_open()  # last_dir as bytes: the dialog starts in assets/ (no answer: nothing opens)
    assert window.session.checkpoint.path == good_file


def test_remembered_answers_that_are_damaged_are_not_used(tmp_path, good_file):
    s = _ini(tmp_path / "answers.ini")
    key = "opened/" + settings_key(good_file)
    for value, expected in (("²", None), ("99999999999999999999", None), ("0", None), ("4", 4)):
        s.setValue(f"{key}/n_heads", value)
        s.setValue(f"{key}/vocab_path", ["a", "b"])
        s.setValue(f"{key}/no_vocab", "perhaps")
        answers = recall(s, good_file)
        assert (answers.n_heads, answers.vocab_path, answers.allow_no_tokenizer) == (expected, None, False)


@pytest.mark.slow
def test_the_command_starts_with_a_damaged_settings_file(tmp_path, damaged, good_file):
    """`transformer-explorer PATH` died at start-up with a TypeError (recent_files as a byte array)."""
    config = tmp_path / "config"
    (config / "TransformerExplorer").mkdir(parents=True)
    conf = config / "TransformerExplorer" / "transformer-explorer.conf"
    conf.write_text(DAMAGED, encoding="utf-8")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(config))
    r = subprocess.run([sys.executable, "-m", "explorer", str(good_file), "--startup-time"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "model loaded and drawn" in r.stdout
    assert str(good_file.resolve()) in conf.read_text(encoding="utf-8")  # the file was opened and remembered



# For each kind of setting: what an INI file can hold under its key that is damage for it, and one
# value that is not (read back as itself, so that the test sees the value, not only the default).
DAMAGE = {
    "int": ["@ByteArray(7)", "1, 2, 3", "99999999999999999999", "²", "2.5", "true", "@Size(3 4)", "@Invalid()", "hot",
            "{above}", "{below}"],
    "float": ["inf", "nan", "hot", "@Size(3 4)", "true", "1, 2", "@ByteArray(0.5)", "{above}", "{below}"],
    "bool": ["maybe", "1, 2", "@Size(3 4)", "@ByteArray(true)", "7"],
    "str": ["1, 2, 3", "@Rect(1 2 3 4)", "@ByteArray(text)", '"a\\0b"', "@Invalid()"],
    "str_list": ["@ByteArray(\\x80\\x81junk)", "@Size(3 4)", "@Invalid()"],
    "bytes": ["@Size(10 10)", "1, 2", "text", "@ByteArray()"],
    "folder": ["@ByteArray(/tmp)", "1, 2, 3", "/no/such/folder", "@Invalid()"],
}
FINE = {"int": ("{end}", "{end}"), "float": ("{end}", "{end}"), "bool": ("true", True), "str": ("some text", "some text"),
        "str_list": ("a, b", ["a", "b"]), "bytes": ("@ByteArray(abc)", QByteArray(b"abc")), "folder": ("{tmp}", "{tmp}")}


def _ini_line(key: str, raw: str) -> str:
    """``key=raw`` as QSettings writes it in an INI file (the first part of the key is the section)."""
    section, _, name = key.partition("/")
    return f"[{section}]\n{name.replace('/', chr(92))}={raw}\n" if name else f"[General]\n{key}={raw}\n"


@pytest.mark.parametrize("setting", stored.ALL, ids=lambda setting: setting.key)
def test_every_declared_setting_falls_back_to_its_default_when_damaged(tmp_path, setting):
    """Each declaration (key, kind, default, range) is what reading it checks: every kind of damage
    a settings file can hold gives the declared default, never an exception; a sound value is read."""
    setting = setting.at(file="0123456789abcdef")  # the per-file answers' group
    fields = dict(above=f"{setting.hi + 1}" if setting.hi is not None else "", tmp=str(tmp_path),
                  below=f"{setting.lo - 1}" if setting.lo is not None else "",
                  end=f"{setting.hi if setting.hi != setting.default else setting.lo}")  # an end that is not the default
    default = list(setting.default) if setting.kind == "str_list" else setting.default
    for i, raw in enumerate(DAMAGE[setting.kind]):  # a file each: QSettings caches a file it has read
        path = tmp_path / f"damaged-{i}.ini"
        path.write_text(_ini_line(setting.key, raw.format(**fields)), encoding="utf-8")
        assert setting.read(_ini(path)) == default, raw
    raw, expected = FINE[setting.kind]
    path = tmp_path / "sound.ini"
    path.write_text(_ini_line(setting.key, raw.format(**fields)), encoding="utf-8")
    value = setting.read(_ini(path))
    expected = type(setting.hi)(expected.format(**fields)) if setting.kind in ("int", "float") else expected
    assert value == (expected.format(**fields) if isinstance(expected, str) else expected) and value != default
    with pytest.raises(ValueError):  # writing what reading would refuse is a bug, said at once
        setting.write(_ini(tmp_path / "new.ini"), object())
    setting.write(_ini(tmp_path / "new.ini"), value)  # what was read writes back
    assert setting.read(_ini(tmp_path / "new.ini")) == value
