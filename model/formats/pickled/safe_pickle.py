"""Reading pickles without running them.

Two readers, neither of which can run code from the file:

- :func:`torch_load` reads torch checkpoints with ``torch.load(weights_only=True)``, which admits
  tensors and plain containers only, and turns its refusals into clear messages: a file that
  would call something like ``os.system`` is refused as code; one that holds a whole pickled
  model (a class from the program that saved it) is refused with a request for its state_dict.
- :func:`load_restricted` reads small pickles such as nanoGPT's ``meta.pkl`` with an unpickler
  whose ``find_class`` refuses everything, so that only dicts, lists, tuples, str and int (and
  the other literals the pickle opcodes build without looking anything up) can be made; the
  result is then checked to hold dict, list, tuple, str and int only, at most 20 levels deep and
  :data:`META_MAX_VALUES` values, as a tree: a list reached from two places (which pickle's memo
  allows, making 10^19 values of 0.5 kB) is refused.

Before either loads anything, :func:`model.formats.pickled.bounds.check_pickle_work` refuses a
pickle that would hash or construct from a value too large to walk (which would hang inside the
loader). torch is always handed an open file, never a path: ``torch.load`` picks its reader by a
path's extension (a ``.safetensors`` name goes to safetensors), and the format is decided here by
the file's contents.
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
from model.formats.pickled.bounds import PickleTooComplex, check_pickle_bytes, check_pickle_work
from model.core.plain import check_plain, clip, shown_name

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
META_MAX_BYTES = 2 * 1024 * 1024  # nanoGPT's character meta.pkl files are a few kB
META_MAX_VALUES = 500_000  # values in a vocabulary pickle (a shared list counted per reference)
DATA_PKL_MAX_BYTES = 256 * 1024 * 1024  # a torch file's pickle (without its tensors' data)
LEGACY_PICKLES = 5  # torch's legacy format: magic, protocol, sys info, the object, storage keys
# What torch.load's refusals say around their cause: not for the user.
_TORCH_NOISE = re.compile(r"Weights only load failed|Please file an issue|Check the documentation|"
                          r"In PyTorch 2\.6|Re-running `torch\.load`|WeightsUnpickler error:\s*$")


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
    """The pickle inside a torch zip file (``*/data.pkl``), or the file's first bytes (a legacy one).

    Raises
    ------
    CheckpointError
        When the zip's pickle is larger than :data:`DATA_PKL_MAX_BYTES`.
    """
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                infos = [i for i in zf.infolist() if i.filename.endswith("data.pkl")]
                if infos and infos[0].file_size > DATA_PKL_MAX_BYTES:
                    raise CheckpointError(f"{shown_name(path)}: its pickle alone is {infos[0].file_size:,} bytes, "
                                          "far more than a checkpoint's (without its tensors' data)")
                with zf.open(infos[0]) if infos else io.BytesIO() as f:
                    return f.read(DATA_PKL_MAX_BYTES)
        with open(path, "rb") as f:
            return f.read(DATA_PKL_MAX_BYTES)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError):
        return b""  # torch will say what is wrong with the file


def _refusal(path: Path, exc: Exception) -> CheckpointError:
    """A clear message for a pickle that ``weights_only`` refused."""
    text, name = str(exc), shown_name(path)
    named = re.findall(r"GLOBAL ([\w.]+)", text)
    names = named or [g for g in referenced_globals(_pickle_bytes(path)) if not _is_torch_own(g)]
    code = [g for g in names if _is_code(g)]
    if code:
        return CheckpointError(
            f"{name}: refused: the file asks Python to call {clip(code[0], 100)}, that is, to run code "
            "when it is opened. Nothing in it was run. Only tensors and plain containers are read "
            "(torch.load with weights_only=True)."
        )
    if names:
        return CheckpointError(
            f"{name}: the file holds a whole pickled Python object ({clip(names[0], 100)}), not a "
            "state_dict; opening it would mean running the code of the program that saved it. "
            "Save the weights instead, in that program: torch.save(model.state_dict(), "
            "'model.pth'), and open that file."
        )
    return CheckpointError(f"{name}: not a torch checkpoint this app can read: its pickle is damaged "
                           f"or not a pickle ({torch_cause(text)})")


def torch_cause(text: str, limit: int = 200) -> str:
    """The cause in one of torch.load's messages, without its advice to torch's own users."""
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line and not _TORCH_NOISE.search(line)]
    return clip(" ".join(kept) or (lines[0] if lines else "no reason given"), limit)


def _check_work(path: Path) -> None:
    """Refuse a torch file whose pickle would hash or construct from a value too large to walk."""
    try:
        if zipfile.is_zipfile(path):
            check_pickle_bytes(_pickle_bytes(path))
        else:
            with open(path, "rb") as f:
                check_pickle_work(f, LEGACY_PICKLES)
    except PickleTooComplex as exc:
        raise CheckpointError(f"{shown_name(path)}: refused: its pickle asks for {exc}; no checkpoint "
                              "does (nothing in it was run)") from None
    except OSError:
        pass  # torch.load says what is wrong with the file


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

    _check_work(path)
    try:
        with open(path, "rb") as f:  # a file, not a path: torch must not choose a reader by the name
            return torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise _refusal(path, exc) from None
    except OSError as exc:
        raise CheckpointError(f"{shown_name(path)}: cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # torch's reader raises many types on a damaged file
        raise CheckpointError(f"{shown_name(path)}: torch cannot read this file "
                              f"({type(exc).__name__}: {torch_cause(str(exc))})") from exc


class _Refused(pickle.UnpicklingError):
    """What the restricted unpickler refuses to look up."""


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that looks nothing up: no classes, no functions, no persistent ids."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle's hook
        raise _Refused(f"it asks for {clip(module, 60)}.{clip(name, 60)}")

    def persistent_load(self, pid):
        raise _Refused("it refers to external objects")


def load_restricted(path: Path) -> Any:
    """Read a small pickle that may hold only dicts, lists, tuples, str and int.

    Nothing in the file is run: every class or function lookup is refused before it happens.
    The file may hold at most :data:`META_MAX_BYTES` bytes, 20 levels of nesting and
    :data:`META_MAX_VALUES` values, and no container reached from two places.

    Raises
    ------
    CheckpointError
        When the file is missing, too large, not a pickle, asks for any class or function, holds
        any other type, or is too deep or too large to walk, naming the file and the problem.
    """
    name = shown_name(path)
    try:
        with open(path, "rb") as f:
            data = f.read(META_MAX_BYTES + 1)
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if len(data) > META_MAX_BYTES:
        raise CheckpointError(f"{name}: more than {META_MAX_BYTES:,} bytes, too large for a vocabulary pickle")
    try:
        check_pickle_bytes(data, strict=True)
        value = _PlainDataUnpickler(io.BytesIO(data)).load()
    except PickleTooComplex as exc:
        raise CheckpointError(f"{name}: refused: it asks for {exc}; a vocabulary pickle never does") from None
    except _Refused as exc:
        raise CheckpointError(
            f"{name}: refused: {exc}; a vocabulary pickle may hold only dicts, lists, "
            "tuples, strings and integers. Nothing in it was run."
        ) from None
    except Exception as exc:  # truncated data, bad opcodes, an integer too long, ...
        raise CheckpointError(f"{name}: not a readable pickle ({type(exc).__name__}: {clip(str(exc), 160)})") from None
    bad = check_plain(value, (dict, list, tuple, str, int), max_depth=20, max_nodes=META_MAX_VALUES, shared=False)
    if bad:
        raise CheckpointError(
            f"{name}: refused: it holds {bad}; a vocabulary pickle may hold only dicts, "
            "lists, tuples, strings and integers, at most 20 levels deep."
        )
    return value
