"""Training throughput: ``python -m model.train`` against a plain PyTorch loop of the same model.

Both run in this process with the same threads, batch size, context, optimizer (AdamW, betas
0.9/0.95, weight decay 0.1), gradient clipping (1.0, the trainer's default) and model config. The
trainer's tokens/s is the one it records in its checkpoint (training steps only, validation
excluded); the plain loop is timed over the same number of steps after two warm-up steps.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, load_checkpoint
from model.train import main as train_main

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tinystories" / "train-sample-lowercase.txt"
BATCH = 64


def _corpus(folder: Path) -> Path:
    """About 300 kB of training text: TinyStories where ../shared has it, else generated sentences."""
    path = folder / "corpus.txt"
    if CORPUS.exists():
        path.write_text(CORPUS.read_text(encoding="utf-8")[:300_000], encoding="utf-8")
    else:
        g = torch.Generator().manual_seed(0)
        words = [f"word{i}" for i in range(3000)]
        idx = torch.randint(len(words), (60_000,), generator=g).tolist()
        path.write_text("\n".join(" ".join(words[i] for i in idx[k:k + 12]) + " ." for k in range(0, 60_000, 12)))
    return path


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

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * BATCH * n / (time.perf_counter() - t0)


def measure(steps: int) -> dict[str, float]:
    """tokens/s of both, and train_throughput_ratio = trainer / plain loop (goal >= 0.95)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = _corpus(folder)
        out = folder / "bench.safetensors"
        plain_before = plain_loop_tokens_per_s(GPTConfig(), steps)
        code = train_main(["--corpus", str(corpus), "--val", str(corpus), "--out", str(out),
                           "--steps", str(steps), "--batch-size", str(BATCH), "--eval-every", str(steps),
                           "--quiet"])
        if code != 0:
            raise RuntimeError(f"python -m model.train exited with {code}")
        ckpt = load_checkpoint(out)
        trainer = float(ckpt.training["tokens_per_s"])
        config = ckpt.config
        plain_after = plain_loop_tokens_per_s(config, steps)
    plain = (plain_before + plain_after) / 2
    return {
        "train_tokens_per_s": trainer,
        "plain_loop_tokens_per_s": plain,
        "train_throughput_ratio": trainer / plain,
        "train_threads": float(torch.get_num_threads()),
    }
