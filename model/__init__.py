"""The PyTorch half of Transformer Explorer: config, transformer, trace, tokenizer, checkpoints.

Nothing in this package imports Qt or anything from ``explorer``.
"""

from model.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from model.core.config import GPTConfig
from model.tokens.tokenizer import Encoding, Tokenizer
from model.tracing.records import LayerTrace, NonFinite, Trace
from model.core.transformer import GPT

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "Encoding",
    "GPT",
    "GPTConfig",
    "LayerTrace",
    "NonFinite",
    "Tokenizer",
    "Trace",
    "load_checkpoint",
    "save_checkpoint",
]
