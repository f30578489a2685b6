"""Desktop integration on Linux: ``transformer-explorer --install-desktop`` and ``--uninstall-desktop``.

For the user who runs it, under ``$XDG_DATA_HOME`` (``~/.local/share`` when unset), following the
freedesktop.org specifications:

- ``applications/transformer-explorer.desktop``: a desktop entry (Desktop Entry Specification 1.4,
  the newest that desktop-file-validate 0.26 knows) that starts the installed command on one file (``Exec=... %f``), so the app is in the
  applications menu, "Open With" offers it for the types below, and a file dropped on its
  launcher is opened;
- ``icons/hicolor/scalable/apps/transformer-explorer.svg``: its icon (Icon Theme Specification);
- ``mime/packages/transformer-explorer.xml``: the MIME types of the checkpoint files it opens that
  no shared-mime-info package defines (Shared MIME-info Database specification).

``update-desktop-database`` and ``update-mime-database`` are run on those folders when they are
installed (desktop-file-utils, shared-mime-info); without them the desktop's own watcher picks the
files up. Nothing is made the default application of any type. ``--uninstall-desktop`` removes
exactly these three files. Qt-free and torch-free: it runs before either is imported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import transformer_explorer_assets as shipped

APP_ID = "transformer-explorer"  # the desktop file id, the icon's name, QGuiApplication.desktopFileName
NAME = "Transformer Explorer"
COMMENT = "Look inside a small language model while you type"
#: Our types for the files the app opens: (type, description, glob patterns, magic string at offset 0).
MIME_TYPES = (
    ("application/x-safetensors", "Safetensors model weights", ("*.safetensors",), None),
    ("application/x-gguf", "GGUF model (llama.cpp)", ("*.gguf",), "GGUF"),
    ("application/x-pytorch", "PyTorch checkpoint", ("*.pt", "*.pth"), None),
)
#: A llama2.c ``model.bin`` or a ``pytorch_model.bin`` has no type of its own: .bin files are
#: application/octet-stream, which the entry lists so that "Open With" offers the app for them too.
OPEN_WITH = tuple(t for t, *_ in MIME_TYPES) + ("application/octet-stream",)
MIME_NS = "http://www.freedesktop.org/standards/shared-mime-info"
RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")  # characters that make an Exec argument need quotes


def data_home() -> Path:
    """``$XDG_DATA_HOME``, or ``~/.local/share`` when it is unset or not absolute (XDG Base Directory spec)."""
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".local" / "share"


def installed_files(home: Path) -> dict[str, Path]:
    """Where the entry, the icon and the MIME types go under the data folder ``home``."""
    return {"entry": home / "applications" / f"{APP_ID}.desktop",
            "icon": home / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg",
            "mime": home / "mime" / "packages" / f"{APP_ID}.xml"}


def launch_command() -> list[str]:
    """The command that starts the app: the installed ``transformer-explorer`` beside this Python
    (a venv's or pipx's bin folder, which need not be on the desktop's PATH), else ``python -m explorer``."""
    script = Path(sys.executable).with_name(APP_ID)
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "explorer"]


def exec_argument(arg: str) -> str:
    """One argument of an ``Exec`` key: quoted when it holds a reserved character (with ``"``, `````,
    ``$`` and ``\\`` escaped inside the quotes), then ``%`` doubled and ``\\`` escaped as the string
    value requires (Desktop Entry Specification, "The Exec key")."""
    if RESERVED & set(arg):
        arg = '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'
    return arg.replace("%", "%%").replace("\\", "\\\\")


def desktop_entry(command: list[str]) -> str:
    """The text of the desktop entry that runs ``command`` on one file."""
    tryexec = [f"TryExec={command[0]}"] if len(command) == 1 else []
    lines = ["[Desktop Entry]", "Type=Application", "Version=1.4", f"Name={NAME}",
             "GenericName=Language Model Explorer", f"Comment={COMMENT}",
             "Exec=" + " ".join(map(exec_argument, command)) + " %f", *tryexec,
             f"Icon={APP_ID}", "Terminal=false", "StartupNotify=true",
             "Categories=Education;ArtificialIntelligence;",
             "Keywords=transformer;attention;language model;GPT;neural network;",
             "MimeType=" + "".join(t + ";" for t in OPEN_WITH)]
    return "\n".join(lines) + "\n"


def mime_package() -> str:
    """The shared-mime-info package (XML) that defines :data:`MIME_TYPES`."""
    ET.register_namespace("", MIME_NS)
    root = ET.Element(f"{{{MIME_NS}}}mime-info")
    for mime, comment, globs, magic in MIME_TYPES:
        node = ET.SubElement(root, f"{{{MIME_NS}}}mime-type", type=mime)
        ET.SubElement(node, f"{{{MIME_NS}}}comment").text = comment
        if magic is not None:
            match = ET.SubElement(ET.SubElement(node, f"{{{MIME_NS}}}magic", priority="50"), f"{{{MIME_NS}}}match")
            match.attrib.update(type="string", offset="0", value=magic)
        for pattern in globs:
            ET.SubElement(node, f"{{{MIME_NS}}}glob", pattern=pattern)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _refresh_databases(home: Path) -> list[str]:
    """Run the desktop's cache builders that are installed on the folders written; their names."""
    ran = []
    for tool, folder in (("update-desktop-database", home / "applications"), ("update-mime-database", home / "mime")):
        if shutil.which(tool) and folder.is_dir():
            subprocess.run([tool, *(["-q"] if tool == "update-desktop-database" else []), str(folder)],
                           check=False, capture_output=True)
            ran.append(tool)
    return ran


def install(home: Path | None = None) -> list[Path]:
    """Write the entry, the icon and the MIME types for this user; the files written.

    Raises
    ------
    OSError
        When a file cannot be written or the shipped icon is missing.
    """
    home = data_home() if home is None else home
    files = installed_files(home)
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    files["entry"].write_text(desktop_entry(launch_command()), encoding="utf-8")
    shutil.copyfile(shipped.path("icons", f"{APP_ID}.svg"), files["icon"])
    files["mime"].write_text(mime_package(), encoding="utf-8")
    _refresh_databases(home)
    return list(files.values())


def uninstall(home: Path | None = None) -> list[Path]:
    """Remove what :func:`install` wrote (what is there of it); the files removed."""
    home = data_home() if home is None else home
    removed = [path for path in installed_files(home).values() if path.is_file()]
    for path in removed:
        path.unlink()
    _refresh_databases(home)
    return removed


def main(remove: bool) -> int:
    """``--install-desktop`` (``remove`` False) or ``--uninstall-desktop``: do it and say what was done;
    the exit status (0 done, 1 not a freedesktop.org system or a file could not be written)."""
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        print("transformer-explorer: error: --install-desktop is for Linux desktops (freedesktop.org); "
              "see the README for macOS and Windows", file=sys.stderr)
        return 1
    try:
        paths = uninstall() if remove else install()
    except OSError as exc:
        print(f"transformer-explorer: error: {exc}", file=sys.stderr)
        return 1
    verb = "removed" if remove else "wrote"
    for path in paths:
        print(f"{verb} {path}")
    if not remove:
        print(f"{NAME} is in the applications menu; Open With offers it for .safetensors, .gguf, .pt, .pth "
              "and .bin files")
    elif not paths:
        print("nothing to remove: no desktop entry of transformer-explorer is installed for this user")
    return 0
