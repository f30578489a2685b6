"""Measure the figures of the README's "The default model" section from the shipped checkpoints.

    python tools/model_report.py --corpus TRAIN.txt --val VALID.txt CHECKPOINT [CHECKPOINT ...]

Prints, for each checkpoint, its validation loss recomputed here and the one its metadata records,
its training time and tokens/s; then, with the first checkpoint's tokenizer: the unigram and bigram
baselines, the share of <unk> validation tokens, top-5 next tokens after three prompts, three greedy
continuations and three sampled ones (temperature 1, seeds 0, 1, 2).
"""

from __future__ import annotations

import argparse
import re

import torch

from model import load_checkpoint
from model.training import data
from model.baselines import baseline_losses
from model.train import validation_loss

TOP5_PROMPTS = ("once upon a", "the little girl was very", "lily and her mom went to the")
GREEDY_PROMPTS = ("once upon a time", "one day, tom went to the park and", "the dog was sad because")
SAMPLE_PROMPT = "once upon a time"


def detok(text: str) -> str:
    """Word tokens joined by spaces, with the space before punctuation removed (display only)."""
    return re.sub(r" ([.,!?;:'\"])(?=\s|$)", r"\1", re.sub(r" ' ", "'", text))


def generate(ck, prompt: str, n_tokens: int, seed: int | None) -> str:
    """Continue a prompt: greedy when seed is None, else sampled from softmax(logits)."""
    ids = list(ck.tokenizer.encode(prompt).ids)
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    n_ctx = ck.config.context_length
    with torch.no_grad():
        for _ in range(n_tokens):
            logits = ck.model(torch.tensor(ids[-n_ctx:]))[-1]  # (vocab_size,)
            if gen is None:
                ids.append(int(logits.argmax()))
            else:
                ids.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)))
    return detok(ck.tokenizer.decode(ids[len(ck.tokenizer.encode(prompt).ids):]))


def top5(ck, prompt: str) -> str:
    ids = ck.tokenizer.encode(prompt).ids
    with torch.no_grad():
        probs = torch.softmax(ck.model(torch.tensor(ids[-ck.config.context_length:]))[-1], -1)
    p, i = probs.topk(5)
    return ", ".join(f'"{ck.tokenizer.id_to_token(int(t))}" {float(q):.3f}' for q, t in zip(p, i))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", required=True)
    p.add_argument("--val", required=True)
    p.add_argument("checkpoints", nargs="+")
    a = p.parse_args()
    cks = [load_checkpoint(path) for path in a.checkpoints]
    first = cks[0]
    train = data.encode_stories(first.tokenizer, data.read_stories([a.corpus]))
    val = data.encode_stories(first.tokenizer, data.read_stories([a.val]))
    for ck in cks:
        t = ck.training
        print(f"{ck.name}: {ck.model.n_params():,} params, val {validation_loss(ck.model, val):.4f} "
              f"(metadata {t['val_loss']:.4f}), train {t['train_loss']:.4f}, steps {t['steps']}, "
              f"epochs {t['epochs']:.2f}, {t['tokens_per_s']:,.0f} tokens/s, "
              f"train {t['train_s']:.0f} s, wall {t['wall_s']:.0f} s, threads {t['torch_threads']}")
    base = baseline_losses(train, val, first.config.context_length, first.config.vocab_size)
    print(f"baselines: {base}")
    eot = first.tokenizer.token_to_id(data.EOT)
    words = val[val != eot]
    print(f"val tokens {val.numel():,} ({words.numel():,} without <|endoftext|>), "
          f"<unk> share {float((words == first.tokenizer.unk_id).double().mean()):.4f}")
    for ck in cks:
        print(f"--- {ck.name}")
        for prompt in TOP5_PROMPTS:
            print(f"top5 [{prompt}]: {top5(ck, prompt)}")
    for prompt in GREEDY_PROMPTS:
        print(f"greedy [{prompt}] {generate(first, prompt, 30, None)}")
    for seed in range(3):
        print(f"sample seed {seed} [{SAMPLE_PROMPT}] {generate(first, SAMPLE_PROMPT, 30, seed)}")


if __name__ == "__main__":
    main()
