"""Train a checkpoint on text: ``python -m model.train --corpus FILE [FILE ...] --val FILE --out PATH``.

The word-level tokenizer is built from the training text (or reused from ``--resume`` /
``--tokenizer``); the model learns next-token prediction on context-window blocks of the corpus
(see :mod:`model.data`) with AdamW, linear warmup and cosine decay. Validation loss is the mean
cross-entropy (nats per token) over all non-overlapping context-window blocks of the ``--val``
text. Bad input ends with a one-line error on stderr and exit status 2; Ctrl+C saves the model
reached so far and exits with status 130. Every file is written atomically.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from model import data
from model.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from model.config import GPTConfig
from model.tokenizer import Tokenizer, train_word_tokenizer
from model.train_args import SHAPE_OPTIONS, TrainError, build_parser, check_args, log_spaced_steps
from model.transformer import GPT

EXIT_DIVERGED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


@dataclass
class Run:
    """Everything one training run needs, prepared and checked before the first step."""

    args: argparse.Namespace
    command: str
    model: GPT
    tokenizer: Tokenizer
    train_stream: torch.Tensor
    val_stream: torch.Tensor
    snapshot_steps: set[int]
    facts: dict = field(default_factory=dict)


def validation_loss(model: GPT, stream: torch.Tensor, batch_size: int = 256) -> float:
    """Mean next-token cross-entropy over all non-overlapping context-window blocks of a stream.

    Parameters
    ----------
    model : GPT
    stream : LongTensor (N,), N >= context_length + 1

    Returns
    -------
    float
        Nats per token, averaged over every target of every block (blocks of context_length
        inputs and their next tokens, stride context_length).
    """
    n_ctx = model.config.context_length
    starts = data.window_starts(stream.numel(), n_ctx)
    was_training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, starts.numel(), batch_size):
            x, y = data.gather_blocks(stream, starts[i : i + batch_size], n_ctx)
            logits = model(x)  # (B, n_ctx, vocab_size)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").double()
    model.train(was_training)
    return float(total) / (starts.numel() * n_ctx)


def lr_at(step: int, total: int, lr: float, warmup: int, min_lr: float) -> float:
    """Learning rate before update ``step`` (0-based): linear warmup, then cosine decay to min_lr.

    Cosine schedule as in Loshchilov & Hutter 2017 (SGDR), without restarts.
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model: GPT, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (Loshchilov & Hutter 2019); weight decay on matrices and embeddings only (nanoGPT)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def _load_tokenizer(path: str) -> Tokenizer:
    p = Path(path)
    if p.suffix == ".json":
        try:
            return Tokenizer.from_json(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise TrainError(f"--tokenizer {path}: {exc}") from None
    tokenizer = load_checkpoint(p).tokenizer
    if tokenizer is None:
        raise TrainError(f"--tokenizer {path}: the checkpoint has no tokenizer")
    return tokenizer


def _shape_config(args: argparse.Namespace, vocab_size: int) -> GPTConfig:
    shape = {k: getattr(args, k) for k in SHAPE_OPTIONS if getattr(args, k) is not None}
    if args.no_positional_encoding:
        shape["positional"] = "none"
    if args.untied_unembed:
        shape["tied_unembed"] = False
    try:
        return GPTConfig(vocab_size=vocab_size, **shape)
    except ValueError as exc:
        raise TrainError(str(exc)) from None


def _resumed_model(args: argparse.Namespace) -> tuple[GPT, Tokenizer, dict]:
    ck = load_checkpoint(args.resume)
    if ck.tokenizer is None:
        raise TrainError(f"--resume {args.resume}: the checkpoint has no tokenizer")
    wanted = _shape_config(args, ck.config.vocab_size).to_dict()
    given = {k for k in SHAPE_OPTIONS if getattr(args, k) is not None}
    if args.no_positional_encoding:
        given.add("positional")
    if args.untied_unembed:
        given.add("tied_unembed")
    for key in sorted(given):
        if wanted[key] != getattr(ck.config, key):
            raise TrainError(
                f"--resume {args.resume} has {key} {getattr(ck.config, key)}, "
                f"but the options ask for {wanted[key]}"
            )
    return ck.model.train(), ck.tokenizer, ck.training


def prepare(args: argparse.Namespace, command: str) -> Run:
    """Read the texts, build or load the tokenizer and the model; raise on any bad input.

    Raises
    ------
    TrainError, data.CorpusError, CheckpointError
    """
    previous: dict = {}
    tokenizer = None
    if args.resume:
        model, tokenizer, previous = _resumed_model(args)
    elif args.tokenizer:
        tokenizer = _load_tokenizer(args.tokenizer)
    stories = data.read_stories(args.corpus)
    val_stories = data.read_stories([args.val])
    if tokenizer is None:
        tokenizer = train_word_tokenizer(stories, args.vocab_size or 4096)
    if not args.resume:
        torch.manual_seed(args.seed)
        model = GPT(_shape_config(args, tokenizer.vocab_size)).train()
    n_ctx = model.config.context_length
    train_stream = data.encode_stories(tokenizer, stories)
    val_stream = data.encode_stories(tokenizer, val_stories)
    data.check_length(train_stream, n_ctx, "the training corpus")
    data.check_length(val_stream, n_ctx, f"--val {args.val}")
    snapshot_steps = set()
    if args.snapshot_every:
        snapshot_steps.update(range(args.snapshot_every, args.steps + 1, args.snapshot_every))
    if args.snapshots:
        snapshot_steps.update(log_spaced_steps(args.steps, args.snapshots))
    eot = tokenizer.token_to_id(data.EOT)
    words = val_stream[val_stream != eot]
    facts = {
        "corpus": [{"path": p, "sha256": data.file_sha256(p)} for p in args.corpus],
        "val": {"path": args.val, "sha256": data.file_sha256(args.val)},
        "train_tokens": int(train_stream.numel()),
        "val_tokens": int(val_stream.numel()),
        "val_unk_share": float((words == tokenizer.unk_id).float().mean()) if words.numel() else 0.0,
        "previous_steps": int(previous.get("steps", 0)),
        "previous_curve": list(previous.get("val_curve", [])),
    }
    if args.resume:
        facts["resumed_from"] = args.resume
        facts["resumed_training"] = {k: v for k, v in previous.items() if k != "val_curve"}
    return Run(args, command, model, tokenizer, train_stream, val_stream, snapshot_steps, facts)


def _training_facts(run: Run, step: int, losses: torch.Tensor, val: float | None,
                    train_s: float, t0: float, curve: list) -> dict:
    a = run.args
    n_tokens = step * a.batch_size * run.model.config.context_length
    recent = losses[max(0, step - _window(a.steps)) : step]
    return {
        "steps": run.facts["previous_steps"] + step,
        "steps_this_run": step,
        "train_loss": float(recent.mean()) if step else None,
        "val_loss": val,
        "command": run.command,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tokens_per_s": n_tokens / train_s if train_s > 0 else None,
        "wall_s": time.perf_counter() - t0,
        "train_s": train_s,
        "epochs": n_tokens / run.facts["train_tokens"],
        "seed": a.seed, "batch_size": a.batch_size, "lr": a.lr, "min_lr": a.min_lr,
        "warmup": a.warmup, "weight_decay": a.weight_decay, "grad_clip": a.grad_clip,
        "torch_threads": torch.get_num_threads(),
        "val_curve": curve,
        **{k: v for k, v in run.facts.items() if not k.startswith("previous_")},
    }


def _window(total_steps: int) -> int:
    """Steps averaged for the reported training loss: the last 100, or a tenth of a short run."""
    return max(1, min(100, total_steps // 10))


def _snapshot(run: Run, step: int, facts: dict) -> None:
    folder = Path(run.args.snapshot_dir)
    folder.mkdir(parents=True, exist_ok=True)
    width = max(6, len(str(run.args.steps)))
    save_checkpoint(folder / f"step-{step:0{width}d}.safetensors", run.model, run.tokenizer,
                    training=facts, dtype=torch.float16)


def train(run: Run, t0: float) -> int:
    """The training loop; saves ``--out`` at the end or on Ctrl+C. Returns the exit status."""
    from tqdm import tqdm

    a, model = run.args, run.model
    optimizer = make_optimizer(model, a.lr, a.weight_decay)
    gen = torch.Generator().manual_seed(a.seed)
    sampler = data.BlockSampler(run.train_stream, model.config.context_length, a.batch_size, gen)
    params = list(model.parameters())
    losses = torch.zeros(a.steps)
    curve: list = list(run.facts["previous_curve"])  # [step, val_loss], continued on --resume
    tokens_per_step = a.batch_size * model.config.context_length
    train_s, val, done = 0.0, None, 0
    bar = tqdm(total=a.steps, unit="step", dynamic_ncols=True, file=sys.stderr,
               mininterval=1.0 if sys.stderr.isatty() else 30.0, disable=a.quiet)

    def evaluate_and_log(s: int) -> float:
        v = validation_loss(model, run.val_stream)
        curve.append([run.facts["previous_steps"] + s, round(v, 5)])
        bar.set_postfix_str(f"train {losses[max(0, s - _window(a.steps)):s].mean():.3f} val {v:.3f} "
                            f"{s * tokens_per_step / max(train_s, 1e-9):,.0f} tok/s", refresh=False)
        return v

    try:
        if 0 in run.snapshot_steps:
            _snapshot(run, 0, _training_facts(run, 0, losses, evaluate_and_log(0), 0.0, t0, curve))
        tick = time.perf_counter()
        for step in range(1, a.steps + 1):
            lr = lr_at(step - 1, a.steps, a.lr, a.warmup, a.min_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = sampler.next_batch()
            logits = model(x)  # (batch_size, context_length, vocab_size)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            if not torch.isfinite(loss):
                bar.close()
                return _diverged(a, step, loss.item())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if a.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
            optimizer.step()
            done = step
            losses[step - 1] = loss.detach()
            bar.update(1)
            is_eval = step % a.eval_every == 0 or step == a.steps
            if is_eval or step in run.snapshot_steps:
                train_s += time.perf_counter() - tick
                val = evaluate_and_log(step)
                if is_eval and not a.quiet:
                    bar.write(f"step {step}: train {losses[max(0, step - _window(a.steps)):step].mean():.4f} "
                              f"val {val:.4f} nats/token", file=sys.stderr)
                if step in run.snapshot_steps:
                    _snapshot(run, step, _training_facts(run, step, losses, val, train_s, t0, curve))
                tick = time.perf_counter()
    except KeyboardInterrupt:
        bar.close()
        return _save_interrupted(run, done, losses, train_s, t0, curve)
    bar.close()
    if not (math.isfinite(val) and all(torch.isfinite(p).all() for p in params)):  # the last step overflowed
        return _diverged(a, a.steps, val)
    facts = _training_facts(run, a.steps, losses, val, train_s, t0, curve)
    save_checkpoint(a.out, model, run.tokenizer, training=facts)
    print(f"saved {a.out}: {facts['steps']} steps, train loss {facts['train_loss']:.4f}, "
          f"val loss {val:.4f} nats/token, {facts['tokens_per_s']:,.0f} tokens/s, "
          f"{facts['wall_s']:.0f} s")
    return 0


def _diverged(a: argparse.Namespace, step: int, loss: float) -> int:
    # A model with NaN or infinite weights would not open (load_checkpoint refuses it): write nothing,
    # so that an earlier good --out is not replaced by it.
    print(f"error: training diverged at step {step} (loss {loss:.4g}); nothing written to {a.out}. "
          "Try a lower --lr.", file=sys.stderr)
    return EXIT_DIVERGED


def _save_interrupted(run: Run, done: int, losses, train_s: float, t0: float, curve) -> int:
    # Ctrl+C between updates leaves the weights of step `done`; one that hits optimizer.step()
    # leaves some tensors updated once more: still a valid model, and the file says where it stopped.
    try:
        val = validation_loss(run.model, run.val_stream)
    except KeyboardInterrupt:
        val = None
    facts = _training_facts(run, done, losses, val, train_s, t0, curve)
    facts["interrupted"] = True
    save_checkpoint(run.args.out, run.model, run.tokenizer, training=facts)
    print(f"interrupted at step {done} of {run.args.steps}; saved {run.args.out}", file=sys.stderr)
    return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point. Returns the exit status (0, 1 when training diverged, 2 on bad input, 130 on Ctrl+C)."""
    t0 = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "-m", "model.train", *argv])
    try:
        args = build_parser().parse_args(argv)
        check_args(args)
        run = prepare(args, command)
    except (ValueError, CheckpointError) as exc:  # TrainError, CorpusError, a bad tokenizer
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted before training started; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    return train(run, t0)


if __name__ == "__main__":
    sys.exit(main())
