"""The transformer's components that families change: norms, rotary position embedding, the MLP.

LayerNorm (GPT-2) or RMSNorm (Llama, llama2.c), each of which can also be frozen at an input into
an affine map (:class:`FrozenNorm`, what attribution and the score split need); rotary position
embedding (RoPE) of q and k instead of a learned table added to the input; a GELU or SwiGLU MLP.
:mod:`model.core.transformer` builds them from the config.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        """(γ, β): the gain (d_model,) and shift (d_model,) or None, float64 numpy copies."""
        bias = getattr(self, "bias", None)
        return (self.weight.detach().double().cpu().numpy(),
                None if bias is None else bias.detach().double().cpu().numpy())

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
    """Root-mean-square norm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) * weight."""

    centred = False

    def __init__(self, d: int, eps: float, device=None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d) -> (..., d)."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(config: GPTConfig, device=None) -> nn.Module:
    """The config's norm over d_model: LayerNorm (with or without shift) or RMSNorm."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.norm_eps, device=device)
    return LayerNorm(config.d_model, eps=config.norm_eps, bias=config.norm_bias, device=device)


class RoPE(nn.Module):
    """Rotary position embedding (Su et al. 2021, RoFormer, eq. 34).

    Pair j of a head at position m turns by the angle m · θ^(-2j/d_head). The pairs are the
    dimensions (2j, 2j+1) (``"interleaved"``, llama2.c) or (j, j + d_head/2) (``"halves"``, Hugging
    Face's ``rotate_half``). A score q_m·k_n then depends on the positions only through m - n.
    """

    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        self.interleaved = config.rope_pairs == "interleaved"
        d = config.d_head
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, device=device).float() / d))
        angles = torch.outer(torch.arange(config.context_length, device=device).float(), inv_freq)
        self.register_buffer("angles", angles, persistent=False)  # (context_length, d_head/2), radians

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotate x (B, n, T, d_head), whose rows are the positions start .. start + T - 1."""
        angles = self.angles[start:start + x.shape[-2]]  # (T, d_head/2)
        cos, sin = angles.cos(), angles.sin()
        if self.interleaved:
            a, b = x[..., 0::2], x[..., 1::2]  # (B, n, T, d_head/2) each
            return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
        a, b = x.chunk(2, dim=-1)
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class MLP(nn.Module):
    """Position-wise feed-forward, hidden width d_mlp.

    ``"gelu"``: GELU(h W_in + b_in) W_out + b_out. ``"swiglu"``: (SiLU(h W_gate) ⊙ h W_in) W_out
    (Shazeer 2020; Llama's gate, up and down projections are fc_gate, fc_in and fc_out).
    """

    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        d, d_mlp, bias = config.d_model, config.d_mlp, config.mlp_bias
        self.fc_gate = nn.Linear(d, d_mlp, bias=bias, device=device) if config.mlp == "swiglu" else None
        self.fc_in = nn.Linear(d, d_mlp, bias=bias, device=device)
        self.fc_out = nn.Linear(d_mlp, d, bias=bias, device=device)
        self.approximate = "none" if config.gelu == "exact" else "tanh"

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        if self.fc_gate is not None:
            return self.fc_out(F.silu(self.fc_gate(h)) * self.fc_in(h))
        return self.fc_out(F.gelu(self.fc_in(h), approximate=self.approximate))
