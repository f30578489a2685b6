"""Opening and saving checkpoints: one dispatcher over every format the app reads.

Each format is a reader module under :mod:`model.formats` with a ``DESCRIPTION`` and an
``inspect(source, options)`` that reads the file once and returns an
:class:`~model.formats.opening.Opening` (its format, what only the user can supply, and the load),
or raises :class:`~model.formats.base.NotThisFormat`. :func:`inspect` tries them in :data:`READERS`
order on what the file's contents say (never its extension); :func:`load_any` is inspect-then-load
for callers with nobody to ask. To add a format, write its reader module and add it to
:data:`READERS`. What can be opened is a :data:`~model.formats.refs.Reference` (a path, a
:class:`~model.formats.refs.HubRef` or a :class:`~model.formats.refs.BuiltinRef`), read from text
once by :func:`~model.formats.refs.parse_reference`.
"""

from __future__ import annotations

import dataclasses
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
from model.formats.errors import ReaderFailure, WrongVocabulary
from model.formats.hub import CachedRevision, cached_revisions
from model.formats.native import FORMAT_NAME, FORMAT_VERSION, save_checkpoint
from model.formats.opening import Opening, Question
from model.formats.refs import BUILTIN_PREFIX, BuiltinRef, HubRef, Reference, as_reference, parse_builtin
from model.core.plain import clip, readable, shown_name

#: The readers :func:`inspect` tries, in order: our own format first, then GGUF (its magic says
#: it); a Hugging Face folder (or
#: one of its weight files) before nanoGPT, whose names GPT-2's resemble; llama2.c before the
#: torch-file readers: its model.bin has no magic, and one whose first bytes look like a pickle
#: would otherwise be handed to torch.load.
READERS = (native, gguf, hf, llama2c, nanogpt, raschka)

MESSAGE_MAX_CHARS = 2000  # a loader's message is shown whole in a dialog or on one line of stderr

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "READERS", "CachedRevision", "Checkpoint", "CheckpointError", "HubRef", "NeedsInput",
    "NotThisFormat", "OpenOptions", "Opening", "Question", "ReaderFailure", "Reference", "WrongVocabulary", "atomic_write",
    "build_model", "cached_revisions", "inspect", "inspect_snapshot", "load_any", "load_checkpoint", "read_header",
    "save_as", "save_checkpoint",
    "validate_state_dict",
]


def formats_tried() -> str:
    """The readers' descriptions, for "not a format this app opens" messages."""
    return "; ".join(reader.DESCRIPTION for reader in READERS)


def inspect(ref: Reference, given: OpenOptions | None = None) -> Opening:
    """Read and check a checkpoint of any known format: what it is and what it still needs.

    The file is read once; the questions left are those ``given`` does not answer (see
    :class:`~model.formats.opening.Opening`). A :class:`~model.formats.refs.HubRef` is fetched
    first (:func:`model.formats.hub.fetch`, offline from the cache with ``HF_HUB_OFFLINE=1``) and its
    snapshot folder inspected as :func:`inspect_snapshot` does. A :class:`~model.formats.refs.BuiltinRef`
    is its shipped file, and the loaded checkpoint's ``origin`` is the reference (so Reload and Open
    Recent open it by name, wherever the app is installed).

    Parameters
    ----------
    ref : Path, HubRef or BuiltinRef
        A file, or a folder (a Hugging Face model folder, whose ``config.json`` or one of its
        weight files stands for it too; a llama2.c ``out/`` folder), a Hub model or a shipped model.
    given : OpenOptions, optional
        What the caller knows already (see :func:`load_any`); it is not asked.

    Raises
    ------
    CheckpointError
        As :func:`load_any` (NeedsInput only from the load).
    """
    given = given or OpenOptions()
    if isinstance(ref, HubRef):
        return inspect_snapshot(ref, hub.fetch(ref), given)
    if isinstance(ref, BuiltinRef):
        return inspect(ref.path, given).wrapped(lambda load: dataclasses.replace(load(), origin=ref))
    opening = _guarded(ref, lambda: _dispatch(Source(ref), given))
    return opening.wrapped(lambda load: _guarded(ref, load),
                           lambda question: dataclasses.replace(question, message=_printable(question.message)))


def load_any(
    path: Reference | str | os.PathLike,
    n_heads: int | None = None,
    *,
    vocab_path: str | os.PathLike | None = None,
    allow_no_tokenizer: bool = False,
) -> Checkpoint:
    """Open any checkpoint format the app knows, recognised from the file's contents.

    Our ``.safetensors``; a GGUF file (llama.cpp's format, architectures llama, qwen2 and qwen3; see
    :mod:`model.formats.gguf`); a Hugging Face model folder (gpt2, gpt_neo, gpt_neox, llama,
    mistral, qwen2, qwen3, gemma2, gemma3_text, phi, olmo2, smollm3; see :mod:`model.formats.hf`); nanoGPT's ``ckpt.pt`` (or a bare nanoGPT state dict); the
    LLMs-from-scratch ``model.pth`` / ``model_and_optimizer.pth``; llama2.c's ``model.bin``
    (versions 0 and 1) and ``ckpt.pt``. Foreign files are read with
    ``torch.load(weights_only=True)`` only (see :mod:`model.formats.pickled.safe_pickle`). A
    :class:`~model.formats.refs.HubRef` (or the text ``hf:REPO_ID[@REVISION]``) is a model on the
    Hugging Face Hub, fetched into the library's cache (:func:`model.formats.hub.fetch`, offline
    from the cache with ``HF_HUB_OFFLINE=1``). It is :func:`inspect`, then the load.

    Parameters
    ----------
    path : Path, HubRef, BuiltinRef or str
        A file or folder (see :func:`inspect`), a Hub model, a shipped model, or text naming one
        (read by :func:`~model.formats.refs.parse_reference`: ``hf:REPO_ID``, ``builtin:NAME``).
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
    options = OpenOptions(n_heads=n_heads, vocab_path=Path(vocab_path) if vocab_path is not None else None,
                          allow_no_tokenizer=allow_no_tokenizer)
    return inspect(as_reference(path), options).load(options)


def load_checkpoint(path: str | os.PathLike | BuiltinRef, tokenizer=None) -> Checkpoint:
    """Read and validate one of our own ``.safetensors`` checkpoints (no other format); the text
    ``builtin:NAME`` (or a :class:`~model.formats.refs.BuiltinRef`) is a shipped one. ``tokenizer``,
    when given, stands for the one its header holds (the snapshots of one run share one object).

    Raises
    ------
    CheckpointError
        For every kind of bad file :func:`model.formats.native.load_checkpoint` lists, with the
        file name and the problem; as :func:`load_any`, what no check foresaw as a
        :class:`ReaderFailure`.
    """
    if isinstance(path, str) and path.strip().startswith(BUILTIN_PREFIX):
        path = parse_builtin(path)
    if isinstance(path, BuiltinRef):
        ref = path
        return dataclasses.replace(_guarded(ref.path, lambda: native.load_checkpoint(ref.path, tokenizer)), origin=ref)
    return _guarded(path, lambda: native.load_checkpoint(path, tokenizer))


def read_header(path: str | os.PathLike) -> native.Header:
    """The config, training facts and tokenizer text of one of our checkpoints, from its header alone
    (no weights read: :func:`model.formats.native.read_header`).

    Raises
    ------
    NotThisFormat
        For a file of another format (open it with :func:`load_any`).
    CheckpointError
        For a missing or bad file, as :func:`load_checkpoint`.
    """
    return _guarded(path, lambda: native.read_header(Source(path)))


def _guarded(path: str | os.PathLike, read):
    """``read()``, every exception it raises ending as one CheckpointError naming the file."""
    try:
        return read()
    except CheckpointError as exc:  # NeedsInput too: the same exception, its message made printable
        exc.args = (_printable(str(exc)),)
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: a bad file must never escape as a traceback
        raise ReaderFailure(_printable(f"{shown_name(path)}: cannot be read ({type(exc).__name__}: "
                                       f"{clip(str(exc)) or 'no message'})")) from exc


def _dispatch(source: Source, given: OpenOptions) -> Opening:
    """The first reader's opening whose format the file is (see :data:`READERS`)."""
    detail = ""
    for reader in READERS:
        try:
            return reader.inspect(source, given)
        except NotThisFormat as exc:
            detail = str(exc)
    raise CheckpointError(
        f"{source.path.name}: not a checkpoint format this app opens; tried: {formats_tried()}. {detail}"
    )


def _printable(message: str) -> str:
    """A message cut to :data:`MESSAGE_MAX_CHARS`, with lone surrogates (non-UTF-8 file names) as U+FFFD."""
    message = readable(message)
    return message if len(message) <= MESSAGE_MAX_CHARS else message[:MESSAGE_MAX_CHARS - 1] + "…"


def inspect_snapshot(ref: HubRef, folder: str | os.PathLike, given: OpenOptions | None = None) -> Opening:
    """Inspect the snapshot folder fetched for a Hub model (:func:`model.formats.hub.fetch`), named after it.

    As :func:`inspect` on the folder; the loaded checkpoint's ``origin`` is ``ref`` and its name the
    repository's (:func:`model.formats.hub.labelled`), and error messages name the repository, not
    the commit hash that names the folder.

    Raises
    ------
    CheckpointError
        As :func:`load_any`.
    """
    folder = Path(folder)
    opening = _renamed(ref, folder, lambda: inspect(folder, given))
    return opening.wrapped(lambda load: hub.labelled(_renamed(ref, folder, load), ref),
                           lambda q: dataclasses.replace(q, message=hub.renamed(q.message, folder, ref)))


def _renamed(ref: HubRef, folder: Path, read):
    """``read()``, a CheckpointError about ``folder`` renamed after ``ref`` (a question keeps its kind)."""
    try:
        return read()
    except NeedsInput as exc:
        exc.args = (hub.renamed(str(exc), folder, ref),)
        raise
    except CheckpointError as exc:  # of the same kind (a ReaderFailure, a WrongVocabulary), with its cause
        raise type(exc)(hub.renamed(str(exc), folder, ref)) from exc.__cause__


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
            "imported_from", {"format": checkpoint.source_format,
                              "file": checkpoint.origin.spec if checkpoint.origin else shown_name(checkpoint.path)}
        )
    save_checkpoint(path, checkpoint.model, checkpoint.tokenizer, training=training,
                    vocab_padding=checkpoint.vocab_padding)
