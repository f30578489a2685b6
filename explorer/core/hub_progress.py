"""What a download from the Hugging Face Hub has done so far, in words and as a fraction (Qt-free)."""

from __future__ import annotations

from typing import Mapping

#: A progress bar's state: (done, total or None while unknown, unit: "B" for bytes, else items).
Bar = tuple[float, "float | None", str]


def _megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def summarise(bars: Mapping[str, Bar]) -> tuple[str, float | None]:
    """One line and a fraction done from ``huggingface_hub``'s progress bars, by description.

    The files bar (``Fetching N files``, items; the last one to move, when a fetch asks twice)
    gives "k of N files"; of the byte bars (bytes received, whose total is a guess the library
    keeps raising, and bytes written, whose total is the sum of the files' sizes) the one with the
    largest total gives the megabytes. The fraction comes from that byte bar when its total is
    known, else from the files bar.

    Parameters
    ----------
    bars : mapping of str to (done, total, unit)
        In the order the bars last moved (oldest first).

    Returns
    -------
    (str, float or None)
        The text ("3 of 5 files · 12.5 MB of 40.0 MB"; "asking the Hub…" before any bar moved) and
        the fraction done in [0, 1], or None when it is not known yet.
    """
    parts: list[str] = []
    fraction = None
    files = [(done, total) for done, total, unit in bars.values() if unit != "B" and total]
    if files:
        done, total = files[-1]
        parts.append(f"{int(done)} of {int(total)} files")
        fraction = min(1.0, done / total)
    sizes = [(done, total) for done, total, unit in bars.values() if unit == "B"]
    if sizes:
        done, total = max(sizes, key=lambda bar: (bar[1] or 0, bar[0]))
        parts.append(f"{_megabytes(done)} of {_megabytes(total)}" if total else _megabytes(done))
        if total:
            fraction = min(1.0, done / total)
    return " · ".join(parts) or "asking the Hub…", fraction
