"""The session's text: as the editor stores it (:func:`as_editor_stores`) and as the model reads it
(:func:`encode_text`).

Qt's ``QPlainTextEdit.toPlainText()`` (``QTextDocument::toPlainText``) gives line breaks, paragraph
and line separators and Qt's frame marks as ``\\n`` and a no-break space as a space, and leaves a
lone surrogate out; :func:`as_editor_stores` does the same to any text the session is given (a
``--text`` argument, a Python caller, generation), so that the session and the editor always hold
the same characters (and character offsets). No Qt here.
"""

from __future__ import annotations

from explorer.core.token_text import ids_encoding
from model import Checkpoint, Encoding

EDIT_MIN_CHARS = 20_000  # longer texts are re-tokenized from the edit on (20 kB take about 7 ms whole)
EMPTY = Encoding(ids=(), tokens=(), spans=())

_EDITOR_CHANGES = "\r\u2028\u2029\ufdd0\ufdd1\u00a0"
_AS_EDITOR_STORES = str.maketrans({"\r": "\n", "\u2028": "\n", "\u2029": "\n", "\ufdd0": "\n",
                                   "\ufdd1": "\n", "\u00a0": " "})


def as_editor_stores(text: str) -> str:
    """``text`` as the editor stores it: line breaks (``\\r\\n``, ``\\r``, U+2028, U+2029, Qt's frame
    marks) as ``\\n``, a no-break space as a space, a surrogate pair as its character and a lone
    surrogate (``--text`` of bytes that are not UTF-8, a Python caller) left out, as Qt leaves it out.

    Each step runs only when the text has something for it: a 1 MB accented text had cost 60 ms
    a keystroke in ``str.translate`` alone.
    """
    text = str(text)
    try:
        text.encode("utf-8")  # fails only on a surrogate
    except UnicodeEncodeError:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if any(c in text for c in _EDITOR_CHANGES):
        text = text.translate(_AS_EDITOR_STORES)
    return text


def encode_text(checkpoint: Checkpoint | None, text: str, before: str | None = None,
                encoded: Encoding = EMPTY) -> Encoding:
    """The text as ``checkpoint``'s model reads it: its tokenizer's encoding, or without a
    vocabulary the ids typed in the text (``"3, 17, 5"``); empty without a checkpoint.

    ``before`` is the text that ``encoded`` encodes: a text longer than :data:`EDIT_MIN_CHARS` is
    then re-tokenized only from shortly before the edit (``Tokenizer.encode_edit``; the same result).
    """
    if checkpoint is None or not text:
        return EMPTY
    tok = checkpoint.tokenizer
    if tok is None:
        return ids_encoding(text, checkpoint.config.vocab_size)[0]
    if before is not None and len(text) > EDIT_MIN_CHARS and len(encoded):
        return tok.encode_edit(text, before, encoded)
    return tok.encode(text)
