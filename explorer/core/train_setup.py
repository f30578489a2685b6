"""What the Train dialog asks for, turned into the command line of ``python -m model.train`` and
checked with the command's own checks before anything starts (Qt-free).

Without a validation file, the last tenth of the training stories is held out: both parts are
written beside the output as ``OUT-STEM-text/train.txt`` and ``val.txt`` (stories separated by
``<|endoftext|>`` lines, which the command splits on), so that no story is trained and validated on.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from model.training import data
from model.core.config import GPTConfig
from model.training.snapshots import CHECKPOINT_SUFFIXES
from model.tokens.tokenizer import EOT
from model.training.args import build_parser, check_args
from model.training.errors import TrainError

VAL_SHARE = 0.1  # of the stories, held out when no validation file is chosen


@dataclass
class TrainChoice:
    """The Train dialog's fields.

    Attributes
    ----------
    corpus : list of str     training text files.
    val : str or None        validation text file; None: hold out :data:`VAL_SHARE` of the stories.
    out : str                the checkpoint to write (``.safetensors``).
    n_layers, n_heads, d_model, context_length : int   the model's shape.
    steps : int              optimizer steps.
    snapshots : int          log-spaced snapshots to keep (0: none).
    """

    corpus: list[str] = field(default_factory=list)
    val: str | None = None
    out: str = ""
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 128
    context_length: int = 32
    steps: int = 1000
    snapshots: int = 14


def default_choice() -> TrainChoice:
    """The command's defaults: the shape of :class:`GPTConfig` (the course's model) and its ``--steps``."""
    shape = {f.name: f.default for f in dataclasses.fields(GPTConfig)}
    steps = build_parser().get_default("steps")
    return TrainChoice(n_layers=shape["n_layers"], n_heads=shape["n_heads"], d_model=shape["d_model"],
                       context_length=shape["context_length"], steps=steps, snapshots=min(14, steps + 1))


def typed_path(text: str) -> str:
    """A path as typed into the dialog, as the run needs it: blanks around it dropped, ``~``
    expanded, made absolute (the run works in the output's folder, so a relative name would be
    read from there), and a trailing separator kept (it says "a folder"). "" stays "".
    """
    text = text.strip()
    if not text:
        return ""
    full = os.path.abspath(os.path.expanduser(text))
    return full + os.sep if text.endswith(("/", os.sep)) and not full.endswith(os.sep) else full


def out_problem(out: str) -> str:
    """Why ``out`` cannot name the checkpoint to write, or "" when it can (the command's own
    checks, :func:`model.training.args.check_args`, then look at its folder).

    Names that are no file are refused here in words: "", "/", ".", "..", a path ending in a
    separator, an existing folder, a name without ``.safetensors`` or with nothing before it, and
    names with characters a file system cannot store (NUL, other control characters), and a ``~``
    left unexpanded (a file named "~" is never what was meant).
    """
    if not out.strip():
        return "choose where to save the model (--out)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in out):
        return f"--out {out!r}: the name holds a control character (a tab, a newline, NUL, ...)"
    if out.startswith("~"):  # the dialog expands it (typed_path); a command line's shell would have
        return f"--out {out}: ~ means your home folder only to a shell; write {os.path.expanduser(out)}"
    path = Path(out)
    if out.endswith(("/", os.sep)) or path.name in ("", ".", ".."):
        return f"--out {out}: names a folder, not a file; add a file name such as my-model.safetensors"
    try:
        folder = path.is_dir()
    except OSError as exc:  # a name too long, a folder that cannot be read
        return f"--out {out}: {exc.strerror or exc}"
    if folder:
        return f"--out {out}: is a folder; add a file name such as {path / 'my-model.safetensors'}"
    if path.suffix != ".safetensors" or not path.stem:
        return f"--out {out}: the name must end in .safetensors, after a name (my-model.safetensors)"
    return ""


def held_out_paths(out: str | os.PathLike) -> tuple[Path, Path]:
    """Where the split training and validation texts go for a run without a validation file.

    Raises
    ------
    ValueError
        When ``out`` has no file name ("/", ""): check it with :func:`out_problem` first.
    """
    folder = Path(out).with_name(Path(out).stem + "-text")
    return folder / "train.txt", folder / "val.txt"


def snapshot_dir(out: str | os.PathLike) -> Path:
    """The command's default snapshot folder for ``--out`` (``OUT-STEM-snapshots``).

    Raises
    ------
    ValueError
        When ``out`` has no file name ("/", ""): check it with :func:`out_problem` first.
    """
    return Path(out).with_name(Path(out).stem + "-snapshots")


def next_free_name(out: str | os.PathLike) -> str:
    """``out``, or ``STEM-2.safetensors``, ``STEM-3``, ... : the first whose file and snapshot
    folder do not exist (the name proposed for the next run)."""
    path = Path(out)
    stem = path.stem.rsplit("-", 1)[0] if path.stem.rsplit("-", 1)[-1].isdigit() else path.stem
    n = 1
    while path.exists() or snapshot_dir(path).exists():
        n += 1
        path = path.with_name(f"{stem}-{n}{path.suffix}")
    return str(path)


def command_args(choice: TrainChoice, log_file: str | os.PathLike | None = None) -> list[str]:
    """The arguments of ``python -m model.train`` for a choice (on the hold-out split's files
    when no validation file was chosen)."""
    if choice.val:
        return _argv(choice, list(choice.corpus), choice.val, log_file)
    train, val = held_out_paths(choice.out)
    return _argv(choice, [str(train)], str(val), log_file)


def _argv(choice: TrainChoice, corpus: list[str], val: str, log_file) -> list[str]:
    argv = ["--corpus", *corpus, "--val", val, "--out", choice.out,
            "--n-layers", str(choice.n_layers), "--n-heads", str(choice.n_heads),
            "--d-model", str(choice.d_model), "--context-length", str(choice.context_length),
            "--steps", str(choice.steps)]
    if choice.snapshots:
        argv += ["--snapshots", str(choice.snapshots), "--snapshot-dir", str(snapshot_dir(choice.out))]
    if log_file is not None:
        argv += ["--log-file", str(log_file), "--quiet"]
    return argv


def check(choice: TrainChoice) -> str:
    """Why the choice cannot start, in the command's words, or "" when it can; never raises.

    Runs the command's parser and :func:`model.training.args.check_args` (options, shape, paths)
    and :func:`model.training.data.check_text_file` on every text (missing, unreadable, empty). A text
    too short for one block is found only once the run has read and tokenized it.
    """
    if not choice.corpus:
        return "choose at least one training text file (--corpus)"
    problem = out_problem(choice.out)
    if problem:
        return problem
    # Without a validation file the split's files do not exist yet: check the files they come from.
    argv = _argv(choice, list(choice.corpus), choice.val or str(held_out_paths(choice.out)[1]), None)
    try:
        args = build_parser().parse_args(argv)
        check_args(args)
        for path in [*choice.corpus, *([choice.val] if choice.val else [])]:
            data.check_text_file(path)
    except (TrainError, data.CorpusError) as exc:
        return str(exc)
    folder = snapshot_dir(choice.out)
    try:
        earlier = choice.snapshots and folder.is_dir() and any(p.suffix in CHECKPOINT_SUFFIXES for p in folder.iterdir())
    except OSError as exc:
        return f"{folder}: cannot be read ({exc.strerror or exc})"
    if earlier:
        return (f"{folder} already holds snapshots of an earlier run: choose another name for the model "
                "(or move that folder), so that the runs' snapshots are not mixed")
    if not choice.val and any(Path(p).resolve() in held_out_paths(choice.out) for p in choice.corpus):
        return f"a training text is the hold-out file it would be split into ({held_out_paths(choice.out)[0].parent})"
    return ""


def split_for_validation(corpus: list[str], train_path: Path, val_path: Path, share: float = VAL_SHARE) -> tuple[int, int]:
    """Hold out the last ``share`` of the stories (at least one) as validation text.

    Writes ``train_path`` and ``val_path`` (each written to a temporary file and renamed), stories
    separated by ``<|endoftext|>`` lines.

    Returns
    -------
    (int, int)
        Stories written for training and for validation.

    Raises
    ------
    model.training.data.CorpusError
        A text cannot be read, or there are fewer than two stories.
    OSError
        The files cannot be written.
    """
    stories = data.read_stories(corpus)
    if len(stories) < 2:
        raise data.CorpusError(f"{corpus[0]}: one story only; choose a validation file")
    k = max(1, round(len(stories) * share))
    train_path.parent.mkdir(parents=True, exist_ok=True)
    for path, part in ((train_path, stories[:-k]), (val_path, stories[-k:])):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"\n{EOT}\n".join(part) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return len(stories) - k, k
