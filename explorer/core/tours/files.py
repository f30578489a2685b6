"""Where tours and the models they name are found: the shipped tours in ``assets/tours/``, a shipped
model by its name, or a file beside the tour.

A shipped file is found with :func:`transformer_explorer_assets.path` and a shipped model by its
``builtin:`` name (:func:`model.formats.refs.builtin_models`), as everywhere else in the app.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import transformer_explorer_assets as shipped
from model.formats.refs import BUILTIN_PREFIX, builtin_models

TOURS = "tours"  # the shipped tours' folder, in the assets
MODEL_SUFFIX = ".safetensors"


def shipped_file(*parts: str) -> Path:
    """The path of a shipped file (``shipped_file("tours", "chapter.toml")``), whether it exists or not."""
    return shipped.path(*parts)


def shipped_tours() -> list[Path]:
    """The tours shipped with the app, by file name."""
    folder = shipped_file(TOURS)
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def shipped_models() -> list[str]:
    """The names of the shipped models (``tinystories-1L1H``, ...): the ``builtin:`` models."""
    return list(builtin_models())


@dataclass(frozen=True)
class ModelRef:
    """A model a tour step names: as the file writes it, and the file it is."""

    text: str
    path: Path


def resolve_model(text, folder: Path) -> ModelRef:
    """A step's ``model``: a shipped model's name (``"tinystories-4L4H"`` or ``"builtin:tinystories-4L4H"``),
    or a path relative to the tour's ``folder`` (or absolute) of a checkpoint file or folder.

    Raises
    ------
    ValueError
        When it is not a string or names nothing that exists.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"model must be a shipped model's name or a path, not {text!r}")
    name = text.strip()
    known = builtin_models()
    stem = name.removeprefix(BUILTIN_PREFIX).removesuffix(MODEL_SUFFIX)
    if stem in known:
        return ModelRef(name, known[stem])
    beside = (folder / name).expanduser()
    if beside.exists():
        return ModelRef(name, beside.resolve())
    raise ValueError(f"model {name!r} is neither a shipped model ({', '.join(shipped_models())}) nor a file "
                     f"beside the tour ({folder / name} does not exist)")
