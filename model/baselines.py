"""Count-based baselines for the validation loss: an add-1 unigram and an interpolated bigram.

They are scored on exactly the targets the transformer's validation loss uses (every next token of
every non-overlapping context-window block, :func:`model.train.validation_loss`), with the same
tokenizer, so their losses compare directly with a checkpoint's ``val_loss``.

``python -m model.baselines --checkpoint CKPT --corpus FILE [FILE ...] --val FILE`` prints them.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from model.training import data


def _val_pairs(val_stream: torch.Tensor, context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    starts = data.window_starts(val_stream.numel(), context_length)
    x, y = data.gather_blocks(val_stream, starts, context_length)
    return x.flatten(), y.flatten()


def unigram_probs(train_stream: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Add-1 (Laplace) unigram: p(w) = (c(w) + 1) / (N + V).

    Returns
    -------
    Tensor (vocab_size,), float64, sums to 1.
    """
    counts = torch.bincount(train_stream, minlength=vocab_size).double()
    return (counts + 1) / (counts.sum() + vocab_size)


def bigram_probs(
    train_stream: torch.Tensor, prev: torch.Tensor, nxt: torch.Tensor, vocab_size: int, lam: float
) -> torch.Tensor:
    """Bigram interpolated with the add-1 unigram (Jelinek & Mercer 1980).

    p(w | u) = lam * c(u, w) / c(u) + (1 - lam) * p_unigram(w); the unigram alone where c(u) = 0.

    Parameters
    ----------
    train_stream : LongTensor (N,)
        Counts come from its consecutive pairs.
    prev, nxt : LongTensor (M,)
        The pairs (u, w) to score.
    lam : float in [0, 1]

    Returns
    -------
    Tensor (M,), float64: p(nxt | prev).
    """
    uni = unigram_probs(train_stream, vocab_size)
    keys = train_stream[:-1] * vocab_size + train_stream[1:]
    pair_keys, pair_counts = torch.unique(keys, return_counts=True)  # sorted keys
    context_counts = torch.bincount(train_stream[:-1], minlength=vocab_size).double()
    query = prev * vocab_size + nxt
    pos = torch.searchsorted(pair_keys, query).clamp(max=pair_keys.numel() - 1)
    c_uw = torch.where(pair_keys[pos] == query, pair_counts[pos], 0).double()
    c_u = context_counts[prev]
    ml = torch.where(c_u > 0, c_uw / c_u.clamp(min=1), uni[nxt])
    return lam * ml + (1 - lam) * uni[nxt]


def fit_lambda(train_stream: torch.Tensor, vocab_size: int, held_out: float = 0.1) -> float:
    """The interpolation weight (grid 0.05 .. 0.95) that best predicts the last tenth of the
    training stream from counts of the rest: the validation text is never used to tune it."""
    cut = int(train_stream.numel() * (1 - held_out))
    fit, tune = train_stream[:cut], train_stream[cut:]
    best = (float("inf"), 0.5)
    for lam in [i / 20 for i in range(1, 20)]:
        p = bigram_probs(fit, tune[:-1], tune[1:], vocab_size, lam)
        best = min(best, (float(-p.log().mean()), lam))
    return best[1]


def baseline_losses(
    train_stream: torch.Tensor, val_stream: torch.Tensor, context_length: int, vocab_size: int
) -> dict[str, float]:
    """Validation cross-entropy (nats per token) of the unigram and the bigram.

    Returns
    -------
    dict
        ``unigram``, ``bigram`` (nats per token) and ``bigram_lambda``.
    """
    prev, nxt = _val_pairs(val_stream, context_length)
    uni = unigram_probs(train_stream, vocab_size)
    lam = fit_lambda(train_stream, vocab_size)
    bi = bigram_probs(train_stream, prev, nxt, vocab_size, lam)
    return {
        "unigram": float(-uni[nxt].log().mean()),
        "bigram": float(-bi.log().mean()),
        "bigram_lambda": lam,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the baselines as JSON, with the tokenizer and context length of a checkpoint."""
    from model.checkpoint import CheckpointError, load_checkpoint

    p = argparse.ArgumentParser(prog="python -m model.baselines", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="its tokenizer and context length are used")
    p.add_argument("--corpus", nargs="+", required=True, metavar="FILE")
    p.add_argument("--val", required=True, metavar="FILE")
    args = p.parse_args(argv)
    try:
        ck = load_checkpoint(args.checkpoint)
        train = data.encode_stories(ck.tokenizer, data.read_stories(args.corpus))
        val = data.encode_stories(ck.tokenizer, data.read_stories([args.val]))
    except (CheckpointError, data.CorpusError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(baseline_losses(train, val, ck.config.context_length, ck.config.vocab_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
