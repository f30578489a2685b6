"""Training text: reading, mojibake repair, story splitting, token streams and context-window blocks.

A corpus is one or more UTF-8 text files of stories. Stories are joined into one token stream with
``<|endoftext|>`` between them (GPT-2's convention), and the model learns from windows of that
stream in which every position predicts the next token.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

import torch

from model.tokens.tokenizer import EOT, Tokenizer

# Mojibake of the TinyStories text: UTF-8 punctuation decoded as cp1252. Replaced before ftfy,
# because ftfy alone turns a closing double quote whose last byte was lost ("â€" + space) into
# "†" and eats the space (measured on the TinyStories samples the shipped models learned from). Order matters:
# the three-character sequences first, then what is left of a damaged one.
MOJIBAKE = (
    ("â€™", "'"),
    ("â€˜", "'"),
    ("â€œ", '"'),
    ("â€\x9d", '"'),
    ("â€”", "—"),
    ("â€“", "–"),
    ("â€¦", "..."),
)
# A damaged quote between two letters (don"t) is an apostrophe; elsewhere a double quote.
_INNER_DAMAGED = re.compile(r"(?<=\w)â€(?=\w)")


class CorpusError(ValueError):
    """A corpus file is missing, unreadable, empty or too short; the message names the file."""


def repair_text(text: str) -> str:
    """Undo the known mojibake, then let ``ftfy.fix_text`` fix what else it recognises.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        The repaired text (curly quotes straightened by ftfy's defaults).
    """
    import ftfy

    for bad, good in MOJIBAKE:
        text = text.replace(bad, good)
    text = _INNER_DAMAGED.sub("'", text)
    text = text.replace("â€", '"')
    return ftfy.fix_text(text)


def split_stories(text: str) -> list[str]:
    """Split a text into stories.

    When the text has ``<|endoftext|>`` lines, those alone end stories (paragraphs inside a story
    may be separated by blank lines or single newlines). Otherwise, paragraphs are separated by
    blank lines and a new story starts where a non-empty line directly follows a non-empty line
    (the layout of the TinyStories train sample).

    Returns
    -------
    list of str
        Non-empty stories, stripped, paragraphs joined by blank lines.
    """
    lines = text.splitlines()
    stories: list[list[str]] = [[]]
    if any(line.strip() == EOT for line in lines):
        for line in lines:
            if line.strip() == EOT:
                stories.append([])
            elif line.strip():
                stories[-1].append(line.strip())
    else:
        previous_blank = True
        for line in lines:
            if not line.strip():
                previous_blank = True
                continue
            if not previous_blank:
                stories.append([])
            stories[-1].append(line.strip())
            previous_blank = False
    return ["\n\n".join(s) for s in stories if s]


def read_stories(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Read, repair and split one or more corpus files.

    Raises
    ------
    CorpusError
        When a file is missing, not a file, not UTF-8 text, or holds no text.
    """
    stories: list[str] = []
    for path in map(Path, paths):
        if not path.exists():
            raise CorpusError(f"{path}: no such file")
        if not path.is_file():
            raise CorpusError(f"{path}: not a file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise CorpusError(f"{path}: cannot be read ({exc.strerror})") from None
        found = split_stories(repair_text(text))
        if not found:
            raise CorpusError(f"{path}: the file is empty (no text)")
        stories.extend(found)
    return stories


def check_text_file(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> None:
    """Cheap checks of a text file before a run starts: it exists, can be read, its first
    ``chunk_bytes`` are UTF-8, and it holds some text (not only whitespace).

    Reads only until the first non-whitespace character (the whole file only when it is all
    whitespace); :func:`read_stories` reads and checks the whole text later.

    Raises
    ------
    CorpusError
        With the messages of :func:`read_stories` (missing, not a file, not UTF-8, unreadable, empty).
    """
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file")
    if not path.is_file():
        raise CorpusError(f"{path}: not a file")
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0  # bytes read before this chunk
    try:
        with path.open("rb") as f:
            while chunk := f.read(chunk_bytes):
                pending = len(decoder.getstate()[0])  # bytes of a character cut by the last chunk
                try:
                    text = decoder.decode(chunk, final=len(chunk) < chunk_bytes)
                except UnicodeDecodeError as exc:
                    raise CorpusError(f"{path}: not UTF-8 text (byte {done - pending + exc.start})") from None
                if text.strip():
                    return
                done += len(chunk)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror})") from None
    raise CorpusError(f"{path}: the file is empty (no text)")


def encode_stories(tokenizer: Tokenizer, stories: Iterable[str]) -> torch.Tensor:
    """One token stream: each story's ids followed by ``<|endoftext|>``.

    Returns
    -------
    LongTensor (N,)
    """
    eot = tokenizer.token_to_id(EOT)
    if eot is None:
        raise ValueError(f"the tokenizer has no {EOT} token")
    encodings = tokenizer.hf.encode_batch(list(stories), add_special_tokens=False)
    ids: list[int] = []
    for enc in encodings:
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def check_length(stream: torch.Tensor, context_length: int, name: str) -> None:
    """Raise CorpusError when a stream is shorter than one block (context_length + 1 tokens)."""
    if stream.numel() < context_length + 1:
        raise CorpusError(
            f"{name}: {stream.numel()} tokens is shorter than one block "
            f"(context length {context_length} + 1)"
        )


def window_starts(n_tokens: int, context_length: int, offset: int = 0) -> torch.Tensor:
    """Starts of the non-overlapping blocks of ``context_length + 1`` tokens, stride context_length.

    Consecutive blocks share one token, so every token after ``offset`` is a target exactly once.

    Returns
    -------
    LongTensor (n_blocks,)
    """
    last = n_tokens - context_length - 1  # the highest valid start
    return torch.arange(offset, last + 1, context_length, dtype=torch.long)


def gather_blocks(
    stream: torch.Tensor, starts: torch.Tensor, context_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets for blocks starting at ``starts``.

    Returns
    -------
    x, y : LongTensor (B, context_length)
        ``y[b, t] = stream[starts[b] + t + 1]``, the token after ``x[b, t]``.
    """
    idx = starts[:, None] + torch.arange(context_length + 1)  # (B, context_length + 1)
    block = stream[idx]
    return block[:, :-1], block[:, 1:]


#: The shortest segment :func:`repeat_segments` repeats, in tokens.
MIN_REPEAT = 8


def repeat_lengths(context_length: int) -> tuple[int, int]:
    """The lengths (shortest, longest) of the segments :func:`repeat_segments` draws for blocks
    of ``context_length`` + 1 tokens: from :data:`MIN_REPEAT` (or less in a short context) to half
    the block."""
    longest = (context_length + 1) // 2
    return min(MIN_REPEAT, longest), longest


def repeat_segments(blocks: torch.Tensor, share: float, generator: torch.Generator,
                    random_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Blocks with a segment repeated, for a share of them: text that rewards copying.

    Block b (of the first ``round(share * B)`` rows) keeps its first s tokens, repeats them and
    goes on with its own text: ``b[:s], b[:s], b[s:]`` cut to the block's length, s drawn
    uniformly from :func:`repeat_lengths`. Where the copy ends the text continues as it did after
    the original, so the second copy is predictable from the first (the induction pattern of
    Olsson et al. 2022, "In-context learning and induction heads"). With ``random_ids`` the
    segment is s tokens drawn uniformly from them instead, repeated to the block's end (``r, r,
    r, ...``): only copying predicts anything after the first copy, and every later token can be.

    Parameters
    ----------
    blocks : LongTensor (B, context_length + 1)
        Blocks in a random order (a :class:`BlockSampler` batch's), so the first rows are random ones.
    share : float
        In [0, 1]; 0 returns ``blocks`` unchanged and draws nothing from ``generator``.
    generator : torch.Generator
        Draws the lengths (and the random tokens).
    random_ids : LongTensor (K,), optional
        The ids random segments are drawn from; None repeats the block's own text.

    Returns
    -------
    LongTensor (B, context_length + 1)
    """
    n = round(share * blocks.shape[0])
    if n == 0:
        return blocks
    width = blocks.shape[1]
    lo, hi = repeat_lengths(width - 1)
    lengths = torch.randint(lo, hi + 1, (n,), generator=generator)
    out = blocks.clone()
    for row, s in enumerate(lengths.tolist()):
        b = blocks[row]
        if random_ids is None:
            out[row] = torch.cat([b[:s], b[:s], b[s : width - s]])
        else:
            r = random_ids[torch.randint(random_ids.numel(), (s,), generator=generator)]
            out[row] = r.repeat(width // s + 1)[:width]
    return out


class BlockSampler:
    """Shuffled epochs of context-window blocks from a token stream, reproducible from a seed.

    Each epoch starts the block grid at a random offset in [0, context_length) and visits every
    block once in a random order, so that over epochs each token is seen at every position.

    Parameters
    ----------
    stream : LongTensor (N,), N >= context_length + 1
    context_length : int
    batch_size : int
    generator : torch.Generator
    repeat_share : float
        The share of each batch's blocks with a repeated segment (:func:`repeat_segments`); 0 (the
        default) leaves the text as it is.
    random_ids : LongTensor (K,), optional
        Draw the repeated segments from these ids instead of repeating the text.
    """

    def __init__(
        self, stream: torch.Tensor, context_length: int, batch_size: int, generator: torch.Generator,
        repeat_share: float = 0.0, random_ids: torch.Tensor | None = None,
    ) -> None:
        self.stream = stream
        self.context_length = context_length
        self.batch_size = batch_size
        self.generator = generator
        self.repeat_share = repeat_share
        self.random_ids = random_ids
        self.epoch = 0
        self._order = torch.empty(0, dtype=torch.long)
        self._next = 0

    def _new_epoch(self) -> None:
        max_offset = min(self.context_length, self.stream.numel() - self.context_length)
        offset = int(torch.randint(max_offset, (1,), generator=self.generator))
        starts = window_starts(self.stream.numel(), self.context_length, offset)
        self._order = starts[torch.randperm(starts.numel(), generator=self.generator)]
        self._next = 0
        self.epoch += 1

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next (x, y) batch, each (batch_size, context_length); crosses epochs as needed."""
        parts = []
        need = self.batch_size
        while need:
            if self._next >= self._order.numel():
                self._new_epoch()
            take = self._order[self._next : self._next + need]
            self._next += take.numel()
            need -= take.numel()
            parts.append(take)
        x, y = gather_blocks(self.stream, torch.cat(parts), self.context_length)
        if not self.repeat_share:
            return x, y
        blocks = repeat_segments(torch.cat([x, y[:, -1:]], 1), self.repeat_share, self.generator, self.random_ids)
        return blocks[:, :-1], blocks[:, 1:]


#: Above this share of ``<unk>`` among the validation tokens (not counting <|endoftext|>), a run warns.
UNK_WARN_SHARE = 0.03


def unknown_share(tokenizer, stream: torch.Tensor) -> float:
    """The share of ``<unk>`` among a token stream's tokens, <|endoftext|> left out, in [0, 1]; 0 for a
    tokenizer without an unknown token (a byte-level BPE encodes every text)."""
    if tokenizer.unk_id is None:
        return 0.0
    eot = tokenizer.token_to_id(EOT)
    words = stream[stream != eot] if eot is not None else stream
    return float((words == tokenizer.unk_id).float().mean()) if words.numel() else 0.0


def unknown_warning(share: float | None) -> str | None:
    """What to say when :data:`UNK_WARN_SHARE` or more of the validation tokens are ``<unk>``, else None."""
    if share is None or not share >= UNK_WARN_SHARE:
        return None
    return (f"warning: {share:.0%} of the validation tokens are <unk>: the word-level tokenizer built from the "
            "training text does not know them (in a text written without spaces, as Chinese or Japanese, a "
            "whole sentence is one word to it), so the model learns little; train with a BPE tokenizer "
            "instead: --tokenizer tokenizer.json (a Hugging Face tokenizer file)")


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
