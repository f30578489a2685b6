"""The model's configuration: one frozen, validated dataclass."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from model.core.plain import short_repr

POSITIONAL_KINDS = ("learned", "rope", "none")
ROPE_PAIRS = ("halves", "interleaved")
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")
GELU_VARIANTS = ("exact", "tanh")

# Keys of older config JSON (format version 1) and what they became.
MAX_CONTEXT_LENGTH = 1 << 20  # positions; a RoPE model's angle table has one row per position
_LEGACY_BOOL_KEYS = {"linear_bias": ("o_bias", "mlp_bias"), "ln_bias": ("norm_bias",)}


@dataclass(frozen=True)
class GPTConfig:
    """Shape and options of a pre-norm decoder-only transformer.

    The defaults are the course's model (GPT-2 / nanoGPT layout): context window 32, one block,
    one head, a word vocabulary of 4,096 and d_model 128, learned positional table, LayerNorm,
    GELU MLP, tied embeddings: 726,528 parameters (about 0.73M). The other options describe the
    families the app opens: GPT-Neo (no score scaling, local attention windows), Llama and
    llama2.c (RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases, untied or tied).

    Parameters
    ----------
    vocab_size : int
        Rows of the token-embedding table (and of the unembedding).
    context_length : int
        Most tokens the model sees at once (rows of the positional table when it has one).
    d_model : int
        Width of the residual stream.
    n_heads : int
        Query heads per block; must divide ``d_model`` (``d_head = d_model // n_heads``).
    n_layers : int
        Transformer blocks.
    d_mlp : int
        Hidden width of each block's MLP (of each of SwiGLU's two branches).
    positional : str
        ``"learned"``: a learned table, x_i = e_i + p_i (GPT-2); ``"rope"``: rotary position
        embedding of q and k in every layer (Su et al. 2021, RoFormer); ``"none"``: x_i = e_i.
    rope_theta : float
        RoPE base θ: pair j of a head turns by position · θ^(-2j/d_head) radians.
    rope_pairs : str
        Which dimensions RoPE rotates together: ``"interleaved"`` (2j, 2j+1), as llama2.c and
        Meta's Llama code; ``"halves"`` (j, j + d_head/2), as Hugging Face's ``rotate_half``.
    n_kv_heads : int, optional
        Key/value heads per block (grouped-query attention, Ainslie et al. 2023); must divide
        ``n_heads``. Query head h uses key/value head ``h // (n_heads // n_kv_heads)``. None (the
        default) means ``n_heads`` (multi-head attention); stored as that number.
    scale_scores : bool
        True divides q_i·k_j by √d_head (Vaswani et al. 2017, eq. 1); False does not (GPT-Neo).
    attn_windows : tuple of int
        Per layer, empty for none: 0 = global attention; w > 0 = local attention, query i sees
        keys j with i - w < j ≤ i (GPT-Neo's local layers).
    norm : str
        ``"layernorm"`` (Ba et al. 2016) or ``"rmsnorm"`` (Zhang & Sennrich 2019, no mean, no bias).
    norm_eps : float
        Epsilon of every norm.
    norm_bias : bool
        LayerNorm's learned shift (must be False with RMSNorm).
    mlp : str
        ``"gelu"``: GELU(h W_in + b_in) W_out + b_out; ``"swiglu"``: (SiLU(h W_gate) ⊙ h W_in) W_out
        (Shazeer 2020).
    gelu : str
        ``"exact"`` (erf, as nanoGPT) or ``"tanh"`` (the approximation, GPT-2's ``gelu_new``).
    qkv_bias, o_bias, mlp_bias : bool
        Biases of W_Q/W_K/W_V; of W_O; of the MLP's linears.
    tied_unembed : bool
        True computes logits with the token-embedding table (GPT-2, nanoGPT, llama2.c); False
        has its own ``unembed`` matrix (LLMs-from-scratch's ``out_head``, Llama's ``lm_head``).

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
    positional: str = "learned"
    rope_theta: float = 10000.0
    rope_pairs: str = "halves"
    n_kv_heads: int | None = None
    scale_scores: bool = True
    attn_windows: tuple[int, ...] = ()
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_bias: bool = True
    mlp: str = "gelu"
    gelu: str = "exact"
    qkv_bias: bool = False
    o_bias: bool = True
    mlp_bias: bool = True
    tied_unembed: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_heads", "n_layers", "d_mlp"):
            _check_positive_int(name, getattr(self, name))
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        _check_positive_int("n_kv_heads", self.n_kv_heads)
        if self.context_length > MAX_CONTEXT_LENGTH:
            raise ValueError(f"context_length {self.context_length:,} is more than this app builds ({MAX_CONTEXT_LENGTH:,})")
        for name in ("scale_scores", "norm_bias", "qkv_bias", "o_bias", "mlp_bias", "tied_unembed"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {short_repr(getattr(self, name))}")
        for name, choices in (("positional", POSITIONAL_KINDS), ("rope_pairs", ROPE_PAIRS), ("norm", NORMS),
                              ("mlp", MLPS), ("gelu", GELU_VARIANTS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {short_repr(getattr(self, name))}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.positional == "rope" and self.d_head % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: d_head ({self.d_head}) must be even")
        if not _is_number(self.rope_theta) or not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be a number above 1, got {short_repr(self.rope_theta)}")
        if not _is_number(self.norm_eps) or not 0 < self.norm_eps < 1:
            raise ValueError(f"norm_eps must be a small positive number, got {short_repr(self.norm_eps)}")
        if self.norm == "rmsnorm" and self.norm_bias:
            raise ValueError("norm_bias must be false with norm 'rmsnorm' (RMSNorm has no shift)")
        self._check_windows()

    def _check_windows(self) -> None:
        windows = self.attn_windows
        if isinstance(windows, list):
            windows = tuple(windows)
            object.__setattr__(self, "attn_windows", windows)
        if not isinstance(windows, tuple):
            raise ValueError(f"attn_windows must be a list of integers, got {short_repr(windows)}")
        if windows and len(windows) != self.n_layers:
            raise ValueError(f"attn_windows has {len(windows)} entries for {self.n_layers} layers")
        for w in windows:
            if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= MAX_CONTEXT_LENGTH:
                raise ValueError(f"attn_windows entries must be integers from 0 (global) to {MAX_CONTEXT_LENGTH:,}, "
                                 f"got {short_repr(w)}")

    @property
    def d_head(self) -> int:
        """Width of one attention head: ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def has_pos_table(self) -> bool:
        """True when the model adds a learned positional table to its input (x_i = e_i + p_i)."""
        return self.positional == "learned"

    @property
    def uses_position(self) -> bool:
        """True when position enters the model at all (a learned table or RoPE)."""
        return self.positional != "none"

    def attn_window(self, layer: int) -> int:
        """Layer ``layer``'s attention window (0 = global attention)."""
        return self.attn_windows[layer] if self.attn_windows else 0

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["attn_windows"] = list(self.attn_windows)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GPTConfig":
        """Build a config from :meth:`to_dict` output (also the keys of older files).

        Older files (format version 1) said ``positional_encoding`` (true: a learned table),
        ``ln_eps``, ``ln_bias`` and ``linear_bias`` (W_O and the MLP); they are read as
        ``positional``, ``norm_eps``, ``norm_bias``, ``o_bias`` and ``mlp_bias``.

        Raises
        ------
        ValueError
            On unknown keys or invalid values.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, got {type(data).__name__}")
        data = dict(data)
        if "positional_encoding" in data:
            value = data.pop("positional_encoding")
            if not isinstance(value, bool):
                raise ValueError(f"positional_encoding must be true or false, got {short_repr(value)}")
            data.setdefault("positional", "learned" if value else "none")
        if "ln_eps" in data:
            data.setdefault("norm_eps", data.pop("ln_eps"))
        for old, new in _LEGACY_BOOL_KEYS.items():
            if old in data:
                value = data.pop(old)
                for name in new:
                    data.setdefault(name, value)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(map(str, unknown))}")
        return cls(**data)


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {short_repr(value)}")


def _is_number(value: Any) -> bool:
    """A finite int or float (an int too large for a float is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
