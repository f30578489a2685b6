"""The PyTorch half of Transformer Explorer: config, transformer, trace, tokenizer, checkpoints.

Nothing in this package imports Qt or anything from ``explorer``. The names below are imported
on first use (PEP 562 ``__getattr__``), so that importing a submodule that needs no torch
(:mod:`model.formats.refs`, :mod:`model.core.plain`) does not import torch: the app shows its
window before torch has been imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Each public name and the module that defines it.
_HOMES = {
    "Checkpoint": "model.checkpoint",
    "CheckpointError": "model.checkpoint",
    "load_checkpoint": "model.checkpoint",
    "save_checkpoint": "model.checkpoint",
    "GPTConfig": "model.core.config",
    "Encoding": "model.tokens.tokenizer",
    "Tokenizer": "model.tokens.tokenizer",
    "LayerTrace": "model.tracing.records",
    "NonFinite": "model.tracing.records",
    "Trace": "model.tracing.records",
    "GPT": "model.core.transformer",
}

__all__ = ["Checkpoint", "CheckpointError", "Encoding", "GPT", "GPTConfig", "LayerTrace", "NonFinite", "Tokenizer",
           "Trace", "load_checkpoint", "save_checkpoint"]  # the keys of _HOMES (tests/test_shipped.py checks)

if TYPE_CHECKING:
    from model.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
    from model.core.config import GPTConfig
    from model.core.transformer import GPT
    from model.tokens.tokenizer import Encoding, Tokenizer
    from model.tracing.records import LayerTrace, NonFinite, Trace


def __getattr__(name: str) -> Any:
    """``model.GPT`` and the other public names, imported from their module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'model' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
