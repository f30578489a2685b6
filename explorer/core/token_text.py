"""Token text without a screen: ids typed as text, and readable names of byte-level BPE tokens.

- A model opened without a vocabulary (``Checkpoint.tokenizer is None``) takes its input as
  token ids typed into the text box, separated by commas, semicolons or whitespace
  (``"3, 17, 5"``); :func:`ids_encoding` turns such text into a :class:`model.Encoding` whose
  tokens are named ``#id`` and whose spans are the digits' own characters.
- GPT-2's byte-level BPE (Radford et al. 2019) names its tokens by a byte-to-character table in
  which a space is ``Ġ``, a newline ``Ċ`` and the bytes of a multi-byte character are spelled one
  character per byte (``’`` is ``âĢĻ``). :func:`readable_token` turns such a name back into the
  text it stands for (``"Ġworld"`` -> ``" world"``).
"""

from __future__ import annotations

import re
from typing import Iterable

from model import Encoding

_PIECE = re.compile(r"[^\s,;]+")  # one typed item between separators


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


BYTE_OF_CHAR = _byte_level_alphabet()


def is_byte_level(tokenizer) -> bool:
    """Whether a :class:`model.Tokenizer` names its tokens in GPT-2's byte-level alphabet.

    True when its ``tokenizers`` decoder or pre-tokenizer is ``ByteLevel`` (GPT-2's BPE and the
    BPE tokenizers trained like it); False for None, word- and character-level tokenizers.
    """
    hf = getattr(tokenizer, "hf", None)
    if hf is None:
        return False
    return any(type(part).__name__ == "ByteLevel" for part in (hf.decoder, hf.pre_tokenizer))


def readable_token(token: str) -> str:
    """The text a byte-level BPE token name stands for.

    ``"Ġworld"`` -> ``" world"``, ``"Ċ"`` -> ``"\\n"``, ``"âĢĻ"`` -> ``"’"``. Bytes that do not
    complete a UTF-8 character (a token holding part of an emoji) are shown as ``\\xNN``. A name
    with a character outside the alphabet (an added special token such as ``<|endoftext|>`` is
    inside it and comes back unchanged) is returned as it is.
    """
    try:
        raw = bytes(BYTE_OF_CHAR[c] for c in token)
    except KeyError:
        return token
    return raw.decode("utf-8", errors="backslashreplace")


def readable_tokens(tokens: Iterable[str], byte_level: bool) -> list[str]:
    """Each token name as text (:func:`readable_token`) when ``byte_level``, else unchanged."""
    return [readable_token(t) for t in tokens] if byte_level else list(tokens)


def readable_encoding(encoding: Encoding, byte_level: bool) -> Encoding:
    """The same encoding with its token names made readable (ids and spans unchanged)."""
    if not byte_level:
        return encoding
    return Encoding(ids=encoding.ids, tokens=tuple(readable_tokens(encoding.tokens, True)), spans=encoding.spans)


def ids_encoding(text: str, vocab_size: int) -> tuple[Encoding, list[str]]:
    """Token ids typed as text, for a model without a vocabulary.

    Parameters
    ----------
    text : str
        Ids in decimal digits separated by commas, semicolons or whitespace: ``"3, 17, 5"``.
    vocab_size : int
        Valid ids are 0 .. vocab_size - 1.

    Returns
    -------
    (Encoding, list of str)
        The ids, their names ``"#id"`` and the [start, end) character span of each; and the
        items that were left out (not a number, or not a valid id), as typed.
    """
    ids, tokens, spans, ignored = [], [], [], []
    for m in _PIECE.finditer(text):
        piece = m.group()
        # Length first: int() refuses more than 4,300 digits, and no id is that long.
        digits = piece.lstrip("0") or "0"
        if piece.isascii() and piece.isdigit() and len(digits) <= len(str(vocab_size)) and int(digits) < vocab_size:
            ids.append(int(piece))
            tokens.append(f"#{int(piece)}")
            spans.append((m.start(), m.end()))
        else:
            ignored.append(piece)
    return Encoding(ids=tuple(ids), tokens=tuple(tokens), spans=tuple(spans)), ignored


def append_id(text: str, token_id: int) -> str:
    """``text`` with one more typed id at its end (``"3, 17"`` -> ``"3, 17, 5"``)."""
    stripped = text.rstrip()
    if not stripped:
        return str(int(token_id))
    sep = " " if stripped.endswith((",", ";")) else ", "
    return f"{stripped}{sep}{int(token_id)}"
