"""What the app says about itself: its version, what it runs on, and the models it ships.

``transformer-explorer --version`` and ``--list-models``, Help ▸ About and File ▸ Open Shipped Model
read these. Versions come from the installed distributions' metadata (no import of torch or Qt);
the shipped models from their files (:func:`model.formats.refs.builtin_models`), described from
each file's header (its config and training facts), never from a list kept by hand.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from model.core.config import GPTConfig
from model.formats.errors import CheckpointError
from model.formats.refs import BuiltinRef, builtin_models

DISTRIBUTION = "transformer-explorer"  # the project's name in pyproject.toml
QT_DISTRIBUTIONS = ("PySide6-Essentials", "PySide6")  # either provides the PySide6 package
POSITIONS = {"learned": "learned positions", "rope": "RoPE", "none": "no positional encoding"}


def version(distribution: str = DISTRIBUTION) -> str:
    """The installed version of a distribution (pyproject.toml's ``version`` for ours), or
    ``"not installed"`` (running from a source tree that was never installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_line() -> str:
    """``transformer-explorer 0.1.0 (torch 2.13.0, PySide6 6.11.3, Python 3.11.7)``: what ``--version`` prints."""
    qt = next((version(d) for d in QT_DISTRIBUTIONS if version(d) != "not installed"), "not installed")
    return (f"{DISTRIBUTION} {version()} (torch {version('torch')}, PySide6 {qt}, "
            f"Python {platform.python_version()})")


@dataclass(frozen=True)
class ShippedModel:
    """A checkpoint shipped with the app, as the lists show it.

    Attributes
    ----------
    ref : BuiltinRef   ``builtin:NAME``.
    path : Path        its installed file.
    summary : str      its shape and training in one line (or why its header cannot be read).
    """

    ref: BuiltinRef
    path: Path
    summary: str


def shipped_models(default: BuiltinRef | None = None) -> list[ShippedModel]:
    """Every shipped model (sorted by name), each summarised from its header; ``default`` is said so."""
    from model.formats.base import Source

    out = []
    for name, path in builtin_models().items():
        try:  # the header only: the weights are not read
            meta = Source(path).safetensors_metadata
            training = json.loads(meta.get("training", "{}"))
            summary = summarise(GPTConfig.from_dict(json.loads(meta["config"])),
                                training if isinstance(training, dict) else {})
        except (CheckpointError, KeyError, TypeError, ValueError) as exc:  # listed with the reason, never raised
            summary = f"cannot be read ({type(exc).__name__}: {exc})"
        ref = BuiltinRef(name)
        out.append(ShippedModel(ref, path, summary + (" (the default)" if ref == default else "")))
    return out


def models_listing(default: BuiltinRef | None = None) -> list[str]:
    """``--list-models``: a line per shipped model, ``builtin:NAME`` then its summary, in columns."""
    models = shipped_models(default)
    width = max((len(m.ref.spec) for m in models), default=0)
    return [f"{m.ref.spec:<{width}}  {m.summary}" for m in models]


def summarise(config: GPTConfig, training: dict) -> str:
    """One line from a checkpoint's config and training facts, e.g. ``1 block, 1 head, d_model 128,
    context 32 tokens, vocabulary 4,096, learned positions; validation loss 3.11 after 2,000 steps``
    (the loss only where the facts give it)."""
    n, h = config.n_layers, config.n_heads
    line = (f"{n} block{'s' * (n != 1)}, {h} head{'s' * (h != 1)}, d_model {config.d_model}, "
            f"context {config.context_length} tokens, vocabulary {config.vocab_size:,}, {POSITIONS[config.positional]}")
    loss, steps = training.get("val_loss"), training.get("steps")
    if isinstance(loss, (int, float)) and isinstance(steps, int):
        line += f"; validation loss {loss:.2f} after {steps:,} steps"
    return line
