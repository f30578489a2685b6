"""Our own checkpoint format: one ``.safetensors`` file, validated before a model is returned.

One file holds all that is needed to run: the weights, and in the safetensors metadata (str ->
str) the format name and version, the config (JSON), the tokenizer (tokenizer.json text) and the
training facts (JSON). Tied unembeddings are stored once (the token-embedding table). Keys that a
DDP-wrapped (``module.``) or ``torch.compile``'d (``_orig_mod.``) model puts first, as in a file made
by hand from such a model's ``state_dict()``, are read as the plain names. A model that is not a
transformer says its architecture (``architecture``: ``"window-mlp"``, the model before attention,
:mod:`model.core.window`); without the key the file holds a transformer.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from model.core.architectures import TRANSFORMER, architecture_of, config_from_dict
from model.core.config import GPTConfig
from model.core.plain import clip, load_json, short_repr
from model.formats.base import (
    Checkpoint, CheckpointError, NotThisFormat, OpenOptions, Source, atomic_write, build_model, fail, is_utf8,
)
from model.formats.common import strip_prefixes
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

__all__ = ["DESCRIPTION", "FORMAT_NAME", "FORMAT_VERSION", "CheckpointError", "Header", "inspect", "load_checkpoint",
           "read", "read_header", "save_checkpoint"]


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
    model : GPT or WindowMLP
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
    architecture = architecture_of(model.config)
    if architecture != TRANSFORMER:
        metadata["architecture"] = architecture
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


def load_checkpoint(path: str | os.PathLike, tokenizer: Tokenizer | None = None) -> Checkpoint:
    """Read and validate one of our ``.safetensors`` checkpoints (with ``tokenizer`` in place of the
    one its header holds, when given: see :func:`read`).

    Raises
    ------
    CheckpointError
        For every kind of bad file (missing, empty, truncated, not safetensors, another format,
        wrong version, bad config or tokenizer, missing/unexpected/misshapen/non-finite tensors,
        tokenizer size different from the embedding rows), with the file name and the problem.
    """
    return read(Source(path), tokenizer=tokenizer)


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


@dataclass(frozen=True)
class Header:
    """What one of our files says in its safetensors header, read without its weights.

    Attributes
    ----------
    path : Path
    config : GPTConfig
    training : dict                  the training facts (steps, val_curve, ...).
    tokenizer_json : str or None     the tokenizer, as tokenizer.json text (parsed on load).
    vocab_padding : int
    """

    path: Path
    config: GPTConfig
    training: dict[str, Any]
    tokenizer_json: str | None
    vocab_padding: int


def read_header(source: Source) -> Header:
    """The header of one of our files: format, config, training facts and tokenizer text, checked;
    no tensor is read (a folder of 3,000 snapshots is sorted by step and shape from these alone).

    Raises
    ------
    NotThisFormat
        When the file is not one of our checkpoints (another safetensors file, a torch file).
    CheckpointError
        For an unsupported format version, a bad config or vocab_padding.
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
    return Header(path, _config(path, metadata.get("config", ""), metadata.get("architecture", TRANSFORMER)), _training(metadata.get("training", "{}")),
                  metadata.get("tokenizer"), _padding(path, metadata.get("vocab_padding", "0")))


def read(source: Source, options: OpenOptions | None = None, tokenizer: Tokenizer | None = None) -> Checkpoint:
    """The reader behind :func:`load_checkpoint`: :func:`read_header`, the tokenizer, the weights.

    ``tokenizer``, when given, is used instead of parsing the header's (whose text it must have:
    the snapshots of one run share one tokenizer object).

    Raises
    ------
    NotThisFormat
        When the file is not one of our checkpoints (another safetensors file, a torch file).
    CheckpointError
        As :func:`load_checkpoint`.
    """
    header = read_header(source)
    path, config, padding = header.path, header.config, header.vocab_padding
    if header.tokenizer_json is not None and tokenizer is None:
        try:
            tokenizer = Tokenizer.from_json(header.tokenizer_json)
        except ValueError as exc:
            raise fail(path, f"bad tokenizer: {clip(str(exc))}") from None
    if header.tokenizer_json is None:
        tokenizer = None
    if tokenizer is not None and tokenizer.vocab_size + padding != config.vocab_size:
        raise fail(
            path,
            f"the tokenizer has {tokenizer.vocab_size} words"
            + (f" (+{padding} padding rows)" if padding else "")
            + f" but the embedding table has {config.vocab_size} rows",
        )
    model = build_model(path, config, strip_prefixes(path, source.tensors))  # a hand-made file of a DDP/compiled model
    return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=header.training,
                      vocab_padding=padding if tokenizer is not None else 0)


def _config(path: Path, text: str, architecture: str = TRANSFORMER) -> GPTConfig:
    """The config metadata (JSON, at most :data:`CONFIG_MAX_CHARS`) as the config of ``architecture``
    (a GPTConfig, or a WindowConfig for ``"window-mlp"``)."""
    if len(text) > CONFIG_MAX_CHARS:
        raise fail(path, f"bad config: {len(text):,} characters, far more than a config holds")
    try:
        return config_from_dict(architecture, load_json(text, max_depth=4, max_nodes=10_000))
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
