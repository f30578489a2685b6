"""A tokenizer's kind and the readable names of its tokens (model.tokens.names), on the fixtures'
own tokenizers: GPT-2's byte-level BPE and a Llama-style BPE with byte fallback and a BOS."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers

from model.formats.vocab import char_tokenizer
from model.tokens.names import CONTINUATION, KIND_DESCRIPTIONS, KINDS, escaped
from model.tokens.tokenizer import Tokenizer, train_word_tokenizer

ARCH = Path(__file__).parent / "fixtures" / "arch"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_json((ARCH / "hf-gpt2" / "tokenizer.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def llama() -> Tokenizer:
    return Tokenizer.from_json((ARCH / "hf-llama" / "tokenizer.json").read_text(encoding="utf-8"))


def test_kinds(gpt2, llama):
    assert gpt2.kind == "byte-level BPE" and llama.kind == "byte-fallback BPE"
    assert train_word_tokenizer(["the cat sat"], 10).kind == "word"
    assert char_tokenizer(list("ab \n")).kind == "char"
    wordpiece = Tokenizer(HFTokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]")))
    unigram = Tokenizer(HFTokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0)], 0)))
    plain = HFTokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    plain.pre_tokenizer = pre_tokenizers.Whitespace()
    assert (wordpiece.kind, unigram.kind, Tokenizer(plain).kind) == ("WordPiece", "Unigram", "BPE")
    assert set(KINDS) == set(KIND_DESCRIPTIONS)


def test_one_token_on_its_own(gpt2, llama):
    assert gpt2.display(gpt2.token_to_id("Ġupon")) == " upon" and gpt2.id_to_token(gpt2.token_to_id("Ġupon")) == "Ġupon"
    assert gpt2.display(gpt2.token_to_id("Ċ")) == "\n" and gpt2.display(6000) == "<|endoftext|>"
    assert gpt2.display(gpt2.token_to_id("Ã©")) == "é"
    assert gpt2.display(gpt2.token_to_id("ð")) == "\\xf0"  # a byte that starts a character, alone
    assert llama.display(llama.token_to_id("▁once")) == " once" and llama.display(1) == "<s>"
    assert llama.display(llama.token_to_id("<0x0A>")) == "\n" and llama.display(llama.token_to_id("<0xC3>")) == "\\xc3"
    assert llama.display(99_999) == "#99999"


def test_a_character_split_over_tokens_is_shown_once(gpt2, llama):
    enc = llama.encode("zoé lived")
    names = llama.display_sequence(enc.ids)
    assert [llama.id_to_token(i) for i in enc.ids[-4:]] == ["<0xC3>", "<0xA9>", "▁li", "ved"]
    assert names[-4:] == ["é", CONTINUATION, " li", "ved"] and names[0] == "<s>"
    enc = gpt2.encode("a 🤗!")  # the truncated GPT-2 vocabulary splits the emoji into byte tokens
    names = gpt2.display_sequence(enc.ids)
    assert enc.tokens == ("a", "Ġ", "ð", "Ł", "¤", "Ĺ", "!")
    assert names == ["a", " ", "🤗", CONTINUATION, CONTINUATION, CONTINUATION, "!"]
    assert gpt2.display_sequence([gpt2.token_to_id("ð")]) == ["\\xf0"]  # never completed: its byte


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters=CONTINUATION + "<", blacklist_categories=("Cs",)),
               max_size=30))
def test_the_names_spell_the_text(gpt2, llama, text):
    # a character without a glyph (a control character) is spelled as its escape: escaped(text)
    assert "".join(gpt2.display_sequence(gpt2.encode(text).ids)).replace(CONTINUATION, "") == escaped(text)
    enc = llama.encode(text)
    assert enc.ids[0] == 1 and enc.spans[0] == (0, 0)  # the BOS the post-processor adds
    # The normalizer writes each space as "▁" and puts one before a text.
    assert "".join(llama.display_sequence(enc.ids[1:])).replace(CONTINUATION, "") == escaped(" " + text if text else "")


def test_bos_is_kept_by_incremental_encoding(llama):
    before = "once upon a time there was a little girl. " * 40
    text = before + "she"
    assert llama.prefix_ids == (1,) and llama.encode(text).ids[0] == 1
    assert llama.encode_edit(text, before, llama.encode(before)) == llama.encode(text)
    assert llama.encode("").ids == (1,)
