"""``--install-desktop`` / ``--uninstall-desktop``: a desktop entry, the icon and the MIME types, per user,
in a temporary ``$XDG_DATA_HOME``; checked with the freedesktop.org tools where they are installed."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import transformer_explorer_assets as shipped
from explorer import desktop

OUR_TYPES = ["application/x-safetensors", "application/x-gguf", "application/x-pytorch"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh $XDG_DATA_HOME: nothing is written to the user's own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


def _entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"))
    return dict(parser["Desktop Entry"])


def test_install_writes_an_entry_the_icon_and_the_mime_types(home, capsys):
    assert desktop.main(remove=False) == 0
    files = desktop.installed_files(home)
    assert capsys.readouterr().out.splitlines()[:3] == [f"wrote {files[k]}" for k in ("entry", "icon", "mime")]
    entry = _entry(files["entry"])
    assert (entry["Type"], entry["Name"], entry["Icon"]) == ("Application", "Transformer Explorer", "transformer-explorer")
    assert entry["MimeType"] == "".join(t + ";" for t in OUR_TYPES) + "application/octet-stream;"
    program, field = entry["Exec"].rsplit(" ", 1)
    assert field == "%f"  # one file: what was chosen in Open With, or dropped on the launcher
    assert program in (str(Path(sys.executable).with_name("transformer-explorer")), f"{sys.executable} -m explorer")
    assert files["icon"].read_bytes() == shipped.path("icons", "transformer-explorer.svg").read_bytes()
    root = ET.fromstring(files["mime"].read_text(encoding="utf-8"))
    ns = {"m": desktop.MIME_NS}
    assert [t.get("type") for t in root.findall("m:mime-type", ns)] == OUR_TYPES
    gguf = root.find("m:mime-type[@type='application/x-gguf']", ns)
    assert gguf.find("m:magic/m:match", ns).attrib == {"type": "string", "offset": "0", "value": "GGUF"}
    globs = [g.get("pattern") for g in root.iter(f"{{{desktop.MIME_NS}}}glob")]
    assert globs == ["*.safetensors", "*.gguf", "*.pt", "*.pth"]


@pytest.mark.skipif(not shutil.which("desktop-file-validate"), reason="desktop-file-utils is not installed")
def test_the_entry_is_valid_by_desktop_file_validate(home):
    desktop.install()
    r = subprocess.run(["desktop-file-validate", str(desktop.installed_files(home)["entry"])],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


@pytest.mark.skipif(not shutil.which("update-mime-database"), reason="shared-mime-info is not installed")
def test_the_mime_database_knows_the_types_after_install(home):
    desktop.install()
    globs = (home / "mime" / "globs2").read_text(encoding="utf-8")
    for line in ("application/x-gguf:*.gguf", "application/x-safetensors:*.safetensors", "application/x-pytorch:*.pt"):
        assert line in globs, line
    assert "GGUF" in (home / "mime" / "application" / "x-gguf.xml").read_text(encoding="utf-8")


@pytest.mark.skipif(not shutil.which("update-desktop-database"), reason="desktop-file-utils is not installed")
def test_open_with_offers_the_app_for_each_type_after_install(home):
    desktop.install()
    cache = (home / "applications" / "mimeinfo.cache").read_text(encoding="utf-8")
    for mime in [*OUR_TYPES, "application/octet-stream"]:
        assert f"{mime}=transformer-explorer.desktop;" in cache, mime


def test_uninstall_removes_what_install_wrote_and_nothing_else(home, capsys):
    mine = home / "applications" / "someone-else.desktop"
    mine.parent.mkdir(parents=True)
    mine.write_text("[Desktop Entry]\n")
    written = desktop.install()
    assert desktop.main(remove=True) == 0
    assert capsys.readouterr().out.splitlines() == [f"removed {p}" for p in written]
    assert not any(p.exists() for p in written) and mine.exists()
    assert desktop.main(remove=True) == 0  # again: nothing to remove, said so
    assert "nothing to remove" in capsys.readouterr().out


def test_the_data_home_is_the_xdg_default_when_unset_or_relative(monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert desktop.data_home() == Path.home() / ".local" / "share"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # the spec: a relative path is invalid, ignored
    assert desktop.data_home() == Path.home() / ".local" / "share"


@pytest.mark.parametrize("arg, written", [
    ("/opt/te/bin/transformer-explorer", "/opt/te/bin/transformer-explorer"),
    ("/home/a b/bin/te", '"/home/a b/bin/te"'),
    ('/x/$HOME/"q"', '"/x/\\\\$HOME/\\\\"q\\\\""'),  # quoted, escaped inside the quotes, then as a string value
    ("/x\\y z", '"/x\\\\\\\\y z"'),  # a literal backslash in a quoted argument: four in the file
    ("/100%/te", "/100%%/te"),
])
def test_exec_arguments_are_quoted_as_the_desktop_entry_spec_says(arg, written):
    assert desktop.exec_argument(arg) == written


def test_the_command_line_installs_into_xdg_data_home(home):
    env = dict(os.environ, XDG_DATA_HOME=str(home))
    r = subprocess.run([sys.executable, "-m", "explorer", "--install-desktop"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert desktop.installed_files(home)["entry"].is_file() and "Open With offers it" in r.stdout
    r = subprocess.run([sys.executable, "-m", "explorer", "--uninstall-desktop"], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0 and not desktop.installed_files(home)["entry"].exists()
