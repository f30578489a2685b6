"""The training loop of ``python -m model.train``: steps, validation, snapshots, saving.

One process, or several under torchrun (see :mod:`model.training.distributed`): every rank runs the same
loop on its share of each global batch; only rank 0 writes files and reports.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from model.training import data
from model.training import distributed
from model.checkpoint import save_checkpoint
from model.training.distributed import ONE_PROCESS, Ranks
from model.tokens.tokenizer import Tokenizer
from model.training.interrupts import EXIT_INTERRUPTED, STARTING_INTERRUPTED, held_interrupts
from model.training.progress import Progress
from model.core.transformer import GPT

EXIT_DIVERGED = 1


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
    snapshot_files: dict[int, Path] = field(default_factory=dict)  # step of this run -> its file
    #: The ids random repeated segments are drawn from (``--repeat-random``), or None.
    random_ids: torch.Tensor | None = None


def validation_loss(model: GPT, stream: torch.Tensor, batch_size: int = 256,
                    ranks: Ranks = ONE_PROCESS) -> float:
    """Mean next-token cross-entropy over all non-overlapping context-window blocks of a stream.

    Parameters
    ----------
    model : GPT
    stream : LongTensor (N,), N >= context_length + 1
    batch_size : int
        Blocks per forward pass.
    ranks : Ranks
        Under torchrun rank r evaluates blocks r, r + world_size, ... and the sums are added
        over the ranks (float64), so every rank gets the same value as one process would.

    Returns
    -------
    float
        Nats per token, averaged over every target of every block (blocks of context_length
        inputs and their next tokens, stride context_length).
    """
    n_ctx = model.config.context_length
    starts = data.window_starts(stream.numel(), n_ctx)
    mine = starts[ranks.rank :: ranks.world_size]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, mine.numel(), batch_size):
            x, y = data.gather_blocks(stream, mine[i : i + batch_size], n_ctx)
            logits = model(x.to(device))  # (B, n_ctx, vocab_size)
            total += F.cross_entropy(logits.flatten(0, 1), y.to(device).flatten(), reduction="sum").double().cpu()
    model.train(was_training)
    total = distributed.all_sum(total.reshape(1), ranks)[0]
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


def batch_loss(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, ranks: Ranks,
               stop_requested: bool = False) -> tuple[torch.Tensor, float, bool]:
    """Forward one global batch; return (loss to backpropagate, the global mean, stop?).

    Parameters
    ----------
    net : the model, or its DistributedDataParallel wrapper under torchrun
    x, y : LongTensor (B, context_length)
        The whole global batch (every rank draws the same one) and its next-token targets.
    ranks : Ranks
    stop_requested : bool
        This rank's Ctrl+C flag.

    Returns
    -------
    loss : Tensor ()
        One process: ``F.cross_entropy`` averaged over the B * context_length targets, as always.
        Under torchrun: this rank's summed cross-entropy times world_size / (B * context_length),
        so that DDP's mean of the ranks' gradients is the gradient of the global mean, also when
        B does not divide evenly.
    reported : float
        The global batch's mean cross-entropy (nats per token), the same on every rank: the
        ranks' sums added by one all-reduce.
    stop : bool
        True when any rank asked to stop (the flags travel with that all-reduce).
    """
    if not ranks.distributed:
        loss = F.cross_entropy(net(x.to(ranks.device)).flatten(0, 1), y.to(ranks.device).flatten())
        return loss, loss.item(), stop_requested
    n_targets = y.numel()
    x, y = distributed.share(x, ranks).to(ranks.device), distributed.share(y, ranks).to(ranks.device)
    local_sum = F.cross_entropy(net(x).flatten(0, 1), y.flatten(), reduction="sum")
    summed = distributed.all_sum(torch.tensor([local_sum.item(), float(stop_requested)]), ranks)
    return local_sum * (ranks.world_size / n_targets), float(summed[0]) / n_targets, bool(summed[1])


def _window(total_steps: int) -> int:
    """Steps averaged for the reported training loss: the last 100, or a tenth of a short run."""
    return max(1, min(100, total_steps // 10))


class Trainer:
    """One run's loop and its state (steps done, losses, validation curve, time spent)."""

    def __init__(self, run: Run, t0: float, ranks: Ranks, progress: Progress) -> None:
        a = self.args = run.args
        self.run, self.t0, self.ranks, self.progress = run, t0, ranks, progress
        self.model = run.model.to(ranks.device)
        self.net = distributed.wrap(self.model, ranks)
        self.optimizer = make_optimizer(self.model, a.lr, a.weight_decay)
        gen = torch.Generator().manual_seed(a.seed)  # the same global batches on every rank
        self.sampler = data.BlockSampler(run.train_stream, self.model.config.context_length, a.batch_size, gen,
                                         a.repeat_share, run.random_ids)
        self.losses = torch.zeros(a.steps)  # the global batch mean of each step
        self.curve: list = list(run.facts["previous_curve"])  # [step, val_loss], continued on --resume
        self.tokens_per_step = a.batch_size * self.model.config.context_length
        self.train_s, self.val, self.done = 0.0, None, 0

    def recent_loss(self, step: int) -> float | None:
        """Mean training loss of the last :func:`_window` steps up to ``step`` (None at step 0)."""
        return float(self.losses[max(0, step - _window(self.args.steps)) : step].mean()) if step else None

    def evaluate(self, step: int) -> float:
        """Validation loss now (every rank takes part), recorded in the curve and reported."""
        v = validation_loss(self.model, self.run.val_stream, ranks=self.ranks)
        total = self.run.facts["previous_steps"] + step
        self.curve.append([total, round(v, 5)])
        self.progress.event("val", step=total, val_loss=v)
        train = self.recent_loss(step)
        self.progress.status(f"train {float('nan') if train is None else train:.3f} val {v:.3f} "
                             f"{step * self.tokens_per_step / max(self.train_s, 1e-9):,.0f} tok/s")
        self.val = v
        return v

    def facts(self, step: int) -> dict:
        """The training facts written with a checkpoint after ``step`` updates."""
        a, r = self.args, self.run
        n_tokens = step * self.tokens_per_step
        facts = {
            "steps": r.facts["previous_steps"] + step,
            "steps_this_run": step,
            "train_loss": self.recent_loss(step),
            "val_loss": self.val,
            "command": r.command,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "tokens_per_s": n_tokens / self.train_s if self.train_s > 0 else None,
            "wall_s": time.perf_counter() - self.t0,
            "train_s": self.train_s,
            "epochs": n_tokens / r.facts["train_tokens"],
            "seed": a.seed, "batch_size": a.batch_size, "lr": a.lr, "min_lr": a.min_lr,
            "warmup": a.warmup, "weight_decay": a.weight_decay, "grad_clip": a.grad_clip,
            "torch_threads": torch.get_num_threads(),
            "processes": self.ranks.world_size, "device": self.ranks.device.type,
            "val_curve": self.curve,
            **{k: v for k, v in r.facts.items() if not k.startswith("previous_")},
        }
        if a.snapshot_dir:  # where the snapshots are, relative to the checkpoint's folder
            facts["snapshot_dir"] = os.path.relpath(a.snapshot_dir, Path(a.out).parent)
        return facts

    def snapshot(self, step: int) -> None:
        """Rank 0 writes a float16 checkpoint of this step into --snapshot-dir, named by the total step
        it records (:mod:`model.training.snapshot_names`; a file already there was kept by plan)."""
        path = self.run.snapshot_files.get(step)
        if not self.ranks.is_main or path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(path, self.model, self.run.tokenizer, training=self.facts(step), dtype=torch.float16)
        self.progress.event("snapshot", step=self.run.facts["previous_steps"] + step, path=str(path))

    def loop(self) -> int:
        """Train ``--steps`` updates; return the exit status (0, EXIT_DIVERGED or EXIT_INTERRUPTED)."""
        a = self.args
        stop = distributed.StopRequest() if self.ranks.distributed else contextlib.nullcontext()
        try:
            with stop:
                if 0 in self.run.snapshot_steps:
                    self.evaluate(0)
                    self.snapshot(0)
                tick = time.perf_counter()
                for step in range(1, a.steps + 1):
                    lr = lr_at(step - 1, a.steps, a.lr, a.warmup, a.min_lr)
                    for group in self.optimizer.param_groups:
                        group["lr"] = lr
                    x, y = self.sampler.next_batch()
                    loss, reported, stopping = batch_loss(self.net, x, y, self.ranks, getattr(stop, "requested", False))
                    if stopping:
                        self.train_s += time.perf_counter() - tick
                        return self.interrupted(self.ranks)
                    if not math.isfinite(reported):
                        return self.diverged(step, reported)
                    self.update(loss)
                    self.done = step
                    self.losses[step - 1] = reported
                    self.progress.step(step, reported, lr, self.train_s + time.perf_counter() - tick)
                    is_eval = step % a.eval_every == 0 or step == a.steps
                    if is_eval or step in self.run.snapshot_steps:
                        self.train_s += time.perf_counter() - tick
                        self.evaluate(step)
                        if is_eval:
                            self.progress.say(f"step {step}: train {self.recent_loss(step):.4f} "
                                              f"val {self.val:.4f} nats/token")
                        if step in self.run.snapshot_steps:
                            self.snapshot(step)
                        tick = time.perf_counter()
        except KeyboardInterrupt:  # one process (under torchrun SIGINT only sets the stop flag)
            # No collectives here: under torchrun the other ranks may be anywhere.
            return self.interrupted(Ranks(device=self.ranks.device), write=self.ranks.is_main)
        return self.finish()

    def update(self, loss: torch.Tensor) -> None:
        """Backward (DDP averages the gradients across ranks), clip, one AdamW step."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.args.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.grad_clip)
        self.optimizer.step()

    def finish(self) -> int:
        """After the last step: rank 0 saves ``--out`` unless the weights overflowed."""
        a = self.args
        if not (math.isfinite(self.val) and all(torch.isfinite(p).all() for p in self.model.parameters())):
            return self.diverged(a.steps, self.val)  # the last step overflowed
        facts = self.facts(a.steps)
        if self.ranks.is_main:
            save_checkpoint(a.out, self.model, self.run.tokenizer, training=facts)
            self.progress.event("end", status="done", step=facts["steps"], out=a.out)
            self.progress.close()
            print(f"saved {a.out}: {facts['steps']} steps, train loss {facts['train_loss']:.4f}, "
                  f"val loss {self.val:.4f} nats/token, {facts['tokens_per_s']:,.0f} tokens/s, "
                  f"{facts['wall_s']:.0f} s")
            warning = data.unknown_warning(facts.get("val_unk_share"))
            if warning:
                self.progress.error(warning)
        return 0

    def diverged(self, step: int, loss: float) -> int:
        """Write nothing: a model with NaN or infinite weights would not open (load_checkpoint
        refuses it), so an earlier good --out must not be replaced by it."""
        self.progress.event("end", status="diverged", step=step, out=None)
        self.progress.close()
        self.progress.error(f"error: training diverged at step {step} (loss {loss:.4g}); nothing written "
                            f"to {self.args.out}. Try a lower --lr.")
        return EXIT_DIVERGED

    def interrupted(self, ranks: Ranks, write: bool = True) -> int:
        """Ctrl+C: rank 0 saves the weights reached (validation computed on ``ranks``).

        Between updates they are the weights of step ``done``; a signal that hits
        optimizer.step() leaves some tensors updated once more: still a valid model, and the
        file says where it stopped.
        """
        self.progress.close_bar()
        if not write:
            return EXIT_INTERRUPTED
        try:
            self.val = validation_loss(self.model, self.run.val_stream, ranks=ranks)
        except KeyboardInterrupt:
            self.val = None
        facts = self.facts(self.done)
        facts["interrupted"] = True
        if ranks.is_main:
            save_checkpoint(self.args.out, self.model, self.run.tokenizer, training=facts)
            self.progress.event("end", status="interrupted", step=facts["steps"], out=self.args.out)
            self.progress.error(f"interrupted at step {self.done} of {self.args.steps}; saved {self.args.out}")
        return EXIT_INTERRUPTED


def train(run: Run, t0: float, ranks: Ranks = ONE_PROCESS) -> int:
    """Train a prepared run; rank 0 saves ``--out`` at the end or on Ctrl+C. Returns the exit status."""
    a = run.args
    progress = Progress(a.steps, a.quiet, a.log_file, ranks)
    progress.event("start", steps=a.steps, processes=ranks.world_size, device=ranks.device.type,
                   tokens_per_step=a.batch_size * run.model.config.context_length, out=a.out,
                   snapshot_dir=a.snapshot_dir, val_unk_share=run.facts.get("val_unk_share"))
    warning = data.unknown_warning(run.facts.get("val_unk_share"))
    if warning:  # said first, so that a run of hours can be stopped, and again at its end
        progress.error(warning)
    try:
        # Making the optimizer imports torch._dynamo (a second or more on a busy machine): a Ctrl+C
        # in it ended with a 40-line traceback and status -2. It is held until the trainer is made.
        with held_interrupts():
            trainer = Trainer(run, t0, ranks, progress)
    except KeyboardInterrupt:  # before the first step: nothing to save
        progress.close()
        if ranks.is_main:
            print(STARTING_INTERRUPTED, file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        return trainer.loop()
    finally:
        progress.close()
