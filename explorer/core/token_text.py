"""Token text without a screen: ids typed as text, and the readable names of a text's tokens.

- A model opened without a vocabulary (``Checkpoint.tokenizer is None``) takes its input as
  token ids typed into the text box, separated by commas, semicolons or whitespace
  (``"3, 17, 5"``); :func:`ids_encoding` turns such text into a :class:`model.Encoding` whose
  tokens are named ``#id`` and whose spans are the digits' own characters.
- How a token is shown (``"Ġworld"`` as " world", ``<0xC3>`` ``<0xA9>`` as "é") is the
  tokenizer's own business (:meth:`model.Tokenizer.display`); :func:`display_tokens` applies it
  to an encoding, or names typed ids without one.
"""

from __future__ import annotations

import re

from model import Encoding, Tokenizer
from model.tokens.names import unnamed

_PIECE = re.compile(r"[^\s,;]+")  # one typed item between separators


def display_tokens(tokenizer: Tokenizer | None, encoding: Encoding, start: int = 0) -> list[str]:
    """The readable names of an encoding's tokens from index ``start`` on.

    With a tokenizer, its :meth:`model.Tokenizer.display_sequence` (``"Ġworld"`` is shown
    " world", a character split over byte tokens once); without one (typed ids), the ``#id``
    names of :func:`ids_encoding`.
    """
    if tokenizer is None:
        return list(encoding.tokens[start:])
    return tokenizer.display_sequence(encoding.ids[start:])


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
            tokens.append(unnamed(piece))
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
