"""Opening the checkpoints people already have: nanoGPT's and LLMs-from-scratch's.

The format is recognised from the file's contents (magic bytes, then the keys inside), never
from its extension. Torch files are read with ``torch.load(map_location="cpu",
weights_only=True)`` only; vocabulary pickles with an unpickler that looks nothing up (see
:mod:`model.interop.safe_pickle`). Each format's reader translates the weights to our GPT's
config and state-dict names; the model is then built and validated as our own files are
(:func:`model.checkpoint.build_model`). Use it through :func:`model.checkpoint.load_any`.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from model.checkpoint import Checkpoint, CheckpointError, NeedsInput, build_model
from model.interop import nanogpt, raschka
from model.interop.common import Converted
from model.interop.safe_pickle import torch_load
from model.interop.vocab import (
    GPT2_PADDED_ROWS, GPT2_VOCAB_SIZE, gpt2_missing_hint, tokenizer_from_path, vocab_padding,
)

FORMATS_TRIED = (
    "Transformer Explorer .safetensors",
    "nanoGPT ckpt.pt (or its bare state_dict)",
    "LLMs-from-scratch model.pth / model_and_optimizer.pth",
)

SAFETENSORS_MAX_HEADER = 100_000_000  # bytes; the safetensors library refuses larger headers

__all__ = ["FORMATS_TRIED", "open_foreign", "sniff"]


def sniff(path: Path) -> str:
    """The container a file is, from its first bytes.

    Returns
    -------
    str
        ``"safetensors"`` (8-byte header length, then ``{``), ``"torch-zip"`` (``PK``, what
        torch.save writes), ``"pickle"`` (protocol 2+, torch's legacy format) or ``"unknown"``.

    Raises
    ------
    CheckpointError
        When the file is missing, not a file, empty, or a safetensors file cut inside its header.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path.name}: " + ("no such file" if not path.exists() else "not a file"))
    try:
        with open(path, "rb") as f:
            head = f.read(9)
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(f"{path.name}: cannot read ({exc.strerror or exc})") from None
    if not head:
        raise CheckpointError(f"{path.name}: the file is empty (0 bytes)")
    if len(head) == 9 and head[8:9] == b"{":
        header = struct.unpack("<Q", head[:8])[0]
        if 0 < header < size:
            return "safetensors"
        if 0 < header < SAFETENSORS_MAX_HEADER:  # a safetensors file cut inside its header
            raise CheckpointError(f"{path.name}: a safetensors file cut short: its header alone is {header:,} "
                                  f"bytes but the file has {size:,} (an incomplete download or copy?)")
    if head.startswith(b"PK\x03\x04"):
        return "torch-zip"
    if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle"
    return "unknown"


def _first_keys(obj: Any) -> str:
    if isinstance(obj, dict):
        keys = [str(k) for k in list(obj)[:8]]
        return "first keys found: " + (", ".join(keys) if keys else "(none: an empty dict)")
    return f"it holds a {type(obj).__name__}, not a dict of tensors"


def _unknown(path: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"{path.name}: not a checkpoint format this app opens; tried: {'; '.join(FORMATS_TRIED)}. {what}"
    )


def _read(path: Path, kind: str) -> Any:
    """The file's top-level object: a dict of tensors (safetensors) or torch.load's result."""
    if kind == "safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except Exception as exc:  # SafetensorError, OSError, ...
            raise CheckpointError(f"{path.name}: not a readable safetensors file ({exc})") from None
    if kind in ("torch-zip", "pickle"):
        return torch_load(path)
    raise _unknown(path, "The file is neither a torch file (zip or pickle) nor safetensors.")


def _convert(path: Path, obj: Any, n_heads: int | None) -> Converted:
    found = nanogpt.recognise(path, obj)
    if found is not None:
        return nanogpt.convert(path, *found, n_heads=n_heads)
    state = raschka.recognise(obj)
    if state is not None:
        return raschka.convert(path, state, n_heads)
    raise _unknown(path, _first_keys(obj))


def _tokenizer(path: Path, conv: Converted, vocab_path, allow_no_tokenizer: bool):
    """The tokenizer (or None when allowed), from vocab_path or where the format keeps it."""
    if vocab_path is not None:
        return tokenizer_from_path(Path(vocab_path))
    tokenizer, searched = conv.find_tokenizer()
    if tokenizer is not None or allow_no_tokenizer:
        return tokenizer
    rows = conv.config.vocab_size
    message = f"{path.name}: no vocabulary was found for this model ({rows} tokens). Looked for: "
    message += ", ".join(str(p) for p in searched) + "."
    if rows in (GPT2_VOCAB_SIZE, GPT2_PADDED_ROWS):
        message += " " + gpt2_missing_hint()
    message += " Choose the vocabulary file, or open the model without one (tokens named by id)."
    raise NeedsInput(message, kind="vocab", path=path, searched=tuple(searched))


def open_foreign(
    path: Path,
    kind: str,
    *,
    n_heads: int | None = None,
    vocab_path=None,
    allow_no_tokenizer: bool = False,
) -> Checkpoint:
    """Read a nanoGPT or LLMs-from-scratch checkpoint as our model (see ``load_any``).

    Parameters
    ----------
    path : Path
    kind : str
        What :func:`sniff` said.
    n_heads, vocab_path, allow_no_tokenizer
        As for :func:`model.checkpoint.load_any`.

    Raises
    ------
    NeedsInput, CheckpointError
        As for :func:`model.checkpoint.load_any`.
    """
    path = Path(path)
    conv = _convert(path, _read(path, kind), n_heads)
    model = build_model(path, conv.config, conv.tensors)
    tokenizer = _tokenizer(path, conv, vocab_path, allow_no_tokenizer)
    padding = vocab_padding(path, tokenizer, conv.config.vocab_size) if tokenizer is not None else 0
    return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=conv.training,
                      source_format=conv.source_format, vocab_padding=padding)
