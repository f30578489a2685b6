"""The checkpoint the app opens by default, and the seeded random model used while it is missing."""

from __future__ import annotations

from pathlib import Path

import torch

import transformer_explorer_assets as shipped
from model import GPT, Checkpoint, GPTConfig
from model.checkpoint import load_any
from model.formats.refs import BuiltinRef
from model.tokens.tokenizer import train_word_tokenizer

ASSETS = shipped.folder()  # the shipped files: assets/ of a source tree, or the installed package data
DEFAULT_MODEL = BuiltinRef("tinystories-1L1H")  # the course's model: one block, one head
DEFAULT_CHECKPOINT = DEFAULT_MODEL.path
#: The model before attention (a fixed-window MLP, model/core/window.py) trained like the default.
BEFORE_ATTENTION = BuiltinRef("tinystories-window-mlp").path
RANDOM_MODEL_NOTE = "seeded random model (untrained): the default checkpoint was not found"

# A few sentences in the style of children's stories, only to give the random model a vocabulary.
_SENTENCES = (
    "once upon a time there was a little girl named lily .",
    "she liked to play in the park with her big red ball .",
    "one day a small dog came to the park and wanted to play too .",
    "the dog was happy and the girl was happy , and they played all day .",
    "tom had a box of toys , but he did not want to share them .",
    "his mom said that sharing is kind , so tom gave lily a car .",
    "the sun was warm and the birds sang in the tall green tree .",
    "they went home and ate cake , and then they went to sleep .",
)


def random_checkpoint(seed: int = 0, config: GPTConfig | None = None) -> Checkpoint:
    """A seeded, untrained model with a small word tokenizer, for when no checkpoint is available.

    Parameters
    ----------
    seed : int
        torch seed for the weights; the same seed gives the same weights.
    config : GPTConfig, optional
        Defaults to the course's shape (context 32, one layer, one head, d_model 128) with the
        vocabulary size of the small tokenizer.
    """
    tokenizer = train_word_tokenizer(_SENTENCES, vocab_size=4096)
    if config is None:
        config = GPTConfig(vocab_size=tokenizer.vocab_size)
    torch.manual_seed(seed)
    model = GPT(config).eval()
    return Checkpoint(model=model, tokenizer=tokenizer, path=None, training={"note": RANDOM_MODEL_NOTE},
                      source_format="seeded random")


def open_default(path: Path | None = None) -> tuple[Checkpoint, str]:
    """The default checkpoint through the normal loader, or the seeded random model if it is absent.

    Parameters
    ----------
    path : Path, optional
        Defaults to :data:`DEFAULT_CHECKPOINT` (the shipped :data:`DEFAULT_MODEL`, opened by that name).

    Returns
    -------
    (Checkpoint, str)
        The checkpoint and a note for the status bar ("" when the file was loaded).

    Raises
    ------
    model.CheckpointError
        When the file exists but is bad (that is reported, not hidden behind a random model).
    """
    path = DEFAULT_CHECKPOINT if path is None else Path(path)
    if not path.exists():
        return random_checkpoint(), RANDOM_MODEL_NOTE
    # The shipped file by its name (builtin:NAME), so that Reload and Open Recent find it after an upgrade.
    return load_any(DEFAULT_MODEL if path == DEFAULT_MODEL.path else path), ""
