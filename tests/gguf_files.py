"""GGUF fixtures for the tests, and variants of them written with gguf-py's own writer.

:func:`rewrite` copies a GGUF file with some metadata entries changed, added or dropped and some
tensors replaced (their type too), so that each refusal and each quirk can be tried on a file
that is otherwise exactly the fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

ARCH3 = Path(__file__).parent / "fixtures" / "arch3"
LLAMA, QWEN2, KQUANTS = ARCH3 / "gguf-llama", ARCH3 / "gguf-qwen2", ARCH3 / "gguf-kquants"
#: (fixture folder, storage type) of every GGUF file with a reference-<TYPE>.npz.
REFERENCED = [(LLAMA, t) for t in ("F32", "F16", "Q8_0", "Q4_0")] + [(QWEN2, t) for t in ("F16", "Q8_0")]
KQUANT_FILE = KQUANTS / "model-Q4_K_M.gguf"


def gguf_file(folder: Path, type_name: str) -> Path:
    return folder / f"model-{type_name}.gguf"


def reference(folder: Path, type_name: str):
    return np.load(folder / f"reference-{type_name}.npz")


#: A tensor replacement: name -> (array, storage type) or None to drop it.
Tensors = Callable[[str, np.ndarray, GGMLQuantizationType], tuple[np.ndarray, GGMLQuantizationType] | None]


def rewrite(src: Path, dst: Path, *, arch: str | None = None, set_keys: dict[str, tuple[Any, GGUFValueType]] | None = None,
            drop: tuple[str, ...] = (), tensors: Tensors | None = None, add: dict[str, np.ndarray] | None = None) -> Path:
    """Copy the GGUF file ``src`` to ``dst``: ``general.architecture`` = ``arch``, the entries of
    ``set_keys`` (key -> (value, type)) set, the keys in ``drop`` left out, each tensor passed
    through ``tensors(name, data, type)`` (its result written as it is; None drops the tensor),
    and the float32 tensors of ``add`` written after them."""
    reader = GGUFReader(src)
    old_arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(dst), arch or old_arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop or key in (set_keys or {}):
            continue
        if arch and key.startswith(old_arch + "."):
            new_key = arch + key[len(old_arch):]
        else:
            new_key = key
        sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(new_key, field.contents(), field.types[0], sub_type=sub)
    for key, (value, vtype) in (set_keys or {}).items():
        sub = None
        if vtype == GGUFValueType.ARRAY:
            sub = GGUFValueType.STRING if isinstance(value[0], str) else GGUFValueType.INT32
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for t in reader.tensors:
        data, qtype = np.array(t.data), t.tensor_type
        replaced = tensors(t.name, data, qtype) if tensors is not None else (data, qtype)
        if replaced is None:
            continue
        data, qtype = replaced
        float_type = qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16)
        writer.add_tensor(t.name, data, raw_dtype=None if float_type else qtype)
    for name, data in (add or {}).items():
        writer.add_tensor(name, data.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst
