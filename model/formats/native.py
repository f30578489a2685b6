"""Our own checkpoint format: one ``.safetensors`` file, validated before a model is returned.

One file holds all that is needed to run: the weights, and in the safetensors metadata (str ->
str) the format name and version, the config (JSON), the tokenizer (tokenizer.json text) and the
training facts (JSON). Tied unembeddings are stored once (the token-embedding table).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch

from model.core.config import GPTConfig
from model.core.plain import clip, load_json, short_repr
from model.formats.base import (
    Checkpoint, CheckpointError, NotThisFormat, OpenOptions, Source, atomic_write, build_model, fail, is_utf8,
)
from model.formats.opening import Opening
from model.tokens.tokenizer import Tokenizer
from model.core.transformer import GPT

FORMAT_NAME = "transformer-explorer"
FORMAT_VERSION = "2"  # 2: the config names the architecture (positional, norm, mlp, ...)
READABLE_VERSIONS = ("1", "2")  # version 1 configs use the older keys (GPTConfig.from_dict reads both)
DESCRIPTION = "Transformer Explorer .safetensors"
CONFIG_MAX_CHARS = 64 * 1024  # a config is a few hundred characters
TRAINING_MAX_VALUES = 100_000  # values in the training facts (a long validation curve is a few thousand)
_COUNT = re.compile(r"[0-9]{1,9}")  # a count of rows, in ASCII digits (str.isdigit also passes "²")

__all__ = ["DESCRIPTION", "FORMAT_NAME", "FORMAT_VERSION", "CheckpointError", "inspect", "load_checkpoint", "read",
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
    tensors = _own_storage({k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()})
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
    atomic_write(path, lambda tmp: _write(tensors, tmp, metadata))


def _write(tensors: dict[str, torch.Tensor], path: str, metadata: dict[str, str]) -> None:
    """safetensors' ``save_file``; for a path that is not UTF-8 (which the library refuses), its
    bytes written here."""
    from safetensors.torch import save, save_file

    if is_utf8(path):
        save_file(tensors, path, metadata=metadata)
    else:
        Path(path).write_bytes(save(tensors, metadata=metadata))


def _own_storage(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors, each with storage of its own: safetensors refuses to write tensors that share
    memory (a foreign model whose unembedding is its embedding table's storage, W_Q/W_K/W_V cut
    from one stacked matrix, weights read as views of one file buffer), so the second and later
    users of a storage get a copy."""
    seen: set[int] = set()
    out = {}
    for name, t in tensors.items():
        storage = t.untyped_storage().data_ptr()
        out[name] = t.clone() if storage in seen and t.numel() else t
        seen.add(storage)
    return out


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


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Our file, for :func:`model.checkpoint.inspect`: it says everything (config, tokenizer or none),
    so it is read and checked here whole and asks nothing.

    Raises
    ------
    NotThisFormat, CheckpointError
        As :func:`read`.
    """
    checkpoint = read(source, options)
    return Opening.ready(source.path, FORMAT_NAME, lambda: checkpoint)


def read(source: Source, options: OpenOptions | None = None) -> Checkpoint:
    """The reader behind :func:`load_checkpoint`.

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
            f"{path.name}: not a Transformer Explorer checkpoint (format {short_repr(fmt)}; expected {FORMAT_NAME!r})"
        )
    if metadata.get("format_version") not in READABLE_VERSIONS:
        raise fail(
            path,
            f"format version {short_repr(metadata.get('format_version'))} is not supported (expected {FORMAT_VERSION})",
        )
    config = _config(path, metadata.get("config", ""))
    padding = _padding(path, metadata.get("vocab_padding", "0"))
    tokenizer = None
    if "tokenizer" in metadata:
        try:
            tokenizer = Tokenizer.from_json(metadata["tokenizer"])
        except ValueError as exc:
            raise fail(path, f"bad tokenizer: {clip(str(exc))}") from None
        if tokenizer.vocab_size + padding != config.vocab_size:
            raise fail(
                path,
                f"the tokenizer has {tokenizer.vocab_size} words"
                + (f" (+{padding} padding rows)" if padding else "")
                + f" but the embedding table has {config.vocab_size} rows",
            )
    training = _training(metadata.get("training", "{}"))
    model = build_model(path, config, source.tensors)
    return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=training,
                      vocab_padding=padding if tokenizer is not None else 0)


def _config(path: Path, text: str) -> GPTConfig:
    """The config metadata (JSON, at most :data:`CONFIG_MAX_CHARS`) as a GPTConfig."""
    if len(text) > CONFIG_MAX_CHARS:
        raise fail(path, f"bad config: {len(text):,} characters, far more than a config holds")
    try:
        return GPTConfig.from_dict(load_json(text, max_depth=4, max_nodes=10_000))
    except (ValueError, TypeError) as exc:
        raise fail(path, f"bad config: {clip(str(exc))}") from None


def _padding(path: Path, text: str) -> int:
    """The vocab_padding metadata: a count of rows in ASCII digits."""
    if not _COUNT.fullmatch(text):
        raise fail(path, f"bad vocab_padding {short_repr(text)} (expected a count of rows, such as 47)")
    return int(text)


def _training(text: str) -> dict[str, Any]:
    """The training facts: a JSON object within bounds, else {} (they describe, they do not decide)."""
    try:
        training = load_json(text, max_depth=16, max_nodes=TRAINING_MAX_VALUES)
    except ValueError:
        return {}
    return training if isinstance(training, dict) else {}  # a JSON list, string or null: not facts to show
