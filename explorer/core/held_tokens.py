"""The session's text and its tokens, kept together: ids the model gave are held as they are.

Typed text is tokenized (:func:`~explorer.core.editor_text.encode_text`). Tokens that come as ids
(each one generation wrote, a next-token bar clicked) are the model's own and stay so: the text
gets their rendering (:meth:`model.Tokenizer.render`), which need not encode back to them (a byte
token that completes no character, a generated ``<unk>``, two tokens a tokenizer would merge).
Such tokens are *held* (:attr:`TokenText.held`). An edit re-tokenizes only the text between the
held tokens around it (:func:`edited`); a held token the edit touches becomes typed text. No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from explorer.core.editor_text import EMPTY, encode_text
from explorer.core.token_text import append_id
from model import Checkpoint, Encoding, Tokenizer
from model.tokens.names import WORD, unnamed
from model.tokens.tokenizer import common_prefix_length

JOINED_TOKENS = 3  # held tokens before an insertion rendered again with it (a character has at most 4 bytes)


@dataclass(frozen=True)
class TokenText:
    """A text and its tokens.

    Attributes
    ----------
    text : str
    encoding : Encoding         the tokens, their spans in ``text`` (the whole text, before cropping).
    held : frozenset of int     indices of the tokens given as ids (their text is their rendering).
    """

    text: str = ""
    encoding: Encoding = EMPTY
    held: frozenset[int] = field(default_factory=frozenset)


def _shifted(encoding: Encoding, lo: int, hi: int, delta: int) -> Encoding:
    """Tokens ``lo:hi`` of an encoding with their spans moved ``delta`` characters."""
    spans = encoding.spans[lo:hi]
    if delta:
        spans = tuple((s + delta, e + delta) for s, e in spans)
    return Encoding(encoding.ids[lo:hi], encoding.tokens[lo:hi], spans)


def _joined(*parts: Encoding) -> Encoding:
    return Encoding(sum((p.ids for p in parts), ()), sum((p.tokens for p in parts), ()),
                    sum((p.spans for p in parts), ()))


def _typed_ids(text_before: str, ids: Sequence[int]) -> tuple[str, Encoding]:
    """Ids written as a model without a vocabulary takes them (``", 5"``), after ``text_before``."""
    text = text_before
    spans = []
    for token_id in ids:
        text = append_id(text, int(token_id))
        spans.append((len(text) - len(str(int(token_id))), len(text)))
    shift = len(text_before)
    return text[shift:], Encoding(tuple(map(int, ids)), tuple(unnamed(i) for i in ids),
                                  tuple((s - shift, e - shift) for s, e in spans))


def spliced(tokenizer: Tokenizer | None, tt: TokenText, start: int, stop: int, ids: Sequence[int]) -> TokenText:
    """``tt`` with its tokens ``start:stop`` replaced by ``ids``, which are held, their rendering in the text.

    An insertion is ``start == stop`` (at the end: ``len(tt.encoding)``). A few held tokens before
    ``start`` are rendered again with ``ids`` (not for word-level vocabularies), so that a
    character the model writes in several byte tokens is one character once its last byte comes.
    Without a tokenizer (typed ids), the ids are written into the text and nothing is held.
    """
    enc, ids = tt.encoding, [int(i) for i in ids]
    k = start
    if tokenizer is not None and tokenizer.kind != WORD:
        while k > 0 and k - 1 in tt.held and (start - k < JOINED_TOKENS or enc.spans[k - 1][0] == enc.spans[k][0]):
            k -= 1
    a = enc.spans[k][0] if k < start else (enc.spans[start - 1][1] if start > 0 else 0)
    b = max([a] + [e for _, e in enc.spans[k:stop]])
    if stop == len(enc) and stop > start:
        b = len(tt.text)  # the whole rest: a branch in place of what followed
    after = tt.text[b:]
    ids = list(enc.ids[k:start]) + ids
    if tokenizer is None:
        text, new = _typed_ids(tt.text[:a], ids)
        held = frozenset()
    else:
        text, spans = tokenizer.render(ids, tt.text[:a])
        if tokenizer.kind == WORD and after[:1].isalnum() and text[-1:] and not text[-1:].isspace():
            text += " "
        new = Encoding(tuple(ids), tuple(tokenizer.id_to_token(i) for i in ids), tuple(spans))
        held = ({i for i in tt.held if i < k} | set(range(k, k + len(ids)))
                | {i - stop + k + len(ids) for i in tt.held if i >= stop})
    delta = a + len(text) - b
    encoding = _joined(_shifted(enc, 0, k, 0), _shifted(new, 0, len(new), a), _shifted(enc, stop, len(enc), delta))
    return TokenText(tt.text[:a] + text + after, encoding, frozenset(held))


def _edit_region(before: str, text: str) -> tuple[int, int, int]:
    """(n, e, delta): ``before[n:e]`` became ``text[n:e + delta]``, the rest is the same."""
    n = common_prefix_length(before, text)
    m = common_prefix_length(before[n:][::-1], text[n:][::-1])
    return n, len(before) - m, len(text) - len(before)


def edited(checkpoint: Checkpoint | None, tt: TokenText, text: str) -> TokenText:
    """``tt`` after its text became ``text``: the held tokens the edit does not touch are kept (spans
    moved), and only the text between the held tokens around the edit is tokenized again.

    Without held tokens this is the text's own encoding (:func:`~explorer.core.editor_text.encode_text`,
    from shortly before the edit for a long text). A held token the edit changes becomes typed
    text; so does one right before the edit where the tokenizer cannot start anew after it (a
    dummy-prefix tokenizer needs a space there).
    """
    tokenizer = checkpoint.tokenizer if checkpoint is not None else None
    if not tt.held or tokenizer is None or not text:
        return TokenText(text, encode_text(checkpoint, text, tt.text, tt.encoding))
    spans, (n, e, delta) = tt.encoding.spans, _edit_region(tt.text, text)
    before = [i for i in sorted(tt.held) if spans[i][1] <= n]
    after = [i for i in sorted(tt.held) if spans[i][1] > n and spans[i][0] >= e]
    right = after[0] if after else None
    hi = len(tt.text) if right is None else spans[right][0]
    while True:
        left = before[-1] if before else None
        if left is None:
            middle = _first_part(checkpoint, tt, text[:hi + delta], right)
            break
        middle = tokenizer.encode_part(text, spans[left][1], hi + delta)
        if middle is not None:
            break
        before.pop()  # the tokenizer cannot start there: the held token joins the typed text
    n_tokens = len(tt.encoding)
    first, last = (0 if left is None else left + 1), (n_tokens if right is None else right)
    encoding = _joined(_shifted(tt.encoding, 0, first, 0), middle, _shifted(tt.encoding, last, n_tokens, delta))
    moved = len(middle) - (last - first)
    return TokenText(text, encoding, frozenset(before) | frozenset(i + moved for i in after))


def _first_part(checkpoint: Checkpoint, tt: TokenText, text: str, right: int | None) -> Encoding:
    """The tokens of the text before the first held token: encoded as a text of its own (the special
    tokens a text starts with included), from shortly before the edit when it is long."""
    if text:
        before = tt.text if right is None else tt.text[:tt.encoding.spans[right][0]]
        return encode_text(checkpoint, text, before, _shifted(tt.encoding, 0, len(tt.encoding) if right is None else right, 0))
    prefix = checkpoint.tokenizer.prefix_ids
    return Encoding(prefix, tuple(checkpoint.tokenizer.id_to_token(i) for i in prefix), ((0, 0),) * len(prefix))
