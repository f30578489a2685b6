"""The command line of ``python -m model.train``: its options, and the checks that run before any
text is read (bad or contradictory input raises :class:`TrainError`, one line for the user)."""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from model.core.architectures import ARCHITECTURES, TRANSFORMER, WINDOW_MLP
from model.core.config import GPTConfig
from model.core.window import WindowConfig
from model.training.distributed import env_world_size
from model.training.errors import TrainError

SHAPE_OPTIONS = ("d_model", "n_heads", "n_layers", "context_length", "d_mlp")
#: The shape options the model before attention has (``--arch window-mlp``): no heads, no blocks.
WINDOW_OPTIONS = ("d_model", "context_length", "d_mlp")
DESCRIPTION = "Train a checkpoint on text: python -m model.train --corpus FILE [FILE ...] --val FILE --out PATH."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2 (argparse adds the usage too)
        raise TrainError(message)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m model.train``."""
    p = _Parser(prog="python -m model.train", description=DESCRIPTION)
    p.add_argument("--corpus", nargs="+", required=True, metavar="FILE",
                   help="training text (UTF-8); stories split on <|endoftext|> lines or "
                        "where a non-empty line follows a non-empty line")
    p.add_argument("--val", required=True, metavar="FILE", help="held-out text for validation loss")
    p.add_argument("--out", required=True, metavar="PATH.safetensors", help="checkpoint to write")
    p.add_argument("--resume", metavar="CHECKPOINT", help="start from this checkpoint's weights and tokenizer "
                   "(a file, or builtin:NAME for a shipped model)")
    p.add_argument("--tokenizer", metavar="FILE", help="reuse a checkpoint's tokenizer or a tokenizer.json")
    p.add_argument("--vocab-size", type=int, help="vocabulary cap for a new tokenizer (default 4096)")
    shape = p.add_argument_group("model shape (defaults: the course's model)")
    shape.add_argument("--arch", choices=tuple(ARCHITECTURES), default=TRANSFORMER,
                       help="transformer (default), or window-mlp: the model before attention, a fixed-window "
                            "MLP language model (Bengio et al. 2003) over the last --context-length tokens, "
                            f"d_model {WindowConfig.d_model} and --d-mlp {WindowConfig.d_mlp} by default")
    for name, default in (("d-model", 128), ("n-heads", 1), ("n-layers", 1),
                          ("context-length", 32), ("d-mlp", 512)):
        shape.add_argument(f"--{name}", type=int, help=f"default {default}")
    shape.add_argument("--no-positional-encoding", action="store_true", help="no positional table")
    shape.add_argument("--rope", action="store_true", help="rotary position embeddings (RoPE, Su et al. 2021: q and "
                       "k turned by their positions) instead of the positional table")
    shape.add_argument("--untied-unembed", action="store_true",
                       help="own unembedding matrix instead of the token-embedding table")
    opt = p.add_argument_group("optimisation")
    opt.add_argument("--steps", type=int, default=1000, help="optimizer steps (default 1000)")
    opt.add_argument("--batch-size", type=int, default=64, help="blocks per step (default 64)")
    opt.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    opt.add_argument("--min-lr", type=float, help="final learning rate of the cosine (default lr/10)")
    opt.add_argument("--warmup", type=int, help="linear warmup steps (default min(100, steps/10))")
    opt.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay (default 0.1)")
    opt.add_argument("--grad-clip", type=float, default=1.0, help="gradient-norm clip, 0 = off (default 1)")
    opt.add_argument("--seed", type=int, default=0, help="seed of weights and batch order (default 0)")
    opt.add_argument("--repeat-share", type=float, default=0.0, metavar="P",
                     help="in each batch, this share of the blocks repeat their first 8 to context/2 tokens "
                          "(text that rewards copying: an induction head forms sooner); default 0")
    opt.add_argument("--repeat-random", action="store_true",
                     help="with --repeat-share: those blocks are random tokens (uniform over the vocabulary "
                          "less its special tokens) repeated to the block's end instead of the block's own text twice")
    out = p.add_argument_group("evaluation and snapshots")
    out.add_argument("--eval-every", type=int, help="validation every N steps (default steps/10, at least 100)")
    out.add_argument("--snapshot-every", type=int, metavar="N", help="also save a checkpoint every N steps")
    out.add_argument("--snapshots", type=int, metavar="K",
                     help="also save K checkpoints log-spaced over the steps (the first at step 0)")
    out.add_argument("--snapshot-steps", type=_steps, metavar="N,N,...",
                     help="also save checkpoints after these steps (0 = before the first), e.g. around a phase change")
    out.add_argument("--snapshot-dir", metavar="DIR", help="snapshot folder (default OUT-STEM-snapshots)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    out.add_argument("--log-file", metavar="FILE",
                     help="also write progress as JSON lines (see model/training/progress.py)")
    run = p.add_argument_group("hardware")
    run.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                     help="where to train; auto = cuda when torch sees a GPU (default cpu). Under torchrun "
                          "each process takes the GPU of its LOCAL_RANK")
    return p


def _steps(text: str) -> list[int]:
    """``--snapshot-steps``: comma-separated integers."""
    try:
        return sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated step numbers, got {text!r}") from None


def log_spaced_steps(total: int, k: int) -> list[int]:
    """Step 0 and k - 1 steps spread geometrically from 1 to ``total`` (strictly increasing).

    Raises
    ------
    ValueError
        When k < 2 or k > total + 1.
    """
    if not 2 <= k <= total + 1:
        raise ValueError(f"--snapshots must be between 2 and steps + 1 ({total + 1}), got {k}")
    steps = [0]
    for i in range(k - 1):
        ideal = round(total ** (i / (k - 2))) if k > 2 else total
        steps.append(max(ideal, steps[-1] + 1))
    # Pushing collisions upwards may pass the end: pull the tail back below total.
    for i in range(len(steps) - 1, 0, -1):
        steps[i] = min(steps[i], total - (len(steps) - 1 - i))
    return steps


def _check_writable(path: Path, what: str) -> None:
    folder = path if path.is_dir() else path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise TrainError(f"{what} {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise TrainError(f"{what} {path}: cannot write in {folder} ({exc.strerror})") from None


def check_args(a: argparse.Namespace) -> None:
    """Fill defaults and reject bad or contradictory options before any file is read.

    Raises
    ------
    TrainError
    """
    positive = {"--steps": a.steps, "--batch-size": a.batch_size, "--eval-every": a.eval_every,
                "--snapshot-every": a.snapshot_every, "--vocab-size": a.vocab_size,
                **{f"--{k.replace('_', '-')}": getattr(a, k) for k in SHAPE_OPTIONS}}
    for name, value in positive.items():
        if value is not None and value < 1:
            raise TrainError(f"{name} must be a positive integer, got {value}")
    a.min_lr = a.lr / 10 if a.min_lr is None else a.min_lr
    a.warmup = min(100, a.steps // 10) if a.warmup is None else a.warmup
    # A validation pass reads the whole --val text: every 2 steps of a 20-step trial run it cost
    # 7 times the training. At least 100 steps apart by default (and always at the end).
    a.eval_every = a.eval_every or max(100, a.steps // 10)
    for name in ("lr", "min_lr", "weight_decay", "grad_clip", "repeat_share"):  # nan and inf pass every comparison below
        if not math.isfinite(getattr(a, name)):
            raise TrainError(f"--{name.replace('_', '-')} must be a finite number, got {getattr(a, name)}")
    if not (a.lr > 0 and 0 <= a.min_lr <= a.lr):
        raise TrainError(f"need --lr > 0 and 0 <= --min-lr <= --lr, got {a.lr} and {a.min_lr}")
    if not 0 <= a.warmup <= a.steps:
        raise TrainError(f"--warmup must be between 0 and --steps ({a.steps}), got {a.warmup}")
    if a.weight_decay < 0 or a.grad_clip < 0:
        raise TrainError("--weight-decay and --grad-clip must not be negative")
    if not 0 <= a.repeat_share <= 1:
        raise TrainError(f"--repeat-share is a share of each batch, between 0 and 1, got {a.repeat_share}")
    if a.repeat_random and not a.repeat_share:
        raise TrainError("--repeat-random goes with --repeat-share")
    if a.rope and a.no_positional_encoding:
        raise TrainError("--rope and --no-positional-encoding contradict each other")
    if a.resume and a.tokenizer:
        raise TrainError("--resume and --tokenizer contradict each other (resume keeps its tokenizer)")
    if a.vocab_size and (a.resume or a.tokenizer):
        raise TrainError("--vocab-size only applies to a new tokenizer, not with --resume/--tokenizer")
    if a.snapshots is not None:
        try:
            log_spaced_steps(a.steps, a.snapshots)
        except ValueError as exc:
            raise TrainError(str(exc)) from None
    if a.batch_size < env_world_size():
        raise TrainError(f"--batch-size {a.batch_size} is smaller than the number of processes "
                         f"({env_world_size()}): every process needs at least one block per step")
    if a.snapshot_steps is not None and not all(0 <= n <= a.steps for n in a.snapshot_steps):
        raise TrainError(f"--snapshot-steps must lie between 0 and --steps ({a.steps}), got {a.snapshot_steps}")
    if a.snapshot_dir and not (a.snapshots or a.snapshot_every or a.snapshot_steps):
        raise TrainError("--snapshot-dir needs --snapshots, --snapshot-every or --snapshot-steps")
    if not a.resume:
        shape_config(a)
    _check_paths(a)


def shape_config(a: argparse.Namespace, vocab_size: int | None = None) -> GPTConfig | WindowConfig:
    """The config the shape options ask for: a GPTConfig, or a WindowConfig with ``--arch window-mlp``
    (the config's defaults where an option is not given; ``vocab_size`` None: the default's).

    Raises
    ------
    TrainError
        For a value the config refuses, or an option the architecture does not have.
    """
    given = {k: getattr(a, k) for k in SHAPE_OPTIONS if getattr(a, k) is not None}
    if vocab_size is not None:
        given["vocab_size"] = vocab_size
    try:
        if a.arch == WINDOW_MLP:
            extra = [f"--{k.replace('_', '-')}" for k in SHAPE_OPTIONS if k not in WINDOW_OPTIONS and k in given]
            extra += [o for o, on in (("--no-positional-encoding", a.no_positional_encoding), ("--rope", a.rope),
                                      ("--untied-unembed", a.untied_unembed)) if on]
            if extra:
                raise TrainError(f"{', '.join(extra)} {'does' if len(extra) == 1 else 'do'} not apply to --arch "
                                 f"{WINDOW_MLP} (no attention, no positional table, a tied unembedding)")
            return WindowConfig(**given)
        if a.no_positional_encoding or a.rope:
            given["positional"] = "rope" if a.rope else "none"
        if a.untied_unembed:
            given["tied_unembed"] = False
        return GPTConfig(**given)
    except ValueError as exc:
        raise TrainError(str(exc)) from None


def _check_paths(a: argparse.Namespace) -> None:
    out = Path(a.out)
    if out.suffix != ".safetensors":
        raise TrainError(f"--out {a.out}: the name must end in .safetensors")
    if out.is_dir():
        raise TrainError(f"--out {a.out}: is a folder")
    if not out.parent.is_dir():
        raise TrainError(f"--out {a.out}: the folder {out.parent} does not exist")
    _check_writable(out, "--out")
    texts = {Path(p).resolve() for p in a.corpus}
    if Path(a.val).resolve() in texts:
        raise TrainError(f"--val {a.val} is also a --corpus file: never validate on training text")
    if out.resolve() in texts | {Path(a.val).resolve()}:
        raise TrainError(f"--out {a.out} would overwrite a text file")
    if a.log_file:
        log = Path(a.log_file)
        if log.resolve() in texts | {Path(a.val).resolve(), out.resolve()}:
            raise TrainError(f"--log-file {a.log_file} would overwrite an input or --out")
        if log.is_dir() or not log.parent.is_dir():
            raise TrainError(f"--log-file {a.log_file}: " + ("is a folder" if log.is_dir() else
                                                   f"the folder {log.parent} does not exist"))
        _check_writable(log, "--log-file")
    if a.snapshots or a.snapshot_every or a.snapshot_steps:
        a.snapshot_dir = a.snapshot_dir or str(out.with_name(out.stem + "-snapshots"))
        _check_writable(Path(a.snapshot_dir), "--snapshot-dir")
