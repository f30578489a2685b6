"""Models on the Hugging Face Hub: ``hf:REPO_ID[@REVISION]`` fetched into the library's own cache.

:func:`fetch` asks ``huggingface_hub.snapshot_download`` for only the files a model folder needs
(the config, the tokenizer and the weights: safetensors, single or sharded; ``pytorch_model.bin``
only when the repository has no safetensors), into the library's cache (``HF_HUB_CACHE``, by
default ``~/.cache/huggingface/hub``), with its own progress bars and its own offline mode
(``HF_HUB_OFFLINE=1``: the cache only, no network). The result is a snapshot folder of that cache,
which the Hugging Face reader (:mod:`model.formats.hf`) opens as any model folder; :func:`labelled`
then names the model after its repository. Every failure becomes one :class:`HubError` that names
the repository, never a traceback.

:func:`cached_revisions` lists the revisions of a repository already in the local cache (no
network): a training suite's checkpoints, such as EleutherAI's Pythia revisions ``step0`` ..
``step143000``, for the Training panel.

``huggingface_hub`` is imported only when a model is fetched (importing it takes about 0.6 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable

from model.core.plain import clip
from model.formats.base import LINK_NOWHERE, Checkpoint, dangling
from model.formats.errors import HubError
from model.formats.refs import EXAMPLE, HUB_PREFIX, HUB_URL, HubRef, parse_hub_spec

__all__ = ["EXAMPLE", "HUB_PREFIX", "HUB_URL", "CachedRevision", "FetchCancelled", "HubError", "HubRef",
           "ProgressCallback", "cached_revisions", "describe_failure", "fetch", "labelled", "parse_hub_spec", "renamed",
           "revision_step"]

COMMIT = re.compile(r"[0-9a-f]{40}")  # a revision that is a commit hash (the library's REGEX_COMMIT_HASH)
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
        cached copy, a file of the snapshot that is a link to nothing (not downloaded), a cache whose
        refs/ do not say which snapshot the revision is, no config.json or no weights this app
        reads, the cache not writable, ... A ``refs/`` file that ends in a newline (a hand-copied
        cache, which the library reads without stripping) is read here, and its snapshot opened.
    FetchCancelled
        When ``on_progress`` raised it.
    """
    from huggingface_hub import errors, snapshot_download

    name = ref.name
    tqdm_class = _progress_relay(on_progress) if on_progress is not None else None
    revision = ref.revision

    def download(*groups: tuple[str, ...]) -> Path:
        patterns = [pattern for group in groups for pattern in group]
        return Path(snapshot_download(ref.repo_id, revision=revision, allow_patterns=patterns, tqdm_class=tqdm_class))

    try:
        try:
            folder = download(CONFIG_FILES, TOKENIZER_FILES, SAFETENSORS_FILES)
        except errors.LocalEntryNotFoundError as exc:  # offline: the cache's refs, read as the library does not
            revision, why = cached_commit(ref, exc)
            if why:
                raise HubError(why) from None
            if revision is None:
                raise
            folder = download(CONFIG_FILES, TOKENIZER_FILES, SAFETENSORS_FILES)
        if not _holds(folder, SAFETENSORS_FILES):
            folder = download(CONFIG_FILES, TOKENIZER_FILES, TORCH_FILES)
    except (FetchCancelled, HubError):
        raise
    except Exception as exc:  # the library raises many kinds; each becomes one message
        raise HubError(describe_failure(exc, ref)) from None
    _check_downloaded(folder, name)
    if not (folder / "config.json").is_file():
        raise HubError(f"{name}: the repository has no config.json: not a transformers model this app opens")
    if not _holds(folder, SAFETENSORS_FILES + TORCH_FILES):
        raise HubError(f"{name}: the repository has no weights this app reads "
                       f"({', '.join(SAFETENSORS_FILES + TORCH_FILES)})")
    return folder


#: A revision named after a training step: EleutherAI's ``step1000``, OLMo's ``stage1-step1000-tokens4B``.
STEP_REVISION = re.compile(r"(?:^|[-_/])step[-_]?(\d{1,12})(?=$|[-_])")
COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class CachedRevision:
    """One revision of a repository in the local Hub cache.

    Attributes
    ----------
    name : str          the ref: a branch or tag (``step1000``, ``main``, ``v1``).
    commit : str        the commit hash it points at.
    folder : Path       ``<cache>/models--owner--name/snapshots/<commit>``, holding a config.json.
    step : int or None  the training step its name says (:func:`revision_step`), else None.
    """

    name: str
    commit: str
    folder: Path
    step: int | None


def revision_step(name: str | None) -> int | None:
    """The training step a revision's name says (``step143000`` -> 143000), or None."""
    match = STEP_REVISION.search(name or "")
    return int(match.group(1)) if match else None


def cached_revisions(repo_id: str) -> list[CachedRevision]:
    """The revisions of a model repository already in the local Hub cache (``HF_HUB_CACHE``), by
    name: every ref whose snapshot folder is there with a ``config.json`` (a ref whose files were
    never fetched, or whose links are broken, is left out). Nothing goes to the network.

    The cache is laid out by huggingface_hub: ``models--owner--name/refs/<revision>`` holds the
    commit hash, ``snapshots/<commit>/`` the fetched files.
    """
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    storage = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    refs = storage / "refs"
    out = []
    try:
        paths = sorted(p for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    except OSError:
        return []
    for path in paths:
        try:
            commit = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeError):
            continue
        folder = storage / "snapshots" / commit
        if COMMIT.fullmatch(commit) and (folder / "config.json").is_file():
            name = path.relative_to(refs).as_posix()
            out.append(CachedRevision(name, commit, folder, revision_step(name)))
    return out


def _holds(folder: Path, patterns: tuple[str, ...]) -> bool:
    """Whether the folder has a file matching one of the patterns."""
    return any(any(folder.glob(pattern)) for pattern in patterns)


def _not_downloaded(folder: Path) -> str:
    """The files of a snapshot this app reads that are links to blobs not in the cache, joined ("" if none)."""
    patterns = CONFIG_FILES + TOKENIZER_FILES + SAFETENSORS_FILES + TORCH_FILES
    try:
        return ", ".join(sorted(p.name for p in folder.iterdir()
                                if any(fnmatch(p.name, pat) for pat in patterns) and dangling(p)))
    except OSError:
        return ""


def _check_downloaded(folder: Path, name: str) -> None:
    """Refuse a snapshot whose files this app reads are links to blobs that are not in the cache (an
    interrupted or filtered download, a cache copied without its blobs; cf. huggingface_hub#1222,
    #4469), naming them: read without them, the folder would say "no weights" or "no tokenizer"."""
    broken = _not_downloaded(folder)
    if broken:
        raise HubError(f"{name}: {broken} {'are' if ', ' in broken else 'is'} in the Hugging Face cache only as a link "
                       f"to a file that is not there ({LINK_NOWHERE}): not downloaded, by a download that was "
                       "interrupted or left it out; open the model again with the network on to fetch it")


def cached_commit(ref: HubRef, exc: Exception) -> tuple[str | None, str | None]:
    """What the cache holds for ``ref`` when ``snapshot_download`` offline did not find it: (the commit
    to open, None) when the library only misread the ref (a ``refs/main`` ending in a newline, as a
    hand-copied cache has it: cf. huggingface_hub#4492), else (None, why) for a cache without
    ``refs/`` or whose ref names a snapshot that is not there while others are (never opened silently:
    a stale snapshot is not the revision asked for), or (None, None) when there is nothing to add.
    """
    from huggingface_hub import constants, errors
    from huggingface_hub.file_download import repo_folder_name

    if isinstance(exc, getattr(errors, "IncompleteSnapshotError", ())):
        return None, None
    storage = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=ref.repo_id, repo_type="model")
    revision = ref.revision or "main"
    try:
        snapshots = sorted(p.name for p in (storage / "snapshots").iterdir() if p.is_dir())
        ref_file = storage / "refs" / revision
        written = ref_file.read_text(encoding="utf-8") if ref_file.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None, None
    if not snapshots or COMMIT.fullmatch(revision):
        return None, None
    commit = written.strip() if written is not None else None
    if commit is not None and commit != written and commit in snapshots:
        return commit, None
    held = ", ".join(f"{HUB_PREFIX}{ref.repo_id}@{c}" for c in snapshots[:3]) + (" …" if len(snapshots) > 3 else "")
    if written is None and not (storage / "refs").is_dir():  # (a refs/ without this revision: not fetched)
        return None, (f"{ref.name}: the local cache has no refs/ folder, so which snapshot is {revision!r} is not "
                      f"known, and the Hub cannot be reached; it holds {held}: open one by its commit")
    if written is None:
        return None, None
    if commit not in snapshots:
        return None, (f"{ref.name}: the local cache's refs/{revision} names commit {clip(commit, 48)}, which is not in "
                      f"the cache, and the Hub cannot be reached; it holds {held} (another revision): open one by "
                      f"its commit, or go online to fetch {revision}")
    return None, None


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
            broken = _not_downloaded(Path(getattr(exc, "snapshot_path", None) or "."))
            which = f" ({broken}: {LINK_NOWHERE}, not downloaded)" if broken else ""
            return f"{name}: the local cache holds only part of this model{which} and the Hub cannot be reached ({why})"
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
    repository, revision and commit it is, and the training step a revision named after one says
    (``step1000``: ``steps`` 1000).
    """
    training = {key: value for key, value in checkpoint.training.items() if key != "folder"}  # the commit hash
    training.update(source="Hugging Face Hub", repo=ref.repo_id, revision=ref.revision or "main",
                    commit=checkpoint.path.name if checkpoint.path is not None else None)
    step = revision_step(ref.revision)
    if step is not None and "steps" not in training:  # a training suite's revision (Pythia's step1000)
        training["steps"] = step
    return replace(checkpoint, origin=ref, training=training)


def renamed(message: str, folder: Path, ref: HubRef) -> str:
    """A reader's message about a snapshot folder, naming the repository instead of the commit hash."""
    prefix = f"{folder.name}:"
    return ref.name + message[len(folder.name):] if message.startswith(prefix) else f"{ref.name}: {message}"
