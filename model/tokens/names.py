"""A tokenizer's kind and the readable text of its tokens (what every panel and the CLI show).

Vocabulary entries are often not the text they stand for:

- GPT-2's byte-level BPE (Radford et al. 2019) spells every byte as one printable character: a
  space is ``Ġ``, a newline ``Ċ``, and the two bytes of "é" are ``Ã©``. ``"Ġworld"`` is " world".
- SentencePiece-style BPE with byte fallback (Llama, llama2.c) writes a space as ``▁`` and a
  character outside its pieces as one token per UTF-8 byte, ``<0xC3>`` ``<0xA9>`` for "é".

:class:`TokenNames` turns ids into that text. One id on its own (:meth:`TokenNames.display`,
a next-token bar) shows its bytes decoded as UTF-8; bytes that do not complete a character are
shown as ``\\xNN`` escapes, and so is every character without a glyph (a control character
such as byte 1, ``<0x01>``: :func:`escaped`). A run of ids in a text (:meth:`TokenNames.display_sequence`, the
token chips) joins the bytes of consecutive tokens: a character split over several tokens is
shown whole on the token that holds its first byte, and each token that only continues it shows
:data:`CONTINUATION` (so "é" as ``<0xC3>`` ``<0xA9>`` is shown "é", "⋯"; a token that continues
one character and then starts others shows "⋯" followed by those). Special tokens (``<s>``,
``<|endoftext|>``) are shown as they are and never join a run.

The kind is read from the tokenizer's own parts (its model and the ``type`` fields of its
tokenizer.json pipeline), once, so that no caller inspects a ``tokenizers`` class.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

WORD = "word"
CHAR = "char"
BYTE_LEVEL_BPE = "byte-level BPE"
BYTE_FALLBACK_BPE = "byte-fallback BPE"
BPE = "BPE"
UNIGRAM = "Unigram"
WORDPIECE = "WordPiece"
#: Every kind :attr:`TokenNames.kind` can be.
KINDS = (WORD, CHAR, BYTE_LEVEL_BPE, BYTE_FALLBACK_BPE, BPE, UNIGRAM, WORDPIECE)
#: One line per kind, for people (the Model panel).
KIND_DESCRIPTIONS = {
    WORD: "word-level (one token per word or punctuation mark)",
    CHAR: "character-level (one token per character)",
    BYTE_LEVEL_BPE: "byte-level BPE (GPT-2 style: every byte has a token)",
    BYTE_FALLBACK_BPE: "BPE with byte fallback (SentencePiece style: ▁ for a space, <0xNN> byte tokens)",
    BPE: "BPE",
    UNIGRAM: "Unigram (SentencePiece)",
    WORDPIECE: "WordPiece",
}
#: Shown for a token that holds only the continuation of a character begun in the token before.
CONTINUATION = "⋯"
METASPACE = "▁"
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def escaped(text: str, keep: str = " \n\t") -> str:
    """``text`` with every character that is not printable written as its Python escape.

    Control characters (``\x01``, ``\x7f``, ``\r``), format characters (``\u200b``) and lone
    surrogates have no glyph: drawn, they are a missing-glyph box or nothing. They are written
    ``\x01``, ``\r``, ``\u200b``, the way a byte that completes no character is written
    (``\xb2``), so every token reads the same wherever it is drawn. The characters in ``keep``
    (space, newline, tab: the labels show them as ␣ ↵ →) stay as they are.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def _byte_level_alphabet() -> dict[str, int]:
    """Character -> byte of GPT-2's byte-level table.

    Printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes, in
    increasing order, are spelled by the characters U+0100, U+0101, ... (so byte 32, the space,
    is U+0120 'Ġ', and byte 10, the newline, is U+010A 'Ċ').
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in table.values()]
    table.update({chr(256 + n): b for n, b in enumerate(others)})
    return table


#: GPT-2's byte-level alphabet, character -> byte.
BYTE_OF_CHAR = _byte_level_alphabet()


def unnamed(token_id: int) -> str:
    """The name of a token id that no vocabulary names: ``"#id"`` (an id outside the vocabulary, or
    a model without a tokenizer). The one place this name is written."""
    return f"#{int(token_id)}"


def token_name(tokenizer, token_id: int) -> str:
    """The display text of one id (``tokenizer.display``), or :func:`unnamed` when ``tokenizer`` is
    None (a model opened without a vocabulary)."""
    return tokenizer.display(int(token_id)) if tokenizer is not None else unnamed(token_id)


def token_names(tokenizer, ids: Sequence[int]) -> list[str]:
    """The display text of a text's ids (``tokenizer.display_sequence``: a character split over
    several tokens shown once), or :func:`unnamed` of each id when ``tokenizer`` is None."""
    ids = [int(i) for i in ids]
    return tokenizer.display_sequence(ids) if tokenizer is not None else [unnamed(i) for i in ids]


def byte_level_bytes(token: str) -> bytes | None:
    """The bytes a byte-level BPE token name spells (``"Ġworld"`` -> ``b" world"``), or None when
    a character is outside GPT-2's alphabet."""
    try:
        return bytes(BYTE_OF_CHAR[c] for c in token)
    except KeyError:
        return None


def _types(component) -> set[str]:
    """Every ``type`` in a pipeline component's tokenizer.json form (a Sequence's parts too)."""
    if component is None:
        return set()
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                found.add(node["type"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    # __getstate__ is the component's tokenizer.json text (what pickling and to_str() write).
    walk(json.loads(component.__getstate__()))
    return found


def _processor_special_ids(hf: HFTokenizer) -> set[int]:
    """The ids the post-processor names as special tokens (a TemplateProcessing's ``special_tokens``,
    a BERT or RoBERTa processor's ``cls`` and ``sep``): control tokens such as llama2.c's ``<s>`` and
    ``</s>``, which stand for no text even where the vocabulary does not mark them special."""
    if hf.post_processor is None:
        return set()
    found: set[int] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "special_tokens" and isinstance(value, dict):
                    found.update(i for t in value.values() if isinstance(t, dict)
                                 for i in t.get("ids", ()) if isinstance(i, int))
                elif key in ("cls", "sep") and isinstance(value, list) and len(value) == 2 and isinstance(value[1], int):
                    found.add(value[1])
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(hf.post_processor.__getstate__()))
    return found


def _utf8_length(lead: int) -> int:
    """Bytes in the UTF-8 character that starts with byte ``lead`` (1 for a byte that cannot start one)."""
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 1


class TokenNames:
    """A tokenizer's kind and the display text of its ids.

    Parameters
    ----------
    hf : tokenizers.Tokenizer
    id_to_token : dict of int -> str
        Its vocabulary, added tokens included.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`: ``"word"``, ``"char"``, ``"byte-level BPE"`` (GPT-2),
        ``"byte-fallback BPE"`` (Llama, llama2.c), ``"BPE"``, ``"Unigram"``, ``"WordPiece"``.
    """

    def __init__(self, hf: HFTokenizer, id_to_token: dict[int, str]) -> None:
        self._id_to_token = id_to_token
        self._special = {i for i, t in hf.get_added_tokens_decoder().items() if t.special} | _processor_special_ids(hf)
        pipeline = _types(hf.pre_tokenizer) | _types(hf.decoder)
        decoder = hf.decoder.__getstate__().decode("utf-8") if hf.decoder is not None else ""
        model = hf.model
        self.byte_level = isinstance(model, models.BPE) and "ByteLevel" in pipeline
        self.byte_fallback = bool(getattr(model, "byte_fallback", False))
        self.metaspace = "Metaspace" in pipeline or METASPACE in decoder or self.byte_fallback
        self.kind = self._kind(model)
        self._cache: dict[int, tuple[str, bool]] = {}

    def _kind(self, model) -> str:
        if isinstance(model, models.BPE):
            return BYTE_LEVEL_BPE if self.byte_level else BYTE_FALLBACK_BPE if self.byte_fallback else BPE
        if isinstance(model, models.Unigram):
            return UNIGRAM
        if isinstance(model, models.WordPiece):
            return WORDPIECE
        plain = [t for i, t in self._id_to_token.items() if i not in self._special]
        return CHAR if plain and all(len(t) == 1 for t in plain) else WORD

    def entry(self, token_id: int) -> str | None:
        """The vocabulary entry of an id (``"Ġworld"``, ``<s>``), or None outside the vocabulary."""
        return self._id_to_token.get(int(token_id))

    def token_bytes(self, token_id: int) -> bytes | None:
        """The text bytes an id stands for; None for special tokens and ids outside the vocabulary."""
        token_id = int(token_id)
        token = self._id_to_token.get(token_id)
        if token is None or token_id in self._special:
            return None
        if self.byte_level:
            raw = byte_level_bytes(token)
            if raw is not None:
                return raw
        if self.byte_fallback and (m := _BYTE_TOKEN.fullmatch(token)):
            return bytes([int(m.group(1), 16)])
        if self.metaspace:
            token = token.replace(METASPACE, " ")
        return token.encode("utf-8", "surrogatepass")

    def _entry(self, token_id: int) -> tuple[str, bool]:
        """(display text, whether its bytes end or start inside a character), cached."""
        hit = self._cache.get(token_id)
        if hit is None:
            raw = self.token_bytes(token_id)
            if raw is None:
                name = self._id_to_token.get(token_id)
                hit = (unnamed(token_id) if name is None else name, False)
            else:
                try:
                    hit = (escaped(raw.decode("utf-8")), False)
                except UnicodeDecodeError:
                    hit = (escaped(raw.decode("utf-8", "backslashreplace")), True)
            self._cache[token_id] = hit
        return hit

    def display(self, token_id: int) -> str:
        """The text one id stands for, on its own (see the module docstring).

        ``"Ġworld"`` -> ``" world"``, ``"▁once"`` -> ``" once"``, ``"<0x0A>"`` -> ``"\\n"``; a byte
        that does not complete a character alone -> ``"\\xc3"``; a control character, which has no
        glyph, as its escape (``"<0x01>"`` -> ``"\\x01"``, :func:`escaped`); a special token as it
        is; an id outside the vocabulary -> ``"#id"``.
        """
        return self._entry(int(token_id))[0]

    def display_sequence(self, ids: Sequence[int]) -> list[str]:
        """The display text of each id of a text, in order, a split character shown once.

        Returns
        -------
        list of str
            One entry per id; :meth:`display` except where consecutive tokens hold the bytes of
            one character: it is shown on the token with its first byte, and :data:`CONTINUATION`
            on the others.
        """
        ids = [int(i) for i in ids]
        entries = [self._entry(i) for i in ids]
        names = [text for text, _ in entries]
        i = 0
        while i < len(ids):
            if not entries[i][1]:
                i += 1
                continue
            j = i
            while j < len(ids) and entries[j][1]:
                j += 1
            names[i:j] = self._join(ids[i:j])
            i = j
        return names

    def _join(self, ids: list[int]) -> list[str]:
        """Display texts of a run of tokens whose bytes only decode together."""
        pieces = [self.token_bytes(i) or b"" for i in ids]
        data = b"".join(pieces)
        owner = [k for k, piece in enumerate(pieces) for _ in piece]  # the token of each byte
        text = [""] * len(ids)
        continues = [False] * len(ids)
        p = 0
        while p < len(data):
            n = _utf8_length(data[p])
            try:
                unit = data[p:p + n].decode("utf-8")
            except UnicodeDecodeError:
                n, unit = 1, data[p:p + 1].decode("utf-8", "backslashreplace")
            text[owner[p]] += unit
            for q in range(p + 1, p + n):  # tokens that start inside this character continue it
                if owner[q] != owner[p]:
                    continues[owner[q]] = True
            p += n
        return [(CONTINUATION if c else "") + escaped(t) for t, c in zip(text, continues)]
