"""The model's configuration: one frozen, validated dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

GELU_VARIANTS = ("exact", "tanh")


@dataclass(frozen=True)
class GPTConfig:
    """Shape and options of a decoder-only transformer (GPT-2 / nanoGPT layout, pre-LayerNorm).

    The defaults are the course's model: context window 32, one block, one head, a word
    vocabulary of 4,096 and d_model 128, which gives 726,528 parameters (about 0.73M) with
    tied embeddings.

    Parameters
    ----------
    vocab_size : int
        Rows of the token-embedding table (and of the unembedding).
    context_length : int
        Most tokens the model sees at once; rows of the positional table.
    d_model : int
        Width of the residual stream.
    n_heads : int
        Attention heads per block; must divide ``d_model`` (``d_head = d_model // n_heads``).
    n_layers : int
        Transformer blocks.
    d_mlp : int
        Hidden width of each block's MLP.
    positional_encoding : bool
        True builds a learned positional table (x_i = e_i + p_i); False builds none (x_i = e_i).
    qkv_bias, linear_bias, ln_bias : bool
        Biases of W_Q/W_K/W_V; of W_O and the MLP's two layers; of every LayerNorm.
    gelu : str
        ``"exact"`` (erf, as nanoGPT) or ``"tanh"`` (the approximation, as LLMs-from-scratch).
    ln_eps : float
        LayerNorm epsilon.
    tied_unembed : bool
        True computes logits with the token-embedding table (GPT-2, nanoGPT); False has its own
        ``unembed`` matrix (LLMs-from-scratch's ``out_head``).

    Raises
    ------
    ValueError
        On any value out of range, naming the field.
    """

    vocab_size: int = 4096
    context_length: int = 32
    d_model: int = 128
    n_heads: int = 1
    n_layers: int = 1
    d_mlp: int = 512
    positional_encoding: bool = True
    qkv_bias: bool = False
    linear_bias: bool = True
    ln_bias: bool = True
    gelu: str = "exact"
    ln_eps: float = 1e-5
    tied_unembed: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_heads", "n_layers", "d_mlp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("positional_encoding", "qkv_bias", "linear_bias", "ln_bias", "tied_unembed"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})"
            )
        if self.gelu not in GELU_VARIANTS:
            raise ValueError(f"gelu must be one of {GELU_VARIANTS}, got {self.gelu!r}")
        if not isinstance(self.ln_eps, (int, float)) or not 0 < self.ln_eps < 1:
            raise ValueError(f"ln_eps must be a small positive number, got {self.ln_eps!r}")

    @property
    def d_head(self) -> int:
        """Width of one attention head: ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GPTConfig":
        """Build a config from :meth:`to_dict` output.

        Raises
        ------
        ValueError
            On unknown keys or invalid values.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        return cls(**data)
