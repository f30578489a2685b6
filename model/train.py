"""Train a checkpoint on text: ``python -m model.train --corpus FILE [FILE ...] --val FILE --out PATH``.

The word-level tokenizer is built from the training text (or reused from ``--resume`` /
``--tokenizer``); the model learns next-token prediction on context-window blocks of the corpus
(see :mod:`model.training.data`) with AdamW, linear warmup and cosine decay. Validation loss is the mean
cross-entropy (nats per token) over all non-overlapping context-window blocks of the ``--val``
text. Bad input ends with a one-line error on stderr and exit status 2; Ctrl+C saves the model
reached so far and exits with status 130 (before training, also while torch is still being
imported: nothing is written, status 130). Every file is written atomically.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from model.training.interrupts import EXIT_INTERRUPTED as _EXIT_INTERRUPTED, STARTING_INTERRUPTED, held_interrupts

try:
    with held_interrupts():  # a Ctrl+C while torch imports would abort the process (see the module)
        import torch

        from model.training import data
        from model.training import distributed
        from model.checkpoint import CheckpointError, load_checkpoint
        from model.core.architectures import architecture_of, model_class
        from model.training.distributed import ONE_PROCESS, Ranks
        from model.tokens.tokenizer import Tokenizer, train_word_tokenizer
        from model.training.args import SHAPE_OPTIONS, build_parser, check_args, log_spaced_steps, shape_config
        from model.training.errors import TrainError
        from model.training.snapshot_names import planned_snapshots
        from model.training.loop import (
            EXIT_DIVERGED, EXIT_INTERRUPTED, Run, lr_at, make_optimizer, train, validation_loss,
        )
        from model.core.transformer import GPT
except KeyboardInterrupt:
    if __name__ != "__main__":
        raise
    print(STARTING_INTERRUPTED, file=sys.stderr)
    sys.exit(_EXIT_INTERRUPTED)

EXIT_BAD_INPUT = 2

__all__ = ["EXIT_BAD_INPUT", "EXIT_DIVERGED", "EXIT_INTERRUPTED", "Run", "log_spaced_steps", "lr_at",
           "main", "make_optimizer", "prepare", "train", "validation_loss"]


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


def _resumed_model(args: argparse.Namespace) -> tuple[GPT, Tokenizer, dict]:
    ck = load_checkpoint(args.resume)
    if ck.tokenizer is None:
        raise TrainError(f"--resume {args.resume}: the checkpoint has no tokenizer")
    if architecture_of(ck.config) != args.arch:
        raise TrainError(f"--resume {args.resume} holds a {architecture_of(ck.config)} model, but --arch is {args.arch}")
    wanted = shape_config(args, ck.config.vocab_size).to_dict()
    given = {k for k in SHAPE_OPTIONS if getattr(args, k) is not None}
    if args.no_positional_encoding or args.rope:
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


def prepare(args: argparse.Namespace, command: str, ranks: Ranks = ONE_PROCESS) -> Run:
    """Read the texts, build or load the tokenizer and the model; raise on any bad input.

    Under torchrun every rank reads the texts; a new tokenizer is built by rank 0 and sent to
    the others, so that all of them encode the same token streams.

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
    if tokenizer is None and not ranks.distributed:
        tokenizer = train_word_tokenizer(stories, args.vocab_size or 4096)
    elif tokenizer is None:
        built = train_word_tokenizer(stories, args.vocab_size or 4096).to_json() if ranks.is_main else ""
        tokenizer = Tokenizer.from_json(distributed.broadcast_text(built, ranks))
    if not args.resume:
        torch.manual_seed(args.seed)
        config = shape_config(args, tokenizer.vocab_size)
        model = model_class(config)(config).train()
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
    if args.snapshot_steps:
        snapshot_steps.update(args.snapshot_steps)
    facts = {
        "corpus": [{"path": p, "sha256": data.file_sha256(p)} for p in args.corpus],
        "val": {"path": args.val, "sha256": data.file_sha256(args.val)},
        "train_tokens": int(train_stream.numel()),
        "val_tokens": int(val_stream.numel()),
        "val_unk_share": data.unknown_share(tokenizer, val_stream),
        "previous_steps": int(previous.get("steps", 0)),
        "previous_curve": list(previous.get("val_curve", [])),
    }
    if args.repeat_share:
        lo, hi = data.repeat_lengths(n_ctx)
        facts["repeated_segments"] = {
            "share": args.repeat_share, "min_length": lo, "max_length": hi,
            "tokens": "random" if args.repeat_random else "text",
            "how": "in each batch this share of the blocks hold a segment of s tokens (s uniform in [min_length, "
                   "max_length]) more than once: " + ("s random tokens, uniform over the vocabulary less its special "
                   "tokens, repeated to the block's end" if args.repeat_random else "the block's first s tokens "
                   "twice, then its own text goes on"),
        }
    if args.resume:
        facts["resumed_from"] = args.resume
        facts["resumed_training"] = {k: v for k, v in previous.items() if k != "val_curve"}
    files = planned_snapshots(args.snapshot_dir if snapshot_steps else None, snapshot_steps,
                              facts["previous_steps"], args.steps, bool(args.resume))
    run = Run(args, command, model, tokenizer, train_stream, val_stream, snapshot_steps, facts, files)
    if args.repeat_random:
        special = set(tokenizer.hf.get_added_tokens_decoder())
        run.random_ids = torch.tensor([i for i in range(tokenizer.vocab_size) if i not in special])
    return run


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point.

    Returns the exit status: 0, 1 when training diverged, 2 on bad input, 130 on Ctrl+C.
    """
    t0 = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "-m", "model.train", *argv])
    main_rank = distributed.env_rank() == 0  # under torchrun only rank 0 prints
    ranks = ONE_PROCESS
    try:
        try:
            args = build_parser().parse_args(argv)
            check_args(args)
            for path in [*args.corpus, args.val]:  # an empty or missing text, before the long reading
                data.check_text_file(path)
            ranks = distributed.start(args.device)
            run = prepare(args, command, ranks)
        except (ValueError, CheckpointError) as exc:  # TrainError, CorpusError, a bad tokenizer
            if main_rank:
                print("error: " + " ".join(str(exc).split()), file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:  # before training started (the loop handles its own)
            if main_rank:
                print(STARTING_INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED
        return train(run, t0, ranks)
    finally:
        distributed.finish(ranks)

if __name__ == "__main__":
    sys.exit(main())
