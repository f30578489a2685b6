"""Models on the Hugging Face Hub: ``hf:REPO_ID[@REVISION]`` fetched into the library's own cache.

:func:`fetch` asks ``huggingface_hub.snapshot_download`` for only the files a model folder needs
(the config, the tokenizer and the weights: safetensors, single or sharded; ``pytorch_model.bin``
only when the repository has no safetensors), into the library's cache (``HF_HUB_CACHE``, by
default ``~/.cache/huggingface/hub``), with its own progress bars and its own offline mode
(``HF_HUB_OFFLINE=1``: the cache only, no network). The result is a snapshot folder of that cache,
which the Hugging Face reader (:mod:`model.formats.hf`) opens as any model folder; :func:`labelled`
then names the model after its repository. Every failure becomes one :class:`HubError` that names
the repository, never a traceback.

``huggingface_hub`` is imported only when a model is fetched (importing it takes about 0.6 s).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from model.formats.base import Checkpoint
from model.formats.errors import HubError
from model.formats.refs import EXAMPLE, HUB_PREFIX, HUB_URL, HubRef, parse_hub_spec

__all__ = ["EXAMPLE", "HUB_PREFIX", "HUB_URL", "FetchCancelled", "HubError", "HubRef", "ProgressCallback",
           "describe_failure", "fetch", "labelled", "parse_hub_spec", "renamed"]

#: Files fetched for every model: its config and its tokenizer (as :mod:`model.formats.hf.tokenizer` reads it).
CONFIG_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt")
#: The weights, safetensors first: one file, or an index and its shards (transformers' shard names).
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors")
#: Fetched only when the repository has no safetensors weights (read with torch.load(weights_only=True)).
TORCH_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*-of-*.bin")

#: ``on_progress(what, done, total, unit)``: one of the library's progress bars moved (``what`` its
#: description, ``total`` None while unknown, ``unit`` ``"B"`` for bytes). It may raise
#: :class:`FetchCancelled` to stop the download; it is called from the library's worker threads.
ProgressCallback = Callable[[str, float, "float | None", str], None]


class FetchCancelled(Exception):
    """Raised by a progress callback to stop a download (what was fetched stays in the cache)."""


def fetch(ref: HubRef, *, on_progress: ProgressCallback | None = None) -> Path:
    """The local snapshot folder of a Hub model, fetched (or found in the cache) with ``huggingface_hub``.

    Only :data:`CONFIG_FILES`, :data:`TOKENIZER_FILES` and :data:`SAFETENSORS_FILES` are fetched;
    :data:`TORCH_FILES` only when the snapshot then holds no safetensors weights. The cache, the
    network and ``HF_HUB_OFFLINE`` are the library's (a cached model opens offline).

    Parameters
    ----------
    ref : HubRef
    on_progress : ProgressCallback, optional
        Receives the library's progress instead of its bars on stderr (see :data:`ProgressCallback`).

    Returns
    -------
    Path
        ``<cache>/models--owner--name/snapshots/<commit hash>``.

    Raises
    ------
    HubError
        One message naming the repository: not in the cache and the Hub cannot be reached (offline
        or no network), no such repository (or private), gated, no such revision, an incomplete
        cached copy, no config.json or no weights this app reads, the cache not writable, ...
    FetchCancelled
        When ``on_progress`` raised it.
    """
    from huggingface_hub import snapshot_download

    tqdm_class = _progress_relay(on_progress) if on_progress is not None else None

    def download(*groups: tuple[str, ...]) -> Path:
        patterns = [pattern for group in groups for pattern in group]
        return Path(snapshot_download(ref.repo_id, revision=ref.revision, allow_patterns=patterns,
                                      tqdm_class=tqdm_class))

    try:
        folder = download(CONFIG_FILES, TOKENIZER_FILES, SAFETENSORS_FILES)
        if not _holds(folder, SAFETENSORS_FILES):
            folder = download(CONFIG_FILES, TOKENIZER_FILES, TORCH_FILES)
    except FetchCancelled:
        raise
    except Exception as exc:  # the library raises many kinds; each becomes one message
        raise HubError(describe_failure(exc, ref)) from None
    if not (folder / "config.json").is_file():
        raise HubError(f"{ref.name}: the repository has no config.json: not a transformers model this app opens")
    if not _holds(folder, SAFETENSORS_FILES + TORCH_FILES):
        raise HubError(f"{ref.name}: the repository has no weights this app reads "
                       f"({', '.join(SAFETENSORS_FILES + TORCH_FILES)})")
    return folder


def _holds(folder: Path, patterns: tuple[str, ...]) -> bool:
    """Whether the folder has a file matching one of the patterns."""
    return any(any(folder.glob(pattern)) for pattern in patterns)


def describe_failure(exc: Exception, ref: HubRef) -> str:
    """One line for a failure of ``snapshot_download``, naming the repository and what to do."""
    from huggingface_hub import constants, errors

    name = ref.name
    if isinstance(exc, errors.GatedRepoError):
        return (f"{name}: a gated repository: accept its conditions at {HUB_URL}{ref.repo_id} and log in "
                "(hf auth login), then open it again")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return f"{name}: no such repository on the Hugging Face Hub (or it is private: log in with hf auth login)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return f"{name}: the repository has no revision {ref.revision!r}"
    if isinstance(exc, errors.LocalEntryNotFoundError):
        why = ("offline mode is on: HF_HUB_OFFLINE=1" if constants.HF_HUB_OFFLINE
               else "no network, or the Hub is down")
        if isinstance(exc, getattr(errors, "IncompleteSnapshotError", ())):
            return f"{name}: the local cache holds only part of this model and the Hub cannot be reached ({why})"
        return f"{name}: not in the local cache and the Hub cannot be reached ({why})"
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        return f"{name}: the Hub answered HTTP {status}: {_first_line(exc)}"
    if isinstance(exc, OSError):
        return f"{name}: could not fetch it into the Hugging Face cache: {exc.strerror or _first_line(exc)}"
    return f"{name}: fetching it from the Hugging Face Hub failed ({type(exc).__name__}: {_first_line(exc)})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Discard:
    """A file that forgets what is written: the relay's bars are shown by its callback, not printed."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _progress_relay(on_progress: ProgressCallback) -> type:
    """A ``tqdm`` class for ``snapshot_download(tqdm_class=...)`` that hands every update to ``on_progress``."""
    from tqdm.auto import tqdm

    class Relay(tqdm):
        def __init__(self, *args, **kwargs) -> None:
            kwargs.pop("name", None)  # huggingface_hub's own bars take a name; tqdm does not
            kwargs.update(disable=False, file=_Discard())
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            on_progress(str(self.desc or ""), float(self.n), None if not self.total else float(self.total),
                        str(self.unit))
            return shown

    return Relay


def labelled(checkpoint: Checkpoint, ref: HubRef) -> Checkpoint:
    """The checkpoint of a snapshot folder fetched for ``ref``, named after the repository.

    ``origin`` becomes ``ref`` (so Reload and Open Recent fetch it again by name, and its
    name is the repository's, not the commit hash of its folder); the training facts say which
    repository, revision and commit it is.
    """
    training = {key: value for key, value in checkpoint.training.items() if key != "folder"}  # the commit hash
    training.update(source="Hugging Face Hub", repo=ref.repo_id, revision=ref.revision or "main",
                    commit=checkpoint.path.name if checkpoint.path is not None else None)
    return replace(checkpoint, origin=ref, training=training)


def renamed(message: str, folder: Path, ref: HubRef) -> str:
    """A reader's message about a snapshot folder, naming the repository instead of the commit hash."""
    prefix = f"{folder.name}:"
    return ref.name + message[len(folder.name):] if message.startswith(prefix) else f"{ref.name}: {message}"
