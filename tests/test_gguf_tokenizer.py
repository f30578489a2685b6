"""The vocabularies of GGUF files, built with ``tokenizers`` from ``tokenizer.ggml.*``, give exactly what
a plain transcription of each algorithm gives, on the fixtures' texts and on thousands of random ones.

The two oracles below are kept in this test only: SentencePiece-style BPE as llama.cpp's
``llm_tokenizer_spm`` runs it (merge the adjacent pair whose concatenation is the best-scoring
normal piece, the leftmost on a tie; UTF-8 bytes as ``<0xNN>`` tokens for what is left unknown),
and GPT-2-style byte-level BPE (split with the pre-tokenizer's regex, here in llama.cpp's own
spelling without ``(?i:…)``, then merge by rank).
"""

from __future__ import annotations

import math
import unicodedata

import numpy as np
import pytest
import regex
from gguf import GGUFReader, GGUFValueType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguf_files import LLAMA, QWEN2, gguf_file, reference, rewrite
from model.checkpoint import load_any
from model.tokens.names import BYTE_OF_CHAR

V = GGUFValueType
# Qwen2's pre-tokenizer as llama.cpp's llama-vocab.cpp writes it (case folded by hand).
QWEN2_SPLIT = regex.compile(r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAR_OF_BYTE = {b: c for c, b in BYTE_OF_CHAR.items()}


def _fields(path):
    return {k: f.contents() for k, f in GGUFReader(path).fields.items() if k.startswith("tokenizer.")}


LLAMA_VOCAB, QWEN2_VOCAB = _fields(gguf_file(LLAMA, "F32")), _fields(gguf_file(QWEN2, "F16"))


def spm_encode(text: str, vocab=LLAMA_VOCAB, bos: bool = True, prefix: bool = True) -> list[int]:
    """llama.cpp's SentencePiece-style encode (with BOS first, and a space before the text)."""
    tokens, scores, types = vocab["tokenizer.ggml.tokens"], vocab["tokenizer.ggml.scores"], vocab["tokenizer.ggml.token_type"]
    ids = {t: i for i, t in enumerate(tokens)}
    out = [vocab["tokenizer.ggml.bos_token_id"]] if bos else []
    if not text:
        return out
    symbols = list((" " * prefix + text).replace(" ", "▁"))
    while True:
        best = None
        for k in range(len(symbols) - 1):
            i = ids.get(symbols[k] + symbols[k + 1])
            if i is not None and types[i] == 1 and (best is None or scores[i] > best[0]):
                best = (scores[i], k)
        if best is None:
            break
        k = best[1]
        symbols[k:k + 2] = [symbols[k] + symbols[k + 1]]
    for symbol in symbols:
        if symbol in ids:
            out.append(ids[symbol])
        else:
            out.extend(ids[f"<0x{b:02X}>"] for b in symbol.encode("utf-8"))
    return out


def bpe_encode(text: str, vocab=QWEN2_VOCAB) -> list[int]:
    """Byte-level BPE: NFC (Qwen2's normalizer), the regex's pieces, each merged by rank."""
    ids = {t: i for i, t in enumerate(vocab["tokenizer.ggml.tokens"])}
    ranks = {tuple(m.split(" ")): r for r, m in enumerate(vocab["tokenizer.ggml.merges"])}
    out = []
    for piece in QWEN2_SPLIT.findall(unicodedata.normalize("NFC", text)):
        word = [CHAR_OF_BYTE[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            rank, k = min((ranks.get((word[k], word[k + 1]), math.inf), k) for k in range(len(word) - 1))
            if rank == math.inf:
                break
            word[k:k + 2] = [word[k] + word[k + 1]]
        out.extend(ids[w] for w in word)
    return out


@pytest.fixture(scope="module")
def llama_tok():
    return load_any(gguf_file(LLAMA, "F32")).tokenizer


@pytest.fixture(scope="module")
def qwen2_tok():
    return load_any(gguf_file(QWEN2, "F16")).tokenizer


def test_the_oracles_give_the_fixtures_ids():
    for folder, encode in ((LLAMA, spm_encode), (QWEN2, bpe_encode)):
        ref = reference(folder, "F16")
        assert encode(str(ref["text"])) == ref["token_ids"].tolist()


ODD_TEXTS = ["", " ", "  two  spaces ", "A Capital", "zoé 😀", "once\nupon\ta time", "123 4567", "ça, c'est l'été!",
             "don't WE'LL", "▁already", "<0x41>", "中文", "\x00"]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_odd_texts_tokenize_as_the_oracles(llama_tok, qwen2_tok, text):
    assert list(llama_tok.encode(text).ids) == spm_encode(text)
    assert list(qwen2_tok.encode(text).ids) == bpe_encode(text)


ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCé.,!?'’-013\n\t😀中"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_random_texts_tokenize_as_the_oracles(llama_tok, qwen2_tok, text):
    assert list(llama_tok.encode(text).ids) == spm_encode(text)
    assert list(qwen2_tok.encode(text).ids) == bpe_encode(text)


def test_random_words_of_the_fixture_text(llama_tok, qwen2_tok):
    words = str(reference(LLAMA, "F16")["text"]).replace(",", " ,").split()
    rng = np.random.default_rng(0)
    for _ in range(500):
        text = " ".join(rng.choice(words, size=rng.integers(1, 12)))
        assert list(llama_tok.encode(text).ids) == spm_encode(text)
        assert list(qwen2_tok.encode(text).ids) == bpe_encode(text)


def test_special_tokens_are_found_whole_and_bos_follows_the_metadata(llama_tok, qwen2_tok):
    im_start = QWEN2_VOCAB["tokenizer.ggml.tokens"].index("<|im_start|>")
    assert qwen2_tok.encode("<|im_start|>hi").ids[0] == im_start
    assert qwen2_tok.prefix_ids == ()  # add_bos_token false
    assert llama_tok.prefix_ids == (1,) and llama_tok.encode("</s>").ids == (1, 2)


def test_decoding_gives_the_text_back(llama_tok, qwen2_tok):
    for text in ("once upon a time, zoé 😀", "  two  spaces", "A\nB"):
        assert llama_tok.decode(llama_tok.encode(text).ids[1:]) == text
        assert qwen2_tok.decode(qwen2_tok.encode(text).ids) == text


def test_add_bos_and_the_space_prefix_follow_the_metadata(tmp_path):
    path = rewrite(gguf_file(LLAMA, "F32"), tmp_path / "plain.gguf",
                   set_keys={"tokenizer.ggml.add_bos_token": (False, V.BOOL), "tokenizer.ggml.add_space_prefix": (False, V.BOOL)})
    tok = load_any(path).tokenizer
    assert tok.prefix_ids == ()
    for text in ("once upon", " once upon", "zoé 😀"):
        assert list(tok.encode(text).ids) == spm_encode(text, bos=False, prefix=False)
    assert tok.encode("once").ids != load_any(gguf_file(LLAMA, "F32")).tokenizer.encode("once").ids[1:]
    assert tok.decode(tok.encode(" once").ids) == " once"
