"""Models from the Hugging Face Hub (``hf:REPO_ID``): fetched by huggingface_hub from a cache that the
tests lay out as the library does (tests/hub_cache.py), in offline mode (conftest.py); the model API
and ``python -m model.trace``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
import torch

from hub_cache import ARCH, LLAMA_FETCHED as LLAMA, REPOS
from model.checkpoint import CheckpointError, NeedsInput, load_any, save_as
from model.formats import hub
from model.formats.hub import FetchCancelled, HubError, HubRef, parse_hub_spec
from model.formats.refs import as_reference, parse_reference
from model.trace import main as trace_main
from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_MISSING = ("fixtures/missing: not in the local cache and the Hub cannot be reached "
                   "(offline mode is on: HF_HUB_OFFLINE=1)")


def test_the_cache_is_the_tests_own_offline_one_laid_out_as_the_library_reads_it(hub_cache):
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE and Path(constants.HF_HUB_CACHE) == hub_cache
    info = huggingface_hub.scan_cache_dir(hub_cache)
    assert not info.warnings
    repos = {repo.repo_id: repo for repo in info.repos}
    assert set(repos) == set(REPOS)
    llama = next(iter(repos["fixtures/hf-llama"].revisions))
    assert llama.refs == frozenset({"main", "v1"})
    assert {f.file_name for f in llama.files} == {"config.json", "model.safetensors", "tokenizer.json",
                                                  "tokenizer_config.json"}
    config = huggingface_hub.try_to_load_from_cache("fixtures/hf-gpt-neo", "config.json")
    assert Path(config).read_bytes() == (ARCH / "hf-gpt-neo" / "config.json").read_bytes()
    assert Path(config).is_symlink() and Path(config).resolve().parent.name == "blobs"


@pytest.mark.parametrize("repo_id", sorted(REPOS))
def test_hf_repo_id_opens_the_same_model_as_its_folder_named_after_the_repository(hub_cache, repo_id):
    ckpt = load_any(f"hf:{repo_id}")
    folder = load_any(ARCH / REPOS[repo_id])
    assert ckpt.name == repo_id and ckpt.origin == HubRef(repo_id) and ckpt.origin.spec == f"hf:{repo_id}"
    assert ckpt.path.parent == hub_cache / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    assert ckpt.source_format == folder.source_format and ckpt.config == folder.config
    ids = folder.tokenizer.encode("Once upon a time there was a cat").ids
    assert ckpt.tokenizer.encode("Once upon a time there was a cat").ids == ids
    with torch.no_grad():
        assert torch.equal(ckpt.model(torch.tensor([ids])), folder.model(torch.tensor([ids])))
    assert ckpt.training["repo"] == repo_id and ckpt.training["commit"] == ckpt.path.name
    assert ckpt.training["weights"] == ("pytorch_model.bin" if repo_id.endswith("-bin") else "model.safetensors")


def test_a_revision_opens_that_ref_and_is_part_of_the_name(hub_cache):
    ckpt = load_any("hf:fixtures/hf-llama@v1")
    assert ckpt.name == "fixtures/hf-llama@v1" and ckpt.origin.spec == "hf:fixtures/hf-llama@v1"
    assert ckpt.training["revision"] == "v1" and ckpt.path == load_any("hf:fixtures/hf-llama").path


def test_save_as_records_the_repository_and_reopens_identically(hub_cache, tmp_path):
    ckpt = load_any("hf:fixtures/hf-gpt2")
    save_as(ckpt, tmp_path / "gpt2.safetensors")
    again = load_any(tmp_path / "gpt2.safetensors")
    assert again.training["imported_from"] == {"format": "hf-gpt2", "file": "hf:fixtures/hf-gpt2"}
    ids = [5, 17, 300]
    with torch.no_grad():
        assert torch.equal(again.model(torch.tensor([ids])), ckpt.model(torch.tensor([ids])))


def test_a_missing_repository_offline_is_one_clear_message(hub_cache):
    with pytest.raises(HubError) as caught:
        load_any("hf:fixtures/missing")
    assert str(caught.value) == OFFLINE_MISSING
    with pytest.raises(HubError, match=r"^fixtures/hf-llama@v2: not in the local cache and the Hub cannot be reached"):
        load_any("hf:fixtures/hf-llama@v2")


def test_a_partly_cached_model_offline_says_so(hub_cache):
    from hub_cache import add_repo, fixture_files

    add_repo(hub_cache, "fixtures/partial", fixture_files(ARCH / "hf-gpt-neo"), {"config.json", "tokenizer.json"})
    with pytest.raises(HubError, match=r"^fixtures/partial: the local cache holds only part of this model and the "
                                       r"Hub cannot be reached \(offline mode is on: HF_HUB_OFFLINE=1\)$"):
        load_any("hf:fixtures/partial")


@pytest.fixture
def no_library_call(monkeypatch):
    """huggingface_hub.snapshot_download replaced by one that records its calls."""
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: calls.append((a, k)))
    return calls


@pytest.mark.parametrize("spec, message", [
    ("hf:", "give a Hugging Face repository id"),
    ("hf:  ", "give a Hugging Face repository id"),
    ("hf:owner/na me", "'owner/na me' is not a Hugging Face repository id"),
    ("hf:owner--x/name", "is not a Hugging Face repository id"),
    ("hf:a/b/c", "'a/b/c' is not a Hugging Face repository id"),
    ("hf:-owner/name", "is not a Hugging Face repository id"),
    ("hf:owner/" + "n" * 97, "is not a Hugging Face repository id"),
    ("hf:owner/name@", "owner/name: '' is not a revision"),
    ("hf:owner/name@../x", "owner/name: '../x' is not a revision"),
    ("hf:owner/name@a b", "owner/name: 'a b' is not a revision"),
])
def test_a_bad_repository_id_is_refused_before_the_library_is_called(spec, message, no_library_call):
    with pytest.raises(HubError, match=message.replace("(", r"\(")):
        load_any(spec)
    assert no_library_call == []


def test_the_forms_a_repository_is_given_in():
    assert parse_hub_spec("hf:roneneldan/TinyStories-1M") == HubRef("roneneldan/TinyStories-1M")
    assert parse_hub_spec(" roneneldan/TinyStories-1M@main ") == HubRef("roneneldan/TinyStories-1M", "main")
    assert parse_hub_spec("https://huggingface.co/roneneldan/TinyStories-1M/") == HubRef("roneneldan/TinyStories-1M")
    assert parse_hub_spec("hf:gpt2@refs/pr/7").spec == "hf:gpt2@refs/pr/7"
    assert parse_reference(" hf:x/y") == HubRef("x/y") and parse_reference("x/y") == Path("x/y")
    assert as_reference(Path("hf:x/y")) == Path("hf:x/y")  # a path is a file, whatever its name


def test_only_config_tokenizer_and_weights_are_asked_for():
    """The patterns, applied by the library's own filter to the files of real repositories."""
    from huggingface_hub.utils import filter_repo_objects

    def picked(files, *groups):
        return sorted(filter_repo_objects(files, allow_patterns=[p for g in groups for p in g]))

    tinystories = [".gitattributes", "README.md", "config.json", "generation_config.json", "merges.txt",
                   "pytorch_model.bin", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"]
    first = picked(tinystories, hub.CONFIG_FILES, hub.TOKENIZER_FILES, hub.SAFETENSORS_FILES)
    assert first == ["config.json", "merges.txt", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"]
    assert "pytorch_model.bin" in picked(tinystories, hub.TORCH_FILES)
    sharded = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
               "model.safetensors.index.json", "pytorch_model-00001-of-00002.bin", "pytorch_model.bin.index.json",
               "tokenizer.json", "tokenizer.model", "onnx/model.safetensors", "original/consolidated.00.pth",
               "adapter_model.safetensors", "flax_model.msgpack", "model.gguf"]
    assert picked(sharded, hub.CONFIG_FILES, hub.TOKENIZER_FILES, hub.SAFETENSORS_FILES) == [
        "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "model.safetensors.index.json", "tokenizer.json"]


def test_the_library_progress_is_relayed_and_a_raise_cancels(hub_cache, monkeypatch):
    """snapshot_download drives tqdm_class as in huggingface_hub (a bar per phase, update per step)."""
    seen = []
    folder = hub_cache / "models--fixtures--hf-gpt-neo" / "snapshots"
    folder = next(folder.iterdir())

    def fake_download(repo_id, *, tqdm_class=None, **_kwargs):
        with tqdm_class(total=4, desc="Fetching 4 files", name="huggingface_hub.snapshot_download") as bar:
            bar.update(1)
        bytes_bar = tqdm_class(total=2_000_000, desc="Downloading bytes", unit="B", unit_scale=True)
        bytes_bar.update(500_000)
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    assert hub.fetch(HubRef("fixtures/hf-gpt-neo"), on_progress=lambda *a: seen.append(a)) == folder
    assert seen == [("Fetching 4 files", 1.0, 4.0, "it"), ("Downloading bytes", 500_000.0, 2_000_000.0, "B")]

    def cancel(*_args):
        raise FetchCancelled("fixtures/hf-gpt-neo")

    with pytest.raises(FetchCancelled):  # not turned into a HubError
        hub.fetch(HubRef("fixtures/hf-gpt-neo"), on_progress=cancel)


def _http_error(kind, status: int):
    import httpx2

    request = httpx2.Request("GET", "https://huggingface.co/api/models/owner/name")
    return kind(f"{status} Client Error", response=httpx2.Response(status, request=request))


@pytest.mark.parametrize("make, message", [
    (lambda e: _http_error(e.RepositoryNotFoundError, 404),
     "owner/name: no such repository on the Hugging Face Hub (or it is private: log in with hf auth login)"),
    (lambda e: _http_error(e.GatedRepoError, 403),
     "owner/name: a gated repository: accept its conditions at https://huggingface.co/owner/name and log in "
     "(hf auth login), then open it again"),
    (lambda e: _http_error(e.RevisionNotFoundError, 404), "owner/name: the repository has no revision None"),
    (lambda e: _http_error(e.HfHubHTTPError, 503), "owner/name: the Hub answered HTTP 503: 503 Client Error"),
    (lambda e: PermissionError(13, "Permission denied"),
     "owner/name: could not fetch it into the Hugging Face cache: Permission denied"),
])
def test_each_failure_of_the_library_is_one_message(make, message, monkeypatch):
    from huggingface_hub import errors

    def failing(*_args, **_kwargs):
        raise make(errors)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", failing)
    with pytest.raises(HubError) as caught:
        load_any("hf:owner/name")
    assert str(caught.value) == message


def test_a_repository_without_a_model_says_so(hub_cache):
    from hub_cache import add_repo

    add_repo(hub_cache, "fixtures/no-weights", {"config.json": (ARCH / "hf-llama" / "config.json").read_bytes()})
    with pytest.raises(HubError, match=r"^fixtures/no-weights: the repository has no weights this app reads"):
        load_any("hf:fixtures/no-weights")
    add_repo(hub_cache, "fixtures/unknown", {"config.json": b'{"model_type": "bert"}', "model.safetensors":
                                             (ARCH / "hf-llama" / "model.safetensors").read_bytes()})
    with pytest.raises(CheckpointError, match=r"^fixtures/unknown: model_type 'bert' is not a model family this app "
                                              r"opens; it opens Hugging Face gpt2"):
        load_any("hf:fixtures/unknown")


def test_model_trace_takes_hf_repo_ids(hub_cache, capsys):
    assert trace_main(["hf:fixtures/hf-gpt2", "Once upon a time", "--json", "--top-k", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert trace_main([str(ARCH / "hf-gpt2"), "Once upon a time", "--json", "--top-k", "2"]) == 0
    assert out == json.loads(capsys.readouterr().out)
    assert trace_main(["hf:fixtures/missing", "--ids", "1,2"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {OFFLINE_MISSING}"


def _refused_port() -> int:
    """A loopback port that nothing listens on (connections are refused at once, nothing leaves the machine)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_without_offline_mode_and_no_network_a_cached_model_opens_and_a_missing_one_says_why(hub_cache):
    env = dict(os.environ, HF_HUB_OFFLINE="0", HF_ENDPOINT=f"http://127.0.0.1:{_refused_port()}")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(name, None)
    code = ("from model.checkpoint import load_any\nprint(load_any('hf:fixtures/hf-llama').name)\n"
            "try:\n    load_any('hf:fixtures/missing')\nexcept Exception as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "fixtures/hf-llama",
        "fixtures/missing: not in the local cache and the Hub cannot be reached (no network, or the Hub is down)"]


def test_the_progress_in_words_and_as_a_fraction():
    from explorer.core.hub_progress import summarise

    assert summarise({}) == ("asking the Hub…", None)
    assert summarise({"Fetching 5 files": (2, 5, "it")}) == ("2 of 5 files", 0.4)
    text, fraction = summarise({"Fetching 5 files": (2, 5, "it"), "Downloading bytes": (30e6, 37.5e6, "B"),
                                "Reconstructing": (20e6, 40e6, "B")})
    assert text == "2 of 5 files · 20.0 MB of 40.0 MB" and fraction == 0.5
    # A second snapshot_download (pytorch_model.bin after no safetensors): its bar, not the first one's.
    assert summarise({"Fetching 5 files": (5, 5, "it"), "Fetching 1 files": (0, 1, "it")}) == ("0 of 1 files", 0.0)
    assert summarise({"Downloading bytes": (3e6, None, "B")}) == ("3.0 MB", None)


def _storage(hub_cache, repo_id):
    return hub_cache / ("models--" + repo_id.replace("/", "--"))


def test_a_hand_copied_cache_offline_opens_or_says_what_its_refs_lack(hub_cache):
    """huggingface_hub#4492, #1307: a refs/main ending in a newline read as "not in the local cache"; a
    cache without refs/, or whose refs/main names a snapshot that is not there, gave the same line."""
    from hub_cache import add_repo, fixture_files

    snapshot = add_repo(hub_cache, "fixtures/newline-ref", fixture_files(ARCH / "hf-llama"), LLAMA)
    refs = _storage(hub_cache, "fixtures/newline-ref") / "refs"
    (refs / "main").write_text(snapshot.name + "\n")
    ckpt = load_any("hf:fixtures/newline-ref")
    assert ckpt.path == snapshot and ckpt.name == "fixtures/newline-ref" and ckpt.training["revision"] == "main"
    (refs / "main").write_text("0" * 40)  # a commit that is not in the cache, while another snapshot is
    with pytest.raises(HubError, match=rf"^fixtures/newline-ref: the local cache's refs/main names commit 0{{40}}, "
                                       rf"which is not in the cache.*hf:fixtures/newline-ref@{snapshot.name}"):
        load_any("hf:fixtures/newline-ref")
    shutil.rmtree(refs)
    with pytest.raises(HubError, match=rf"^fixtures/newline-ref: the local cache has no refs/ folder, so which "
                                       rf"snapshot is 'main' is not known.*@{snapshot.name}: open one by its commit$"):
        load_any("hf:fixtures/newline-ref")
    assert load_any(f"hf:fixtures/newline-ref@{snapshot.name}").path == snapshot  # as the message says


@pytest.mark.parametrize("missing", ["tokenizer.json", "model.safetensors"])
@pytest.mark.parametrize("listing", [False, True])
def test_a_cache_with_links_to_missing_blobs_names_the_file_not_downloaded(hub_cache, missing, listing):
    """huggingface_hub#1222, #4469: a dangling tokenizer.json gave a message starting with the commit
    hash, a dangling model.safetensors "the repository has no weights this app reads". Without the
    tree listing (an older library's cache, a copy) the library hands the folder over as it is; with it,
    it refuses the snapshot as incomplete, and the message names the file too."""
    from hub_cache import add_repo, fixture_files

    repo = f"fixtures/dangling-{missing.split('.')[0]}-{listing}"
    snapshot = add_repo(hub_cache, repo, fixture_files(ARCH / "hf-llama"), LLAMA)
    (snapshot / missing).resolve().unlink()  # the blob gone, its link left
    if not listing:
        shutil.rmtree(_storage(hub_cache, repo) / "trees")
    with pytest.raises(HubError) as caught:
        load_any(f"hf:{repo}")
    said = (f"{missing} is in the Hugging Face cache only as a link to a file that is not there" if not listing else
            f"the local cache holds only part of this model ({missing}: a symbolic link that leads nowhere")
    assert str(caught.value).startswith(f"{repo}: {said}") and "not downloaded" in str(caught.value)


def test_a_question_about_a_hub_model_names_the_repository_not_the_commit(hub_cache):
    from hub_cache import add_repo, fixture_files

    files = {k: v for k, v in fixture_files(ARCH / "hf-llama").items() if not k.startswith("tokenizer")}
    snapshot = add_repo(hub_cache, "fixtures/no-tokenizer", files)
    with pytest.raises(NeedsInput) as caught:
        load_any("hf:fixtures/no-tokenizer")
    assert str(caught.value).startswith("fixtures/no-tokenizer: no vocabulary was found") and caught.value.kind == "vocab"
    assert snapshot.name not in str(caught.value).split(". Looked for")[0]
