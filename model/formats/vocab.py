"""Vocabularies of foreign checkpoints, each built as a ``tokenizers.Tokenizer``.

- nanoGPT's character vocabulary (``meta.pkl``: ``itos`` / ``stoi``): one token per character,
  whitespace included; characters outside the vocabulary produce no token (nanoGPT itself
  cannot encode them either).
- A word vocabulary JSON with an ``itos`` list (ids in list order), an optional
  ``tokenizer_regex`` (the words are ``re.findall(tokenizer_regex, text)``), ``lowercase``,
  ``unk_id`` (words outside the list get this id).
- GPT-2's byte-level BPE (50,257 tokens) from its ``encoder.json`` and ``vocab.bpe``: in
  ``TIKTOKEN_CACHE_DIR`` when it is set (where tiktoken caches them), else the copy shipped in
  ``assets/gpt2-bpe/`` (the package data, :func:`transformer_explorer_assets.path`); nothing is ever downloaded.
- A ``tokenizer.json``.
- llama2.c's ``tokenizer.bin`` (:mod:`model.formats.llama2c.vocab`).

Every one is wrapped in :class:`model.tokens.tokenizer.Tokenizer`, so ``encode`` reports character spans
and the tokenizer is saved inside our checkpoints as its tokenizer.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from tokenizers import Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import BPE, WordLevel

import transformer_explorer_assets as shipped

from model.formats.errors import CheckpointError
from model.formats.llama2c.vocab import is_tokenizer_bin, llama2c_tokenizer
from model.core.plain import clip, read_bounded, read_json_file, short_repr, shown_name
from model.tokens.tokenizer import WORD_PATTERN, Tokenizer, word_tokenizer_from_vocab

GPT2_VOCAB_SIZE = 50257
GPT2_PADDED_ROWS = 50304  # nanoGPT rounds GPT-2's vocabulary up to a multiple of 64
GPT2_EOT = "<|endoftext|>"
_GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
# tiktoken caches a download under the sha1 of its address.
GPT2_FILES = {
    "encoder.json": hashlib.sha1((_GPT2_URL + "encoder.json").encode()).hexdigest(),
    "vocab.bpe": hashlib.sha1((_GPT2_URL + "vocab.bpe").encode()).hexdigest(),
}
#: GPT-2's two files as the project ships them (with their licence and source, see its README.md).
SHIPPED_GPT2_DIR = shipped.path("gpt2-bpe")
JSON_MAX_BYTES = 64 * 1024 * 1024
UNK_NAMES = ("<unk>", "<|unk|>", "[UNK]")  # ours, the book's (ch. 2), BERT's


def char_tokenizer(itos: Sequence[str]) -> Tokenizer:
    """One token per character; id i is ``itos[i]``.

    Characters not in the vocabulary produce no token (their text simply has no span).

    Raises
    ------
    ValueError
        When an entry is not exactly one character, or characters repeat.
    """
    if any(not isinstance(c, str) or len(c) != 1 for c in itos):
        raise ValueError("the vocabulary is not one character per id")
    vocab = {c: i for i, c in enumerate(itos)}
    if len(vocab) != len(itos):
        raise ValueError("the vocabulary has repeated characters")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in vocab):
        raise ValueError("the vocabulary holds a lone surrogate, which is not a character of any text")
    known = "".join(f"\\x{{{ord(c):X}}}" for c in sorted(vocab))
    hf = HFTokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    # Keep each known character as its own piece and drop everything else; no normalizer, so
    # offsets are the text's own.
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(f"[{known}]"), behavior="removed", invert=True)
    hf.decoder = decoders.Fuse()
    return Tokenizer(hf)


def word_vocab_tokenizer(data: dict[str, Any]) -> Tokenizer:
    """A word-level tokenizer from a vocabulary JSON object (see the module docstring).

    With ``tokenizer_regex`` the words are exactly ``re.findall(regex, text.lower())`` (no
    other normalisation); without it, the project's own word splitting is used. Words outside
    the list get the unknown-word id (``unk_id``, else the entry ``<unk>``, ``<|unk|>`` or ``[UNK]``).

    Raises
    ------
    ValueError
        When ``itos`` is missing, not a list of distinct strings, has no unknown-word entry, or
        the regex is invalid.
    """
    itos = data.get("itos")
    if not isinstance(itos, list) or not all(isinstance(w, str) for w in itos):
        raise ValueError("the vocabulary JSON has no 'itos' list of strings")
    lowercase = bool(data.get("lowercase", True))
    regex = data.get("tokenizer_regex")
    if regex is None and "<unk>" in itos:
        return word_tokenizer_from_vocab(itos, lowercase=lowercase)
    vocab = {w: i for i, w in enumerate(itos)}
    if len(vocab) != len(itos):
        raise ValueError("the vocabulary list has duplicate entries")
    unk_id = data.get("unk_id")
    unks = [itos[unk_id]] if isinstance(unk_id, int) and 0 <= unk_id < len(itos) else []
    unks += [w for w in UNK_NAMES if w in vocab]
    if not unks:
        raise ValueError(
            f"the vocabulary has no entry for unknown words (one of {', '.join(UNK_NAMES)}, or unk_id)"
        )
    unk, regex = unks[0], WORD_PATTERN if regex is None else regex
    hf = HFTokenizer(WordLevel(vocab=vocab, unk_token=unk))  # every word maps to an id
    if lowercase:
        hf.normalizer = normalizers.Lowercase()
    try:
        # invert=True keeps the regex's matches and drops the rest: re.findall.
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(regex), behavior="removed", invert=True)
    except Exception as exc:  # tokenizers raises a plain Exception for a bad pattern
        raise ValueError(f"bad tokenizer_regex {short_repr(regex)}: {clip(str(exc))}") from None
    return Tokenizer(hf)


def gpt2_search_dirs() -> list[Path]:
    """Where GPT-2's files may be, in order: the folders named by ``TIKTOKEN_CACHE_DIR`` and
    ``DATA_GYM_CACHE_DIR`` (overrides), the project's own copy, tiktoken's default cache."""
    dirs = [os.environ.get(v) for v in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")]
    dirs = [Path(d) for d in dirs if d]
    return dirs + [SHIPPED_GPT2_DIR, Path(tempfile.gettempdir()) / "data-gym-cache"]


def find_gpt2_files(folder: Path) -> tuple[Path, Path] | None:
    """(encoder.json, vocab.bpe) in ``folder``, under their own names or tiktoken's, or None."""
    for names in (("encoder.json", "vocab.bpe"), (GPT2_FILES["encoder.json"], GPT2_FILES["vocab.bpe"])):
        enc, bpe = folder / names[0], folder / names[1]
        if enc.is_file() and bpe.is_file():
            return enc, bpe
    return None


def gpt2_tokenizer(folder: Path) -> Tokenizer:
    """GPT-2's byte-level BPE (50,257 tokens, ``<|endoftext|>`` = 50256) from its two files.

    Token for token the same as ``tiktoken.get_encoding("gpt2")`` with ``<|endoftext|>``
    allowed (Radford et al. 2019; tests compare the two).

    Raises
    ------
    CheckpointError
        When the files are not in ``folder`` or are not GPT-2's.
    """
    files = find_gpt2_files(folder)
    if files is None:
        raise CheckpointError(f"{folder}: GPT-2's encoder.json and vocab.bpe are not in this folder")
    try:
        hf = HFTokenizer(bpe_from_files(*files))
    except Exception as exc:  # tokenizers raises a plain Exception for unreadable files
        raise CheckpointError(f"{folder}: GPT-2's BPE files cannot be read ({clip(str(exc))})") from None
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([GPT2_EOT])
    if hf.get_vocab_size(with_added_tokens=True) != GPT2_VOCAB_SIZE or hf.token_to_id(GPT2_EOT) != 50256:
        raise CheckpointError(f"{folder}: these BPE files are not GPT-2's (expected {GPT2_VOCAB_SIZE} tokens)")
    return wrap_tokenizer(folder, hf)


def find_gpt2_tokenizer() -> Tokenizer | None:
    """GPT-2's tokenizer from the first search folder that holds its files, or None."""
    folder = find_gpt2_folder()
    return gpt2_tokenizer(folder) if folder is not None else None


def find_gpt2_folder() -> Path | None:
    """The first of :func:`gpt2_search_dirs` that holds GPT-2's two files, or None."""
    return next((folder for folder in gpt2_search_dirs() if find_gpt2_files(folder) is not None), None)


def gpt2_missing_hint() -> str:
    """A plain sentence on where GPT-2's files were looked for and how to supply them."""
    where = ", ".join(str(d) for d in gpt2_search_dirs())
    set_ = "TIKTOKEN_CACHE_DIR is not set" if not os.environ.get("TIKTOKEN_CACHE_DIR") else "none there"
    return (
        f"GPT-2's tokenizer files (encoder.json and vocab.bpe, as tiktoken caches them) were not "
        f"found in {where} ({set_}); nothing is downloaded. Set TIKTOKEN_CACHE_DIR to a folder that "
        "holds them (for example one where tiktoken.get_encoding('gpt2') has run once), or choose "
        "that folder as the vocabulary."
    )


def bpe_from_files(vocab_file: Path, merges_file: Path, max_bytes: int = JSON_MAX_BYTES) -> BPE:
    """``BPE.from_file(vocab, merges)`` from the files' contents, read here (bounded, any path):
    the vocabulary JSON (token -> id) and the merges, one ``a b`` pair per line after an optional
    ``#version`` line.

    Raises
    ------
    ValueError
        When a file cannot be read, is too large, or is not in that form (saying which line).
    """
    vocab = read_json_file(vocab_file, max_bytes)
    if not isinstance(vocab, dict) or not all(type(i) is int for i in vocab.values()):
        raise ValueError(f"{shown_name(vocab_file)} is not an object of token -> id")
    try:
        text = read_bounded(merges_file, max_bytes).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{shown_name(merges_file)} cannot be read ({exc})") from None
    merges = []
    for n, line in enumerate(text.splitlines(), 1):
        if (n == 1 and line.startswith("#version")) or not line:
            continue
        pair = line.split(" ")
        if len(pair) != 2:
            raise ValueError(f"{shown_name(merges_file)}, line {n}: not a pair of tokens")
        merges.append((pair[0], pair[1]))
    return BPE(vocab=vocab, merges=merges)


def wrap_tokenizer(path: Path, hf: HFTokenizer) -> Tokenizer:
    """``Tokenizer(hf)``, its refusal (see :class:`model.tokens.tokenizer.Tokenizer`) naming the file.

    Raises
    ------
    CheckpointError
        When the tokenizer cannot be used (it fails on unknown text, its ids leave the vocabulary).
    """
    try:
        return Tokenizer(hf)
    except ValueError as exc:
        raise CheckpointError(f"{shown_name(path)}: {clip(str(exc))}") from None


def read_json(path: Path) -> Any:
    """A JSON file's value, or None when it is not small, shallow, readable JSON (see
    :func:`model.core.plain.read_json_file`)."""
    try:
        return read_json_file(path, JSON_MAX_BYTES)
    except ValueError:
        return None


def find_word_vocab(folder: Path, rows: int) -> Path | None:
    """A vocabulary JSON in ``folder`` whose ``itos`` list has exactly ``rows`` entries."""
    try:
        candidates = sorted(folder.glob("*.json"))[:64]
    except OSError:
        return None
    for path in candidates:
        data = read_json(path)
        if isinstance(data, dict) and isinstance(data.get("itos"), list) and len(data["itos"]) == rows:
            return path
    return None


def tokenizer_from_meta(path: Path, meta: Any) -> Tokenizer:
    """The character tokenizer of a nanoGPT ``meta.pkl`` value (``itos`` or ``stoi``).

    Raises
    ------
    CheckpointError
        When the dict has neither, or the vocabulary is not one character per id 0..n-1.
    """
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path.name}: a meta.pkl must hold a dict, not a {type(meta).__name__}")
    itos = meta.get("itos")
    if isinstance(itos, dict):
        itos = [itos.get(i) for i in range(len(itos))]
    elif itos is None and isinstance(meta.get("stoi"), dict):
        stoi = meta["stoi"]
        bad = next((v for v in stoi.values() if type(v) is not int), None)
        if bad is not None:
            raise CheckpointError(f"{path.name}: the meta.pkl's stoi maps a character to {short_repr(bad)}, "
                                  "not to an id (an integer)")
        inverse = {i: s for s, i in stoi.items()}
        itos = [inverse.get(i) for i in range(len(inverse))]
    if not isinstance(itos, (list, tuple)):
        raise CheckpointError(f"{path.name}: the meta.pkl has no 'itos' or 'stoi' vocabulary")
    try:
        return char_tokenizer(list(itos))
    except ValueError as exc:
        raise CheckpointError(f"{path.name}: {exc} (ids must run 0..{len(itos) - 1})") from None


def tokenizer_from_path(path: Path) -> Tokenizer:
    """A tokenizer from a file or folder the user chose (see ``load_any``'s ``vocab_path``).

    Raises
    ------
    CheckpointError
        When the path is none of: a folder with GPT-2's files, a meta.pkl, a word-vocabulary
        JSON, a tokenizer.json, a llama2.c tokenizer.bin.
    """
    from model.formats.pickled.safe_pickle import load_restricted

    path = Path(path)
    if path.is_dir():
        return gpt2_tokenizer(path)
    if not path.is_file():
        raise CheckpointError(f"{path.name}: no such vocabulary file")
    if is_tokenizer_bin(path):  # first: it has no magic, and its first byte may be 0x80
        return llama2c_tokenizer(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:1] == b"\x80":  # a pickle (protocol 2 or later): nanoGPT's meta.pkl
        return tokenizer_from_meta(path, load_restricted(path))
    try:
        data = read_json_file(path, JSON_MAX_BYTES)
    except ValueError as exc:
        if head.lstrip()[:1] in (b"{", b"["):  # meant as JSON: say what is wrong with it
            raise CheckpointError(f"{path.name}: not a vocabulary this app reads: {clip(str(exc))}") from None
        data = None
    if isinstance(data, dict) and "itos" in data:
        try:
            return word_vocab_tokenizer(data)
        except ValueError as exc:
            raise CheckpointError(f"{path.name}: {clip(str(exc))}") from None
    if isinstance(data, dict) and "model" in data:
        try:
            return Tokenizer.from_json(json.dumps(data))
        except ValueError as exc:
            raise CheckpointError(f"{path.name}: {clip(str(exc))}") from None
    raise CheckpointError(
        f"{path.name}: not a vocabulary this app reads (a nanoGPT meta.pkl, a JSON with an 'itos' "
        "list, a tokenizer.json, a llama2.c tokenizer.bin, or a folder with GPT-2's encoder.json and vocab.bpe)"
    )


def vocab_padding(path: Path, tokenizer: Tokenizer, rows: int) -> int:
    """Embedding rows the tokenizer never produces: 0, or 47 for GPT-2 in nanoGPT's 50,304.

    Raises
    ------
    CheckpointError
        When the tokenizer's size differs from the embedding rows, naming both numbers.
    """
    n = tokenizer.vocab_size
    if n == rows:
        return 0
    if n == GPT2_VOCAB_SIZE and rows == GPT2_PADDED_ROWS and tokenizer.token_to_id(GPT2_EOT) == 50256:
        return rows - n
    raise CheckpointError(
        f"{path.name}: the vocabulary has {n} tokens but the model's embedding table has {rows} "
        "rows; they must match (is this the vocabulary the model was trained with?)"
    )
