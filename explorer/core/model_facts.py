"""A checkpoint's training facts as text for people: rounded numbers, units, phases of a resumed run.

``model.train`` records ``steps`` as the total over every phase of a resumed run, while
``steps_this_run``, ``epochs``, ``train_s``, ``wall_s`` and ``tokens_per_s`` describe the latest
phase only; the phase before it is kept under ``resumed_training`` (which may hold its own).
:func:`describe_training` turns that into labelled rows, totals first, then one section per phase.
"""

from __future__ import annotations

import math
from typing import Any

from model.core.plain import short_repr

Rows = list[tuple[str, str]]
Section = tuple[str, Rows]

LOSS_KEYS = {"train_loss": "train loss", "val_loss": "val loss", "best_val_loss": "best val loss"}
PHASE_KEYS = ["steps_this_run", "epochs", "train_s", "wall_s", "tokens_per_s", "date", "batch_size", "lr",
              "min_lr", "warmup", "weight_decay", "grad_clip", "seed", "torch_threads", "command"]
LABELS = {"steps_this_run": "steps", "train_s": "training time", "wall_s": "wall time",
          "tokens_per_s": "speed", "torch_threads": "torch threads", "min_lr": "min lr",
          "weight_decay": "weight decay", "grad_clip": "grad clip", "batch_size": "batch size",
          "train_tokens": "train tokens", "val_tokens": "val tokens", "val_unk_share": "val <unk> share",
          "val": "val corpus", "val_curve": "val loss curve", "resumed_from": "resumed from",
          "imported_from": "imported from"}
CURVE_POINTS = 8  # at most this many "step: loss" pairs in the curve row (first and last always)
HASH_CHARS = 12
VALUE_MAX_CHARS = 1000  # one fact's text (a long training command fits)


def fmt_number(x: float | int, sig: int = 4) -> str:
    """``x`` for people: ints and |x| ≥ 1000 with thousands separators, else ``sig`` significant digits.

    >>> fmt_number(5196.533897749445), fmt_number(4.257756424316197), fmt_number(0.0006)
    ('5,197', '4.258', '0.0006')
    """
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 10 ** (sig - 1):
        return f"{x:,.0f}"
    return f"{x:.{sig}g}"


def fmt_seconds(s: float) -> str:
    """A duration: "45.2 s" under 90 s, "18.7 min" under 90 min, else "2.3 h"."""
    if s < 90:
        return f"{s:.3g} s"
    if s < 90 * 60:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def fmt_loss(loss: float) -> str:
    """A cross-entropy loss with its unit and perplexity: "3.045 nats/token (perplexity 21.0)"."""
    return f"{fmt_number(float(loss))} nats/token (perplexity {math.exp(min(float(loss), 700.0)):.1f})"


def fmt_curve(curve: list, points: int = CURVE_POINTS) -> str:
    """``[[step, val_loss], ...]`` as "step: loss" pairs, thinned evenly to ``points`` (ends kept)."""
    pairs = [p for p in curve if isinstance(p, (list, tuple)) and len(p) == 2 and all(map(_finite, p))]
    if len(pairs) > points:
        keep = sorted({round(i * (len(pairs) - 1) / (points - 1)) for i in range(points)})
        pairs = [pairs[i] for i in keep]
    text = " · ".join(f"{int(s):,}: {float(v):.3f}" for s, v in pairs)
    return text + ("  (nats/token)" if pairs else "")


def fmt_file(ref: dict) -> str:
    """A ``{"path", "sha256"}`` record: "train.txt (sha256 30c6f2fac206…)"."""
    text = str(ref.get("path", ref.get("file", "?")))
    if "sha256" in ref:
        text += f" (sha256 {str(ref['sha256'])[:HASH_CHARS]}…)"
    extra = {k: v for k, v in ref.items() if k not in ("path", "file", "sha256")}
    return text + "".join(f", {k} {fmt_value(k, v)}" for k, v in extra.items())


def _finite(x: Any) -> bool:
    """A number that formats: an int or a finite float (not a bool)."""
    return not isinstance(x, bool) and (isinstance(x, int) or (isinstance(x, float) and math.isfinite(x)))


def fmt_value(key: str, value: Any) -> str:
    """Any recorded fact as text, chosen by its key and type (nested dicts and lists included).

    Never raises: a value of an unexpected type or range (the facts come from files) is shown as
    a short repr; the text is at most :data:`VALUE_MAX_CHARS` characters.
    """
    try:
        text = _fmt_value(str(key), value)
    except (TypeError, ValueError, OverflowError, RecursionError, AttributeError):
        text = short_repr(value)
    return text if len(text) <= VALUE_MAX_CHARS else text[:VALUE_MAX_CHARS - 1] + "…"


def _fmt_value(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key in LOSS_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_loss(value)
    if key.endswith("_s") and key != "tokens_per_s" and isinstance(value, (int, float)):
        return fmt_seconds(float(value))
    if key == "tokens_per_s" and isinstance(value, (int, float)):
        return f"{fmt_number(float(value))} tokens/s"
    if key == "val_unk_share" and isinstance(value, (int, float)):
        return f"{100 * value:.2f} %"
    if key.endswith("_tokens") and isinstance(value, int):
        return f"{value:,} tokens"
    if isinstance(value, (bool, int, float)):
        return fmt_number(value)
    if isinstance(value, dict):
        if "path" in value or "sha256" in value:
            return fmt_file(value)
        return ", ".join(f"{k} {fmt_value(k, v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if key.endswith("curve"):
            return fmt_curve(list(value))
        return "; ".join(fmt_value(key, v) for v in value)
    return str(value)


def phases(training: dict) -> list[dict]:
    """The run's phases, newest first: ``training``, then each nested ``resumed_training``."""
    chain, phase = [], training
    while isinstance(phase, dict) and phase and len(chain) < 100:
        chain.append(phase)
        phase = phase.get("resumed_training")
    return chain


def _label(key: str) -> str:
    return LOSS_KEYS.get(key) or LABELS.get(key, key.replace("_", " "))


def _phase_range(phase: dict) -> str:
    """"steps 1,201–2,000" from a phase's total ``steps`` and ``steps_this_run`` ("" when unknown)."""
    end, this = phase.get("steps"), phase.get("steps_this_run")
    if not isinstance(end, int) or not isinstance(this, int):
        return ""
    return f"steps {end - this + 1:,}–{end:,}" if this else f"no steps (at step {end:,})"


def _totals(chain: list[dict]) -> Rows:
    """Steps and epochs over every phase; epochs summed only when every phase saw the same corpus size."""
    latest, n = chain[0], len(chain)
    rows: Rows = []
    if isinstance(latest.get("steps"), int):
        rows.append(("steps", f"{latest['steps']:,}" + (f" in {n} phases" if n > 1 else "")))
    epochs = [p.get("epochs") for p in chain]
    same_corpus = len({p.get("train_tokens") for p in chain}) == 1
    if all(isinstance(e, (int, float)) for e in epochs) and (n == 1 or same_corpus):
        parts = " + ".join(fmt_number(float(e)) for e in reversed(epochs))
        rows.append(("epochs", fmt_number(float(sum(epochs))) + (f" in {n} phases ({parts})" if n > 1 else "")
                     + " of the training corpus"))
    return rows


def describe_training(training: dict) -> list[Section]:
    """The training facts as titled sections of (label, text) rows, for a person to read.

    One section for a single-phase run. A resumed run gets a summary (total steps and epochs,
    the latest losses and the whole validation curve, the data) and then one section per phase,
    newest first, each with its step range, epochs, time, speed and settings ("this phase").
    Unknown keys are kept, formatted by type. An empty dict gives no sections.

    Parameters
    ----------
    training : dict
        A checkpoint's ``training`` facts (JSON-like; see ``model.train``).

    Returns
    -------
    list of (str, list of (str, str))
        ``(title, rows)`` per section.
    """
    chain = phases(training)
    if not chain:
        return []
    latest = chain[0]
    summary = _totals(chain)
    shown = {"steps", "epochs", "resumed_training", "steps_this_run"}
    if len(chain) > 1:
        shown |= set(PHASE_KEYS)
    for key in list(LOSS_KEYS) + [k for k in latest if k not in LOSS_KEYS]:
        if key in latest and key not in shown:
            value = _curve_ending_on_val_loss(latest) if key == "val_curve" else latest[key]
            summary.append((_label(key), fmt_value(key, value)))
    if len(chain) == 1:
        return [("Training", summary)]
    sections = [(f"Training ({len(chain)} phases)", summary)]
    for i, phase in enumerate(chain):
        name = f"Phase {len(chain) - i}" + (" (latest)" if i == 0 else "")
        sections.append((f"{name}, {_phase_range(phase)}".rstrip(", "), _phase_rows(phase, latest, i == 0)))
    return sections


def _curve_ending_on_val_loss(training: dict):
    """The validation curve with its last point, when it is the final validation (same step), given
    the final ``val_loss`` itself: the curve is stored rounded (3.1065), and rounding it again
    showed 3.107 beside the val loss row's 3.106 for one number."""
    curve, val, steps = training.get("val_curve"), training.get("val_loss"), training.get("steps")
    if (isinstance(curve, list) and curve and isinstance(curve[-1], (list, tuple)) and len(curve[-1]) == 2
            and isinstance(val, (int, float)) and curve[-1][0] == steps and abs(float(curve[-1][1]) - val) < 1e-3):
        return curve[:-1] + [[curve[-1][0], float(val)]]
    return curve


def _phase_rows(phase: dict, latest: dict, is_latest: bool) -> Rows:
    """One phase's own facts: its steps, epochs, time and settings; an earlier one adds its end losses
    and any data that differs from the latest phase's."""
    rows = [(_label(k) + (" (this phase)" if k in ("steps_this_run", "epochs") else ""), fmt_value(k, phase[k]))
            for k in PHASE_KEYS if k in phase]
    if not is_latest:
        rows += [(f"{_label(k)} at its end", fmt_value(k, phase[k])) for k in LOSS_KEYS if k in phase]
        rows += [(_label(k), fmt_value(k, v)) for k, v in phase.items()
                 if k not in PHASE_KEYS and k not in LOSS_KEYS and k not in ("steps", "resumed_training")
                 and latest.get(k) != v]
    return rows
