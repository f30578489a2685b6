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

from model.config import GPTConfig
from model.formats.errors import CheckpointError, NeedsInput, NotThisFormat
from model.formats.safe_pickle import torch_load
from model.tokenizer import Tokenizer
from model.transformer import GPT

__all__ = ["Checkpoint", "CheckpointError", "NeedsInput", "NotThisFormat", "OpenOptions", "Source",
           "atomic_write", "build_model", "fail", "validate_state_dict"]

SAFETENSORS_MAX_HEADER = 100_000_000  # bytes; the safetensors library refuses larger headers


@dataclass
class Checkpoint:
    """A loaded model with everything needed to run and describe it.

    Attributes
    ----------
    model : GPT                    in eval mode, float32, on the CPU.
    tokenizer : Tokenizer or None  None when no vocabulary is known (tokens are named by id).
    path : Path or None            the file (or model folder) it came from.
    training : dict                training facts from the metadata (steps, losses, command, ...);
                                   for a foreign model where it came from, and any ``note`` on it.
    source_format : str            ``"transformer-explorer"`` or the foreign format it was read from
                                   (``"nanogpt"``, ``"llms-from-scratch"``, ``"hf-gpt2"``,
                                   ``"hf-gpt-neo"``, ``"hf-llama"``, ``"hf-mistral"``).
    vocab_padding : int            embedding rows past the tokenizer's vocabulary, never produced
                                   by it (nanoGPT pads GPT-2's 50,257 tokens to 50,304 rows).
    origin : str or None           what was opened when it is not ``path`` itself: ``hf:REPO_ID[@REVISION]``
                                   for a model from the Hugging Face Hub (``path`` is then its snapshot
                                   folder in the Hub's cache); Reload and Open Recent open it again.
    """

    model: GPT
    tokenizer: Tokenizer | None
    path: Path | None = None
    training: dict[str, Any] = field(default_factory=dict)
    source_format: str = "transformer-explorer"  # native.FORMAT_NAME
    vocab_padding: int = 0
    origin: str | None = None

    @property
    def config(self) -> GPTConfig:
        """The model's config."""
        return self.model.config

    @property
    def name(self) -> str:
        """A short display name: the repository for a Hub model (``owner/name``), the file's stem, or
        "unsaved model"."""
        if self.origin is not None:
            return self.origin.removeprefix("hf:")
        return self.path.stem if self.path is not None else "unsaved model"


@dataclass(frozen=True)
class OpenOptions:
    """What the caller of :func:`model.checkpoint.load_any` supplied (see its parameters)."""

    n_heads: int | None = None
    vocab_path: Path | None = None
    allow_no_tokenizer: bool = False


def fail(path: Path, problem: str) -> CheckpointError:
    """A CheckpointError whose message starts with the file's name."""
    return CheckpointError(f"{Path(path).name}: {problem}")


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
        torch.save writes), ``"pickle"`` (protocol 2+, torch's legacy format), ``"folder"`` (a
        directory: readers look inside it) or ``"unknown"``.

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
        if path.is_dir():
            return "folder"
        if not path.is_file():
            raise fail(path, "no such file or folder" if not path.exists() else "not a file or folder")
        try:
            with open(path, "rb") as f:
                head = f.read(9)
            size = path.stat().st_size
        except OSError as exc:
            raise fail(path, f"cannot read ({exc.strerror or exc})") from None
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
        if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:
            return "pickle"
        return "unknown"

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
            with safe_open(str(self.path), framework="pt") as f:
                return dict(f.metadata() or {})
        except Exception as exc:  # safetensors raises SafetensorError, OSError, ...
            raise fail(self.path, f"not a readable safetensors file ({exc})") from None

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
        from safetensors.torch import load_file

        try:
            return load_file(str(self.path), device="cpu")
        except Exception as exc:  # SafetensorError, OSError, ...
            raise fail(self.path, f"not a readable safetensors file ({exc})") from None

    @cached_property
    def torch_object(self) -> Any:
        """The top-level object of a torch file, read with ``torch.load(weights_only=True)``.

        Raises
        ------
        CheckpointError
            For other containers, a pickle that would run code or holds a whole model, or a file
            torch cannot read (see :func:`model.formats.safe_pickle.torch_load`).
        """
        if self.container not in ("torch-zip", "pickle"):
            raise fail(self.path, "not a torch file")
        return torch_load(self.path)


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
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
    expected = GPT.state_dict_shapes(config)
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
    """A GPT in eval mode with validated ``tensors`` as its weights (see validate_state_dict)."""
    state = validate_state_dict(path, config, tensors)
    # Built on the CPU, not the meta device: initialising meta tensors imports torch._dynamo
    # (1.8 s on first use). The throw-away initialisation must not move torch's global RNG.
    with torch.random.fork_rng(devices=[]):
        model = GPT(config)
    model.load_state_dict(state, assign=True, strict=True)
    return model.eval()
