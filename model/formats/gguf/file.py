"""A GGUF file opened with the ``gguf`` package's reader, every read bounded by the file's size.

GGUF (llama.cpp's format, version 2 or 3): the magic ``GGUF``, a version, the numbers of tensors
and of metadata entries, the entries (a key, a value type, the value: numbers, booleans, strings,
arrays), one record per tensor (name, dimensions ne0, ne1, … with ne0 the fastest-varying, type,
offset), then the aligned tensor data. :class:`gguf.GGUFReader` maps the file and parses it.
Parsing a damaged file with it as it is can read past the end without noticing (a short
``numpy`` slice), and an array that claims 2^63 entries of a value it cannot find makes it loop
for ever. :class:`BoundedReader` refuses both: every read must lie inside the file, and every
array may claim no more entries than the rest of the file could hold. A file cut short, one
whose counts are absurd, a value type or tensor type the package does not know: one
:class:`~model.formats.base.CheckpointError` naming the file.
"""

from __future__ import annotations

import importlib.metadata
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.gguf_reader import READER_SUPPORTED_VERSIONS, ReaderField, ReaderTensor

from model.formats.base import CheckpointError, fail
from model.core.plain import clip, short_repr

HEADER_BYTES = 24  # magic, version (uint32), tensor count, metadata count (uint64)
MIN_ENTRY_BYTES = 8 + 4  # a metadata entry: key length (uint64), value type (uint32), then more
MIN_TENSOR_RECORD_BYTES = 8 + 4 + 4 + 8  # name length, dimensions, type, offset
MAX_ARRAY_ENTRIES = 1 << 26  # a vocabulary has at most a few hundred thousand tokens
VALUE_TYPES = {int(t) for t in GGUFValueType}
_ARRAY = int(GGUFValueType.ARRAY)
TENSOR_TYPES = {int(t) for t in GGMLQuantizationType}
GGUF_PACKAGE_VERSION = importlib.metadata.version("gguf")
_DTYPES = {t: np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                    np.int64, np.float16, np.float32, np.float64, np.bool_)}
INTEGER_TYPES = (GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
                 GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64)
FLOAT_TYPES = (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64)


class CutShort(ValueError):
    """A read of the GGUF structure would end past the end of the file."""

    def __init__(self, end: int, size: int) -> None:
        super().__init__(f"it is cut short: its structure needs at least {end:,} bytes but the file has "
                         f"{size:,} (an incomplete download or copy?)")


class BoundedReader(GGUFReader):
    """:class:`gguf.GGUFReader` whose every read lies inside the file (see the module docstring),
    reading the mapped file as a plain array (a vocabulary of 150,000 tokens and as many merges
    parses several times faster).

    Raises
    ------
    CutShort
        For a read past the end of the file.
    ValueError, KeyError, UnicodeDecodeError
        As the package's reader (bad magic or version, an unknown value or tensor type, a
        duplicate key or tensor, a name that is not UTF-8), and for an array that claims more
        entries than the rest of the file can hold.
    """

    def _get(self, offset: int, dtype, count: int = 1, override_order=None) -> np.ndarray:
        """``count`` values of ``dtype`` at ``offset`` (the package's own read, bounded, of this
        machine's byte order: :func:`_check_header` refuses the other), as a view of the file."""
        if type(self.data) is not np.ndarray:
            # A plain array over the same mapping (which it keeps open): slicing a np.memmap costs
            # its subclass hooks on every read, two thirds of the time to parse a vocabulary.
            self.data = self.data.view(np.ndarray)
        dtype = _DTYPES.get(dtype) or np.dtype(dtype)
        end = int(offset) + dtype.itemsize * int(count)
        if offset < 0 or count < 0 or end > len(self.data):
            raise CutShort(end, len(self.data))
        return self.data[offset:end].view(dtype)

    def _get_field_parts(self, orig_offs: int, raw_type: int):
        raw = int(raw_type)
        if raw not in VALUE_TYPES:
            raise ValueError(f"a metadata value at byte {orig_offs:,} has type {raw}, which GGUF does not define")
        if raw == _ARRAY:
            n = int(self._get(orig_offs + 4, np.uint64)[0])
            room = len(self.data) - orig_offs - 12  # every entry takes at least one byte
            if n > min(room, MAX_ARRAY_ENTRIES):
                raise ValueError(f"an array at byte {orig_offs:,} claims {n:,} entries, more than the file can hold")
        return super()._get_field_parts(orig_offs, raw_type)

    def _get_tensor_info_field(self, orig_offs: int) -> ReaderField:
        field = super()._get_tensor_info_field(orig_offs)
        raw = int(field.parts[4][0])
        if raw not in TENSOR_TYPES:
            raise ValueError(f"tensor {field.name} has type {raw}, which the gguf package ({GGUF_PACKAGE_VERSION}) does not know")
        return field


def _check_header(path: Path) -> None:
    """Refuse a file whose header is short, of another version or byte order, or counts more
    entries than the file could hold, before the package's reader walks them."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if len(head) < HEADER_BYTES:
        raise CutShort(HEADER_BYTES, size)
    version, n_tensors, n_entries = struct.unpack("<IQQ", head[4:])
    if version & 0xFFFF == 0 and version:
        order = "big" if sys.byteorder == "little" else "little"
        raise ValueError(f"it is a {order}-endian GGUF file; only files of this machine's byte order are read")
    if version not in READER_SUPPORTED_VERSIONS:
        raise ValueError(f"it is GGUF version {version}; versions {', '.join(map(str, READER_SUPPORTED_VERSIONS))} are read")
    if n_entries * MIN_ENTRY_BYTES + n_tensors * MIN_TENSOR_RECORD_BYTES > size:
        raise ValueError(f"its header counts {n_tensors:,} tensors and {n_entries:,} metadata entries, "
                         f"more than {size:,} bytes can hold")


class GGUFFile:
    """The metadata and tensors of a GGUF file, read with :class:`BoundedReader`.

    Parameters
    ----------
    path : Path

    Attributes
    ----------
    path : Path
    version : int                    the GGUF version (2 or 3).
    tensors : dict of str -> ReaderTensor
        Each tensor's record, its data a view of the mapped file: for a float type an array of
        shape (ne_{n-1}, …, ne1, ne0), for a block type the bytes of its blocks.

    Raises
    ------
    CheckpointError
        When the file is not a GGUF file this package can read, naming the file and the cause.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            _check_header(path)
            reader = BoundedReader(path)
        except (ValueError, KeyError, UnicodeDecodeError, IndexError, OverflowError) as exc:
            raise fail(path, f"not a readable GGUF file: {clip(str(exc), 300)}") from None
        except OSError as exc:
            raise fail(path, f"cannot read ({exc.strerror or exc})") from None
        self._fields: dict[str, ReaderField] = dict(reader.fields)
        self.version = int(self._fields["GGUF.version"].parts[0][0])
        self.tensors: dict[str, ReaderTensor] = {t.name: t for t in reader.tensors}

    # ---- metadata, each refusal naming the key and its value
    def has(self, key: str) -> bool:
        return key in self._fields

    def error(self, key: str, problem: str) -> CheckpointError:
        """A CheckpointError naming the file, the key and its value: ``key = value: problem``."""
        shown = short_repr(self.value(key)) if self.has(key) else "(absent)"
        return fail(self.path, f"{key} = {shown}: {problem}")

    def value(self, key: str, default: Any = None) -> Any:
        """The entry's value as Python data (an array as a list), ``default`` when absent.

        Raises
        ------
        CheckpointError
            When a string in it is not UTF-8.
        """
        field = self._fields.get(key)
        if field is None:
            return default
        try:
            return field.contents()
        except UnicodeDecodeError:
            raise fail(self.path, f"{key} holds a string that is not UTF-8 text") from None

    def _typed(self, key: str, types: tuple, what: str, array: bool = False):
        field = self._fields.get(key)
        if field is None:
            return None
        kinds = field.types
        ok = (len(kinds) == 2 and kinds[0] == GGUFValueType.ARRAY and kinds[1] in types) if array else (
            len(kinds) == 1 and kinds[0] in types)
        empty_array = array and kinds == [GGUFValueType.ARRAY]  # an array of no entries has no item type
        if not ok and not empty_array:
            raise self.error(key, f"expected {what}")
        return [] if empty_array else self.value(key)

    def integer(self, key: str, default: Any = None, minimum: int = 0) -> int | None:
        """A whole number of at least ``minimum``; ``default`` when absent."""
        value = self._typed(key, INTEGER_TYPES, "a whole number")
        if value is None:
            return default
        if value < minimum:
            raise self.error(key, f"expected a whole number of at least {minimum}")
        return int(value)

    def number(self, key: str, default: float | None = None) -> float | None:
        """A finite number (an integer or a float entry); ``default`` when absent."""
        value = self._typed(key, INTEGER_TYPES + FLOAT_TYPES, "a number")
        if value is None:
            return default
        if not np.isfinite(value):
            raise self.error(key, "expected a finite number")
        return float(value)

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self._typed(key, (GGUFValueType.STRING,), "a string")
        return default if value is None else value

    def flag(self, key: str, default: bool) -> bool:
        value = self._typed(key, (GGUFValueType.BOOL,), "true or false")
        return default if value is None else bool(value)

    def array(self, key: str, kind: str) -> list | None:
        """An array of ``kind`` (``"string"``, ``"integer"`` or ``"number"``); None when absent."""
        types = {"string": (GGUFValueType.STRING,), "integer": INTEGER_TYPES,
                 "number": INTEGER_TYPES + FLOAT_TYPES}[kind]
        return self._typed(key, types, f"an array of {kind}s", array=True)

    def keys(self, prefix: str) -> list[str]:
        """The metadata keys that start with ``prefix``, in file order."""
        return [k for k in self._fields if k.startswith(prefix)]
