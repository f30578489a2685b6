"""The tokenizer of a Hugging Face model folder: ``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``.

``tokenizer.json`` is read by the ``tokenizers`` library as it is (byte-level BPE, Llama's BPE
with byte fallback, ...), post-processor included: the special tokens it puts before a text
(Llama's ``<s>``) are added by :meth:`model.Tokenizer.encode`. ``tokenizer_config.json``'s
``add_bos_token``, when given, decides whether a text starts with ``bos_token``, as transformers'
Llama tokenizers do. Without ``tokenizer.json``, ``vocab.json`` + ``merges.txt`` are GPT-2's
byte-level BPE (``add_prefix_space`` from tokenizer_config.json, default false), with the
config's special tokens (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``) that are in
the vocabulary, and ``added_tokens.json``'s tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import AddedToken, decoders, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer

from model.formats.base import CheckpointError, broken_link, dangling
from model.formats.vocab import bpe_from_files, read_json
from model.core.plain import clip, read_bounded, short_repr
from model.tokens.tokenizer import Tokenizer

SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")
TOKENIZER_MAX_BYTES = 128 * 1024 * 1024  # the largest hub tokenizer.json files are a few tens of MB
GPT2_EOT = "<|endoftext|>"


def settings(folder: Path) -> dict[str, Any]:
    """``tokenizer_config.json``, with ``special_tokens_map.json`` filling keys it lacks ({} when absent)."""
    merged: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json", "added_tokens.json"):
        if dangling(folder / name):  # read without it, the tokenizer would quietly be another one
            raise broken_link(folder / name)
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        data = read_json(folder / name) if (folder / name).is_file() else None
        if isinstance(data, dict):
            merged.update(data)
    return merged


def token_text(value: Any) -> str | None:
    """A special token's text: a string, or the ``content`` of an AddedToken's dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _starts_with_special(hf: HFTokenizer) -> bool:
    """Whether the post-processor puts a special token before a text."""
    mask = hf.encode("a", add_special_tokens=True).special_tokens_mask
    return bool(mask) and mask[0] == 1


def apply_add_bos_token(hf: HFTokenizer, config: dict[str, Any], folder: Path) -> None:
    """Make the post-processor put ``bos_token`` before a text exactly when ``add_bos_token`` says so.

    Nothing changes when ``add_bos_token`` is not given or already holds. Changing the
    post-processor (not a flag beside it) keeps the behaviour in the tokenizer.json that our
    checkpoints store.
    """
    add = config.get("add_bos_token")
    if not isinstance(add, bool) or _starts_with_special(hf) == add:
        return
    if not add:
        hf.post_processor = None  # only its leading tokens matter here (see model.Tokenizer.prefix_ids)
        return
    bos = token_text(config.get("bos_token"))
    bos_id = hf.token_to_id(bos) if bos is not None else None
    if bos_id is None:
        return  # nothing to add: the config names no BOS in the vocabulary
    try:
        template = processors.TemplateProcessing(single=[bos, "$A"], pair=[bos, "$A", bos, "$B"],
                                                 special_tokens=[(bos, bos_id)])
    except Exception as exc:  # tokenizers raises a plain Exception for a token it cannot put in a template
        raise CheckpointError(f"{folder.name}: tokenizer_config.json: bos_token {short_repr(bos)} cannot start a text ({exc})") from None
    hf.post_processor = template if hf.post_processor is None else processors.Sequence([hf.post_processor, template])


def _from_tokenizer_json(path: Path) -> HFTokenizer:
    try:  # the contents, read here: the library's from_file takes only UTF-8 paths
        return HFTokenizer.from_str(read_bounded(path, TOKENIZER_MAX_BYTES).decode("utf-8"))
    except Exception as exc:  # tokenizers raises its own Exception subclasses
        raise CheckpointError(f"{path.parent.name}: {path.name} is not a valid tokenizer.json ({clip(str(exc))})") from None


def _from_vocab_merges(folder: Path, config: dict[str, Any]) -> HFTokenizer:
    """GPT-2's byte-level BPE from ``vocab.json`` and ``merges.txt``."""
    try:
        hf = HFTokenizer(bpe_from_files(folder / "vocab.json", folder / "merges.txt", TOKENIZER_MAX_BYTES))
    except Exception as exc:  # tokenizers raises a plain Exception for unreadable files
        raise CheckpointError(f"{folder.name}: vocab.json and merges.txt cannot be read as BPE ({clip(str(exc))})") from None
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=config.get("add_prefix_space") is True)
    hf.decoder = decoders.ByteLevel()
    added = read_json(folder / "added_tokens.json") if (folder / "added_tokens.json").is_file() else {}
    if not isinstance(added, dict) or not all(isinstance(i, int) for i in added.values()):
        raise CheckpointError(f"{folder.name}: added_tokens.json is not an object of token -> id")
    for text, token_id in sorted(added.items(), key=lambda item: item[1]):
        if hf.add_tokens([AddedToken(text, special=False)]) and hf.token_to_id(text) != token_id:
            raise CheckpointError(f"{folder.name}: added_tokens.json gives {short_repr(text)} id {token_id}, "
                                  f"but it comes out as {hf.token_to_id(text)}")
    specials = [token_text(config.get(key)) for key in SPECIAL_KEYS] + [GPT2_EOT]
    hf.add_special_tokens(list(dict.fromkeys(t for t in specials if t and hf.token_to_id(t) is not None)))
    return hf


def folder_tokenizer(folder: Path) -> tuple[Tokenizer | None, list[Path]]:
    """The folder's tokenizer (None when it has none) and the files looked for (a link to nothing
    among them, a file not downloaded, counts as none: the question that follows names it).

    Raises
    ------
    CheckpointError
        When a tokenizer file is there but cannot be read, or one of its settings files is a link
        to nothing.
    """
    searched = [folder / "tokenizer.json", folder / "vocab.json", folder / "merges.txt"]
    config = settings(folder)
    if not searched[0].is_file() and not (searched[1].is_file() and searched[2].is_file()):
        return None, searched
    try:
        hf = _from_tokenizer_json(searched[0]) if searched[0].is_file() else _from_vocab_merges(folder, config)
        apply_add_bos_token(hf, config, folder)
        return Tokenizer(hf), searched
    except CheckpointError:
        raise
    except Exception as exc:  # tokenizers' own Exceptions, and the Tokenizer's ValueError (it fails on text, ...)
        raise CheckpointError(f"{folder.name}: its tokenizer cannot be used ({clip(str(exc))})") from exc
