"""Reading pickles without running them.

Two readers, neither of which can run code from the file:

- :func:`torch_load` reads torch checkpoints with ``torch.load(weights_only=True)``, which admits
  tensors and plain containers only, and turns its refusals into clear messages: a file that
  would call something like ``os.system`` is refused as code; one that holds a whole pickled
  model (a class from the program that saved it) is refused with a request for its state_dict.
- :func:`load_restricted` reads small pickles such as nanoGPT's ``meta.pkl`` with an unpickler
  whose ``find_class`` refuses everything, so that only dicts, lists, tuples, str and int (and
  the other literals the pickle opcodes build without looking anything up) can be made; the
  result is then checked to hold dict, list, tuple, str and int only.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

from model.formats.errors import CheckpointError

# Modules (and builtins) whose callables a checkpoint has no business asking for: a pickle that
# names one is trying to run code, not describing a model.
_CODE_MODULES = {
    "os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "runpy", "pty",
    "code", "ctypes", "pickle", "marshal", "types", "webbrowser", "io", "pathlib", "tempfile",
    "commands", "platform", "signal", "multiprocessing", "threading", "asyncio",
}
_CODE_BUILTINS = {
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "open", "input",
    "breakpoint", "globals", "locals", "vars", "apply", "execfile",
}
META_MAX_BYTES = 64 * 1024 * 1024


def _is_code(name: str) -> bool:
    module, _, attr = name.rpartition(".")
    root = module.split(".")[0]
    if root in ("builtins", "__builtin__"):
        return attr in _CODE_BUILTINS
    return root in _CODE_MODULES


def _is_torch_own(name: str) -> bool:
    """Globals that ``torch.save`` itself writes for plain tensors and state dicts."""
    return name.startswith(("torch._utils.", "collections.")) or name.endswith("Storage") or name in (
        "torch.Size", "torch.device", "torch.dtype", "torch._tensor._rebuild_from_type_v2",
    )


def referenced_globals(data: bytes) -> list[str]:
    """Every ``module.name`` a pickle would look up, read statically (nothing is run).

    Follows GLOBAL and INST arguments, and the two strings before a STACK_GLOBAL (through the
    memo), in each of the pickles one after another in ``data`` (torch's legacy format writes
    several). Stops quietly at the first malformed opcode.
    """
    found: list[str] = []
    stream = io.BytesIO(data)
    try:
        while stream.tell() < len(data):
            _scan_one(stream, found)
    except Exception:  # a truncated or odd pickle: report what was read so far
        pass
    return found


def _scan_one(stream: io.BytesIO, found: list[str]) -> None:
    """Read one pickle's opcodes up to its STOP, appending the globals it names to ``found``."""
    strings, memo = [], {}
    last = None  # the string the previous opcode left on the stack, if it was one
    for op, arg, _ in pickletools.genops(stream):
        pushed = None
        if op.name in ("GLOBAL", "INST"):
            found.append(arg.replace(" ", "."))
        elif isinstance(arg, str) and ("UNICODE" in op.name or op.name.endswith("STRING")):
            pushed = arg
            strings.append(arg)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = pushed = last
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = pushed = last
        elif op.name in ("GET", "BINGET", "LONG_BINGET"):
            pushed = memo.get(arg)
            if pushed is not None:
                strings.append(pushed)
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.append(f"{strings[-2]}.{strings[-1]}")
        last = pushed


def _pickle_bytes(path: Path) -> bytes:
    """The pickle inside a torch zip file (``*/data.pkl``), or the whole file."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith("data.pkl")]
            return zf.read(names[0]) if names else b""
    return path.read_bytes()


def _refusal(path: Path, exc: Exception) -> CheckpointError:
    """A clear message for a pickle that ``weights_only`` refused."""
    text = str(exc)
    named = re.findall(r"GLOBAL ([\w.]+)", text)
    names = named or [g for g in referenced_globals(_pickle_bytes(path)) if not _is_torch_own(g)]
    code = [g for g in names if _is_code(g)]
    if code:
        return CheckpointError(
            f"{path.name}: refused: the file asks Python to call {code[0]}, that is, to run code "
            "when it is opened. Nothing in it was run. Only tensors and plain containers are read "
            "(torch.load with weights_only=True)."
        )
    if names:
        return CheckpointError(
            f"{path.name}: the file holds a whole pickled Python object ({names[0]}), not a "
            "state_dict; opening it would mean running the code of the program that saved it. "
            "Save the weights instead, in that program: torch.save(model.state_dict(), "
            "'model.pth'), and open that file."
        )
    first = next((line for line in text.splitlines() if "rror" in line), text.splitlines()[0] if text else "")
    return CheckpointError(f"{path.name}: not a weights-only torch checkpoint ({first.strip()})")


def torch_load(path: Path) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)`` with clear refusals.

    Tensors saved from a CUDA (or MPS) device arrive on the CPU.

    Raises
    ------
    CheckpointError
        For a pickle that would run code (nothing runs), a whole pickled model, or a file torch
        cannot read, naming the file.
    """
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise _refusal(path, exc) from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{path.name}: torch cannot read this file ({str(exc).splitlines()[0]})") from None


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that looks nothing up: no classes, no functions, no persistent ids."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle's hook
        raise pickle.UnpicklingError(f"it asks for {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it refers to external objects")


def _check_plain(value: Any, depth: int = 0) -> str | None:
    """The first type other than dict/list/tuple/str/int in ``value``, or None."""
    if depth > 20:
        return "nesting deeper than 20 levels"
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _check_plain(k, depth + 1) or _check_plain(v, depth + 1)
            if bad:
                return bad
        return None
    if isinstance(value, (list, tuple)):
        return next((b for b in (_check_plain(v, depth + 1) for v in value) if b), None)
    if type(value) in (str, int):
        return None
    return type(value).__name__


def load_restricted(path: Path) -> Any:
    """Read a small pickle that may hold only dicts, lists, tuples, str and int.

    Nothing in the file is run: every class or function lookup is refused before it happens.

    Raises
    ------
    CheckpointError
        When the file is missing, too large, not a pickle, asks for any class or function, or
        holds any other type, naming the file and what it asked for.
    """
    try:
        size = path.stat().st_size
        if size > META_MAX_BYTES:
            raise CheckpointError(f"{path.name}: {size} bytes is too large for a vocabulary pickle")
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{path.name}: cannot read ({exc.strerror or exc})") from None
    try:
        value = _PlainDataUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path.name}: refused: {exc}; a vocabulary pickle may hold only dicts, lists, "
            "tuples, strings and integers. Nothing in it was run."
        ) from None
    except Exception as exc:  # truncated data, bad opcodes, ...
        raise CheckpointError(f"{path.name}: not a readable pickle ({exc})") from None
    bad = _check_plain(value)
    if bad:
        raise CheckpointError(
            f"{path.name}: refused: it holds {bad}; a vocabulary pickle may hold only dicts, "
            "lists, tuples, strings and integers."
        )
    return value
