"""Plain data read from files, bounded: JSON and small pickles checked before anything walks them.

A file can describe data whose walk never ends: JSON nested 100,000 levels deep, or a 0.5 kB
pickle whose lists share sub-lists through memo references (each level doubles what a walk
visits: ~10^19 nodes). Everything here is bounded three ways, so that checking, printing or
comparing such a value is fast or refused:

- depth: at most ``max_depth`` nested containers;
- node count: every visit counts, a shared container once per reference, so a walk of a
  checked value visits at most ``max_nodes`` values;
- size: text is read only up to a byte limit, and values are shown only as :func:`short_repr`.

Nothing here imports torch or the formats; errors are ``ValueError`` with a plain message that the
callers prefix with the file's name.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
from pathlib import Path
from typing import Any, Iterable

JSON_TYPES = (dict, list, str, int, float, bool, type(None))
JSON_MAX_DEPTH = 64  # far above any config.json, tokenizer_config.json or training facts
JSON_MAX_NODES = 1_000_000
REPR_CHARS = 80


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is an int or float (not a bool) with a finite float value, else
    None (an int too large for a float, inf, NaN, a string, ...)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_plain(value: Any, types: Iterable[type] = JSON_TYPES, *, max_depth: int = JSON_MAX_DEPTH,
                max_nodes: int = JSON_MAX_NODES, shared: bool = True) -> str | None:
    """What makes ``value`` unfit to walk, or None: a type outside ``types``, too deep, too many values.

    Iterative (no recursion), and it stops at the first problem, so it is fast on any input: a
    shared sub-container counts once per reference to it, so at most ``max_nodes`` values are
    visited however the references are arranged.

    Parameters
    ----------
    value : any
    types : iterable of type
        The exact types allowed (``type(v) in types``: no subclasses such as ``OrderedDict`` or
        ``bool`` for ``int`` unless listed). dict, list and tuple are walked into.
    max_depth : int
        Containers nested deeper than this are refused (the top level is depth 0).
    max_nodes : int
        Values visited, keys included.
    shared : bool
        False refuses a container that is reached a second time (data that is a tree, such as a
        vocabulary, never shares one): a walk then visits each container once.

    Returns
    -------
    str or None
        e.g. ``"a value of type float"``, ``"nesting deeper than 64 levels"``, ``"more than
        1,000,000 values"``, ``"a list reached from more than one place"``.
    """
    allowed = tuple(types)
    stack: list[tuple[Any, int]] = [(value, 0)]
    visited = 0
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        visited += 1
        if visited > max_nodes:
            return f"more than {max_nodes:,} values"
        kind = type(item)
        if kind not in allowed:
            return f"a value of type {kind.__name__}"
        if kind is dict or kind is list or kind is tuple:
            if not shared and item:
                if id(item) in seen:
                    return f"a {kind.__name__} reached from more than one place"
                seen.add(id(item))
            if depth >= max_depth and item:
                return f"nesting deeper than {max_depth} levels"
            if len(item) > max_nodes:
                return f"more than {max_nodes:,} values"
            if kind is dict:
                for k, v in item.items():
                    stack.append((k, depth + 1))
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
    return None


def load_json(text: str | bytes, *, max_depth: int = JSON_MAX_DEPTH, max_nodes: int = JSON_MAX_NODES) -> Any:
    """``json.loads(text)``, refused when it is not JSON or is deeper or larger than the bounds.

    Raises
    ------
    ValueError
        Saying what is wrong: not JSON (with json's position), not UTF-8, nested too deep (the
        parser's own recursion limit included), too many values.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise ValueError(f"not valid JSON ({exc})") from None
    bad = check_plain(value, max_depth=max_depth, max_nodes=max_nodes)
    if bad is not None:
        raise ValueError(f"JSON with {bad}")
    return value


def read_bounded(path: str | os.PathLike, max_bytes: int) -> bytes:
    """A file's bytes, refusing one larger than ``max_bytes`` (read at most one byte more).

    Raises
    ------
    OSError
        When it cannot be read.
    ValueError
        When it is larger than ``max_bytes``.
    """
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes:,} bytes, too large for this kind of file")
    return data


def read_json_file(path: str | os.PathLike, max_bytes: int, **bounds: Any) -> Any:
    """A JSON file's value, within ``max_bytes`` and the bounds of :func:`load_json`.

    Raises
    ------
    ValueError
        When it cannot be read (the OSError's reason), is too large, or is not bounded JSON.
    """
    try:
        data = read_bounded(path, max_bytes)
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
    return load_json(data, **bounds)


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr, with integers too long to print as digits described instead."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 3, 4, 6, 6
        self.maxstring, self.maxother, self.maxlong = 60, 60, 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<an integer of {x.bit_length():,} bits>"
        return super().repr_int(x, level)

    def repr_float(self, x: float, level: int) -> str:
        return repr(x) if math.isfinite(x) else str(x)


_SHORT = _ShortRepr()


def short_repr(value: Any, limit: int = REPR_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters, computed without walking more than a few
    dozen values (safe on a value read from a file, however large, deep or shared)."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # an object whose repr fails: say what it is
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def clip(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (with "…")."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def readable(text: str) -> str:
    """``text`` with lone surrogates (how Python keeps bytes of a file name that are not UTF-8)
    replaced by U+FFFD, so that it can be printed and shown anywhere."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def shown_name(path: str | os.PathLike) -> str:
    """A path's last part as readable text (see :func:`readable`)."""
    return readable(Path(path).name or str(path))
