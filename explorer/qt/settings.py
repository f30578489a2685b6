"""Typed reads from QSettings: a value of the wrong type or out of range gives the default.

QSettings stays the store; these functions only check what it returns. A settings file left by
a crash, another version or a hand edit can hold anything under a key: an INI file gives back
strings, lists of strings, ``QByteArray`` (``@ByteArray(...)``), ``QSize``/``QRect``/``QPoint``
(``@Size(...)`` ...), None (``@Invalid()``, or a key that is a group), and values set in this run
come back as the Python objects that were stored. Every value the app reads goes through one of
these, so no stored value can stop the app (``recent_files`` as a byte array raised TypeError at
start-up, ``next_token/k=99999999999999999999`` OverflowError in a spin box).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

MAX_TEXT = 4096  # longest string kept (a path); longer ones are damage
_INT = re.compile(r"[+-]?[0-9]{1,30}")  # ASCII digits only: "²".isdigit() is True, int("²") fails


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


def read_folder(settings: QSettings, key: str, default: str) -> str:
    """A folder that exists, stored under ``key``; ``default`` otherwise (a file dialog starts there)."""
    text = read_str(settings, key)
    try:
        return text if text and Path(text).is_dir() else default
    except (OSError, ValueError):
        return default
