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
MLPS = ("gelu", "swiglu", "geglu")
GELU_VARIANTS = ("exact", "tanh")
BLOCK_LAYOUTS = ("sequential", "parallel", "parallel_one_norm")
NORM_PLACEMENTS = ("pre", "sandwich", "post")
QK_NORMS = ("none", "head", "full")

# Keys of older config JSON (format version 1) and what they became.
MAX_CONTEXT_LENGTH = 1 << 20  # positions; a RoPE model's angle table has one row per position
_LEGACY_BOOL_KEYS = {"linear_bias": ("o_bias", "mlp_bias"), "ln_bias": ("norm_bias",)}


@dataclass(frozen=True)
class GPTConfig:
    """Shape and options of a decoder-only transformer.

    The defaults are the course's model (GPT-2 / nanoGPT layout): context window 32, one block,
    one head, a word vocabulary of 4,096 and d_model 128, learned positional table, LayerNorm,
    GELU MLP, tied embeddings: 726,528 parameters (about 0.73M). The other options describe the
    families the app opens: GPT-Neo (no score scaling, local attention windows), Llama and
    llama2.c (RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases, untied or tied),
    GPT-NeoX / Pythia and Phi (parallel attention and MLP, partial rotary), Qwen2 and Qwen3
    (q/k/v biases; QK-norm, an explicit head width), Gemma 2 and 3 (four norms per block, (1 + w)
    RMSNorm, scaled embeddings, gated GELU, local and global layers with their own RoPE bases,
    soft-capping), OLMo-2 (norms after the branches) and SmolLM3 (layers without RoPE).

    Parameters
    ----------
    vocab_size : int
        Rows of the token-embedding table (and of the unembedding).
    context_length : int
        Most tokens the model sees at once (rows of the positional table when it has one).
    d_model : int
        Width of the residual stream.
    n_heads : int
        Query heads per block.
    n_layers : int
        Transformer blocks.
    d_mlp : int
        Hidden width of each block's MLP (of each of a gated MLP's two branches).
    d_head : int, optional
        Width of one attention head; W_Q maps d_model to n_heads · d_head. None (the default)
        means ``d_model // n_heads`` (n_heads must then divide d_model), stored as that number;
        Qwen3 and Gemma state it (Qwen3's ``head_dim`` 128 with d_model 1024 and 16 heads).
    positional : str
        ``"learned"``: a learned table, x_i = e_i + p_i (GPT-2); ``"rope"``: rotary position
        embedding of q and k in every layer (Su et al. 2021, RoFormer); ``"none"``: x_i = e_i.
    rope_theta : float
        RoPE base θ: pair j of a head turns by position · θ^(-2j/rotary_dims) radians.
    rope_pairs : str
        Which dimensions RoPE rotates together: ``"interleaved"`` (2j, 2j+1), as llama2.c and
        Meta's Llama code; ``"halves"`` (j, j + rotary_dims/2), as Hugging Face's ``rotate_half``.
    rotary_dims : int, optional
        How many of each head's dimensions RoPE turns, the first ones (partial rotary: GPT-NeoX's
        ``rotary_pct``, Phi's ``partial_rotary_factor``); the other d_head - rotary_dims carry no
        position. None (the default) is the whole head, and a value equal to d_head is stored as None.
    rope_thetas : tuple of float
        Per layer, empty for ``rope_theta`` everywhere: each layer's own base (Gemma 3: 10,000 in
        its local layers, 1,000,000 in its global ones).
    nope_layers : tuple of int
        Layers that do not rotate q and k (SmolLM3's ``no_rope_layers``: "NoPE" layers, where
        attention sees no position at all); sorted, each in 0 .. n_layers - 1.
    n_kv_heads : int, optional
        Key/value heads per block (grouped-query attention, Ainslie et al. 2023); must divide
        ``n_heads``. Query head h uses key/value head ``h // (n_heads // n_kv_heads)``. None (the
        default) means ``n_heads`` (multi-head attention); stored as that number.
    scale_scores : bool
        True multiplies q_i·k_j by ``score_scale`` (by default 1/√d_head, Vaswani et al. 2017,
        eq. 1); False by 1 (GPT-Neo).
    score_scale : float, optional
        What q_i·k_j is multiplied by, when it is not 1/√d_head: Gemma's
        ``query_pre_attn_scalar``^(-1/2). None (the default) is 1/√d_head. Needs ``scale_scores``.
    attn_softcap : float
        c > 0 soft-caps every score to c · tanh(s / c) before the mask (Gemma 2's
        ``attn_logit_softcapping``); 0 (the default) leaves scores as they are.
    final_softcap : float
        The same for the logits, c · tanh(z / c) (Gemma's ``final_logit_softcapping``); 0: none.
    attn_windows : tuple of int
        Per layer, empty for none: 0 = global attention; w > 0 = local attention, query i sees
        keys j with i - w < j ≤ i (GPT-Neo's local layers, Gemma's and Mistral's sliding windows).
    qk_norm : str
        ``"none"``; ``"head"``: a norm over d_head applied to every head's q and to every k after
        the projection and before RoPE, one weight shared by the heads (Qwen3, Gemma 3);
        ``"full"``: one over the whole projection, n_heads · d_head for q and n_kv_heads · d_head
        for k, before the split into heads (OLMo-2). Of kind ``norm``.
    norm : str
        ``"layernorm"`` (Ba et al. 2016) or ``"rmsnorm"`` (Zhang & Sennrich 2019, no mean, no bias).
    norm_eps : float
        Epsilon of every norm.
    norm_bias : bool
        LayerNorm's learned shift (must be False with RMSNorm).
    norm_unit_offset : bool
        True: every RMSNorm multiplies by (1 + w), its stored weight w offset by one (Gemma's
        norms, which start at w = 0); False: by w.
    norm_placement : str
        ``"pre"``: x + f(norm(x)) (GPT-2, Llama); ``"sandwich"``: x + norm'(f(norm(x))), a norm
        before and one after each of attention and the MLP (Gemma 2 and 3); ``"post"``:
        x + norm'(f(x)), only after (OLMo-2).
    block_layout : str
        ``"sequential"``: the MLP reads x + attention; ``"parallel"``: attention and the MLP both
        read the block's input, x + Attn(LN1(x)) + MLP(LN2(x)) (GPT-NeoX's
        ``use_parallel_residual``, GPT-J); ``"parallel_one_norm"``: the same from one norm,
        x + Attn(LN1(x)) + MLP(LN1(x)) (Phi). Both parallel layouts need ``norm_placement`` "pre".
    embed_scale : float
        The token embedding is multiplied by this before the blocks (Gemma: √d_model).
    mlp : str
        ``"gelu"``: GELU(h W_in + b_in) W_out + b_out; ``"swiglu"``: (SiLU(h W_gate) ⊙ h W_in) W_out
        (Shazeer 2020); ``"geglu"``: (GELU(h W_gate) ⊙ h W_in) W_out (Gemma).
    gelu : str
        ``"exact"`` (erf, as nanoGPT) or ``"tanh"`` (the approximation, GPT-2's ``gelu_new``).
    qkv_bias, o_bias, mlp_bias : bool
        Biases of W_Q/W_K/W_V; of W_O; of the MLP's linears.
    tied_unembed : bool
        True computes logits with the token-embedding table (GPT-2, nanoGPT, llama2.c); False
        has its own ``unembed`` matrix (LLMs-from-scratch's ``out_head``, Llama's ``lm_head``).
    unembed_bias : bool
        The unembedding adds a bias per token (Phi's ``lm_head``); needs an untied unembedding.

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
    d_head: int | None = None
    positional: str = "learned"
    rope_theta: float = 10000.0
    rope_pairs: str = "halves"
    rotary_dims: int | None = None
    rope_thetas: tuple[float, ...] = ()
    nope_layers: tuple[int, ...] = ()
    n_kv_heads: int | None = None
    scale_scores: bool = True
    score_scale: float | None = None
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    attn_windows: tuple[int, ...] = ()
    qk_norm: str = "none"
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_bias: bool = True
    norm_unit_offset: bool = False
    norm_placement: str = "pre"
    block_layout: str = "sequential"
    embed_scale: float = 1.0
    mlp: str = "gelu"
    gelu: str = "exact"
    qkv_bias: bool = False
    o_bias: bool = True
    mlp_bias: bool = True
    tied_unembed: bool = True
    unembed_bias: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_heads", "n_layers", "d_mlp"):
            _check_positive_int(name, getattr(self, name))
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        _check_positive_int("n_kv_heads", self.n_kv_heads)
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model}), or give d_head")
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        _check_positive_int("d_head", self.d_head)
        if self.context_length > MAX_CONTEXT_LENGTH:
            raise ValueError(f"context_length {self.context_length:,} is more than this app builds ({MAX_CONTEXT_LENGTH:,})")
        for name in ("scale_scores", "norm_bias", "norm_unit_offset", "qkv_bias", "o_bias", "mlp_bias",
                     "tied_unembed", "unembed_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {short_repr(getattr(self, name))}")
        for name, choices in (("positional", POSITIONAL_KINDS), ("rope_pairs", ROPE_PAIRS), ("norm", NORMS),
                              ("mlp", MLPS), ("gelu", GELU_VARIANTS), ("block_layout", BLOCK_LAYOUTS),
                              ("norm_placement", NORM_PLACEMENTS), ("qk_norm", QK_NORMS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {short_repr(getattr(self, name))}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if not _is_number(self.norm_eps) or not 0 < self.norm_eps < 1:
            raise ValueError(f"norm_eps must be a small positive number, got {short_repr(self.norm_eps)}")
        if self.norm == "rmsnorm" and self.norm_bias:
            raise ValueError("norm_bias must be false with norm 'rmsnorm' (RMSNorm has no shift)")
        if self.norm_unit_offset and self.norm != "rmsnorm":
            raise ValueError("norm_unit_offset (a gain of 1 + w) is for norm 'rmsnorm' only")
        if self.block_layout != "sequential" and self.norm_placement != "pre":
            raise ValueError(f"block_layout {self.block_layout!r} needs norm_placement 'pre'")
        if self.unembed_bias and self.tied_unembed:
            raise ValueError("unembed_bias needs an untied unembedding (tied_unembed false)")
        self._check_scales()
        self._check_rope()
        self._check_windows()

    def _check_scales(self) -> None:
        for name in ("embed_scale", "score_scale"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not value > 0):
                raise ValueError(f"{name} must be a positive number, got {short_repr(value)}")
        if self.score_scale is not None and not self.scale_scores:
            raise ValueError("score_scale needs scale_scores true (false multiplies the scores by 1)")
        for name in ("attn_softcap", "final_softcap"):
            value = getattr(self, name)
            if not _is_number(value) or value < 0:
                raise ValueError(f"{name} must be 0 (none) or a positive number, got {short_repr(value)}")

    def _check_rope(self) -> None:
        if not _is_number(self.rope_theta) or not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be a number above 1, got {short_repr(self.rope_theta)}")
        thetas = _as_tuple(self, "rope_thetas")
        if thetas and len(thetas) != self.n_layers:
            raise ValueError(f"rope_thetas has {len(thetas)} entries for {self.n_layers} layers")
        if any(not _is_number(t) or not t > 1 for t in thetas):
            raise ValueError(f"rope_thetas entries must be numbers above 1, got {short_repr(thetas)}")
        nope = _as_tuple(self, "nope_layers")
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.n_layers for i in nope) \
                or list(nope) != sorted(set(nope)):
            raise ValueError(f"nope_layers must be sorted distinct layers in 0..{self.n_layers - 1}, "
                             f"got {short_repr(nope)}")
        if self.rotary_dims == self.d_head:
            object.__setattr__(self, "rotary_dims", None)
        if self.rotary_dims is not None:
            _check_positive_int("rotary_dims", self.rotary_dims)
            if self.rotary_dims > self.d_head:
                raise ValueError(f"rotary_dims ({self.rotary_dims}) must be at most d_head ({self.d_head})")
        if self.positional != "rope" and (self.rotary_dims is not None or thetas or nope):
            raise ValueError("rotary_dims, rope_thetas and nope_layers need positional 'rope'")
        if self.positional == "rope" and self.rotary_width % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: rotary_dims / d_head ({self.rotary_width}) "
                             "must be even")

    def _check_windows(self) -> None:
        windows = _as_tuple(self, "attn_windows")
        if windows and len(windows) != self.n_layers:
            raise ValueError(f"attn_windows has {len(windows)} entries for {self.n_layers} layers")
        for w in windows:
            if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= MAX_CONTEXT_LENGTH:
                raise ValueError(f"attn_windows entries must be integers from 0 (global) to {MAX_CONTEXT_LENGTH:,}, "
                                 f"got {short_repr(w)}")

    @property
    def rotary_width(self) -> int:
        """How many dimensions of each head RoPE turns: rotary_dims, or d_head (the whole head)."""
        return self.d_head if self.rotary_dims is None else self.rotary_dims

    @property
    def attn_scale(self) -> float:
        """What q_i·k_j is multiplied by: score_scale, 1/√d_head, or 1 without scaling (GPT-Neo)."""
        if not self.scale_scores:
            return 1.0
        return self.score_scale if self.score_scale is not None else 1.0 / math.sqrt(self.d_head)

    def layer_rope_theta(self, layer: int) -> float | None:
        """Layer ``layer``'s RoPE base θ, or None where it has no RoPE (no RoPE at all, or a NoPE layer)."""
        if self.positional != "rope" or layer in self.nope_layers:
            return None
        return self.rope_thetas[layer] if self.rope_thetas else self.rope_theta

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
        """The fields as a JSON-ready dict (``d_head`` only when it is not d_model // n_heads)."""
        data = dataclasses.asdict(self)
        for name in _TUPLE_FIELDS:
            data[name] = list(getattr(self, name))
        if self.d_model % self.n_heads == 0 and self.d_head == self.d_model // self.n_heads:
            del data["d_head"]
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


_TUPLE_FIELDS = ("rope_thetas", "nope_layers", "attn_windows")


def _as_tuple(config: GPTConfig, name: str) -> tuple:
    """The field ``name`` as a tuple (a list, as JSON gives it, is stored as one)."""
    value = getattr(config, name)
    if isinstance(value, list):
        value = tuple(value)
        object.__setattr__(config, name, value)
    if not isinstance(value, tuple):
        raise ValueError(f"{name} must be a list, got {short_repr(value)}")
    return value


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
