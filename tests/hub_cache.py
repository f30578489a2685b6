"""A Hugging Face Hub cache laid out from the fixtures exactly as ``huggingface_hub`` lays out its own.

``<cache>/models--owner--name/`` holds ``blobs/<etag>`` (a file's contents, named by its git blob
sha1, or by its sha256 for a file stored with Git LFS, as the Hub's ETag headers name them),
``snapshots/<commit>/<file>`` (relative symlinks into ``blobs/``, only for the files that were
fetched), ``refs/<revision>`` (the commit hash, no newline) and ``trees/<commit>.json`` (the
repository's whole file listing, which huggingface_hub 2.x keeps so that an offline
``snapshot_download`` can tell a complete snapshot from a partial one). See huggingface_hub's
``file_download.py`` (``_create_symlink``, ``_cache_commit_hash_for_specific_revision``) and
``_tree_cache.py``. The tests check the result with the library's own ``scan_cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

LFS_SUFFIXES = (".safetensors", ".bin", ".npz", ".h5", ".msgpack")  # the Hub's default .gitattributes


def git_blob_id(data: bytes) -> str:
    """Git's object id of a file: sha1 of ``blob <size>\\0`` and the contents."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_entry(name: str, data: bytes) -> tuple[str, dict]:
    """(etag, the tree cache's entry) of one file of the repository."""
    if not name.endswith(LFS_SUFFIXES):
        return git_blob_id(data), {"size": len(data), "blob_id": git_blob_id(data)}
    sha256 = hashlib.sha256(data).hexdigest()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()
    return sha256, {"size": len(data), "blob_id": git_blob_id(pointer), "lfs_sha256": sha256, "lfs_size": len(data)}


def add_repo(cache: Path, repo_id: str, files: dict[str, bytes], fetched: set[str] | None = None,
             revision: str = "main") -> Path:
    """Lay out one model repository in the cache, as after a download of the files in ``fetched``.

    Parameters
    ----------
    cache : Path            the hub cache (``HF_HUB_CACHE``).
    repo_id : str           ``owner/name``.
    files : dict            every file of the repository on the Hub: name -> contents.
    fetched : set of str    the files that were downloaded (default: all).
    revision : str          the branch whose ref points at the commit.

    Returns
    -------
    Path
        The snapshot folder ``models--owner--name/snapshots/<commit>``.
    """
    storage = cache / ("models--" + repo_id.replace("/", "--"))
    listing = json.dumps({name: git_blob_id(data) for name, data in sorted(files.items())}).encode()
    commit = git_blob_id(repo_id.encode() + listing)  # any 40-hex id; this one is stable per contents
    snapshot = storage / "snapshots" / commit
    entries = {}
    for name, data in files.items():
        etag, entries[name] = tree_entry(name, data)
        if fetched is not None and name not in fetched:
            continue
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(os.path.relpath(blob, link.parent), link)
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / revision).write_text(commit)
    (storage / "trees").mkdir(exist_ok=True)
    tree = {"format_version": 1, "files": {name: entries[name] for name in sorted(entries)}}
    (storage / "trees" / f"{commit}.json").write_text(json.dumps(tree, indent=1), encoding="utf-8")
    return snapshot


def fixture_files(folder: Path, leave_out: tuple[str, ...] = ("reference.npz",)) -> dict[str, bytes]:
    """A fixture folder's files as a repository holds them (with a README and .gitattributes)."""
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name not in leave_out}
    files[".gitattributes"] = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES).encode()
    return files


ARCH = Path(__file__).parent / "fixtures" / "arch"
#: What a download of the config, tokenizer and weights leaves in the cache, per fixture repository
#: (written out here, not derived from the patterns in model/formats/hub.py, so that a pattern that
#: asks for more makes the offline snapshot_download refuse the snapshot as incomplete).
GPT2_FETCHED = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                "merges.txt"}
NEO_FETCHED = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
LLAMA_FETCHED = NEO_FETCHED
LLAMA_BIN_FETCHED = {"config.json", "pytorch_model.bin", "tokenizer.json", "tokenizer_config.json"}
#: Repository id -> fixture folder.
REPOS = {"fixtures/hf-gpt2": "hf-gpt2", "fixtures/hf-gpt-neo": "hf-gpt-neo", "fixtures/hf-llama": "hf-llama",
         "fixtures/hf-llama-bin": "hf-llama"}


def _pytorch_bin(safetensors_file: Path) -> bytes:
    """The weights of a safetensors file as ``torch.save`` writes ``pytorch_model.bin``."""
    import io

    import torch
    from safetensors.torch import load_file

    buffer = io.BytesIO()
    torch.save(load_file(safetensors_file), buffer)
    return buffer.getvalue()


def add_fixture_repos(cache: Path) -> Path:
    """Lay out :data:`REPOS` in the cache (idempotent); returns the cache.

    ``fixtures/hf-gpt2`` also lists files a download must leave alone (a ``pytorch_model.bin`` beside
    its safetensors, Flax and ONNX weights); ``fixtures/hf-llama`` has a tag ``v1`` too;
    ``fixtures/hf-llama-bin`` has only ``pytorch_model.bin`` weights.
    """
    gpt2 = fixture_files(ARCH / "hf-gpt2")
    gpt2.update({"pytorch_model.bin": b"not fetched: the repository has safetensors",
                 "flax_model.msgpack": b"not fetched", "onnx/model.onnx": b"not fetched"})
    add_repo(cache, "fixtures/hf-gpt2", gpt2, GPT2_FETCHED)
    add_repo(cache, "fixtures/hf-gpt-neo", fixture_files(ARCH / "hf-gpt-neo"), NEO_FETCHED)
    llama = fixture_files(ARCH / "hf-llama")
    add_repo(cache, "fixtures/hf-llama", llama, LLAMA_FETCHED)
    add_repo(cache, "fixtures/hf-llama", llama, LLAMA_FETCHED, revision="v1")
    llama_bin = {name: data for name, data in llama.items() if name != "model.safetensors"}
    llama_bin["pytorch_model.bin"] = _pytorch_bin(ARCH / "hf-llama" / "model.safetensors")
    add_repo(cache, "fixtures/hf-llama-bin", llama_bin, LLAMA_BIN_FETCHED)
    return cache
