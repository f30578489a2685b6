"""What can be opened: a :data:`Reference` is a file or folder (a ``Path``), a model on the Hugging
Face Hub (a :class:`HubRef`) or a model shipped with the app (a :class:`BuiltinRef`), read from
text once, where text comes in (a command line, a dialog, the recent-files list), by
:func:`parse_reference`; everything after that holds the typed value.

To add a kind of reference (as :class:`BuiltinRef` was added), add its frozen dataclass here, add it to
:data:`Reference`, give :func:`parse_reference` its prefix and :func:`reference_text` its text,
and teach :func:`model.checkpoint.inspect` to open it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import transformer_explorer_assets as shipped

from model.core.plain import readable
from model.formats.errors import CheckpointError, HubError

__all__ = ["BUILTIN_PREFIX", "EXAMPLE", "HUB_PREFIX", "HUB_URL", "BuiltinRef", "HubRef", "Reference", "as_reference",
           "builtin_models", "parse_builtin", "parse_hub_spec", "parse_reference", "reference_name", "reference_text"]

BUILTIN_PREFIX = "builtin:"
HUB_PREFIX = "hf:"
HUB_URL = "https://huggingface.co/"
EXAMPLE = "roneneldan/TinyStories-1M"
#: A branch, tag or commit hash: git's ref characters, no ``..``, no leading or trailing ``/``.
REVISION = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


@dataclass(frozen=True)
class HubRef:
    """A model repository on the Hugging Face Hub, at a revision.

    Attributes
    ----------
    repo_id : str               ``owner/name`` (or a legacy ``name``), as the Hub spells it.
    revision : str or None      a branch, tag or commit hash; None for the default branch (``main``).
    """

    repo_id: str
    revision: str | None = None

    @property
    def name(self) -> str:
        """``owner/name`` or ``owner/name@revision``: the model's display name."""
        return self.repo_id + (f"@{self.revision}" if self.revision else "")

    @property
    def spec(self) -> str:
        """``hf:owner/name[@revision]``, as the command lines, Open Recent and Reload take it."""
        return HUB_PREFIX + self.name


@dataclass(frozen=True)
class BuiltinRef:
    """A checkpoint shipped with the app, by name: ``builtin:NAME`` is ``NAME.safetensors`` in the
    shipped files (:func:`transformer_explorer_assets.path`; see :func:`builtin_models`).

    Attributes
    ----------
    name : str    the file's stem, e.g. ``tinystories-1L1H``.
    """

    name: str

    @property
    def spec(self) -> str:
        """``builtin:NAME``, as the command lines, Open Recent and Reload take it."""
        return BUILTIN_PREFIX + self.name

    @property
    def path(self) -> Path:
        """The shipped file (it exists when the reference came from :func:`parse_builtin`)."""
        return shipped.path(self.name + ".safetensors")


#: Anything :func:`model.checkpoint.inspect` opens: a file or folder, a Hub model, or a shipped model.
Reference = Union[Path, HubRef, BuiltinRef]


def builtin_models() -> dict[str, Path]:
    """The shipped checkpoints, by name (sorted): every ``*.safetensors`` at the top of the shipped
    files, named by its stem. Nothing lists them by hand: a file added there is a model.
    """
    return dict(sorted((p.stem, p) for p in shipped.folder().glob("*.safetensors") if p.is_file()))


def parse_builtin(text: str) -> BuiltinRef:
    """Read ``builtin:NAME`` (the prefix optional, spaces around ignored).

    Raises
    ------
    CheckpointError
        When no shipped model has that name (the message lists the names there are).
    """
    name = text.strip().removeprefix(BUILTIN_PREFIX).strip()
    known = builtin_models()
    if name not in known:
        names = ", ".join(BUILTIN_PREFIX + n for n in known) or "none (the shipped files are missing)"
        raise CheckpointError(f"{BUILTIN_PREFIX}{name}: no model of that name is shipped with the app; "
                              f"the shipped models are {names}")
    return BuiltinRef(name)


def parse_hub_spec(text: str) -> HubRef:
    """Read ``hf:REPO_ID[@REVISION]``; the ``hf:`` prefix, or ``https://huggingface.co/``, is optional.

    The repository id is checked with the library's own rules (``huggingface_hub.utils.validate_repo_id``:
    ``owner/name``, letters, digits, ``-``, ``_`` and ``.``, at most 96 characters), so a bad one
    is refused before anything is looked up.

    Raises
    ------
    HubError
        When the text is not of that form (the message quotes it and gives an example).
    """
    raw = text.strip()
    body = raw.removeprefix(HUB_PREFIX).removeprefix(HUB_URL)
    repo_id, _, revision = body.strip().rstrip("/").partition("@")
    if not repo_id:
        raise HubError(f"{raw!r}: give a Hugging Face repository id, e.g. {HUB_PREFIX}{EXAMPLE}")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise HubError(f"{repo_id!r} is not a Hugging Face repository id: owner/name, with letters, digits, "
                       f"'-', '_' and '.' (not '--' or '..'), at most 96 characters, e.g. {EXAMPLE}") from None
    if "@" in body and (not REVISION.fullmatch(revision) or ".." in revision):
        raise HubError(f"{repo_id}: {revision!r} is not a revision (a branch, tag or commit hash, e.g. "
                       f"{HUB_PREFIX}{repo_id}@main)")
    return HubRef(repo_id, revision or None)


def parse_reference(text: str) -> Reference:
    """The reference a text names: ``hf:REPO_ID[@REVISION]`` (leading and trailing spaces ignored) is
    a :class:`HubRef`, ``builtin:NAME`` a :class:`BuiltinRef`, anything else the path of a file or
    folder (a file literally named ``hf:...`` or ``builtin:...`` is given as ``./hf:...``).

    Raises
    ------
    HubError
        For ``hf:`` followed by something that is not a repository id (see :func:`parse_hub_spec`).
    CheckpointError
        For ``builtin:`` followed by a name no shipped model has (see :func:`parse_builtin`).
    """
    if text.strip().startswith(HUB_PREFIX):
        return parse_hub_spec(text)
    if text.strip().startswith(BUILTIN_PREFIX):
        return parse_builtin(text)
    return Path(text)


def as_reference(value: Reference | str | os.PathLike) -> Reference:
    """A reference as it is (a ``Path``, :class:`HubRef` or :class:`BuiltinRef`), text parsed by
    :func:`parse_reference`, any other path-like object as its ``Path``: for the functions that take all three.

    Raises
    ------
    HubError, CheckpointError
        As :func:`parse_reference`.
    """
    if isinstance(value, (Path, HubRef, BuiltinRef)):
        return value
    if isinstance(value, str):
        return parse_reference(value)
    return Path(value)


def reference_text(ref: Reference) -> str:
    """The text :func:`parse_reference` reads back as ``ref``: the path as it is (``./`` in front of a
    relative one that starts like a prefix), ``hf:owner/name[@revision]`` or ``builtin:NAME``."""
    if not isinstance(ref, Path):
        return ref.spec
    text = str(ref)
    return os.path.join(os.curdir, text) if text.strip().startswith((HUB_PREFIX, BUILTIN_PREFIX)) else text


def reference_name(ref: Reference) -> str:
    """How messages name it: the file or folder's name (bytes that are not UTF-8 as U+FFFD),
    ``hf:owner/name[@revision]`` or ``builtin:NAME``."""
    return readable(ref.name) if isinstance(ref, Path) else ref.spec
