"""What can be opened: a :data:`Reference` is a file or folder (a ``Path``) or a model on the Hugging
Face Hub (a :class:`HubRef`), read from text once, where text comes in (a command line, a dialog,
the recent-files list), by :func:`parse_reference`; everything after that holds the typed value.

To add a kind of reference (a built-in model, say), add its frozen dataclass here, add it to
:data:`Reference`, give :func:`parse_reference` its prefix and :func:`reference_text` its text,
and teach :func:`model.checkpoint.inspect` to open it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from model.core.plain import readable
from model.formats.errors import HubError

__all__ = ["EXAMPLE", "HUB_PREFIX", "HUB_URL", "HubRef", "Reference", "as_reference", "parse_hub_spec",
           "parse_reference", "reference_name", "reference_text"]

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


#: Anything :func:`model.checkpoint.inspect` opens: a file or folder, or a Hub model.
Reference = Union[Path, HubRef]


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
    a :class:`HubRef`, anything else the path of a file or folder (a file literally named ``hf:...``
    is given as ``./hf:...``).

    Raises
    ------
    HubError
        For ``hf:`` followed by something that is not a repository id (see :func:`parse_hub_spec`).
    """
    if text.strip().startswith(HUB_PREFIX):
        return parse_hub_spec(text)
    return Path(text)


def as_reference(value: Reference | str | os.PathLike) -> Reference:
    """A reference as it is (a ``Path`` or :class:`HubRef`), text parsed by :func:`parse_reference`,
    any other path-like object as its ``Path``: for the functions that take all three.

    Raises
    ------
    HubError
        As :func:`parse_reference`.
    """
    if isinstance(value, (Path, HubRef)):
        return value
    if isinstance(value, str):
        return parse_reference(value)
    return Path(value)


def reference_text(ref: Reference) -> str:
    """The text :func:`parse_reference` reads back as ``ref``: the path as it is, or ``hf:owner/name[@revision]``."""
    return ref.spec if isinstance(ref, HubRef) else str(ref)


def reference_name(ref: Reference) -> str:
    """How messages name it: the file or folder's name (bytes that are not UTF-8 as U+FFFD), or
    ``hf:owner/name[@revision]``."""
    return ref.spec if isinstance(ref, HubRef) else readable(ref.name)
