"""``python -m explorer.book``: the worked example of Raschka's chapter 3, every tensor, without Qt.

    python -m explorer.book [--json] [--dropout] [--query N]

Prints every named tensor of :func:`explorer.core.lessons.book.chapter3` under its section, four decimals
as the chapter prints them; ``--json`` prints one object instead: ``tokens``, ``query``,
``dropout``, ``tensors`` (name -> nested lists, -inf as null), ``sections`` (name -> section)
and ``printed`` (the names the chapter prints).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from explorer.core.lessons.book import QUERY, SECTIONS, TOKENS, BookExample, chapter3


def to_json(ex: BookExample) -> dict:
    """The example as one JSON-ready object (-inf, the masked scores, as None)."""
    def nested(a: np.ndarray):
        return np.where(np.isfinite(a), a, None).tolist() if not np.isfinite(a).all() else a.tolist()

    return {
        "source": "Raschka, Build a Large Language Model (From Scratch), chapter 3",
        "tokens": list(TOKENS),
        "query": ex.query,
        "dropout": ex.dropout,
        "tensors": {key: nested(t.value) for key, t in ex.tensors.items()},
        "sections": {key: t.section for key, t in ex.tensors.items()},
        "printed": [key for key, t in ex.tensors.items() if t.printed],
    }


def _text(ex: BookExample) -> str:
    lines, section = [], None
    for key, t in ex.tensors.items():
        if t.section != section:
            section = t.section
            lines.append(f"\n== {section} {SECTIONS[section]}")
        name = t.name if t.name == key else f"{t.name} [{key}]"
        shown = np.array2string(t.value, precision=4, floatmode="fixed", separator=", ", max_line_width=100)
        lines.append(f"{name} = {t.code}\n{shown}")
    return "\n".join(lines).lstrip("\n")


def main(argv: list[str] | None = None) -> int:
    """Print the example; returns the exit code (0, or 2 for bad usage)."""
    p = argparse.ArgumentParser(prog="python -m explorer.book",
                                description="The worked example of Raschka's chapter 3, every tensor.")
    p.add_argument("--json", action="store_true", help="print one JSON object with every tensor")
    p.add_argument("--dropout", action="store_true",
                   help="run CausalAttention and the multi-head classes with dropout 0.5 (the chapter uses 0.0)")
    p.add_argument("--query", type=int, default=QUERY + 1, metavar="N",
                   help=f"the query token x^N of 3.3.1 and 3.4.1, 1 to {len(TOKENS)} (default 2, 'journey')")
    args = p.parse_args(argv)
    if not 1 <= args.query <= len(TOKENS):
        p.error(f"--query must be 1 to {len(TOKENS)}, got {args.query}")
    ex = chapter3(args.query - 1, args.dropout)
    if args.json:
        json.dump(to_json(ex), sys.stdout)
        print()
    else:
        print(_text(ex))
    return 0


if __name__ == "__main__":
    sys.exit(main())
