"""Opening and saving checkpoints: one dispatcher over every format the app reads.

Each format is a reader module under :mod:`model.formats` with a ``DESCRIPTION`` and a
``read(source, options)`` that returns a :class:`Checkpoint` or raises
:class:`~model.formats.base.NotThisFormat`. :func:`load_any` tries them in :data:`READERS` order on
what the file's contents say (never its extension). To add a format, write its reader module and
add it to :data:`READERS`.
"""

from __future__ import annotations

import os
from pathlib import Path

from model.formats import hf, hub, native
from model.formats.gguf import reader as gguf
from model.formats.llama2c import reader as llama2c
from model.formats.pickled import nanogpt
from model.formats.pickled import raschka
from model.formats.base import (
    Checkpoint, CheckpointError, NeedsInput, NotThisFormat, OpenOptions, Source, atomic_write,
    build_model, validate_state_dict,
)
from model.formats.errors import ReaderFailure
from model.formats.native import FORMAT_NAME, FORMAT_VERSION, save_checkpoint
from model.core.plain import clip, readable, shown_name

#: The readers :func:`load_any` tries, in order: our own format first, then GGUF (its magic says
#: it); a Hugging Face folder (or
#: one of its weight files) before nanoGPT, whose names GPT-2's resemble; llama2.c before the
#: torch-file readers: its model.bin has no magic, and one whose first bytes look like a pickle
#: would otherwise be handed to torch.load.
READERS = (native, gguf, hf, llama2c, nanogpt, raschka)

MESSAGE_MAX_CHARS = 2000  # a loader's message is shown whole in a dialog or on one line of stderr

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "READERS", "Checkpoint", "CheckpointError", "NeedsInput",
    "NotThisFormat", "ReaderFailure", "atomic_write", "build_model", "load_any", "load_checkpoint", "load_snapshot",
    "save_as",
    "save_checkpoint", "validate_state_dict",
]


def formats_tried() -> str:
    """The readers' descriptions, for "not a format this app opens" messages."""
    return "; ".join(reader.DESCRIPTION for reader in READERS)


def load_any(
    path: str | os.PathLike,
    n_heads: int | None = None,
    *,
    vocab_path: str | os.PathLike | None = None,
    allow_no_tokenizer: bool = False,
) -> Checkpoint:
    """Open any checkpoint format the app knows, recognised from the file's contents.

    Our ``.safetensors``; a GGUF file (llama.cpp's format, architectures llama and qwen2; see
    :mod:`model.formats.gguf`); a Hugging Face model folder (gpt2, gpt_neo, llama, mistral; see
    :mod:`model.formats.hf`); nanoGPT's ``ckpt.pt`` (or a bare nanoGPT state dict); the
    LLMs-from-scratch ``model.pth`` / ``model_and_optimizer.pth``; llama2.c's ``model.bin``
    (versions 0 and 1) and ``ckpt.pt``. Foreign files are read with
    ``torch.load(weights_only=True)`` only (see :mod:`model.formats.pickled.safe_pickle`). A string
    ``hf:REPO_ID[@REVISION]`` is a model on the Hugging Face Hub, fetched into the library's cache
    (:func:`model.formats.hub.fetch`, offline from the cache with ``HF_HUB_OFFLINE=1``) and opened
    as :func:`load_snapshot` does.

    Parameters
    ----------
    path : path-like or str
        A file, or a folder (a Hugging Face model folder, whose ``config.json`` or one of its
        weight files stands for it too; a llama2.c ``out/`` folder), or ``hf:REPO_ID[@REVISION]``.
    n_heads : int, optional
        Heads per block, for files that cannot tell (LLMs-from-scratch state dicts without a
        sidecar JSON, bare nanoGPT state dicts). Ignored where the file says.
    vocab_path : path-like, optional
        The vocabulary, where it is not found beside the checkpoint: a nanoGPT ``meta.pkl``, a
        word-vocabulary JSON with an ``itos`` list, a ``tokenizer.json``, a llama2.c
        ``tokenizer.bin``, or a folder holding
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
        When no known format fits (naming the formats tried and what the file holds), the
        file is bad, asks to run code, holds a whole pickled model, or its vocabulary size
        differs from the embedding rows; :class:`model.formats.hub.HubError` when a Hub model
        cannot be fetched (not cached and the Hub unreachable, no such repository, ...). Every
        exception a reader raises ends as one: one that no check foresaw as a
        :class:`ReaderFailure` naming the file and the exception (kept as ``__cause__``).
        Messages are at most :data:`MESSAGE_MAX_CHARS` characters, with bytes of a file name
        that are not UTF-8 shown as U+FFFD.
    """
    if hub.is_hub_spec(path):
        ref = hub.parse_hub_spec(path)
        return load_snapshot(ref, hub.fetch(ref), n_heads, vocab_path=vocab_path,
                             allow_no_tokenizer=allow_no_tokenizer)
    options = OpenOptions(n_heads=n_heads, vocab_path=Path(vocab_path) if vocab_path is not None else None,
                          allow_no_tokenizer=allow_no_tokenizer)
    return _guarded(path, lambda: _dispatch(Source(path), options))


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and validate one of our own ``.safetensors`` checkpoints (no other format).

    Raises
    ------
    CheckpointError
        For every kind of bad file :func:`model.formats.native.load_checkpoint` lists, with the
        file name and the problem; as :func:`load_any`, what no check foresaw as a
        :class:`ReaderFailure`.
    """
    return _guarded(path, lambda: native.load_checkpoint(path))


def _guarded(path: str | os.PathLike, read) -> Checkpoint:
    """``read()``, every exception it raises ending as one CheckpointError naming the file."""
    try:
        return read()
    except CheckpointError as exc:  # NeedsInput too: the same exception, its message made printable
        exc.args = (_printable(str(exc)),)
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: a bad file must never escape as a traceback
        raise ReaderFailure(_printable(f"{shown_name(path)}: cannot be read ({type(exc).__name__}: "
                                       f"{clip(str(exc)) or 'no message'})")) from exc


def _dispatch(source: Source, options: OpenOptions) -> Checkpoint:
    """The first reader's result whose format the file is (see :data:`READERS`)."""
    detail = ""
    for reader in READERS:
        try:
            return reader.read(source, options)
        except NotThisFormat as exc:
            detail = str(exc)
    raise CheckpointError(
        f"{source.path.name}: not a checkpoint format this app opens; tried: {formats_tried()}. {detail}"
    )


def _printable(message: str) -> str:
    """A message cut to :data:`MESSAGE_MAX_CHARS`, with lone surrogates (non-UTF-8 file names) as U+FFFD."""
    message = readable(message)
    return message if len(message) <= MESSAGE_MAX_CHARS else message[:MESSAGE_MAX_CHARS - 1] + "…"


def load_snapshot(
    ref: hub.HubRef,
    folder: str | os.PathLike,
    n_heads: int | None = None,
    *,
    vocab_path: str | os.PathLike | None = None,
    allow_no_tokenizer: bool = False,
) -> Checkpoint:
    """Open the snapshot folder fetched for a Hub model (:func:`model.formats.hub.fetch`), named after it.

    As :func:`load_any` on the folder; the checkpoint's ``origin`` is ``ref.spec`` and its name the
    repository's (:func:`model.formats.hub.labelled`), and messages name the repository, not the
    commit hash that names the folder.

    Raises
    ------
    NeedsInput, CheckpointError
        As :func:`load_any`.
    """
    folder = Path(folder)
    try:
        checkpoint = load_any(folder, n_heads, vocab_path=vocab_path, allow_no_tokenizer=allow_no_tokenizer)
    except NeedsInput:
        raise
    except CheckpointError as exc:  # a ReaderFailure stays one, with its cause
        kind = ReaderFailure if isinstance(exc, ReaderFailure) else CheckpointError
        raise kind(hub.renamed(str(exc), folder, ref)) from exc.__cause__
    return hub.labelled(checkpoint, ref)


def save_as(checkpoint: Checkpoint, path: str | os.PathLike) -> None:
    """Write any opened checkpoint (our own or a foreign format) as our ``.safetensors``.

    The tokenizer, the training facts and any vocabulary padding go with it, and the foreign
    format and file it came from are recorded in the training facts (``imported_from``), so
    that the result opens directly with :func:`load_checkpoint`.

    Tensors that share memory (a foreign model's unembedding tied to its embedding's storage,
    views of one stacked matrix) are written each with its own copy.

    Raises
    ------
    OSError
        When the file cannot be written (nothing is left half-written).
    """
    training = dict(checkpoint.training)
    if checkpoint.source_format != FORMAT_NAME and checkpoint.path is not None:
        training.setdefault(
            "imported_from", {"format": checkpoint.source_format, "file": checkpoint.origin or shown_name(checkpoint.path)}
        )
    save_checkpoint(path, checkpoint.model, checkpoint.tokenizer, training=training,
                    vocab_padding=checkpoint.vocab_padding)
