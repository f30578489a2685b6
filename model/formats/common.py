"""What the foreign-format readers share: their result, key bookkeeping, asking for n_heads, and
turning a translated state dict into an :class:`~model.formats.opening.Opening` (a checked file
that asks what it cannot tell, then loads once)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable

import torch

from model.core.config import GPTConfig
from model.formats.base import (
    LINK_NOWHERE, NOT_DOWNLOADED, Checkpoint, CheckpointError, NeedsInput, NotThisFormat, OpenOptions, Source,
    check_tensor, dangling, model_from_state, validate_state_dict,
)
from model.formats.errors import WrongVocabulary
from model.formats.opening import N_HEADS, VOCAB, Opening, Question
from model.formats.vocab import (
    GPT2_PADDED_ROWS, GPT2_VOCAB_SIZE, SHIPPED_GPT2_DIR, find_gpt2_folder, gpt2_missing_hint, gpt2_search_dirs,
    tokenizer_from_path, vocab_padding,
)
from model.core.plain import clip, short_repr
from model.tokens.tokenizer import Tokenizer

PREFIXES = ("_orig_mod.", "module.")  # what torch.compile and DDP put before state-dict keys
MAX_BLOCK_INDEX_DIGITS = 6  # block numbers in state-dict keys (a million blocks is no model)
SCALAR_MAX_CHARS = 500  # a string kept from a torch file's settings (model_args, config)
SCALAR_MAX_ENTRIES = 1000
# Heads per block of GPT-2's four sizes (Radford et al. 2019), by d_model.
GPT2_HEADS = {768: 12, 1024: 16, 1280: 20, 1600: 25}


@dataclass
class Converted:
    """A foreign checkpoint translated to our config and state-dict names.

    Attributes
    ----------
    source_format : str                 e.g. ``"nanogpt"``.
    config : GPTConfig
    tensors : dict of str -> Tensor     our state-dict names (see model/core/transformer.py).
    training : dict                     JSON-ready facts (steps, val_loss, dataset, ...).
    find_tokenizer : callable           () -> (Tokenizer or None, places searched).
    heads_question : Question or None   set when the file does not say n_heads (``config`` then has the
                                        proposed number until the answer replaces it).
    """

    source_format: str
    config: GPTConfig
    tensors: dict[str, torch.Tensor]
    training: dict[str, Any] = field(default_factory=dict)
    find_tokenizer: Callable[[], tuple[Tokenizer | None, list[Path]]] = lambda: (None, [])
    heads_question: Question | None = None


class Keys:
    """A foreign state dict whose entries are taken one by one; leftovers are an error.

    Every entry is checked when the dict is wrapped: a name (str) and a tensor that holds its data
    (see :func:`~model.formats.base.check_tensor`), so that the shapes read from it can be trusted
    to describe real values. The methods that read a size check the tensor's number of dimensions
    first, so a misshapen tensor is named, never unpacked blindly.

    Raises
    ------
    CheckpointError
        For a key that is not a string, an entry that is not a tensor, or a tensor without its data.
    """

    def __init__(self, path: Path, fmt: str, tensors: dict[str, Any]) -> None:
        self.path, self.fmt = path, fmt
        for key, value in tensors.items():
            if not isinstance(key, str):
                raise CheckpointError(f"{path.name}: the {fmt} state_dict has a key {short_repr(key)} that is not a name")
            if not isinstance(value, torch.Tensor):
                raise CheckpointError(f"{path.name}: entry {short_repr(key)} of the {fmt} state_dict is not a tensor "
                                      f"(a {type(value).__name__})")
            check_tensor(path, key, value)
        self.left = dict(tensors)

    def has(self, key: str) -> bool:
        return key in self.left

    def peek(self, key: str) -> torch.Tensor:
        """The tensor under ``key`` without taking it."""
        if key not in self.left:
            raise CheckpointError(f"{self.path.name}: the {self.fmt} state_dict has no {key}")
        return self.left[key]

    def take(self, key: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        """Remove and return ``key``, checking its shape when given."""
        t = self.peek(key)
        del self.left[key]
        if shape is not None and tuple(t.shape) != shape:
            raise CheckpointError(
                f"{self.path.name}: {key} has shape {tuple(t.shape)}, expected {shape}"
            )
        return t

    def peek_matrix(self, key: str) -> torch.Tensor:
        """The 2-D tensor under ``key`` (an embedding table, a weight whose shape tells a size), left in."""
        t = self.peek(key)
        if t.dim() != 2:
            raise CheckpointError(f"{self.path.name}: {key} has shape {tuple(t.shape)}, expected a matrix (2 dimensions)")
        return t

    def take_matrix(self, key: str) -> torch.Tensor:
        """:meth:`peek_matrix`, taken out."""
        self.peek_matrix(key)
        return self.take(key)

    def rows(self, key: str) -> int:
        """The first axis of the matrix under ``key`` (e.g. the context length of a positional table)."""
        return int(self.peek_matrix(key).shape[0])

    def take_opt(self, key: str, shape: tuple[int, ...] | None = None) -> torch.Tensor | None:
        return self.take(key, shape) if key in self.left else None

    def take_linears(self, out: dict, src: str, dst: str, pairs, bias: bool) -> None:
        """Move Linear layers into ``out``: ``pairs`` of (their name, our name, weight shape);
        with ``bias`` their biases too (shape = the weight's first axis)."""
        for theirs, ours, shape in pairs:
            out[f"{dst}{ours}.weight"] = self.take(f"{src}{theirs}.weight", shape)
            if bias:
                out[f"{dst}{ours}.bias"] = self.take(f"{src}{theirs}.bias", (shape[0],))

    def layers(self, prefix: str) -> int:
        """How many blocks ``prefix.N.`` there are (N must run 0..n-1)."""
        number = re.compile(re.escape(prefix) + r"\.(\d{1,%d})\." % MAX_BLOCK_INDEX_DIGITS)
        found = {int(m.group(1)) for k in self.left if (m := number.match(k))}
        if not found:
            raise CheckpointError(f"{self.path.name}: the {self.fmt} state_dict has no {prefix}.0 block")
        if found != set(range(len(found))):
            raise CheckpointError(f"{self.path.name}: blocks {sorted(found)} are not numbered 0..{len(found) - 1}")
        return len(found)

    def finish(self) -> None:
        """Raise when entries remain that the reader did not understand."""
        if self.left:
            names = ", ".join(sorted(self.left)[:5])
            raise CheckpointError(f"{self.path.name}: unexpected tensor(s) in a {self.fmt} file: {names}")


def strip_prefixes(path: Path, state: dict[str, Any]) -> dict[str, Any]:
    """Remove ``_orig_mod.`` (torch.compile) / ``module.`` (DDP) from the start of each key (only the start).

    Raises
    ------
    CheckpointError
        When a key is not a string, or two keys become the same.
    """
    out = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise CheckpointError(f"{path.name}: the state_dict has a key {short_repr(key)} that is not a name")
        name = key
        while name.startswith(PREFIXES):
            name = name[len(next(p for p in PREFIXES if name.startswith(p))):]
        if name in out:
            raise CheckpointError(f"{path.name}: keys {short_repr(key)} and another both mean {short_repr(name)}")
        out[name] = value
    return out


def divisors(n: int) -> tuple[int, ...]:
    return tuple(h for h in range(1, n + 1) if n % h == 0)


def propose_n_heads(d_model: int) -> int:
    """GPT-2's heads for its sizes; otherwise the divisor of d_model nearest d_model / 64."""
    if d_model in GPT2_HEADS:
        return GPT2_HEADS[d_model]
    target = max(1.0, d_model / 64)
    return min(divisors(d_model), key=lambda h: (abs(h - target), h))


def heads_question(path: Path, d_model: int, hint: str) -> Question:
    """The question to ask when heads per block cannot be read from a file."""
    proposed = propose_n_heads(d_model)
    return Question(
        N_HEADS,
        f"{path.name}: the number of attention heads cannot be read from the weights "
        f"(d_model {d_model}; a wrong guess would load and give wrong numbers). {hint} "
        f"Likely: {proposed}.",
        path, proposed=proposed, choices=divisors(d_model),
    )


def resolve_n_heads(path: Path, d_model: int, given: int | None, hint: str) -> tuple[int, Question | None]:
    """Heads per block for a file that does not say: ``given`` (checked), else the proposed number
    with the question that asks for the real one."""
    if given is not None:
        return check_n_heads(path, given, d_model, "given"), None
    question = heads_question(path, d_model, hint)
    return question.proposed, question


def check_n_heads(path: Path, n_heads: Any, d_model: int, source: str) -> int:
    """``n_heads`` as an int that divides d_model, or a CheckpointError naming its source."""
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1 or d_model % n_heads:
        raise CheckpointError(
            f"{path.name}: n_heads {short_repr(n_heads)} ({source}) does not divide d_model {d_model}; "
            f"possible values: {', '.join(map(str, divisors(d_model)))}"
        )
    return n_heads


def make_config(path: Path, **fields: Any) -> GPTConfig:
    """GPTConfig(**fields), its ValueError (or TypeError) turned into a CheckpointError naming the file."""
    try:
        return GPTConfig(**fields)
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{path.name}: {exc}") from None


def first_keys(obj: Any) -> str:
    """A short description of what a file holds, for "not this format" messages."""
    if isinstance(obj, dict):
        keys = [k if isinstance(k, str) and len(k) <= 80 else short_repr(k) for k in list(obj)[:8]]
        return "first keys found: " + (", ".join(keys) if keys else "(none: an empty dict)")
    return f"it holds a {type(obj).__name__}, not a dict of tensors"


def scalars(value: Any) -> dict[str, Any]:
    """The entries of a settings dict from a torch file (``model_args``, train.py's ``config``) whose
    values are plain: bool, int (within 64 bits), float, str (cut to :data:`SCALAR_MAX_CHARS`),
    None, or a one-value tensor as its number. Other entries are left out, so that comparing,
    converting, printing or saving the result as JSON is safe and fast; a non-dict gives {}."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    for key, v in list(value.items())[:SCALAR_MAX_ENTRIES]:
        if not isinstance(key, str) or len(key) > 100:
            continue
        if isinstance(v, torch.Tensor):
            try:
                v = v.item() if v.numel() == 1 and not v.is_complex() else ()
            except (RuntimeError, ValueError, NotImplementedError):  # a tensor without data (meta, ...)
                continue
        if v is None or type(v) in (bool, float) or (type(v) is int and v.bit_length() < 64):
            out[key] = v
        elif type(v) is str:
            out[key] = clip(v, SCALAR_MAX_CHARS) if len(v) > SCALAR_MAX_CHARS or "\n" in v else v
    return out


def foreign_object(source: Source) -> Any:
    """The file's top-level object: a dict of tensors (safetensors) or torch.load's result.

    Raises
    ------
    NotThisFormat
        When the file is neither a torch file nor safetensors.
    CheckpointError
        When it cannot be read (see :class:`~model.formats.base.Source`).
    """
    if source.container == "safetensors":
        return source.tensors
    if source.container in ("torch-zip", "pickle"):
        return source.torch_object
    if source.container == "folder":
        try:
            files = sorted(p.name for p in source.path.iterdir())
        except OSError:
            files = []
        shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
        raise NotThisFormat(f"It is a folder holding {shown or 'nothing'} (a model folder has a Hugging Face "
                            "config.json with a model_type, and weights beside it).")
    raise NotThisFormat("The file is neither a torch file (zip or pickle) nor safetensors.")


def _vocab_question(path: Path, rows: int, searched: list[Path]) -> Question:
    """No vocabulary was found: where it was looked for, which of those files is a link to nothing (not
    downloaded), and for GPT-2's 50,257 (or nanoGPT's 50,304) rows either where GPT-2's files were
    looked for, or, for a format that does not look there, GPT-2's files offered as a choice
    (``suggested``): a vocabulary of that size need not be GPT-2's, so it is asked, not assumed."""
    message = f"{path.name}: no vocabulary was found for this model ({rows} tokens). Looked for: "
    message += ", ".join(str(p) for p in searched) + "."
    broken = [p.name for p in searched if dangling(p)]
    if broken:
        message += f" {', '.join(broken)}: {LINK_NOWHERE}, {NOT_DOWNLOADED}."
    suggested = None
    if rows in (GPT2_VOCAB_SIZE, GPT2_PADDED_ROWS):
        suggested = None if set(gpt2_search_dirs()) & set(searched) else find_gpt2_folder()
        if suggested is None:
            message += " " + gpt2_missing_hint()
        else:
            shipped = " (shipped with this app)" if suggested == SHIPPED_GPT2_DIR else ""
            message += (f" {rows:,} tokens is the size of GPT-2's vocabulary, but a vocabulary of that size need not "
                        f"be GPT-2's: if this model uses GPT-2's tokenizer, choose GPT-2's files{shipped}, in "
                        f"{suggested}.")
    message += " Choose the vocabulary file, or open the model without one (tokens named by id)."
    return Question(VOCAB, message, path, searched=tuple(searched), suggested=suggested)


def opening(source: Source, conv: Converted, given: OpenOptions) -> Opening:
    """A translated file, checked, with what it still needs asked and its model built once on load.

    The tensors are checked here, so that a bad file is reported before the user is asked
    anything; the vocabulary the format keeps (beside the file) is looked for here unless
    ``given`` names one. On :meth:`~model.formats.opening.Opening.load` the answered heads replace
    the proposed ones, the vocabulary is read and compared with the embedding rows (a given one
    that does not fit raises :class:`~model.formats.errors.WrongVocabulary`), and only then is the
    model built.

    Raises
    ------
    CheckpointError
        For bad tensors, or a vocabulary beside the file that cannot be read.
    """
    path, config, heads, fmt, training = source.path, conv.config, conv.heads_question, conv.source_format, conv.training
    state = validate_state_dict(path, config, conv.tensors)  # what the load keeps (not the file's own tensors)
    found = cache(conv.find_tokenizer)  # looked for once, here or on load
    questions = [heads] if heads is not None else []
    if given.vocab_path is None and not given.allow_no_tokenizer and found()[0] is None:
        questions.append(_vocab_question(path, config.vocab_size, found()[1]))

    def finish(options: OpenOptions) -> Checkpoint:
        answered = _answered(path, config, heads, options)
        try:
            tokenizer = _tokenizer(path, config.vocab_size, options, found)
            padding = vocab_padding(path, tokenizer, config.vocab_size) if tokenizer is not None else 0
        except NeedsInput:
            raise
        except CheckpointError as exc:  # the given vocabulary is not this model's: another may be
            if options.vocab_path is None:
                raise
            raise WrongVocabulary(str(exc)) from exc
        model = model_from_state(path, answered, state)
        return Checkpoint(model=model, tokenizer=tokenizer, path=path, training=training, source_format=fmt,
                          vocab_padding=padding)

    return Opening(path, fmt, tuple(questions), finish)


def _answered(path: Path, config: GPTConfig, question: Question | None, options: OpenOptions) -> GPTConfig:
    """``config`` with the heads the user gave where the file did not say them (same tensor shapes)."""
    if question is None:
        return config
    if options.n_heads is None:
        raise question.error()
    heads = check_n_heads(path, options.n_heads, config.d_model, "given")
    return dataclasses.replace(config, n_heads=heads, n_kv_heads=heads, d_head=config.d_model // heads)


def _tokenizer(path: Path, rows: int, options: OpenOptions, found) -> Tokenizer | None:
    """The tokenizer (or None when allowed): the caller's vocab_path, else the one the format keeps."""
    if options.vocab_path is not None:
        return tokenizer_from_path(Path(options.vocab_path))
    tokenizer, searched = found()
    if tokenizer is None and not options.allow_no_tokenizer:
        raise _vocab_question(path, rows, searched).error()
    return tokenizer
