"""Checkpoint files: our own ``.safetensors`` format, validated before a model is returned.

One file holds all that is needed to run: the weights, and in the safetensors metadata (str ->
str) the format name and version, the config (JSON), the tokenizer (tokenizer.json text) and the
training facts (JSON). Tied unembeddings are stored once (the token-embedding table).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from model.config import GPTConfig
from model.tokenizer import Tokenizer
from model.transformer import GPT

FORMAT_NAME = "transformer-explorer"
FORMAT_VERSION = "1"


class CheckpointError(Exception):
    """A checkpoint file could not be read or is not valid; the message names file and problem."""


class NeedsInput(CheckpointError):
    """The file is sound but cannot be opened without something only the user can supply.

    Call :func:`load_any` again with the answer (and every earlier answer): ``n_heads=`` for
    kind ``"n_heads"``; ``vocab_path=`` (or ``allow_no_tokenizer=True``) for kind ``"vocab"``.

    Parameters
    ----------
    message : str
        What is missing and how to supply it, starting with the file name.
    kind : str
        ``"n_heads"`` (heads per block cannot be read from the weights) or ``"vocab"`` (no
        vocabulary was found for the model).
    path : path-like
        The checkpoint file.
    proposed : int, optional
        For ``"n_heads"``: the most likely value, to offer as the default.
    choices : tuple of int
        For ``"n_heads"``: every value the weights allow (the divisors of d_model).
    searched : tuple of Path
        For ``"vocab"``: the places where a vocabulary was looked for.
    """

    def __init__(self, message: str, *, kind: str, path: str | os.PathLike,
                 proposed: int | None = None, choices: tuple[int, ...] = (),
                 searched: tuple[Path, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = Path(path)
        self.proposed = proposed
        self.choices = tuple(choices)
        self.searched = tuple(searched)


@dataclass
class Checkpoint:
    """A loaded model with everything needed to run and describe it.

    Attributes
    ----------
    model : GPT                    in eval mode, float32, on the CPU.
    tokenizer : Tokenizer or None  None when no vocabulary is known (tokens are named by id).
    path : Path or None            the file it came from.
    training : dict                training facts from the metadata (steps, losses, command, ...).
    source_format : str            ``"transformer-explorer"`` or the foreign format it was read from
                                   (``"nanogpt"``, ``"llms-from-scratch"``).
    vocab_padding : int            embedding rows past the tokenizer's vocabulary, never produced
                                   by it (nanoGPT pads GPT-2's 50,257 tokens to 50,304 rows).
    """

    model: GPT
    tokenizer: Tokenizer | None
    path: Path | None = None
    training: dict[str, Any] = field(default_factory=dict)
    source_format: str = FORMAT_NAME
    vocab_padding: int = 0

    @property
    def config(self) -> GPTConfig:
        """The model's config."""
        return self.model.config

    @property
    def name(self) -> str:
        """A short display name: the file's stem, or "unsaved model"."""
        return self.path.stem if self.path is not None else "unsaved model"


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


def _fail(path: Path, problem: str) -> CheckpointError:
    return CheckpointError(f"{path.name}: {problem}")


def _read_safetensors(path: Path) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    from safetensors import safe_open

    if not path.is_file():
        raise _fail(path, "no such file" if not path.exists() else "not a file")
    if path.stat().st_size == 0:
        raise _fail(path, "the file is empty (0 bytes)")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # safetensors raises SafetensorError, OSError, ...
        raise _fail(path, f"not a readable safetensors file ({exc})") from None
    return metadata, tensors


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
        raise _fail(path, f"missing tensor(s): {', '.join(missing[:5])}")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise _fail(path, f"unexpected tensor(s): {', '.join(unexpected[:5])}")
    out = {}
    for name, shape in expected.items():
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise _fail(path, f"tensor {name} has shape {tuple(t.shape)}, the config implies {shape}")
        if not t.is_floating_point():
            raise _fail(path, f"tensor {name} has dtype {t.dtype}, expected a float type")
        t = t.float()
        if not torch.isfinite(t).all():
            raise _fail(path, f"tensor {name} holds NaN or infinite values")
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


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and validate one of our ``.safetensors`` checkpoints.

    Raises
    ------
    CheckpointError
        For every kind of bad file (missing, empty, truncated, not safetensors, another format,
        wrong version, bad config or tokenizer, missing/unexpected/misshapen/non-finite tensors,
        tokenizer size different from the embedding rows), with the file name and the problem.
    """
    path = Path(path)
    metadata, tensors = _read_safetensors(path)
    fmt = metadata.get("format")
    if fmt != FORMAT_NAME:
        raise _fail(
            path,
            f"not a Transformer Explorer checkpoint (format {fmt!r}; expected {FORMAT_NAME!r})",
        )
    if metadata.get("format_version") != FORMAT_VERSION:
        raise _fail(
            path,
            f"format version {metadata.get('format_version')!r} is not supported (expected {FORMAT_VERSION})",
        )
    try:
        config = GPTConfig.from_dict(json.loads(metadata.get("config", "")))
    except (ValueError, TypeError) as exc:
        raise _fail(path, f"bad config: {exc}") from None
    tokenizer = None
    padding = metadata.get("vocab_padding", "0")
    if not padding.isdigit():
        raise _fail(path, f"bad vocab_padding {padding!r} (expected a count of rows)")
    padding = int(padding)
    if "tokenizer" in metadata:
        try:
            tokenizer = Tokenizer.from_json(metadata["tokenizer"])
        except ValueError as exc:
            raise _fail(path, f"bad tokenizer: {exc}") from None
        if tokenizer.vocab_size + padding != config.vocab_size:
            raise _fail(
                path,
                f"the tokenizer has {tokenizer.vocab_size} words"
                + (f" (+{padding} padding rows)" if padding else "")
                + f" but the embedding table has {config.vocab_size} rows",
            )
    try:
        training = json.loads(metadata.get("training", "{}"))
    except ValueError:
        training = {}
    if not isinstance(training, dict):  # a JSON list, string or null: not facts we can show
        training = {}
    model = build_model(path, config, tensors)
    return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=training,
                      vocab_padding=padding if tokenizer is not None else 0)


def save_as(checkpoint: Checkpoint, path: str | os.PathLike) -> None:
    """Write any opened checkpoint (our own or a foreign format) as our ``.safetensors``.

    The tokenizer, the training facts and any vocabulary padding go with it, and the foreign
    format and file it came from are recorded in the training facts (``imported_from``), so
    that the result opens directly with :func:`load_checkpoint`.

    Raises
    ------
    OSError
        When the file cannot be written (nothing is left half-written).
    """
    training = dict(checkpoint.training)
    if checkpoint.source_format != FORMAT_NAME and checkpoint.path is not None:
        training.setdefault(
            "imported_from", {"format": checkpoint.source_format, "file": checkpoint.path.name}
        )
    save_checkpoint(path, checkpoint.model, checkpoint.tokenizer, training=training,
                    vocab_padding=checkpoint.vocab_padding)


def load_any(
    path: str | os.PathLike,
    n_heads: int | None = None,
    *,
    vocab_path: str | os.PathLike | None = None,
    allow_no_tokenizer: bool = False,
) -> Checkpoint:
    """Open any checkpoint format the app knows, recognised from the file's contents.

    Our ``.safetensors``; nanoGPT's ``ckpt.pt`` (or a bare nanoGPT state dict); the
    LLMs-from-scratch ``model.pth`` / ``model_and_optimizer.pth``. Foreign files are read with
    ``torch.load(weights_only=True)`` only (see :mod:`model.interop`).

    Parameters
    ----------
    path : path-like
    n_heads : int, optional
        Heads per block, for files that cannot tell (LLMs-from-scratch state dicts without a
        sidecar JSON, bare nanoGPT state dicts). Ignored where the file says.
    vocab_path : path-like, optional
        The vocabulary, where it is not found beside the checkpoint: a nanoGPT ``meta.pkl``, a
        word-vocabulary JSON with an ``itos`` list, a ``tokenizer.json``, or a folder holding
        GPT-2's ``encoder.json`` and ``vocab.bpe`` (plain or as tiktoken caches them).
    allow_no_tokenizer : bool
        True returns the model with ``tokenizer=None`` when no vocabulary is found (tokens are
        then named by id) instead of raising :class:`NeedsInput`.

    Returns
    -------
    Checkpoint
        ``source_format`` says which format the file was read as.

    Raises
    ------
    NeedsInput
        When the user must supply ``n_heads`` or a vocabulary (see its ``kind``).
    CheckpointError
        When no known format fits (naming the formats tried and the first keys found), the
        file is bad, asks to run code, holds a whole pickled model, or its vocabulary size
        differs from the embedding rows.
    """
    from model.interop import open_foreign, sniff

    path = Path(path)
    kind = sniff(path)
    if kind == "safetensors":
        try:
            return load_checkpoint(path)
        except CheckpointError as exc:
            if "not a Transformer Explorer checkpoint" not in str(exc):
                raise
    return open_foreign(path, kind, n_heads=n_heads, vocab_path=vocab_path,
                        allow_no_tokenizer=allow_no_tokenizer)
