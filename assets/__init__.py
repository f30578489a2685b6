"""The files Transformer Explorer ships, as the package data of ``transformer_explorer_assets``.

This folder (``assets/`` in the source tree) is installed as the package
``transformer_explorer_assets`` (the mapping is in ``setup.py``), in a wheel as in an editable
install, so the app and the commands find the shipped checkpoints (``<name>.safetensors``: the
``builtin:NAME`` models), the default model's training snapshots, GPT-2's BPE files, the icon and
the tours wherever the project is installed. :func:`path` is the one way to find any of them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["folder", "path"]


def folder() -> Path:
    """The folder that holds the shipped files (``assets/`` of a source tree, or the installed package).

    Raises
    ------
    RuntimeError
        When the package was imported from a zip archive (the files must be on disk: checkpoints
        are memory-mapped); pip, pipx and uv always install a wheel unpacked.
    """
    root = files(__name__)
    if not isinstance(root, Path):
        raise RuntimeError(f"{__name__} is not installed as a folder ({root!r}); install the wheel with pip")
    return root


def path(*parts: str) -> Path:
    """The path of a shipped file or folder, e.g. ``path("icons", "transformer-explorer.svg")``.

    The path is returned whether or not the file exists (callers that can do without it check).
    """
    return folder().joinpath(*parts)
