"""Training throughput: ``python -m model.train`` against a plain PyTorch loop of the same model.

Both run in this process with the same threads, batch size, context, optimizer (AdamW, betas
0.9/0.95, weight decay 0.1), gradient clipping (1.0, the trainer's default) and model config. The
trainer's tokens/s is the one it records in its checkpoint (training steps only, validation
excluded) over all its steps, and the plain loop is timed the same way, from its first step.
The two alternate for a few rounds and the best round of each counts, so that a burst of other
work on the machine hurts neither more than the other. The text is generated sentences unless
``--corpus`` names a UTF-8 text (the figures in the README used TinyStories' train sample).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, load_checkpoint
from model.train import main as train_main

BATCH = 64


def _texts(folder: Path, corpus: Path | None = None) -> tuple[Path, Path]:
    """About 300 kB of training text and 30 kB of other text for the final validation: the start
    of ``corpus`` when given (at least 330 kB), else generated sentences."""
    if corpus is not None:
        text = Path(corpus).read_text(encoding="utf-8")[:330_000]
    else:
        g = torch.Generator().manual_seed(0)
        words = [f"word{i}" for i in range(3000)]
        idx = torch.randint(len(words), (66_000,), generator=g).tolist()
        text = "\n".join(" ".join(words[i] for i in idx[k:k + 12]) + " ." for k in range(0, 66_000, 12))
    cut = text.rindex("\n", 0, 300_000)
    train, val = folder / "train.txt", folder / "val.txt"
    train.write_text(text[:cut], encoding="utf-8")
    val.write_text(text[cut:], encoding="utf-8")
    return train, val


def plain_loop_tokens_per_s(config: GPTConfig, steps: int, seed: int = 0) -> float:
    """Tokens/s of a minimal loop: random blocks, forward, cross-entropy, backward, clip, AdamW."""
    torch.manual_seed(seed)
    model = GPT(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    stream = torch.randint(config.vocab_size, (200_000,))
    n = config.context_length

    def step() -> None:
        starts = torch.randint(stream.numel() - n - 1, (BATCH,))
        idx = starts[:, None] + torch.arange(n + 1)
        block = stream[idx]
        logits = model(block[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), block[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * BATCH * n / (time.perf_counter() - t0)


def measure(steps: int, rounds: int = 2, corpus: Path | None = None) -> dict[str, float]:
    """tokens/s of both (best of ``rounds``), and train_throughput_ratio = trainer / plain loop
    (goal >= 0.95); ``corpus``: the training text (default: generated sentences)."""
    trainer, plain = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus, val = _texts(folder, corpus)
        out = folder / "bench.safetensors"
        for _ in range(rounds):
            code = train_main(["--corpus", str(corpus), "--val", str(val), "--out", str(out),
                               "--steps", str(steps), "--batch-size", str(BATCH), "--eval-every", str(steps),
                               "--quiet"])
            if code != 0:
                raise RuntimeError(f"python -m model.train exited with {code}")
            ckpt = load_checkpoint(out)
            trainer.append(float(ckpt.training["tokens_per_s"]))
            plain.append(plain_loop_tokens_per_s(ckpt.config, steps))
    return {
        "train_tokens_per_s": max(trainer),
        "plain_loop_tokens_per_s": max(plain),
        "train_throughput_ratio": max(trainer) / max(plain),
        "train_threads": float(torch.get_num_threads()),
    }
