"""The transformer's components that families change: norms, rotary position embedding, the MLP.

LayerNorm (GPT-2) or RMSNorm (Llama, llama2.c; with a gain of 1 + w in Gemma), each of which can
also be frozen at an input into an affine map (:class:`FrozenNorm`, what attribution and the score
split need); rotary position embedding (RoPE) of q and k instead of a learned table added to the
input, over the whole head or its first dimensions (partial rotary); a GELU, SwiGLU or gated-GELU
MLP. :mod:`model.core.transformer` builds them from the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from model.core.config import GPTConfig


@dataclass(frozen=True)
class FrozenNorm:
    """A norm with its scale frozen at one input x₀: an affine map of its input.

    A norm computes norm(x) = γ ⊙ c(x) / s(x) + β, with c(x) = x − mean(x) and s(x) = √(var(x) + ε)
    for LayerNorm, c(x) = x and s(x) = √(mean(x²) + ε) for RMSNorm. Holding s at its value at x₀
    gives L(y) = γ ⊙ c(y) / s(x₀) + β: linear in y but for the shift β, and L(x₀) = norm(x₀)
    exactly. So a sum of parts of x₀ goes through the norm part by part (as TransformerLens's
    ``apply_ln_to_stack`` does).

    Attributes
    ----------
    gain : (d_model,) float64         γ.
    shift : (d_model,) float64 or None  β (None: the norm has no shift).
    inv_scale : (..., 1) float64      1 / s(x₀), one per row of x₀.
    centred : bool                    whether c subtracts the mean (LayerNorm).
    """

    gain: np.ndarray
    shift: np.ndarray | None
    inv_scale: np.ndarray
    centred: bool

    def linear(self, y: np.ndarray) -> np.ndarray:
        """γ ⊙ c(y) / s(x₀), the linear part of L: (..., d_model) float64, rows of ``y`` against
        the rows of x₀ (the parts of x₀ give parts of norm(x₀) − β that sum to it)."""
        y = np.asarray(y, dtype=np.float64)
        centred = y - y.mean(axis=-1, keepdims=True) if self.centred else y
        return self.gain * centred * self.inv_scale

    def direction(self, u: np.ndarray) -> np.ndarray:
        """d with linear(y) · u = y · d for every y: (..., d_model) float64, one per row of x₀
        (the centring moves into d: d = w − mean(w), w = γ ⊙ u / s(x₀))."""
        w = self.gain * np.asarray(u, dtype=np.float64) * self.inv_scale
        return w - w.mean(axis=-1, keepdims=True) if self.centred else w


class _Freezable:
    """What LayerNorm and RMSNorm share: their gain and shift, and their frozen form."""

    centred = True

    def affine(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(γ, β): the gain (d,) the normalised input is multiplied by (1 + w for a norm with a
        unit offset) and shift (d,) or None, float64 numpy copies."""
        bias = getattr(self, "bias", None)
        gain = self.weight.detach().double().cpu().numpy() + (1.0 if getattr(self, "unit_offset", False) else 0.0)
        return gain, None if bias is None else bias.detach().double().cpu().numpy()

    def frozen(self, x: np.ndarray) -> FrozenNorm:
        """This norm with its scale frozen at ``x`` (..., d_model), one scale per row
        (:class:`FrozenNorm`); computed in float64."""
        x = np.asarray(x, dtype=np.float64)
        c = x - x.mean(axis=-1, keepdims=True) if self.centred else x
        gain, shift = self.affine()
        return FrozenNorm(gain, shift, 1.0 / np.sqrt((c * c).mean(axis=-1, keepdims=True) + self.eps), self.centred)


class LayerNorm(_Freezable, nn.LayerNorm):
    """``torch.nn.LayerNorm`` (Ba et al. 2016), with :meth:`frozen` and :meth:`affine`."""


class RMSNorm(_Freezable, nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) * weight.

    With ``unit_offset`` the gain is (1 + weight), as Gemma's norms store it (their weights
    start at 0); the arithmetic is transformers' ``GemmaRMSNorm``'s.
    """

    centred = False

    def __init__(self, d: int, eps: float, device=None, unit_offset: bool = False) -> None:
        super().__init__()
        self.eps = eps
        self.unit_offset = unit_offset
        self.weight = nn.Parameter(torch.zeros(d, device=device) if unit_offset else torch.ones(d, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d) -> (..., d)."""
        gain = 1.0 + self.weight if self.unit_offset else self.weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * gain


def make_norm(config: GPTConfig, device=None, width: int | None = None) -> nn.Module:
    """The config's norm over ``width`` (default d_model): LayerNorm (with or without shift) or
    RMSNorm (with Gemma's 1 + w gain when ``norm_unit_offset``)."""
    d = config.d_model if width is None else width
    if config.norm == "rmsnorm":
        return RMSNorm(d, config.norm_eps, device=device, unit_offset=config.norm_unit_offset)
    return LayerNorm(d, eps=config.norm_eps, bias=config.norm_bias, device=device)


def qk_norms(config: GPTConfig, device=None) -> tuple[nn.Module | None, nn.Module | None]:
    """The norms of q and of k for the config's ``qk_norm`` (of its ``norm`` kind): over d_head
    (``"head"``: one weight shared by the heads, Qwen3 and Gemma 3), over n_heads · d_head and
    n_kv_heads · d_head (``"full"``, OLMo-2), or (None, None)."""
    if config.qk_norm == "none":
        return None, None
    dh = config.d_head
    if config.qk_norm == "head":
        return make_norm(config, device, dh), make_norm(config, device, dh)
    return make_norm(config, device, config.n_heads * dh), make_norm(config, device, config.n_kv_heads * dh)


def qk_normed(kind: str, q_norm, k_norm, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """QK-norm of q (B, n_heads, T, d_head) and k (B, n_kv_heads, T, d_head), same shapes, for the
    config's ``qk_norm`` ``kind``: ``"head"`` normalises each head's vector; ``"full"`` each
    position's heads concatenated (n · d_head), as OLMo-2 normalises the projection before
    splitting it into heads; ``"none"`` returns q and k themselves."""
    if kind == "none":
        return q, k
    if kind == "head":
        return q_norm(q), k_norm(k)
    return _across_heads(q_norm, q), _across_heads(k_norm, k)


def _across_heads(norm: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """``norm`` over each position's heads concatenated: t (B, n, T, d_head) -> the same shape."""
    B, n, T, dh = t.shape
    flat = t.transpose(1, 2).reshape(B, T, n * dh)  # (B, T, n * d_head): the projection's own layout
    return norm(flat).view(B, T, n, dh).transpose(1, 2)  # (B, n, T, d_head)


class RoPE(nn.Module):
    """Rotary position embedding (Su et al. 2021, RoFormer, eq. 34) with base ``theta``.

    Of each head, the first r = ``config.rotary_width`` dimensions turn (all of them unless the
    model has partial rotary, GPT-NeoX's ``rotary_pct``); the other d_head - r pass through
    unchanged and carry no position. Pair j at position m turns by the angle m · θ^(-2j/r). The
    pairs are the dimensions (2j, 2j+1) (``"interleaved"``, llama2.c) or (j, j + r/2)
    (``"halves"``, Hugging Face's ``rotate_half``). A score q_m·k_n then depends on the positions
    only through m - n.
    """

    def __init__(self, config: GPTConfig, theta: float, device=None) -> None:
        super().__init__()
        self.interleaved = config.rope_pairs == "interleaved"
        self.theta = float(theta)
        self.dims = r = config.rotary_width
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, r, 2, device=device).float() / r))
        angles = torch.outer(torch.arange(config.context_length, device=device).float(), inv_freq)
        self.register_buffer("angles", angles, persistent=False)  # (context_length, r/2), radians

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotate x (B, n, T, d_head), whose rows are the positions start .. start + T - 1."""
        angles = self.angles[start:start + x.shape[-2]]  # (T, r/2)
        cos, sin = angles.cos(), angles.sin()
        rot, rest = (x, None) if self.dims == x.shape[-1] else (x[..., :self.dims], x[..., self.dims:])
        if self.interleaved:
            a, b = rot[..., 0::2], rot[..., 1::2]  # (B, n, T, r/2) each
            out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
        else:
            a, b = rot.chunk(2, dim=-1)
            out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        return out if rest is None else torch.cat((out, rest), dim=-1)  # (B, n, T, d_head)


def layer_ropes(config: GPTConfig, device=None) -> list[RoPE | None]:
    """Each layer's RoPE: one module per base θ, shared by the layers with that base (Gemma's
    local and global layers have two); None in a layer without RoPE (no RoPE at all, a NoPE layer)."""
    made: dict[float, RoPE] = {}
    out: list[RoPE | None] = []
    for layer in range(config.n_layers):
        theta = config.layer_rope_theta(layer)
        if theta is not None and theta not in made:
            made[theta] = RoPE(config, theta, device)
        out.append(None if theta is None else made[theta])
    return out


class MLP(nn.Module):
    """Position-wise feed-forward, hidden width d_mlp.

    ``"gelu"``: GELU(h W_in + b_in) W_out + b_out. ``"swiglu"``: (SiLU(h W_gate) ⊙ h W_in) W_out
    (Shazeer 2020; Llama's gate, up and down projections are fc_gate, fc_in and fc_out).
    ``"geglu"``: (GELU(h W_gate) ⊙ h W_in) W_out, with the config's GELU (Gemma: tanh).
    """

    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        d, d_mlp, bias = config.d_model, config.d_mlp, config.mlp_bias
        self.gated = config.mlp
        self.fc_gate = nn.Linear(d, d_mlp, bias=bias, device=device) if config.mlp != "gelu" else None
        self.fc_in = nn.Linear(d, d_mlp, bias=bias, device=device)
        self.fc_out = nn.Linear(d_mlp, d, bias=bias, device=device)
        self.approximate = "none" if config.gelu == "exact" else "tanh"

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        if self.gated == "swiglu":
            return self.fc_out(F.silu(self.fc_gate(h)) * self.fc_in(h))
        if self.gated == "geglu":
            return self.fc_out(F.gelu(self.fc_gate(h), approximate=self.approximate) * self.fc_in(h))
        return self.fc_out(F.gelu(self.fc_in(h), approximate=self.approximate))


class HeadWeights:
    """Each head's slice of an attention module's projections (mixed into
    :class:`model.core.transformer.Attention`, which has ``W_Q``, ``W_K``, ``W_V``, ``W_O``,
    ``n_heads``, ``n_kv_heads`` and ``d_head``): head h uses rows ``h*d_head:(h+1)*d_head`` of W_Q
    (heads are contiguous groups, as in nanoGPT) and of W_K, W_V for key/value head h."""

    #: The entries of :meth:`head_weights`.
    HEAD_WEIGHTS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")

    def head_out_direction(self, d: np.ndarray) -> np.ndarray:
        """A direction d (d_model,) of W_O's output, pulled back to each head: (n_heads, d_head)
        float64 whose row h is W_O[h] d, so that head_out[h, i] · row h is head h's share of
        (W_O's output at i, less its bias) · d (direct logit attribution's readout)."""
        w = self.W_O.weight.detach().double().cpu()  # (d_model, n_heads * d_head)
        return (w.t() @ torch.from_numpy(np.asarray(d, dtype=np.float64))).view(self.n_heads, self.d_head).numpy()

    def head_weights(self, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Per-head weight matrices and biases, in the course's orientation (q_i = h_i W_Q + b_Q).

        Parameters
        ----------
        names : sequence of str, optional
            The entries wanted (all of :attr:`HEAD_WEIGHTS` by default).

        Returns
        -------
        dict
            ``W_Q``: (n_heads, d_model, d_head); ``W_K``, ``W_V``: (n_kv_heads, d_model, d_head);
            ``W_O``: (n_heads, d_head, d_model); ``b_Q``: (n_heads, d_head), ``b_K``, ``b_V``:
            (n_kv_heads, d_head), ``b_O``: (d_model,), zeros where the model has no bias;
            float32 numpy copies.

        Raises
        ------
        ValueError
            For a name that is not one of :attr:`HEAD_WEIGHTS`.
        """
        want = self.HEAD_WEIGHTS if names is None else tuple(names)
        if unknown := sorted(set(want) - set(self.HEAD_WEIGHTS)):
            raise ValueError(f"no head weights named {unknown}; try {self.HEAD_WEIGHTS}")
        out = {}
        for p, lin, n in (("Q", self.W_Q, self.n_heads), ("K", self.W_K, self.n_kv_heads),
                          ("V", self.W_V, self.n_kv_heads), ("O", self.W_O, self.n_heads)):
            w = lin.weight.detach().float().cpu()  # (n * d_head, d_model); W_O: (d_model, n_heads * d_head)
            if f"W_{p}" in want:  # (n, d_model, d_head); W_O (n_heads, d_head, d_model)
                heads = w.t().reshape(n, self.d_head, -1) if p == "O" else w.view(n, self.d_head, -1).transpose(1, 2)
                out[f"W_{p}"] = heads.clone(memory_format=torch.contiguous_format).numpy()
            if f"b_{p}" in want:  # (n, d_head); b_O (d_model,)
                b = lin.bias.detach().float().cpu() if lin.bias is not None else torch.zeros(w.shape[0])
                out[f"b_{p}"] = (b if p == "O" else b.view(n, self.d_head)).clone().numpy()
        return out
