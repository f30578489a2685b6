"""The GGUF part of the damaged-file corpus (:mod:`damaged_files`): the llama fixture's bytes cut,
or poked at a metadata entry or a tensor record, each with the message it must give."""

from __future__ import annotations

import struct
from pathlib import Path

from damaged_files import FIX, Damaged, damaged


def gguf_copy(tmp: Path, patch=None, cut: int | None = None) -> Damaged:
    """The llama GGUF fixture (Q8_0) copied, ``patch(data, reader)`` applied to its bytes and cut at ``cut``."""
    from gguf import GGUFReader

    src = FIX / "arch3" / "gguf-llama" / "model-Q8_0.gguf"
    data = bytearray(src.read_bytes())
    if patch is not None:
        patch(data, GGUFReader(src))
    path = tmp / "model.gguf"
    path.write_bytes(bytes(data[:cut]) if cut is not None else bytes(data))
    return Damaged(path, "model.gguf", "")


def _at_key(reader, key: str, after: int) -> int:
    """The offset ``after`` bytes past a metadata entry's key (0: its value type)."""
    return reader.fields[key].offset + 8 + len(key.encode()) + after


def _at_tensor(reader, name: str, after: int) -> int:
    """The offset ``after`` bytes past a tensor record's dimensions (0: its type)."""
    t = next(t for t in reader.tensors if t.name == name)
    return t.field.offset + 8 + len(name.encode()) + 4 + 8 * len(t.shape) + after


def _gguf(tmp, cause, patch=None, cut=None) -> Damaged:
    case = gguf_copy(tmp, patch, cut)
    case.cause = cause
    return case


@damaged("GGUF cut inside the tensor data")
def _(tmp):
    return _gguf(tmp, r"not a readable GGUF file: it is cut short: its structure needs at least [\d,]+ bytes "
                      r"but the file has [\d,]+ \(an incomplete download or copy\?\)", cut=-100)


@damaged("GGUF cut inside the vocabulary")
def _(tmp):
    return _gguf(tmp, r"it is cut short", cut=3000)


def _poked(tmp, cause, at, fmt: str, value) -> Damaged:
    """The fixture with ``struct.pack(fmt, value)`` written at ``at(reader)``."""
    def patch(data, reader):
        offset = at(reader)
        data[offset:offset + struct.calcsize(fmt)] = struct.pack(fmt, value)
    return _gguf(tmp, cause, patch)


@damaged("GGUF array claiming 2^40 entries")
def _(tmp):
    return _poked(tmp, r"an array at byte [\d,]+ claims 1,099,511,627,776 entries, more than the file can hold",
                  lambda r: _at_key(r, "tokenizer.ggml.tokens", 8), "<Q", 1 << 40)  # after value and item types


@damaged("GGUF with an unknown value type")
def _(tmp):
    return _poked(tmp, r"not a readable GGUF file: a metadata value at byte [\d,]+ has type 99, which GGUF does not define",
                  lambda r: _at_key(r, "llama.block_count", 0), "<I", 99)


@damaged("GGUF with an unknown tensor type")
def _(tmp):
    return _poked(tmp, r"tensor blk.0.attn_q.weight has type 200, which the gguf package \(0.19.\d+\) does not know",
                  lambda r: _at_tensor(r, "blk.0.attn_q.weight", 0), "<I", 200)


@damaged("GGUF tensor lying past the end of the file")
def _(tmp):
    return _poked(tmp, r"it is cut short: its structure needs at least 1,125,8",
                  lambda r: _at_tensor(r, "blk.1.ffn_down.weight", 4), "<Q", 1 << 50)  # its offset, after the type


@damaged("GGUF string longer than the file")
def _(tmp):
    return _poked(tmp, r"it is cut short", lambda r: _at_key(r, "general.architecture", 4), "<Q", 1 << 62)


@damaged("GGUF key that is not UTF-8")
def _(tmp):
    def patch(data, reader):
        data[reader.fields["general.name"].offset + 8] = 0xFF
    return _gguf(tmp, r"not a readable GGUF file: 'utf-8' codec can't decode byte 0xff", patch)


@damaged("GGUF matrix with only some of its dimensions")
def _(tmp):
    def patch(data, reader):
        t = next(t for t in reader.tensors if t.name == "blk.0.attn_k.weight")
        at = t.field.offset + 8 + len(t.name.encode()) + 4 + 8  # ne1 of [64, 32]
        data[at:at + 8] = struct.pack("<Q", 31)
    return _gguf(tmp, r"blk.0.attn_k.weight has shape \(31, 64\), expected \(32, 64\)", patch)


@damaged("GGUF weights that are NaN")
def _(tmp):
    def patch(data, reader):
        t = next(t for t in reader.tensors if t.name == "output_norm.weight")
        data[t.data_offset:t.data_offset + 4] = struct.pack("<f", float("nan"))
    return _gguf(tmp, r"tensor ln_f.weight holds NaN or infinite values", patch)
