"""The word-level tokenizer: normalisation, splitting, unknowns, spans, odd text."""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.tokens.tokenizer import EOT, UNK, Tokenizer, train_word_tokenizer, word_tokenizer_from_vocab

TEXTS = ["The cat sat on the mat.", "Don't worry, the dog and the cat are friends!", "A café, on the mat."]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_word_tokenizer(TEXTS, vocab_size=64)


def test_special_tokens_come_first(tok):
    assert tok.token_to_id(UNK) == 0 and tok.token_to_id(EOT) == 1 and tok.unk_id == 0


def test_most_frequent_words_come_first():
    t = train_word_tokenizer(["b a a a c b"], vocab_size=10)
    assert [t.id_to_token(i) for i in range(2, 5)] == ["a", "b", "c"]


def test_vocabulary_cap_is_respected():
    t = train_word_tokenizer(["a b c d e f g h"], vocab_size=5)
    assert t.vocab_size == 5
    assert t.encode("a h").tokens.count(UNK) == 1


def test_whitespace_runs_are_separators(tok):
    assert tok.encode("the  cat\t\tsat \n").ids == tok.encode("the cat sat").ids
    assert tok.encode("the\u00a0cat\u2003sat").ids == tok.encode("the cat sat").ids


def test_unknown_words_and_emoji_become_unk(tok):
    enc = tok.encode("the cat zzyzx sat 🤗 on")
    assert list(enc.tokens) == ["the", "cat", UNK, "sat", UNK, "on"]


def test_words_keep_inner_apostrophes_and_punctuation_splits(tok):
    assert list(tok.encode("Don't worry, friends!").tokens) == ["don't", "worry", ",", "friends", "!"]


def test_nfd_and_nfc_encode_the_same(tok):
    nfd, nfc = unicodedata.normalize("NFD", "café"), unicodedata.normalize("NFC", "café")
    assert nfd != nfc
    assert tok.encode(nfd).ids == tok.encode(nfc).ids == (tok.token_to_id("café"),)


def test_spans_point_into_the_typed_text(tok):
    text = "  The CAT, sat"
    enc = tok.encode(text)
    assert [text[a:b] for a, b in enc.spans] == ["The", "CAT", ",", "sat"]
    nfd = unicodedata.normalize("NFD", "a café")
    assert [nfd[a:b] for a, b in tok.encode(nfd).spans] == ["a", nfd[2:]]


def test_endoftext_is_one_token(tok):
    assert tok.encode("the<|endoftext|>cat").ids == (tok.token_to_id("the"), 1, tok.token_to_id("cat"))


def test_empty_and_blank_text_give_no_tokens(tok):
    assert len(tok.encode("")) == 0 and len(tok.encode(" \n\t ")) == 0


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_encodes_without_raising(text):
    tok = train_word_tokenizer(TEXTS, vocab_size=64)
    enc = tok.encode(text)
    assert len(enc.ids) == len(enc.tokens) == len(enc.spans)
    assert all(0 <= i < tok.vocab_size for i in enc.ids)
    assert all(0 <= a <= b <= len(text) for a, b in enc.spans)


def test_odd_text_never_raises(tok):
    for text in ["a\ud800b", "👨\u200d👩\u200d👧", "\x00\x01", "\u202e", "ﬁ", "x" * 10_000, "\ud800e\u0301 cafe\u0301"]:
        tok.encode(text)


def test_token_strings_are_the_vocabulary_entries_of_the_ids(tok):
    enc = tok.encode("The cat sat on a zzqx! Café, cafe\u0301 and 🙂.")
    assert tok.unk_id in enc.ids  # an unknown word is among them
    assert enc.tokens == tuple(tok.id_to_token(i) for i in enc.ids)


def test_json_round_trip(tok):
    again = Tokenizer.from_json(tok.to_json())
    assert again.encode("the cat, zzz").ids == tok.encode("the cat, zzz").ids
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        Tokenizer.from_json("{not json")


def test_vocab_list_tokenizer():
    t = word_tokenizer_from_vocab([UNK, "the", "cat", "."])
    assert t.encode("The cat. dog").ids == (1, 2, 3, 0)
    with pytest.raises(ValueError, match="duplicate"):
        word_tokenizer_from_vocab([UNK, "a", "a"])


# Pieces that stress word boundaries: runs of spaces and newlines, punctuation, apostrophes,
# decomposed accents (a combining mark after a space), emoji, <|endoftext|>.
PIECES = ["the", "cat", "Café", "cafe\u0301", " ", "  ", "\n", "\t", ".", ",", "!", "'s", "don't", "🙂", "\u0301",
          "<|endoftext|>", "zzqx", "1984", "x"]


def _edit_tokenizers():
    from pathlib import Path

    from model.formats.llama2c.vocab import llama2c_tokenizer
    from model.formats.vocab import char_tokenizer, gpt2_tokenizer

    llama2c = Path(__file__).parent / "fixtures" / "arch" / "llama2c-v0" / "tokenizer.bin"  # a dummy prefix and BOS
    found = [train_word_tokenizer(TEXTS, vocab_size=64), char_tokenizer("abcdefghijklmnopqrstuvwxyz .,!'\n"),
             llama2c_tokenizer(llama2c)]
    found.append(gpt2_tokenizer(Path(__file__).resolve().parents[1] / "assets" / "gpt2-bpe"))
    return found


EDIT_TOKENIZERS = _edit_tokenizers()


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(base=st.lists(st.sampled_from(PIECES), min_size=0, max_size=60),
       edit=st.lists(st.sampled_from(PIECES), max_size=3), where=st.floats(0, 1), removed=st.integers(0, 6),
       which=st.integers(0, 3))
def test_encoding_an_edit_gives_what_encoding_the_whole_text_gives(base, edit, where, removed, which):
    tok = EDIT_TOKENIZERS[which % len(EDIT_TOKENIZERS)]
    before = "".join(base)
    at = int(where * len(before))
    text = before[:at] + "".join(edit) + before[at + removed:]
    assert tok.encode_edit(text, before, tok.encode(before)) == tok.encode(text)


def test_typing_at_the_end_of_a_long_text_re_encodes_only_the_end(tok, monkeypatch):
    before = "the cat sat on the mat . " * 2000
    old = tok.encode(before)
    text = before + "the dog"
    full = tok.encode(text)
    seen = []
    encode = tok._encode
    monkeypatch.setattr(tok, "_encode", lambda text, *a, **k: seen.append(len(text)) or encode(text, *a, **k))
    assert tok.encode_edit(text, before, old) == full
    assert seen and max(seen) < 100  # only the last few words, not 50,000 characters


def test_an_unknown_token_of_another_name_is_no_letters_either():
    """A vocabulary whose unknown token is "[UNK]" (WordPiece's name) had no unk_id: a generated one went
    into the text as the letters "[UNK]"."""
    from tokenizers import Tokenizer as HF
    from tokenizers import models, pre_tokenizers

    hf = HF(models.WordLevel({"[UNK]": 0, "the": 1, "cat": 2}, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    t = Tokenizer(hf)
    assert t.unk_id == 0 == t.encode("the dog").ids[1]
    assert t.render([1, 0, 2])[0] == "the \ufffd cat" and "[" not in t.decode([0])
