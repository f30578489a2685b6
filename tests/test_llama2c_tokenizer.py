"""llama2.c's tokenizer.bin: the tokenizers-built BPE gives exactly what run.c's encode() gives.

The oracle below is a plain transcription of run.c's ``encode(t, text, bos=1, eos=0, ...)``
(karpathy/llama2.c, run.c), kept in this test only: it works on the UTF-8 bytes as run.c does.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.checkpoint import CheckpointError
from model.formats.llama2c.vocab import is_tokenizer_bin, llama2c_tokenizer
from model.formats.vocab import tokenizer_from_path
from model.tokens.tokenizer import Tokenizer

FIX = Path(__file__).parent / "fixtures" / "arch" / "llama2c-v0"
TOKENIZER_BIN = FIX / "tokenizer.bin"


def read_tokenizer_bin(path: Path) -> tuple[list[bytes], list[float]]:
    """run.c's build_tokenizer: uint32 max length, then (float32 score, uint32 length, bytes) per id."""
    data = path.read_bytes()
    pieces, scores, at = [], [], 4
    while at < len(data):
        score, n = struct.unpack_from("<fI", data, at)
        pieces.append(data[at + 8:at + 8 + n])
        scores.append(score)
        at += 8 + n
    return pieces, scores


PIECES, SCORES = read_tokenizer_bin(TOKENIZER_BIN)


def run_c_encode(text: str, pieces=PIECES, scores=SCORES) -> list[int]:
    """run.c's encode(text, bos=1, eos=0), on the text's UTF-8 bytes."""
    raw = text.encode("utf-8")
    lookup = {}
    for i, piece in enumerate(pieces):
        lookup.setdefault(piece, i)
    tokens = [1]  # BOS
    if raw:  # the dummy prefix, only for non-empty text
        tokens.append(lookup[b" "])
    i = 0
    while i < len(raw):  # one UTF-8 codepoint at a time: a byte, then its continuation bytes (at most 4 in all)
        j = i + 1
        while j < len(raw) and (raw[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        codepoint = raw[i:j]
        if codepoint in lookup:
            tokens.append(lookup[codepoint])
        else:
            tokens.extend(b + 3 for b in codepoint)  # byte fallback
        i = j
    while True:  # merge the best-scoring adjacent pair, the leftmost on a tie
        best_score, best_id, best_idx = -1e10, -1, -1
        for k in range(len(tokens) - 1):
            merged = pieces[tokens[k]] + pieces[tokens[k + 1]]
            if merged in lookup and scores[lookup[merged]] > best_score:
                best_score, best_id, best_idx = scores[lookup[merged]], lookup[merged], k
        if best_idx == -1:
            return tokens
        tokens[best_idx:best_idx + 2] = [best_id]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return llama2c_tokenizer(TOKENIZER_BIN)


def test_fixture_text_gives_the_reference_ids(tok):
    ref = np.load(FIX / "reference.npz")
    text, ids = str(ref["text"]), ref["token_ids"].tolist()
    assert run_c_encode(text) == ids  # the oracle is run.c (the fixture's README: run.c gives these ids)
    enc = tok.encode(text)
    assert list(enc.ids) == ids
    assert enc.tokens[:4] == ("<s>", " once", " upon", " a")
    assert enc.tokens[17:21] == ("o", "<0xC3>", "<0xA9>", " li")  # é is not a piece: two byte tokens


ODD_TEXTS = ["", " ", "  ", "\t\n \n", "a", "é", "zoé", "e\u0301", "😀", "👩‍👩‍👧", "2024", "3.14159",
             "  leading and trailing  ", "tabs\tand\nnewlines\r\n", "<s>", "</s>", "<unk>", "<0x41>",
             "\n<s>\n", "once upon a time", "ONCE UPON", "naïve café", "日本語", "\u00a0nbsp", "\ufeffbom",
             "a" * 200, " " * 50, "the the the the", "x\ufffdy", "\U0010ffff"]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_odd_texts_match_run_c(tok, text):
    assert list(tok.encode(text).ids) == run_c_encode(text)


def test_texts_made_of_pieces_match_run_c(tok):
    """Concatenated pieces and their halves: the inputs where merge order matters most."""
    rng = random.Random(13)
    texts = [p.decode() for p in PIECES[259:]]
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(1, 6)):
            piece = rng.choice(texts)
            cut = rng.randint(0, len(piece))
            parts.append(rng.choice([piece, piece[:cut], piece[cut:]]))
        text = "".join(parts)
        assert list(tok.encode(text).ids) == run_c_encode(text), text


# Characters that are pieces, and others that are not (byte fallback); no NUL (see below).
ALPHABET = st.sampled_from(list("abcdeilmnorstuwy .,!?'\"\n\t0123456789ABZé😀ü—ß\u00a0\u3000"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(ALPHABET, max_size=40),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)))
def test_random_texts_match_run_c(tok, text):
    assert list(tok.encode(text).ids) == run_c_encode(text)


def test_nul_is_a_byte_token(tok):
    """run.c reads a C string and stops at a NUL; here the text goes on (NUL is byte token 3)."""
    assert tok.encode("a\x00b").ids == (1, tok.token_to_id(" a"), 3, tok.token_to_id("b"))


def test_spans_index_the_text(tok):
    text = "once upon a time, zoé 😀  3"
    enc = tok.encode(text)
    assert enc.spans[0] == (0, 0) and enc.tokens[0] == "<s>"  # BOS is not in the text
    assert [text[s:e] for s, e in enc.spans[1:4]] == ["once", " upon", " a"]  # the dummy space merged into " once"
    starts = [s for s, _ in enc.spans]
    assert starts == sorted(starts) and enc.spans[-1][1] == len(text)
    emoji = [text[s:e] for (s, e), t in zip(enc.spans, enc.tokens) if t.startswith("<0xF0")]
    assert emoji == ["😀"]  # each byte token of a character spans that character
    alone = tok.encode("zo")
    assert alone.tokens[1] == " " and alone.spans[1] == (0, 0)  # an unmerged dummy space has no text


def test_tokenizer_json_round_trip(tok):
    again = Tokenizer.from_json(tok.to_json())
    for text in ODD_TEXTS:
        assert again.encode(text) == tok.encode(text)
    assert again.vocab_size == tok.vocab_size == 512


def test_names_and_decode(tok):
    assert [tok.id_to_token(i) for i in (0, 1, 2, 3, 198, 259, 402)] == [
        "<unk>", "<s>", "</s>", "<0x00>", "<0xC3>", " t", " once"]
    assert tok.token_to_id(" once") == 402
    # byte tokens decode to their character; at the start of a text the dummy prefix's space goes, as
    # run.c's decode drops it after BOS (decode([1, " Once"]) was "<s> Once")
    assert tok.decode([402, 424, 198, 172]) == "once uponé" and tok.decode([1, 402]) == "once"
    assert tok.encode(tok.decode([1, 402, 424])).ids == (1, 402, 424)
    assert tok.render([402, 424], "a")[0] == " once upon"  # after other text the space stays


def test_found_by_content_as_a_vocabulary(tmp_path):
    copy = tmp_path / "my-vocab.dat"  # any name: recognised by parsing
    copy.write_bytes(TOKENIZER_BIN.read_bytes())
    assert is_tokenizer_bin(copy)
    assert tokenizer_from_path(copy).encode("once").ids == (1, 402)


def _write_bin(path: Path, pieces: list[bytes], scores: list[float]) -> Path:
    with open(path, "wb") as f:
        f.write(struct.pack("<I", max(len(p) for p in pieces)))
        for piece, score in zip(pieces, scores):
            f.write(struct.pack("<fI", score, len(piece)) + piece)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda p: p.__setitem__(300, p[301]), "are the same text"),
    (lambda p: p.__setitem__(300, b"\xff\xfe"), "is not UTF-8"),
    (lambda p: p.__setitem__(10, b"<0x7>"), "byte fallback"),
])
def test_refused_when_run_c_cannot_be_reproduced(tmp_path, change, message):
    pieces = list(PIECES)
    change(pieces)
    with pytest.raises(CheckpointError, match=message):
        llama2c_tokenizer(_write_bin(tmp_path / "tokenizer.bin", pieces, SCORES))


def test_not_a_tokenizer_bin(tmp_path):
    cut = tmp_path / "cut.bin"
    cut.write_bytes(TOKENIZER_BIN.read_bytes()[:-3])  # ends inside a piece
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 8)
    for path in (cut, junk, TOKENIZER_BIN.parent / "reference.npz"):
        assert not is_tokenizer_bin(path)
        with pytest.raises(CheckpointError, match="not a llama2.c tokenizer.bin"):
            llama2c_tokenizer(path)


def test_a_low_score_never_merges(tmp_path):
    """run.c starts its search at -1e10: a piece scored at or below it is never merged into."""
    scores = list(SCORES)
    scores[402] = -1e11  # " once"
    tok = llama2c_tokenizer(_write_bin(tmp_path / "tokenizer.bin", PIECES, scores))
    assert 402 not in tok.encode("once upon").ids
    assert list(tok.encode("once upon").ids) == run_c_encode("once upon", PIECES, scores)


def test_edits_re_encode_only_the_tail_and_equal_a_full_encode(tok):
    """encode_edit keeps the tokens before an edit: the dummy prefix stands in for the space at
    the cut, so a long text is not encoded again on every keystroke, and the result is encode()'s."""
    rng = random.Random(5)
    words = [p.decode() for p in PIECES[259:]] + [" zoé", " 😀", "\n", " 42."]
    text = "".join(rng.choice(words) for _ in range(3000))
    before = tok.encode(text)
    calls = []
    original = tok._encode
    tok._encode = lambda t, *a, **k: calls.append(len(t)) or original(t, *a, **k)
    try:
        for _ in range(60):
            i = rng.randint(len(text) - 300, len(text))
            edited = text[:i] + rng.choice(["", "a", " the", "é", " ", "  "]) + text[i + rng.randint(0, 4):]
            assert tok.encode_edit(edited, text, before) == original(edited, add_special_tokens=True)
    finally:
        del tok._encode
    assert sum(n < 1000 for n in calls) >= 50  # nearly every edit re-encoded a short tail only
