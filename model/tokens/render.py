"""The text a run of token ids stands for, and each id's span in it: what the model wrote, as text.

Generation and a chosen next token give ids, not text; the text shown is their rendering, and
the ids stay what they are (a text need not encode back to the ids it was rendered from: a byte
token that completes no character, two tokens a tokenizer would have merged). :func:`render` is
the one place ids become text:

- the bytes of consecutive tokens are joined, so a character the model wrote in several byte
  tokens (``<0xC3>`` ``<0xA9>``) is that character, and every token holding one of its bytes
  spans it (as ``tokenizers`` spans such tokens when it encodes); a byte that completes no
  character is U+FFFD, the Unicode replacement character, one per byte;
- the unknown token (``<unk>``) and ids no vocabulary names are U+FFFD too (not the text
  ``<unk>``, which another tokenizer reads as ``<``, ``unk``, ``>``);
- special and control tokens (``<s>``, ``</s>``, ``<|endoftext|>``: those the vocabulary marks
  special, and those its post-processor names, as llama2.c's) stand for no text: they get the
  empty span where they stand and add nothing. Their name written into the text (``</s>``) was
  read again as ordinary text, by this tokenizer as "<", "/", "s", ">", and so by another model
  after a switch: a generated special token stays a token (a held chip showing its name), never
  letters;
- a tokenizer that puts a space before every text (sentencepiece's dummy prefix: Llama,
  llama2.c) has its first text token's leading space dropped at the start of the text, as
  ``run.c``'s ``decode`` drops it after BOS and Hugging Face's Llama decoder strips it: the
  text then encodes back to the same first token;
- a word-level vocabulary's words are separated by a space where the text before does not end
  in one (punctuation follows directly).
"""

from __future__ import annotations

from typing import Sequence

from model.tokens.names import WORD, TokenNames, _utf8_length

REPLACEMENT = "\ufffd"  # U+FFFD: a byte that completes no character, an unknown token
Span = tuple[int, int]


def _decode_run(parts: list[bytes], ks: list[int], start: int, spans: list[list[int]]) -> str:
    """Text of a run of tokens' joined bytes (``parts[i]`` the bytes of token ``ks[i]``), setting each
    token's span over the characters its bytes are in (``start``: the run's first character offset);
    a token without bytes gets the empty span where the next character starts."""
    data = b"".join(parts)
    owner = [k for k, part in zip(ks, parts) for _ in part]
    char_at = [0] * (len(data) + 1)  # byte offset -> offset of the character starting at or after it
    out, p, at = [], 0, start
    while p < len(data):
        n = _utf8_length(data[p])
        try:
            unit = data[p:p + n].decode("utf-8")
        except UnicodeDecodeError:
            n, unit = 1, REPLACEMENT
        for q in range(p, p + n):
            char_at[q] = at
            span = spans[owner[q]]
            span[0], span[1] = (min(span[0], at) if span[1] >= span[0] else at), at + len(unit)
        out.append(unit)
        at += len(unit)
        p += n
    char_at[len(data)] = at
    offset = 0
    for k, part in zip(ks, parts):
        if not part:
            spans[k] = [char_at[offset], char_at[offset]]
        offset += len(part)
    return "".join(out)


def render(names: TokenNames, ids: Sequence[int], text_before: str = "", *, unk_id: int | None = None,
           prefix_ids: tuple[int, ...] = (), space_prefix: bool = False) -> tuple[str, tuple[Span, ...]]:
    """The text ``ids`` stand for when they follow ``text_before``, and each id's span in it.

    Parameters
    ----------
    names : TokenNames
        The tokenizer's names (its kind and each id's bytes).
    ids : sequence of int
    text_before : str
        The text the ids follow ("" at the start of a text).
    unk_id, prefix_ids, space_prefix
        The tokenizer's unknown token, the special tokens it puts before a text, and whether it
        puts a space before every text (see the module docstring).

    Returns
    -------
    (str, tuple of (int, int))
        The text (to append to ``text_before``) and each id's [start, end) character span in it
        (offsets from the text's start, not ``text_before``'s); a token holding no character
        (a prefix token) has an empty span where it stands.
    """
    ids = [int(i) for i in ids]
    raws = [names.token_bytes(i) for i in ids]  # None: a special token, or an id without a name
    pieces: list[str] = []
    spans = [[0, -1] for _ in ids]  # [start, end); end < start: not placed yet
    length, tail, at_start = 0, text_before[-1:], not text_before
    run: list[int] = []  # consecutive tokens whose bytes are joined

    def put(k: int, text: str, space: str = "") -> None:
        nonlocal length, tail
        pieces.append(space + text)
        spans[k] = [length + len(space), length + len(space) + len(text)]
        length += len(space) + len(text)
        tail = text[-1:] or tail

    def flush() -> None:
        nonlocal length, tail
        if run:
            text = _decode_run([raws[k] for k in run], list(run), length, spans)
            pieces.append(text)
            length += len(text)
            tail = text[-1:] or tail
            run.clear()

    for k, token_id in enumerate(ids):
        raw = raws[k]
        if at_start and token_id in prefix_ids:
            flush()
            spans[k] = [length, length]
            continue
        if raw is None or token_id == unk_id:
            flush()
            unknown = token_id == unk_id or names.entry(token_id) is None
            if not unknown:  # a special or control token: no text (see the module docstring)
                spans[k] = [length, length]
                at_start = False
                continue
            word = names.kind == WORD and tail and not tail.isspace()  # an unknown word is a word
            put(k, REPLACEMENT, " " if word else "")
        elif names.kind == WORD:
            flush()
            word = raw.decode("utf-8", "replace")
            put(k, word, " " if word[:1].isalnum() and tail and not tail.isspace() else "")
        else:
            if at_start and space_prefix and raw.startswith(b" "):
                raws[k] = raw[1:]  # the dummy prefix's space, which encode puts back
            run.append(k)
        at_start = False
    flush()
    return "".join(pieces), tuple((s, e) for s, e in spans)
