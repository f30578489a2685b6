"""What makes a ``tokenizers.Tokenizer`` safe to type into: checked when it is made, and a fallback
for :meth:`model.tokens.tokenizer.Tokenizer.encode`, which must never raise.

A tokenizer.json (or any tokenizer built from a file) can be one the library accepts and then
fails on: a word-level or BPE model whose unknown-word token is not in its vocabulary raises on
every word it does not know; a vocabulary whose ids leave [0, vocab_size) produces ids that no
embedding row has. :func:`check_usable` refuses both when the tokenizer is made.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from tokenizers import Tokenizer as HFTokenizer

# Text a tokenizer must encode without failing to be accepted: letters, digits, punctuation,
# accents, CJK, an emoji, whitespace runs, control characters, an unassigned and a private-use
# code point, and words no vocabulary holds (which need its unknown-word token, if it has one).
PROBE_TEXT = ("Zqxj 9 ~!? é ñ 中文 😀 \t\n  \x00\x7f \u0378 \U0010fffd qzxqzjvq <unk> [UNK] "
              "xqzjvqzxqzjvqxqzjvqzxqzjvqxqzjvqzxqzjvqxqzjvqzxqzjvqxqzjvqzxqzjvqxqzjvqzxqzjvq")
_PIECES = re.compile(r"\s*\S+|\s+")  # words with the whitespace before them, or trailing whitespace


def unk_hint(hf: HFTokenizer) -> str:
    """``": its unknown-word token '<x>' is not in its vocabulary"`` when that is so, else ""."""
    try:
        unk = getattr(hf.model, "unk_token", None)
        missing = isinstance(unk, str) and hf.token_to_id(unk) is None
    except Exception:  # noqa: BLE001 - only a hint
        return ""
    return f": its unknown-word token {unk[:40]!r} is not in its vocabulary" if missing else ""


def check_usable(hf: HFTokenizer, id_to_token: Mapping[int, str], vocab_size: int) -> None:
    """Refuse a tokenizer that would fail on text or give ids outside its vocabulary.

    Parameters
    ----------
    hf : tokenizers.Tokenizer
    id_to_token : mapping of int -> str
        Its vocabulary, added tokens included.
    vocab_size : int
        The ids it may produce are 0..vocab_size-1.

    Raises
    ------
    ValueError
        When an id is not in [0, vocab_size), or encoding :data:`PROBE_TEXT` fails (e.g. an
        unknown-word token that is not in the vocabulary: every unknown word would fail).
    """
    top = max(id_to_token, default=-1)
    if top >= vocab_size or min(id_to_token, default=0) < 0:
        raise ValueError(f"its token ids run up to {top:,} but its vocabulary has {vocab_size:,} entries "
                         f"(ids must be 0..{vocab_size - 1:,})")
    try:
        ids = hf.encode(PROBE_TEXT, add_special_tokens=True).ids
    except Exception as exc:  # noqa: BLE001 - whatever the library says is the reason
        raise ValueError(f"it fails on text it does not know{unk_hint(hf)} ({exc})") from None
    if any(not 0 <= i < vocab_size for i in ids):
        raise ValueError(f"it gives token ids outside its vocabulary of {vocab_size:,}")


def encode_by_pieces(hf: HFTokenizer, text: str, clean: Callable[[str], str]
                     ) -> tuple[list[int], list[str], list[tuple[int, int]]]:
    """``text`` encoded word by word (each with the whitespace before it), leaving out the words
    the library fails on: (ids, tokens, [start, end) spans in ``text``), without special tokens.
    ``clean`` makes a piece acceptable to the library (lone surrogates replaced one for one)."""
    ids: list[int] = []
    tokens: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in _PIECES.finditer(text):
        try:
            piece = hf.encode(clean(match.group()), add_special_tokens=False)
        except Exception:  # noqa: BLE001 - this word gives no token
            continue
        ids += piece.ids
        tokens += piece.tokens
        spans += [(match.start() + a, match.start() + b) for a, b in piece.offsets]
    return ids, tokens, spans
