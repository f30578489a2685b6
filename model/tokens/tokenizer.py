"""Tokenizers: a thin wrapper over Hugging Face ``tokenizers`` that also reports character spans.

The project's own tokenizer is word-level (:func:`train_word_tokenizer`): NFKC and lowercase;
words (with inner apostrophes) and each punctuation mark are tokens; special tokens ``<unk>``
(id 0) and ``<|endoftext|>`` (id 1). Any ``tokenizers.Tokenizer`` (a character vocabulary,
GPT-2's byte-level BPE, Llama's BPE with byte fallback) can be wrapped the same way, and every
one is stored as its standard tokenizer.json. A :class:`Tokenizer` knows its kind and shows each
token as readable text (:mod:`model.tokens.names`).
"""

from __future__ import annotations

import bisect
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from tokenizers import Regex, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import WordLevel

from model.tokens.names import TokenNames, unnamed
from model.tokens.render import render
from model.tokens.checks import check_usable, encode_by_pieces, unk_hint

UNK = "<unk>"
EOT = "<|endoftext|>"
SPECIAL_TOKENS = (UNK, EOT)

# A word with inner apostrophes (don't, lily's), or any single character that is neither a
# word character nor whitespace (punctuation, symbols, emoji).
WORD_PATTERN = r"\w+(?:['’]\w+)*|[^\w\s]"


@dataclass(frozen=True)
class Encoding:
    """Tokens of a text.

    Attributes
    ----------
    ids : tuple of int             token ids, in [0, vocab_size).
    tokens : tuple of str          the vocabulary entry of each id (``<unk>`` for unknowns).
    spans : tuple of (int, int)    each token's [start, end) character offsets in the text.
    """

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]

    def __len__(self) -> int:
        return len(self.ids)


EDIT_MARGIN_TOKENS = 4  # tokens re-made before an edit (they must come out as they were)


def _clean(text: str) -> str:
    """Replace lone surrogates (which ``tokenizers`` cannot take) one-for-one, keeping offsets."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common start of two strings (a binary search over C-level compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # a[:lo] == b[:lo]; the answer is at most hi
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _word_boundary(text: str, i: int) -> bool:
    """True where a token ends at i and whitespace follows a non-space: every pre-tokenizer here
    (whitespace-and-punctuation words, GPT-2's regex) starts a new piece at i."""
    return 0 < i < len(text) and text[i].isspace() and not text[i - 1].isspace()


def _has_combining_marks(text: str) -> bool:
    """Whether ``text`` holds a combining mark (e.g. U+0301 of a decomposed "é"): a scan in numpy."""
    if text.isascii():
        return False
    codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    return any(unicodedata.combining(chr(c)) for c in np.unique(codepoints[codepoints >= 0x300]))


def _prepends_space(hf: HFTokenizer) -> bool:
    """Whether the normalizer puts a space (in its own spelling, such as ``▁``) before every
    non-empty text, as sentencepiece's dummy prefix does (llama2.c's and Llama's tokenizers)."""
    normalizer = hf.normalizer
    if normalizer is None:
        return False
    alone = normalizer.normalize_str("x")
    return alone != "x" and normalizer.normalize_str(" x")[1:] == alone


def _past_combining(text: str, end: int) -> int:
    """``end`` moved past combining marks that normalisation folded into the token before it."""
    while end < len(text) and unicodedata.combining(text[end]):
        end += 1
    return end


def _leading_special_tokens(hf: HFTokenizer) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The ids and names the tokenizer's post-processor puts before a text (Llama's ``<s>``)."""
    probe = hf.encode("a", add_special_tokens=True)
    n = 0
    while n < len(probe.ids) and probe.special_tokens_mask[n]:
        n += 1
    return tuple(probe.ids[:n]), tuple(probe.tokens[:n])


class Tokenizer:
    """Any ``tokenizers.Tokenizer``, with spans in the original text and a never-raising encode.

    Parameters
    ----------
    hf : tokenizers.Tokenizer

    Raises
    ------
    ValueError
        When the tokenizer cannot be used: the library fails on it, it fails on unknown text (an
        unknown-word token missing from its vocabulary), or its ids leave [0, vocab_size).

    Attributes
    ----------
    kind : str
        What kind of tokenizer it is: one of :data:`model.tokens.names.KINDS` (``"word"``,
        ``"char"``, ``"byte-level BPE"``, ``"byte-fallback BPE"``, ``"BPE"``, ``"Unigram"``,
        ``"WordPiece"``).
    prefix_ids : tuple of int
        The special tokens that :meth:`encode` puts before every text: those the tokenizer's
        post-processor adds in front of a single sequence (a BOS such as Llama's ``<s>``), as
        Hugging Face's tokenizers do by default. Tokens it adds after the text (an EOS) are not
        added: the explorer predicts what follows the text.
    """

    def __init__(self, hf: HFTokenizer) -> None:
        self.hf = hf
        try:  # tokenizers raises plain Exceptions (a post-processor naming a token it lacks, ...)
            self._id_to_token = {i: t for t, i in hf.get_vocab(with_added_tokens=True).items()}
            # the unknown token by its usual name, else by the one the model declares ("[UNK]" of WordPiece)
            self.unk_id = hf.token_to_id(UNK)
            if self.unk_id is None and isinstance(getattr(hf.model, "unk_token", None), str):
                self.unk_id = hf.token_to_id(hf.model.unk_token)
            self._space_prefix = _prepends_space(hf)
            self.prefix_ids, self._prefix_tokens = _leading_special_tokens(hf)
            self._names = TokenNames(hf, self._id_to_token)
        except Exception as exc:
            raise ValueError(f"not a usable tokenizer{unk_hint(hf)} ({exc})") from exc
        self.kind = self._names.kind
        check_usable(hf, self._id_to_token, self.vocab_size)

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce (its vocabulary with added tokens)."""
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> Encoding:
        """Tokenize ``text``; never raises for any str (emoji, odd whitespace, lone surrogates).

        A tokenizer is checked when it is made (see :func:`model.tokens.checks.check_usable`); should the library
        still fail on some text, the words it fails on give no token and the rest are encoded.

        Returns
        -------
        Encoding
            ids, token strings and [start, end) character spans into ``text``; the
            :attr:`prefix_ids` first, each with the empty span (0, 0).
        """
        plain = self._encode_text(text)
        if not self.prefix_ids:
            return plain
        return Encoding(ids=self.prefix_ids + plain.ids, tokens=self._prefix_tokens + plain.tokens,
                        spans=((0, 0),) * len(self.prefix_ids) + plain.spans)

    def _encode_text(self, text: str) -> Encoding:
        """The text's own tokens, without the leading special tokens."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return self._encode(text, add_special_tokens=False)

    def _encode(self, text: str, add_special_tokens: bool, shift: int = 0) -> Encoding:
        """The encoding of ``text`` with its spans moved ``shift`` characters on."""
        try:
            enc = self.hf.encode(_clean(text), add_special_tokens=add_special_tokens)
        except Exception:  # noqa: BLE001 - a checked tokenizer does not fail; one that does loses only what it cannot encode
            return self._encode_by_pieces(text, shift)
        spans = enc.offsets
        if _has_combining_marks(text):  # a per-token loop costs 0.2 s per MB of text
            spans = [(start, _past_combining(text, end)) for start, end in spans]
        if shift:
            spans = [(start + shift, end + shift) for start, end in spans]
        # enc.tokens are the vocabulary entries of enc.ids, made in Rust rather than looked up here.
        return Encoding(ids=tuple(enc.ids), tokens=tuple(enc.tokens), spans=tuple(spans))

    def _encode_by_pieces(self, text: str, shift: int) -> Encoding:
        """The fallback that keeps :meth:`encode` from raising (see :func:`encode_by_pieces`)."""
        ids, tokens, spans = encode_by_pieces(self.hf, text, _clean)
        spans = [(start + shift, _past_combining(text, end) + shift) for start, end in spans]
        return Encoding(ids=tuple(ids), tokens=tuple(tokens), spans=tuple(spans))

    def _encode_tail(self, text: str, cut: int) -> Encoding:
        """The tokens of ``text[cut:]`` as they come inside ``text`` (cut at a word boundary):
        without the special tokens a text starts with. A tokenizer that puts a space before every
        text (sentencepiece's dummy prefix) encodes ``text[cut + 1:]``, whose prefix stands in for
        the space at ``cut``; the first token then starts at ``cut``."""
        if not self._space_prefix:
            return self._encode(text[cut:], add_special_tokens=False, shift=cut)
        tail = self._encode(text[cut + 1:], add_special_tokens=False, shift=cut + 1)
        spans = ((cut, tail.spans[0][1]),) + tail.spans[1:] if tail.spans else ()
        return Encoding(ids=tail.ids, tokens=tail.tokens, spans=spans)

    def encode_part(self, text: str, start: int, end: int) -> Encoding | None:
        """The tokens of ``text[start:end]`` as they come after other text (no special tokens first),
        spans in ``text``; None where the tokenizer cannot start anew at ``start``: one that puts a
        space before every text (sentencepiece's dummy prefix) needs a space there, which the
        prefix then stands for (:meth:`_encode_tail`)."""
        if start >= end:
            return Encoding((), (), ())
        if self._space_prefix and text[start] != " ":
            return None
        part = self._encode_tail(text[:end], start)
        first = self._names.token_bytes(part.ids[0]) if part.ids else None
        if not self._space_prefix and first is not None and first[:1] == b" " and text[start] != " ":
            return None  # a space put before the text (a Metaspace pre-tokenizer's) that it does not have
        return part

    def encode_edit(self, text: str, before: str, before_encoding: Encoding) -> Encoding:
        """``encode(text)``, re-tokenizing only from shortly before where ``text`` leaves ``before``.

        Typing at the end of a long text (a pasted book) would otherwise tokenize all of it on
        every keystroke (0.35 s per MB). The tokens that end a few tokens before the first changed
        character are kept from ``before_encoding``, cut at a word boundary (a token end followed
        by whitespace, where both kinds of pre-tokenizer split; a plain space for a tokenizer with
        a dummy prefix, see :meth:`_encode_tail`); the rest of the text is encoded again, without
        the special tokens a text starts with. The re-made tokens that overlap kept text must equal the old ones, else the whole
        text is encoded: the result is always what ``encode(text)`` gives.

        Parameters
        ----------
        text : str
        before : str
            The previous text.
        before_encoding : Encoding
            ``encode(before)``.
        """
        n = common_prefix_length(text, before)
        spans = before_encoding.spans
        # Old tokens that end before the first change (one ending at it may go on: "cat" + "s").
        unchanged = bisect.bisect_left(spans, n, key=lambda span: span[1])
        kept = unchanged - EDIT_MARGIN_TOKENS
        while kept > 0 and not self._can_cut(before, spans[kept - 1][1]):
            kept -= 1
        if kept <= 0:
            return self.encode(text)
        tail = self._encode_tail(text, spans[kept - 1][1])
        overlap = unchanged - kept  # re-made tokens that must come out as they were
        if (overlap < 1 or tail.ids[:overlap] != before_encoding.ids[kept:kept + overlap]
                or tail.spans[:overlap] != spans[kept:kept + overlap]):
            return self.encode(text)  # the tokenizer did not split there as assumed
        return Encoding(ids=before_encoding.ids[:kept] + tail.ids,
                        tokens=before_encoding.tokens[:kept] + tail.tokens,
                        spans=spans[:kept] + tail.spans)

    def _can_cut(self, text: str, i: int) -> bool:
        """Whether :meth:`encode_edit` may re-encode from ``i``: a word boundary, and a plain space
        there when the tokenizer's dummy prefix must stand in for it."""
        return _word_boundary(text, i) and (not self._space_prefix or text[i] == " ")

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry for an id, or ``#id`` for an id outside the vocabulary."""
        name = self._id_to_token.get(int(token_id))
        return unnamed(token_id) if name is None else name

    def display(self, token_id: int) -> str:
        """The text an id stands for, readable: ``"Ġworld"`` -> ``" world"``, ``"▁once"`` -> ``" once"``,
        ``"<0x0A>"`` -> ``"\\n"`` (see :meth:`model.tokens.names.TokenNames.display`); ``#id`` outside
        the vocabulary. Use it wherever one token is named on its own (a next-token bar)."""
        return self._names.display(token_id)

    def display_sequence(self, ids: Sequence[int]) -> list[str]:
        """:meth:`display` of each id of a text, where a character split over consecutive tokens
        (``<0xC3>`` ``<0xA9>``) is shown once, on its first token, and the others show "⋯" (see
        :meth:`model.tokens.names.TokenNames.display_sequence`). Use it for a text's tokens."""
        return self._names.display_sequence(ids)

    def token_to_id(self, token: str) -> int | None:
        """The id of a vocabulary entry, or None."""
        return self.hf.token_to_id(token)

    def render(self, ids: Sequence[int], text_before: str = "") -> tuple[str, tuple[tuple[int, int], ...]]:
        """The text ids stand for when they follow ``text_before``, and each id's [start, end) span in
        it (see :func:`model.tokens.render.render`: bytes joined across tokens, U+FFFD for a byte
        that completes no character and for the unknown token, no text for a leading BOS, the
        dummy prefix's space dropped at the start of a text, words spaced)."""
        return render(self._names, ids, text_before, unk_id=self.unk_id, prefix_ids=self.prefix_ids,
                      space_prefix=self._space_prefix)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids at the start of a text (:meth:`render`'s text): ``decode([<s>, ▁Once])`` is
        "Once", as ``run.c`` prints it after BOS, and encodes back to those ids."""
        return self.render(ids)[0]

    def to_json(self) -> str:
        """The standard tokenizer.json text."""
        return self.hf.to_str()

    @staticmethod
    def same_vocabulary(a: "Tokenizer | None", b: "Tokenizer | None") -> bool:
        """Whether two tokenizers (or None) encode alike: one object, or the same tokenizer.json."""
        return a is b or (a is not None and b is not None and a.to_json() == b.to_json())

    @classmethod
    def from_json(cls, text: str) -> "Tokenizer":
        """Build from tokenizer.json text.

        Raises
        ------
        ValueError
            When the text is not a valid tokenizer.json.
        """
        try:
            return cls(HFTokenizer.from_str(text))
        except Exception as exc:  # tokenizers raises its own Exception subclasses
            raise ValueError(f"not a valid tokenizer.json: {exc}") from None


def _word_level_skeleton(vocab: dict[str, int] | None = None) -> HFTokenizer:
    hf = HFTokenizer(WordLevel(vocab=vocab, unk_token=UNK) if vocab else WordLevel(unk_token=UNK))
    hf.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")]
    )
    return hf


def train_word_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> Tokenizer:
    """Build the project's word-level tokenizer from texts, most frequent words first.

    Parameters
    ----------
    texts : iterable of str
    vocab_size : int
        Cap on the vocabulary, special tokens included (>= 3).

    Returns
    -------
    Tokenizer
        ``<unk>`` is id 0, ``<|endoftext|>`` id 1.

    Raises
    ------
    ValueError
        When vocab_size < 3.
    """
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be at least 3, got {vocab_size}")
    hf = _word_level_skeleton()
    trainer = trainers.WordLevelTrainer(
        vocab_size=vocab_size, min_frequency=1, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    hf.train_from_iterator(texts, trainer)
    hf.add_special_tokens(list(SPECIAL_TOKENS))
    return Tokenizer(hf)


def word_tokenizer_from_vocab(itos: Sequence[str], lowercase: bool = True) -> Tokenizer:
    """A word-level tokenizer with a given id -> word list (same splitting rules as ours).

    Raises
    ------
    ValueError
        When the list has duplicates.
    """
    vocab = {w: i for i, w in enumerate(itos)}
    if len(vocab) != len(itos):
        raise ValueError("the vocabulary list has duplicate entries")
    if UNK not in vocab:
        raise ValueError(f"the vocabulary has no {UNK} entry")
    hf = _word_level_skeleton(vocab)
    if not lowercase:
        hf.normalizer = normalizers.NFKC()
    hf.add_special_tokens([t for t in SPECIAL_TOKENS if t in vocab])
    return Tokenizer(hf)
