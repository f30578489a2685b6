"""``python -m model.trace SNAPSHOTS TEXT --over-training [--json]``: the curves of a text over training.

SNAPSHOTS is a folder of snapshots of one run, or a checkpoint whose snapshots are found as
:func:`model.training.snapshots.snapshot_folder_for` says. ``--json`` prints one list with a dict per
snapshot (see :func:`curves_to_json`); without it, a table.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path

from model.checkpoint import CheckpointError, load_any
from model.tokens.names import token_name
from model.training.over_training import TrainingCurves, curves_over_training
from model.training.snapshots import SnapshotError, SnapshotSet, load_snapshots, snapshots_for


#: The command reads each snapshot once: its loaded weights are kept up to this many bytes (3,000
#: snapshots kept whole took 545 MB).
KEEP_LOADED_BYTES = 32 * 2**20


def _number(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def curves_to_json(curves: TrainingCurves, tokenizer=None) -> list[dict]:
    """One JSON-ready dict per snapshot (NaN as None); tokens named by ``tokenizer`` or ``#id``.

    Keys: ``step``; ``loss_on_text`` (nats per token); ``target_prob``; ``target`` (the token
    followed), ``target_kind`` and ``position`` (the query position, 0-based in the tokens run);
    ``top1``, ``top1_prob`` and ``top1_changed`` (differs from the snapshot before); ``val_loss``
    (the stored validation loss at this step, or None); ``heads``: a list of ``{"layer", "head",
    "entropy" (nats), "first", "prev", "self"}``. Definitions: :mod:`model.training.over_training`.
    """
    name = functools.partial(token_name, tokenizer)
    stored = {int(s): float(v) for s, v in curves.val_curve}
    n_layers, n_heads = curves.attn_entropy.shape[1:]
    out = []
    for k, step in enumerate(curves.steps):
        heads = [{"layer": li, "head": h, "entropy": _number(curves.attn_entropy[k, li, h]),
                  "first": _number(curves.attn_first[k, li, h]), "prev": _number(curves.attn_prev[k, li, h]),
                  "self": _number(curves.attn_self[k, li, h])}
                 for li in range(n_layers) for h in range(n_heads)]
        top1 = int(curves.top1[k])
        out.append({
            "step": int(step), "loss_on_text": _number(curves.loss_on_text[k]),
            "target_prob": _number(curves.target_prob[k]),
            "target": name(curves.target_id) if curves.target_id >= 0 else None,
            "target_kind": curves.target_kind, "position": curves.position,
            "top1": name(top1) if top1 >= 0 else None, "top1_prob": _number(curves.top1_prob[k]),
            "top1_changed": bool(curves.top1_changed[k]), "val_loss": stored.get(int(step)),
            "heads": heads,
        })
    return out


def _open(path: str, args: argparse.Namespace) -> SnapshotSet:
    """The snapshots of a folder, or of a checkpoint's run (a Hub model's: its cached step revisions).
    Raises SnapshotError or CheckpointError."""
    p = Path(path)
    options = {"n_heads": args.n_heads, "vocab_path": args.vocab}
    if p.is_dir():
        snaps = load_snapshots(p, **options)
    else:
        ckpt = load_any(path, n_heads=args.n_heads, vocab_path=args.vocab, allow_no_tokenizer=True)  # builtin:, hf: too
        snaps = snapshots_for(ckpt)
        if snaps is None:
            raise SnapshotError(f"{path}: no snapshot folder found for this checkpoint "
                                f"(give the folder instead; model.train writes {p.stem}-snapshots/)")
    if not len(snaps):
        first = f": {snaps.skipped[0].path.name}: {snaps.skipped[0].reason}" if snaps.skipped else ""
        raise SnapshotError(f"{snaps.folder}: no snapshots of one run found "
                            f"({len(snaps.skipped)} file(s) skipped{first})")
    return snaps


SKIPPED_SHOWN = 5  # files named in the note; the rest are counted


def skipped_note(snaps: SnapshotSet) -> str:
    """One line: how many files of the folder were skipped and why (the first few by name)."""
    shown = "; ".join(f"{s.path.relative_to(snaps.folder)}: {s.reason}" for s in snaps.skipped[:SKIPPED_SHOWN])
    more = f"; and {len(snaps.skipped) - SKIPPED_SHOWN} more" if len(snaps.skipped) > SKIPPED_SHOWN else ""
    n = len(snaps.skipped)
    return (f"note: {n} file{'s' * (n != 1)} of {snaps.folder} skipped (not snapshots of this run), "
            f"{len(snaps)} used: " + " ".join(f"{shown}{more}".split()))


def _ids(args: argparse.Namespace, snaps: SnapshotSet, parse_ids) -> tuple[list[int], object]:
    tokenizer = snaps.tokenizer
    if args.ids is not None:
        return parse_ids(args.ids), tokenizer
    if tokenizer is None:
        raise ValueError(f"{args.checkpoint}: no tokenizer was found for these snapshots; use --ids")
    return tokenizer.encode(args.text).ids, tokenizer


def _target(args: argparse.Namespace, tokenizer, vocab_size: int) -> int | None:
    from model.explain.report import resolve_target

    return None if args.target is None else resolve_target(args.target, tokenizer, vocab_size)


def _table(curves: TrainingCurves, rows: list[dict], tokens: list[str]) -> None:
    print(f"tokens ({len(tokens)}): " + " ".join(f"[{i}]{t}" for i, t in enumerate(tokens)))
    print(f"position {curves.position}, target {rows[0]['target']!r} ({curves.target_kind}); "
          "loss on the text in nats per token; * = top-1 changed")
    heads = [f"L{h['layer']}H{h['head']} ent/prev" for h in rows[0]["heads"]]
    print(f"{'step':>7} {'loss':>7} {'p(target)':>9}  {'top-1':<14} " + " ".join(f"{h:>13}" for h in heads))
    for r in rows:
        def fmt(x, spec):
            return "-" if x is None else format(x, spec)

        cells = " ".join(f"{fmt(h['entropy'], '.3f'):>6}/{fmt(h['prev'], '.3f'):<6}" for h in r["heads"])
        top = ("*" if r["top1_changed"] else " ") + str(r["top1"])
        print(f"{r['step']:>7} {fmt(r['loss_on_text'], '7.3f'):>7} {fmt(r['target_prob'], '9.4f'):>9}  "
              f"{top:<14} {cells}")


def run(args: argparse.Namespace, parse_ids) -> int:
    """The ``--over-training`` branch of ``python -m model.trace`` (``args`` from its parser).

    Returns the exit status: 0, or 2 with one line on stderr for bad input.
    """
    try:
        if args.ids is not None and args.text:
            raise ValueError("give the text or --ids, not both")
        snaps = _open(args.checkpoint, args)
        snaps.kept.budget = KEEP_LOADED_BYTES  # each snapshot is traced once here: keep few loaded
        ids, tokenizer = _ids(args, snaps, parse_ids)
        curves = curves_over_training(snaps, ids, position=args.position, target_id=_target(args, tokenizer, snaps.snapshots[0].model.config.vocab_size),
                                      val_curve=snaps.val_curve, positional_encoding=not args.no_pe,
                                      causal=not args.bidirectional)
    except (SnapshotError, CheckpointError, ValueError, OSError) as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    if snaps.skipped:  # on stderr: the JSON on stdout stays one value
        print(skipped_note(snaps), file=sys.stderr)
    rows = curves_to_json(curves, tokenizer)
    if args.json:
        json.dump(rows, sys.stdout)
        print()
    else:
        name = functools.partial(token_name, tokenizer)
        _table(curves, rows, [name(i) for i in curves.token_ids])
    return 0
