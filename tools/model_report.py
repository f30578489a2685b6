"""Measure the figures of the README's "The default model" section from the shipped checkpoints.

    python tools/model_report.py --corpus TRAIN.txt --val VALID.txt CHECKPOINT [CHECKPOINT ...]

Prints, for each checkpoint, its validation loss recomputed here and the one its metadata records,
its training time and tokens/s; then, with the first checkpoint's tokenizer: the unigram and bigram
baselines, the share of <unk> validation tokens, top-5 next tokens after three prompts, three greedy
continuations and three sampled ones (temperature 1, seeds 0, 1, 2), as README lines.

The continuations are :func:`model.generate.generate`'s, the sampler of the app's Generate panel
and of ``python -m model.trace CKPT TEXT --generate 30 --temperature 1 --seed S`` (numpy's
generator seeded with S: "seed S" means one thing everywhere), written as those write the text
they add (:meth:`model.Tokenizer.render`).
"""

from __future__ import annotations

import argparse

import torch

from model import load_checkpoint
from model.generate import Sampling, generate
from model.training import data
from model.baselines import baseline_losses
from model.train import validation_loss

TOP5_PROMPTS = ("once upon a", "the little girl was very", "lily and her mom went to the")
GREEDY_PROMPTS = ("once upon a time", "one day, tom went to the park and", "the dog was sad because")
SAMPLE_PROMPT = "once upon a time"


def continuation(ck, prompt: str, n_tokens: int, seed: int | None) -> str:
    """The text ``n_tokens`` generated tokens add after ``prompt``: greedy when seed is None, else
    sampled from softmax(logits) (temperature 1) with that seed, by :func:`model.generate.generate`."""
    sampling = Sampling() if seed is None else Sampling(temperature=1.0, seed=seed)
    steps = generate(ck.model, ck.tokenizer.encode(prompt).ids, n_tokens, sampling)
    return ck.tokenizer.render([s.token_id for s in steps], prompt)[0]


def story_line(prompt: str, text: str) -> str:
    """A README bullet: the prompt in italics, then the text generated after it."""
    return f"- *{prompt}*{text}"


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
    print("greedy:")
    for prompt in GREEDY_PROMPTS:
        print(story_line(prompt, continuation(first, prompt, 30, None)))
    print("sampled at temperature 1, seeds 0, 1, 2:")
    for seed in range(3):
        print(story_line(SAMPLE_PROMPT, continuation(first, SAMPLE_PROMPT, 30, seed)))


if __name__ == "__main__":
    main()
