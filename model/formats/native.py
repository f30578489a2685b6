"""Our own checkpoint format: one ``.safetensors`` file, validated before a model is returned.

One file holds all that is needed to run: the weights, and in the safetensors metadata (str ->
str) the format name and version, the config (JSON), the tokenizer (tokenizer.json text) and the
training facts (JSON). Tied unembeddings are stored once (the token-embedding table).
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from model.config import GPTConfig
from model.formats.base import (
    Checkpoint, CheckpointError, NotThisFormat, OpenOptions, Source, atomic_write, build_model, fail,
)
from model.tokenizer import Tokenizer
from model.transformer import GPT

FORMAT_NAME = "transformer-explorer"
FORMAT_VERSION = "2"  # 2: the config names the architecture (positional, norm, mlp, ...)
READABLE_VERSIONS = ("1", "2")  # version 1 configs use the older keys (GPTConfig.from_dict reads both)
DESCRIPTION = "Transformer Explorer .safetensors"

__all__ = ["DESCRIPTION", "FORMAT_NAME", "FORMAT_VERSION", "CheckpointError", "load_checkpoint", "read",
           "save_checkpoint"]


def save_checkpoint(
    path: str | os.PathLike,
    model: GPT,
    tokenizer: Tokenizer | None,
    training: dict[str, Any] | None = None,
    dtype: torch.dtype = torch.float32,
    vocab_padding: int = 0,
) -> None:
    """Write a model, its tokenizer and training facts to one ``.safetensors`` file, atomically.

    Parameters
    ----------
    path : path-like
    model : GPT
    tokenizer : Tokenizer or None
    training : dict, optional
        JSON-ready facts: steps, train_loss and val_loss (nats per token), command, corpus sha256.
    dtype : torch.dtype
        Storage dtype (float16 for compact snapshots); loading always returns float32.
    vocab_padding : int
        Embedding rows past the tokenizer's vocabulary (see :class:`Checkpoint`); recorded so that
        loading accepts exactly this difference between tokenizer and embedding table.

    Raises
    ------
    OSError
        When the file cannot be written.
    """
    from safetensors.torch import save_file

    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "config": json.dumps(model.config.to_dict()),
        "training": json.dumps(training or {}),
    }
    if tokenizer is not None:
        metadata["tokenizer"] = tokenizer.to_json()
    if vocab_padding:
        metadata["vocab_padding"] = str(int(vocab_padding))
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and validate one of our ``.safetensors`` checkpoints.

    Raises
    ------
    CheckpointError
        For every kind of bad file (missing, empty, truncated, not safetensors, another format,
        wrong version, bad config or tokenizer, missing/unexpected/misshapen/non-finite tensors,
        tokenizer size different from the embedding rows), with the file name and the problem.
    """
    return read(Source(path))


def read(source: Source, options: OpenOptions | None = None) -> Checkpoint:
    """The reader behind :func:`load_checkpoint`, for :func:`model.checkpoint.load_any`.

    Raises
    ------
    NotThisFormat
        When the file is not one of our checkpoints (another safetensors file, a torch file).
    CheckpointError
        As :func:`load_checkpoint`.
    """
    path = source.path
    if source.container != "safetensors":
        raise NotThisFormat(
            f"{path.name}: not a readable safetensors file (it does not begin with a safetensors header)")
    metadata = source.safetensors_metadata
    fmt = metadata.get("format")
    if fmt != FORMAT_NAME:
        raise NotThisFormat(
            f"{path.name}: not a Transformer Explorer checkpoint (format {fmt!r}; expected {FORMAT_NAME!r})"
        )
    if metadata.get("format_version") not in READABLE_VERSIONS:
        raise fail(
            path,
            f"format version {metadata.get('format_version')!r} is not supported (expected {FORMAT_VERSION})",
        )
    try:
        config = GPTConfig.from_dict(json.loads(metadata.get("config", "")))
    except (ValueError, TypeError, RecursionError) as exc:
        raise fail(path, f"bad config: {exc}") from None
    tokenizer = None
    padding = metadata.get("vocab_padding", "0")
    if not (padding.isascii() and padding.isdigit()):
        raise fail(path, f"bad vocab_padding {padding!r} (expected a count of rows)")
    padding = int(padding)
    if "tokenizer" in metadata:
        try:
            tokenizer = Tokenizer.from_json(metadata["tokenizer"])
        except ValueError as exc:
            raise fail(path, f"bad tokenizer: {exc}") from None
        if tokenizer.vocab_size + padding != config.vocab_size:
            raise fail(
                path,
                f"the tokenizer has {tokenizer.vocab_size} words"
                + (f" (+{padding} padding rows)" if padding else "")
                + f" but the embedding table has {config.vocab_size} rows",
            )
    try:
        training = json.loads(metadata.get("training", "{}"))
    except (ValueError, RecursionError):
        training = {}
    if not isinstance(training, dict):  # a JSON list, string or null: not facts we can show
        training = {}
    model = build_model(path, config, source.tensors)
    return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=training,
                      vocab_padding=padding if tokenizer is not None else 0)
