"""The architectures a checkpoint can hold: the transformer, and the model before attention.

Each has a name (our files' ``architecture`` metadata, ``python -m model.train --arch``), a config
class (frozen, with ``to_dict`` / ``from_dict``) and a model class (with ``state_dict_shapes`` and
the transformer's ``forward`` / ``trace`` signature). Readers, training and the explorer ask here
which class a config builds, never by guessing from tensor names.
"""

from __future__ import annotations

from typing import Any

from model.core.config import GPTConfig
from model.core.transformer import GPT
from model.core.window import ARCHITECTURE as WINDOW_MLP
from model.core.window import WindowConfig, WindowMLP

TRANSFORMER = "transformer"

#: name -> (config class, model class).
ARCHITECTURES: dict[str, tuple[type, type]] = {
    TRANSFORMER: (GPTConfig, GPT),
    WINDOW_MLP: (WindowConfig, WindowMLP),
}

__all__ = ["ARCHITECTURES", "TRANSFORMER", "WINDOW_MLP", "architecture_of", "config_from_dict", "has_attention",
           "model_class"]


def architecture_of(config) -> str:
    """The architecture name of a config: ``"transformer"`` for a GPTConfig, else its ``architecture``.

    Raises
    ------
    TypeError
        For an object that is no config of a known architecture.
    """
    for name, (config_class, _) in ARCHITECTURES.items():
        if isinstance(config, config_class):
            return name
    raise TypeError(f"not a model config: {type(config).__name__}")


def has_attention(config) -> bool:
    """True for a transformer's config (GPTConfig); False for the model before attention."""
    return isinstance(config, GPTConfig)


def require_attention(config, what: str) -> None:
    """Refuse ``what`` (e.g. "activation patching") for a config without attention heads.

    Raises
    ------
    ValueError
        For the model before attention: it has no layers of attention, no heads and no residual
        stream between blocks to patch or score.
    """
    if not has_attention(config):
        raise ValueError(f"{what} needs attention heads: the model before attention (a fixed-window MLP) has "
                         "none; open a transformer")


def model_class(config) -> type:
    """The model class that ``config`` builds (GPT or WindowMLP)."""
    return ARCHITECTURES[architecture_of(config)][1]


def config_from_dict(architecture: str, data: dict[str, Any]):
    """The config of ``architecture`` from its JSON dict.

    Raises
    ------
    ValueError
        For an unknown architecture (naming the known ones), unknown keys or invalid values.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r} is not one this app builds ({', '.join(ARCHITECTURES)})")
    return ARCHITECTURES[architecture][0].from_dict(data)
