"""llama2.c's ``tokenizer.bin``, as a ``tokenizers`` BPE that encodes exactly as ``run.c`` does.

The file (written by llama2.c's ``tokenizer.py`` from a sentencepiece model): a uint32
``max_token_length``, then for each id in turn a float32 score, a uint32 byte length and the
piece's bytes (sentencepiece's ``▁`` written as a space; BOS as ``"\\n<s>\\n"``, EOS as
``"\\n</s>\\n"``; byte pieces as the text ``<0xNN>``). Little-endian, no count: the entries run to
the end of the file.

``run.c``'s ``encode(text, bos=1, eos=0)``: id 1 (BOS) first; for non-empty text the piece ``" "``
(the dummy prefix); then each UTF-8 character's piece, or, when the character is not a piece, one
token per byte with id byte + 3 (byte fallback); then, repeatedly, the adjacent pair whose
concatenated text is a piece with the highest score is merged (the leftmost on a tie) until no
pair is a piece. As a ``tokenizers`` pipeline: a normalizer that puts a space before non-empty
text, no pre-tokenizer (``run.c`` merges across the whole text), a BPE model with
``byte_fallback`` whose merges are every split (a, b) of every piece a + b with both halves
pieces, ranked by the merged piece's score (highest first), and a post-processor that puts BOS
first. The heap of ``tokenizers``' BPE merges the lowest rank first, the leftmost on a tie: the
same choice as ``run.c``'s scan wherever the best score belongs to one pair (in sentencepiece
vocabularies every merged piece has its own score). Scores at or below run.c's floor of -1e10
(and NaN) never merge there, so they are left out here.

The vocabulary keeps run.c's piece texts (so merges are concatenations), except that ids 1 and 2
are named ``<s>`` and ``</s>`` (the sentencepiece names) instead of their export text.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import Regex, decoders, normalizers, processors
from tokenizers.models import BPE

from model.formats.errors import CheckpointError
from model.tokens.merges import merges_by_score
from model.tokens.tokenizer import Tokenizer

BOS_ID, EOS_ID, BYTE_OFFSET = 1, 2, 3  # run.c: BOS = 1, EOS = 2, byte b is id b + 3
SPECIAL_NAMES = {BOS_ID: "<s>", EOS_ID: "</s>"}
MERGE_FLOOR = -1e10  # run.c's starting best_score: a pair must score above it to merge
MAX_PIECE_BYTES = 1 << 16  # far above any real piece (Llama 2's longest is 16 bytes)
MAX_FILE_BYTES = 64 * 1024 * 1024
MIN_PIECES = BYTE_OFFSET + 256  # <unk>, <s>, </s> and the 256 byte pieces


def read_pieces(path: Path) -> tuple[list[bytes], list[float]] | None:
    """The pieces and scores of a ``tokenizer.bin``, or None when the file is not one.

    A tokenizer.bin has no magic number: it is recognised by parsing, which must end exactly at
    the end of the file with every length within ``max_token_length``, and by holding at least
    the 259 pieces (3 special, 256 bytes) that ``run.c``'s byte fallback addresses.
    """
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < 4:
        return None
    (max_len,) = struct.unpack_from("<I", data, 0)
    if not 0 < max_len <= MAX_PIECE_BYTES:
        return None
    pieces, scores, offset = [], [], 4
    while offset < len(data):
        if offset + 8 > len(data):
            return None
        score, length = struct.unpack_from("<fI", data, offset)
        offset += 8
        if length > max_len or offset + length > len(data):
            return None
        pieces.append(data[offset:offset + length])
        scores.append(score)
        offset += length
    return (pieces, scores) if len(pieces) >= MIN_PIECES else None


def is_tokenizer_bin(path: Path) -> bool:
    """Whether ``path`` parses as a llama2.c ``tokenizer.bin`` (see :func:`read_pieces`)."""
    return read_pieces(path) is not None


def _names(path: Path, pieces: list[bytes]) -> list[str]:
    """Each piece as text, ids 1 and 2 renamed; refuses files that cannot be encoded exactly."""
    try:
        texts = [p.decode("utf-8") for p in pieces]
    except UnicodeDecodeError:
        bad = next(i for i, p in enumerate(pieces) if not _is_utf8(p))
        raise CheckpointError(f"{path.name}: piece {bad} is not UTF-8 text ({pieces[bad][:16]!r})") from None
    if len(set(texts)) != len(texts):
        seen: dict[str, int] = {}
        dup = next((i, seen[t]) for i, t in enumerate(texts) if seen.setdefault(t, i) != i)
        raise CheckpointError(f"{path.name}: pieces {dup[1]} and {dup[0]} are the same text {texts[dup[0]]!r}")
    for b in range(256):
        if texts[BYTE_OFFSET + b] != f"<0x{b:02X}>":
            raise CheckpointError(
                f"{path.name}: piece {BYTE_OFFSET + b} is {texts[BYTE_OFFSET + b]!r}, but run.c's byte "
                f"fallback gives byte 0x{b:02X} that id, so it must be <0x{b:02X}>"
            )
    names = list(texts)
    for i, name in SPECIAL_NAMES.items():
        if name not in texts:
            names[i] = name
    return names


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _merges(path: Path, texts: list[str], names: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """Every (a, b) with a, b and a + b pieces, the best-scoring result first (ties: by id; see
    :func:`model.tokens.merges.merges_by_score`)."""
    ranked = merges_by_score(texts, scores, MERGE_FLOOR)
    for i, a, b in ranked:
        if names[a] != texts[a] or names[b] != texts[b] or names[i] != texts[i]:
            raise CheckpointError(f"{path.name}: piece {i} {texts[i]!r} is made from the BOS or EOS text")
    return [(texts[a], texts[b]) for _, a, b in ranked]


def llama2c_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer of a llama2.c ``tokenizer.bin`` (see the module docstring).

    Returns
    -------
    Tokenizer
        ``encode`` gives run.c's ids, BOS first; spans index the text (BOS has the empty span
        (0, 0)); the vocabulary has as many ids as the file has pieces.

    Raises
    ------
    CheckpointError
        When the file is not a tokenizer.bin, or is one that ``tokenizers`` cannot reproduce
        exactly: a piece that is not UTF-8, two pieces with one text, byte pieces not at ids 3..258,
        a piece made by concatenating the BOS or EOS export text.
    """
    path = Path(path)
    parsed = read_pieces(path)
    if parsed is None:
        raise CheckpointError(f"{path.name}: not a llama2.c tokenizer.bin")
    pieces, scores = parsed
    names = _names(path, pieces)
    texts = [p.decode("utf-8") for p in pieces]
    merges = _merges(path, texts, names, scores)
    vocab = {name: i for i, name in enumerate(names)}
    unk = names[0] if names[0] == "<unk>" else None
    try:
        hf = HFTokenizer(BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=False))
        # run.c's dummy prefix, for non-empty text only. Inserted at the empty match before the first
        # character, so its token has the empty span (0, 0) (Prepend would give it the first character's).
        hf.normalizer = normalizers.Replace(Regex(r"\A(?=[\s\S])"), " ")
        # A list, not "<s> $A": a template string is split at whitespace, and BOS may hold some.
        hf.post_processor = processors.TemplateProcessing(
            single=[names[BOS_ID], "$A"], special_tokens=[(names[BOS_ID], BOS_ID), (names[EOS_ID], EOS_ID)]
        )  # EOS listed too: a control token (TokenNames reads the list), which stands for no text
        hf.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
        return Tokenizer(hf)
    except Exception as exc:  # tokenizers' own Exceptions, and the Tokenizer's ValueError
        raise CheckpointError(f"{path.name}: this tokenizer.bin cannot be used ({str(exc)[:200]})") from exc


def tokenizer_candidates(model_path: Path, vocab_size: int) -> list[Path]:
    """Where llama2.c keeps a model's tokenizer, nearest first.

    ``run.c``'s default is ``tokenizer.bin`` (the Llama 2 vocabulary, at the repository's root);
    ``tinystories.py train_vocab`` writes ``data/tok<vocab_size>.bin``; ``train.py`` writes the
    model into ``out/``. So: beside the model, then ``data/`` beside it, then the same one folder up.
    """
    folder = Path(model_path).resolve().parent
    names = ("tokenizer.bin", f"tok{vocab_size}.bin")
    places = []
    for base in (folder, folder.parent):
        places += [base / n for n in names] + [base / "data" / names[1]]
    return list(dict.fromkeys(places))


def find_llama2c_tokenizer(model_path: Path, vocab_size: int) -> tuple[Tokenizer | None, list[Path]]:
    """(the first tokenizer.bin among :func:`tokenizer_candidates` with ``vocab_size`` pieces, or
    None; the places searched). One with another size (the 32,000-piece Llama 2 tokenizer beside a
    custom-vocabulary model) is passed over."""
    places = tokenizer_candidates(model_path, vocab_size)
    for place in places:
        parsed = read_pieces(place)
        if parsed is not None and len(parsed[0]) == vocab_size:
            return llama2c_tokenizer(place), places
    return None, places
