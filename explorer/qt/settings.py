"""Every setting the app keeps, declared once: its key, type, default and range (:class:`Setting`).

QSettings stays the store; a :class:`Setting` reads and writes one key of it, and every read and
write of the app goes through the declarations below. A settings file left by a crash, another
version or a hand edit can hold anything under a key: an INI file gives back strings, lists of
strings, ``QByteArray`` (``@ByteArray(...)``), ``QSize``/``QRect``/``QPoint`` (``@Size(...)`` ...),
None (``@Invalid()``, or a key that is a group), and values set in this run come back as the Python
objects that were stored. :meth:`Setting.read` checks what comes back with the typed readers
(:func:`read_int`, ...) and gives the default for anything of another type or out of range, so no
stored value can stop the app (``recent_files`` as a byte array raised TypeError at start-up,
``next_token/k=99999999999999999999`` OverflowError in a spin box).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from model.formats.refs import EXAMPLE

MAX_TEXT = 4096  # longest string kept (a path); longer ones are damage
_INT = re.compile(r"[+-]?[0-9]{1,30}")  # ASCII digits only: "²".isdigit() is True, int("²") fails
KINDS = ("int", "float", "bool", "str", "str_list", "bytes", "folder")


def read_int(settings: QSettings, key: str, default: int, lo: int, hi: int) -> int:
    """An integer in [lo, hi] stored under ``key``; ``default`` when missing, not an integer or
    outside the range (booleans and floats are not integers)."""
    value = settings.value(key)
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return value
    return default


def read_float(settings: QSettings, key: str, default: float, lo: float, hi: float) -> float:
    """A finite number in [lo, hi] stored under ``key``; ``default`` otherwise."""
    value = settings.value(key)
    if isinstance(value, str) and len(value) < 64:
        try:
            value = float(value)
        except ValueError:
            return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and lo <= value <= hi:
            return value
    return default


def read_bool(settings: QSettings, key: str, default: bool) -> bool:
    """``True``/``False`` (or the strings ``true``/``false`` that an INI file holds); ``default`` otherwise."""
    value = settings.value(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return default


def _text(value) -> str | None:
    """``value`` when it is a usable string (no NUL, not too long), else None."""
    if isinstance(value, str) and "\0" not in value and len(value) <= MAX_TEXT:
        return value
    return None


def read_str(settings: QSettings, key: str, default: str = "") -> str:
    """A string stored under ``key``; ``default`` for anything else (a list, bytes, a QSize, ...)."""
    text = _text(settings.value(key))
    return default if text is None else text


def read_str_list(settings: QSettings, key: str, limit: int) -> list[str]:
    """At most ``limit`` strings stored under ``key``.

    One string is a list of one (an INI file stores a one-item list as a plain value); items
    that are not usable strings are dropped; anything else (bytes, a number, None) is ``[]``.
    """
    value = settings.value(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return []
    return [text for text in map(_text, value) if text][:limit]


def read_bytes(settings: QSettings, key: str) -> QByteArray | None:
    """A byte array stored under ``key`` (window geometry, dock state), or None."""
    value = settings.value(key)
    return value if isinstance(value, QByteArray) and not value.isEmpty() else None


def read_folder(settings: QSettings, key: str, default: str | None) -> str | None:
    """A folder that exists, stored under ``key``; ``default`` otherwise (a file dialog starts there)."""
    text = read_str(settings, key)
    try:
        return text if text and Path(text).is_dir() else default
    except (OSError, ValueError):
        return default


@dataclass(frozen=True)
class Setting:
    """One key of the app's settings: what it holds and what reading a damaged value gives.

    Attributes
    ----------
    key : str                   the QSettings key; ``{name}`` fields are filled by :meth:`at`.
    kind : str                  ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"str_list"`` (at most
                                ``hi`` strings), ``"bytes"`` (window geometry, dock state) or
                                ``"folder"`` (a folder that still exists).
    default : Any               what :meth:`read` gives for a missing or damaged value.
    lo, hi : number or None     the range of an int or float (both ends included); for a str_list,
                                ``hi`` is how many strings are kept.
    """

    key: str
    kind: str
    default: Any = None
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.key}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def at(self, **fields: str) -> Setting:
        """The setting of one group: ``OPENED_N_HEADS.at(file=digest)``."""
        return replace(self, key=self.key.format(**fields))

    def read(self, settings: QSettings) -> Any:
        """The stored value, checked; :attr:`default` when missing, of another type or out of range."""
        if self.kind == "int":
            return read_int(settings, self.key, self.default, self.lo, self.hi)
        if self.kind == "float":
            return read_float(settings, self.key, self.default, self.lo, self.hi)
        if self.kind == "bool":
            return read_bool(settings, self.key, self.default)
        if self.kind == "str":
            return read_str(settings, self.key, self.default)
        if self.kind == "str_list":
            return read_str_list(settings, self.key, int(self.hi)) or list(self.default)
        if self.kind == "bytes":
            value = read_bytes(settings, self.key)
            return self.default if value is None else value
        return read_folder(settings, self.key, self.default)

    def write(self, settings: QSettings, value: Any) -> None:
        """Store ``value`` (None removes the key).

        Raises
        ------
        ValueError
            When the value is not of the declared kind or outside the range: a bug, not damage.
        """
        if value is None:
            settings.remove(self.key)
            return
        if not self.accepts(value):
            raise ValueError(f"{self.key}: {value!r} is not a {self.kind} in range [{self.lo}, {self.hi}]")
        settings.setValue(self.key, list(value) if self.kind == "str_list" else value)

    def accepts(self, value: Any) -> bool:
        """Whether :meth:`write` takes ``value`` (of the declared kind, in range; a string without NUL and
        at most :data:`MAX_TEXT` long)."""
        if self.kind in ("int", "float"):
            number = (int,) if self.kind == "int" else (int, float)
            return (isinstance(value, number) and not isinstance(value, bool) and math.isfinite(value)
                    and (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi))
        if self.kind == "str_list":
            return isinstance(value, (list, tuple)) and len(value) <= self.hi and all(map(_text, value))
        if self.kind == "bytes":
            return isinstance(value, QByteArray)
        return isinstance(value, bool) if self.kind == "bool" else _text(value) is not None


# ---- the app's settings ----------------------------------------------------------------------------
WINDOW_GEOMETRY = Setting("window/geometry", "bytes")
WINDOW_STATE = Setting("window/state", "bytes")
RECENT_FILES = Setting("recent_files", "str_list", (), hi=8)  # reference texts, newest first
LAST_DIR = Setting("last_dir", "folder")  # where File ▸ Open and Save As start (None: the caller's place)
LAST_EXPORT_DIR = Setting("last_export_dir", "folder")
LAST_TRAIN_DIR = Setting("train/last_dir", "folder")  # the folder the last Train New Model run wrote into
HUB_LAST_REPO = Setting("hub/last_repo", "str", EXAMPLE)  # proposed by File ▸ Open from Hugging Face Hub
NEXT_TOKEN_K = Setting("next_token/k", "int", 10, 1, 1_000_000)  # shown clamped to the vocabulary
NEXT_TOKEN_TEMPERATURE = Setting("next_token/temperature", "float", 1.0, 0.0, 10.0)
GENERATE_N = Setting("generate/n", "int", 20, 1, 2000)
GENERATE_MODE = Setting("generate/mode", "int", 0, 0, 1)  # 0 greedy, 1 sample
GENERATE_TEMPERATURE = Setting("generate/temperature", "float", 1.0, 0.05, 10.0)
GENERATE_TOP_K = Setting("generate/top_k", "int", 0, 0, 10**7)  # 0: all
GENERATE_TOP_P = Setting("generate/top_p", "float", 1.0, 0.01, 1.0)
GENERATE_SEED = Setting("generate/seed", "int", 0, 0, 2**31 - 1)
# The answers given for one file (File ▸ Open asks them once), in the group opened/<digest of its path>/:
OPENED_PATH = Setting("opened/{file}/path", "str")
OPENED_N_HEADS = Setting("opened/{file}/n_heads", "int", None, 1, 4096)  # more is damage, not an answer
OPENED_VOCAB_PATH = Setting("opened/{file}/vocab_path", "str")
OPENED_NO_VOCAB = Setting("opened/{file}/no_vocab", "bool", False)

#: Every declaration, for the tests that damage each one.
ALL = (WINDOW_GEOMETRY, WINDOW_STATE, RECENT_FILES, LAST_DIR, LAST_EXPORT_DIR, LAST_TRAIN_DIR, HUB_LAST_REPO, NEXT_TOKEN_K,
       NEXT_TOKEN_TEMPERATURE, GENERATE_N, GENERATE_MODE, GENERATE_TEMPERATURE, GENERATE_TOP_K, GENERATE_TOP_P,
       GENERATE_SEED, OPENED_PATH, OPENED_N_HEADS, OPENED_VOCAB_PATH, OPENED_NO_VOCAB)


def documents_folder() -> str:
    """The user's documents folder (``QStandardPaths.DocumentsLocation``; it may not exist yet)."""
    return QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
