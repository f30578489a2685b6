"""What every checkpoint format shares: the loaded result, the sniffed file, and building a model.

The bottom of :mod:`model.formats`: every reader (our own ``.safetensors`` and each foreign
format) imports from here and never from another reader or from the dispatcher
(:mod:`model.checkpoint`), so no import goes back up (the layers are checked by import-linter).
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from model.core.architectures import model_class
from model.core.config import GPTConfig
from model.formats.errors import CheckpointError, NeedsInput, NotThisFormat
from model.formats.pickled.safe_pickle import torch_load
from model.formats.refs import BuiltinRef, HubRef, Reference
from model.formats.storage import WeightStorage
from model.core.plain import clip, load_json, readable, shown_name
from model.tokens.tokenizer import Tokenizer
from model.core.transformer import GPT

__all__ = ["Checkpoint", "CheckpointError", "NeedsInput", "NotThisFormat", "OpenOptions", "Source",
           "atomic_write", "build_model", "check_tensor", "fail", "is_file", "is_utf8", "model_from_state",
           "validate_state_dict"]

SAFETENSORS_MAX_HEADER = 100_000_000  # bytes; the safetensors library refuses larger headers


@dataclass
class Checkpoint:
    """A loaded model with everything needed to run and describe it.

    Attributes
    ----------
    model : GPT or WindowMLP       in eval mode, float32, on the CPU (a WindowMLP: the model before
                                   attention, :mod:`model.core.window`; only our own format holds one).
    tokenizer : Tokenizer or None  None when no vocabulary is known (tokens are named by id).
    path : Path or None            the file (or model folder) it came from.
    training : dict                training facts from the metadata (steps, losses, command, ...);
                                   for a foreign model where it came from, and any ``note`` on it.
    source_format : str            ``"transformer-explorer"`` or the foreign format it was read from
                                   (``"nanogpt"``, ``"llms-from-scratch"``, ``"hf-gpt2"``,
                                   ``"hf-gpt-neo"``, ``"hf-llama"``, ``"hf-mistral"``, ``"gguf-llama"``,
                                   ``"gguf-qwen2"``).
    vocab_padding : int            embedding rows past the tokenizer's vocabulary, never produced
                                   by it (nanoGPT pads GPT-2's 50,257 tokens to 50,304 rows).
    origin : HubRef, BuiltinRef or None  what was opened when it is not ``path`` itself: the repository
                                   of a model from the Hugging Face Hub (``path`` is then its snapshot
                                   folder in the Hub's cache), or a shipped model's name (``path`` is
                                   its installed file); Reload and Open Recent open it again.
    storage : WeightStorage or None  how the file stored the weights when they were quantised blocks
                                   (GGUF), dequantised to float32 on opening; None for plain float files.
    """

    model: GPT
    tokenizer: Tokenizer | None
    path: Path | None = None
    training: dict[str, Any] = field(default_factory=dict)
    source_format: str = "transformer-explorer"  # native.FORMAT_NAME
    vocab_padding: int = 0
    origin: HubRef | BuiltinRef | None = None
    storage: WeightStorage | None = None

    @property
    def config(self) -> GPTConfig:
        """The model's config (a :class:`~model.core.window.WindowConfig` for the model before attention)."""
        return self.model.config

    @property
    def name(self) -> str:
        """A short display name: the repository for a Hub model (``owner/name``), the file's stem
        (bytes that are not UTF-8 as U+FFFD), or "unsaved model"."""
        if self.origin is not None:
            return self.origin.name
        return readable(self.path.stem) if self.path is not None else "unsaved model"

    @property
    def reference(self) -> Reference | None:
        """What opens it again (Reload, Open Recent): ``origin``, else ``path``; None for a model made in memory."""
        return self.origin if self.origin is not None else self.path


@dataclass(frozen=True)
class OpenOptions:
    """What the caller of :func:`model.checkpoint.load_any` supplied (see its parameters)."""

    n_heads: int | None = None
    vocab_path: Path | None = None
    allow_no_tokenizer: bool = False


def fail(path: Path, problem: str) -> CheckpointError:
    """A CheckpointError whose message starts with the file's name."""
    return CheckpointError(f"{shown_name(path)}: {problem}")


def is_file(path: Path) -> bool:
    """``path.is_file()``, False too for a path the system refuses (a name too long, a NUL in it):
    for paths made from what a file says (a dataset name, a shard)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


#: Why a symbolic link cannot be read: what :func:`dangling` finds.
LINK_NOWHERE = "a symbolic link that leads nowhere (its target is missing, or the links form a loop)"
#: What a dangling link in a downloaded model folder (a Hub snapshot) usually is.
NOT_DOWNLOADED = ("not downloaded: a download that was interrupted or left it out (cf. huggingface_hub#1222); "
                  "fetch the model again")


def dangling(path: Path) -> bool:
    """Whether ``path`` is a symbolic link whose target is not there (a Hub snapshot's file whose blob
    an interrupted or filtered download never wrote); ``is_file()`` is False for it, as for no file."""
    try:
        return path.is_symlink() and not path.exists()
    except (OSError, ValueError):
        return False


def broken_link(path: Path) -> CheckpointError:
    """The error for a file of a model folder that is a link to nothing, naming the file."""
    return CheckpointError(f"{shown_name(path.parent)}: {shown_name(path)} is {LINK_NOWHERE}: {NOT_DOWNLOADED}")


#: A file with this name stands for its folder (a Hugging Face model folder's config).
FOLDER_CONFIG = "config.json"


class Source:
    """A file or folder to open and what its first bytes say it is; contents are read once, on demand.

    Parameters
    ----------
    path : path-like
        A file, or a folder (a Hugging Face model folder). A file named ``config.json`` means its
        folder.

    Attributes
    ----------
    path : Path
        The file, or the folder (for a ``config.json``, its folder).
    container : str
        ``"safetensors"`` (8-byte header length, then ``{``), ``"torch-zip"`` (``PK``, what
        torch.save writes), ``"pickle"`` (protocol 2+, torch's legacy format), ``"gguf"`` (the magic
        ``GGUF``, llama.cpp's format), ``"folder"`` (a directory: readers look inside it) or ``"unknown"``.

    Raises
    ------
    CheckpointError
        When the path is missing, neither a file nor a folder, unreadable, empty, or a safetensors
        file cut inside its header.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.name == FOLDER_CONFIG and self.path.is_file():
            self.path = self.path.parent.resolve() if self.path.parent == Path() else self.path.parent
        self.container = self._sniff()

    def _sniff(self) -> str:
        path = self.path
        try:
            if path.is_dir():
                return "folder"
            if not path.is_file():
                raise fail(path, self._missing())
            with open(path, "rb") as f:
                head = f.read(9)
            size = path.stat().st_size
        except (OSError, ValueError) as exc:
            raise fail(path, f"cannot read ({getattr(exc, 'strerror', None) or exc})") from None
        if not head:
            raise fail(path, "the file is empty (0 bytes)")
        if len(head) == 9 and head[8:9] == b"{":
            header = struct.unpack("<Q", head[:8])[0]
            if 0 < header < size:
                return "safetensors"
            if 0 < header < SAFETENSORS_MAX_HEADER:  # a safetensors file cut inside its header
                raise fail(path, f"a safetensors file cut short: its header alone is {header:,} bytes "
                                 f"but the file has {size:,} (an incomplete download or copy?)")
        if head.startswith(b"PK\x03\x04"):
            return "torch-zip"
        if head.startswith(b"GGUF"):
            return "gguf"
        if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:
            return "pickle"
        return "unknown"

    def _missing(self) -> str:
        """Why a path that is neither a file nor a folder cannot be opened."""
        if self.path.is_symlink():
            return LINK_NOWHERE
        return "no such file or folder" if not self.path.exists() else "not a file or folder"

    @cached_property
    def safetensors_metadata(self) -> dict[str, str]:
        """The safetensors header's ``__metadata__`` (str -> str); {} for other containers.

        Raises
        ------
        CheckpointError
            When the header cannot be read.
        """
        if self.container != "safetensors":
            return {}
        from safetensors import safe_open

        try:
            if not is_utf8(self.path):  # the library takes only UTF-8 paths: read the header here
                return _header_metadata(self.path)
            with safe_open(str(self.path), framework="pt") as f:
                return dict(f.metadata() or {})
        except Exception as exc:  # safetensors raises SafetensorError, OSError, ...
            raise fail(self.path, f"not a readable safetensors file ({clip(str(exc))})") from None

    @cached_property
    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor of a safetensors file, on the CPU.

        Raises
        ------
        CheckpointError
            For other containers, or when the file cannot be read.
        """
        if self.container != "safetensors":
            raise fail(self.path, "not a safetensors file")
        from safetensors.torch import load, load_file

        try:
            if not is_utf8(self.path):  # the library takes only UTF-8 paths: hand it the bytes
                return load(self.path.read_bytes())
            return load_file(str(self.path), device="cpu")
        except Exception as exc:  # SafetensorError, OSError, MemoryError, ...
            raise fail(self.path, f"not a readable safetensors file ({clip(str(exc)) or type(exc).__name__})") from None

    @cached_property
    def torch_object(self) -> Any:
        """The top-level object of a torch file, read with ``torch.load(weights_only=True)``.

        Raises
        ------
        CheckpointError
            For other containers, a pickle that would run code or holds a whole model, or a file
            torch cannot read (see :func:`model.formats.pickled.safe_pickle.torch_load`).
        """
        if self.container not in ("torch-zip", "pickle"):
            raise fail(self.path, "not a torch file")
        return torch_load(self.path)


def is_utf8(path: str | os.PathLike) -> bool:
    """Whether a path is valid UTF-8 (Python keeps other bytes of a name as lone surrogates)."""
    try:
        str(path).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _header_metadata(path: Path) -> dict[str, str]:
    """A safetensors file's ``__metadata__``, read from its header without the library."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        if size > SAFETENSORS_MAX_HEADER:
            raise ValueError(f"a header of {size:,} bytes")
        header = load_json(f.read(size))
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("its __metadata__ is not an object of strings")
    return dict(metadata)


def run_facts(run: dict, fields: tuple[tuple[str, str, type], ...]) -> dict[str, Any]:
    """Training facts read from a foreign checkpoint's run dict (nanoGPT's and llama2.c's ``ckpt.pt``).

    Parameters
    ----------
    run : dict
        The checkpoint's top-level dict (``iter_num``, ``best_val_loss``, ...).
    fields : tuple of (ours, theirs, kind)
        Each fact's name in our metadata, its key in ``run`` and the type it must convert to.

    Returns
    -------
    dict
        ``ours -> kind(run[theirs])`` for each key present whose value converts; a value that does
        not (inf steps, a text loss) is no fact to show and is left out.
    """
    facts: dict[str, Any] = {}
    for ours, theirs, kind in fields:
        value = run.get(theirs)
        try:
            if value is not None:
                facts[ours] = kind(value)
        except (TypeError, ValueError, OverflowError):
            pass
    return facts


def atomic_write(path: str | os.PathLike, write) -> None:
    """Call ``write(tmp_path)``, then rename the temporary file onto ``path``.

    Nothing is left half-written: on any error the temporary file is removed and ``path`` is
    untouched.

    Raises
    ------
    OSError
        When the folder cannot be written.
    """
    path = Path(path)
    # The temporary name in UTF-8 (the file name's other bytes as U+FFFD): libraries that write
    # it (safetensors) take only UTF-8 paths. The rename then gives the file its own name.
    fd, tmp = tempfile.mkstemp(prefix=f".{shown_name(path)}.", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual file permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_tensor(path: Path, name: str, t: torch.Tensor) -> None:
    """Refuse a tensor from a file that does not hold its values as an ordinary (dense) array.

    torch.load rebuilds what the file describes: a sparse, quantized, nested or meta tensor, or a
    view whose shape and strides claim more values than its storage holds (a stride of 0 makes
    a 10^6 x 10^6 "table" from 4 bytes). Sizes read from such a tensor describe no real weights.

    Raises
    ------
    CheckpointError
        Naming the tensor and what it is.
    """
    what = None
    if t.is_nested or t.layout != torch.strided:
        what = f"a {'nested' if t.is_nested else str(t.layout).removeprefix('torch.')} tensor"
    elif t.is_quantized:
        what = "a quantized tensor"
    elif t.device.type != "cpu":
        what = f"a tensor on the {t.device.type} device, without data"
    elif t.numel() and t.numel() * t.element_size() > t.untyped_storage().nbytes():
        what = (f"a tensor of shape {tuple(t.shape)} whose data holds only "
                f"{t.untyped_storage().nbytes() // max(1, t.element_size()):,} values (a view with repeated strides)")
    if what is not None:
        raise fail(path, f"{clip(name, 100)} is {what}; only dense weights are read")


def validate_state_dict(
    path: Path, config: GPTConfig, tensors: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Check names, shapes, dtypes and finiteness against what ``config`` implies.

    Returns
    -------
    dict
        The tensors as float32.

    Raises
    ------
    CheckpointError
        Naming the first missing, unexpected, misshapen, non-float or non-finite tensor.
    """
    expected = model_class(config).state_dict_shapes(config)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise fail(path, f"missing tensor(s): {', '.join(missing[:5])}")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise fail(path, f"unexpected tensor(s): {', '.join(unexpected[:5])}")
    out = {}
    for name, shape in expected.items():
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise fail(path, f"tensor {name} has shape {tuple(t.shape)}, the config implies {shape}")
        if not t.is_floating_point():
            raise fail(path, f"tensor {name} has dtype {t.dtype}, expected a float type")
        t = t.float()
        if not torch.isfinite(t).all():
            raise fail(path, f"tensor {name} holds NaN or infinite values")
        out[name] = t
    return out


def build_model(path: Path, config: GPTConfig, tensors: dict[str, torch.Tensor]) -> GPT:
    """A model of ``config``'s architecture (a GPT, or a WindowMLP for its config) in eval mode with
    validated ``tensors`` as its weights (see validate_state_dict)."""
    return model_from_state(path, config, validate_state_dict(path, config, tensors))


def model_from_state(path: Path, config: GPTConfig, state: dict[str, torch.Tensor]) -> GPT:
    """A GPT in eval mode with ``state`` (what :func:`validate_state_dict` returned for ``config``) as its weights.

    Raises
    ------
    CheckpointError
        When the model cannot be built in memory.
    """
    # Built on the CPU, not the meta device: initialising meta tensors imports torch._dynamo
    # (1.8 s on first use). The throw-away initialisation must not move torch's global RNG.
    try:
        with torch.random.fork_rng(devices=[]):
            model = model_class(config)(config)
    except (RuntimeError, MemoryError) as exc:  # the allocator: buffers the weights do not bound (RoPE angles)
        raise fail(path, f"cannot build this model in memory ({clip(str(exc), 120) or type(exc).__name__})") from exc
    model.load_state_dict(state, assign=True, strict=True)
    return model.eval()
