"""Components that other families put where the course's model has LayerNorm or a positional table.

RMSNorm (Llama, llama2.c) instead of LayerNorm, and rotary position embedding (RoPE) of q and k
instead of a learned table added to the input. :mod:`model.core.transformer` builds them from the
config; the course's model uses neither.
"""

from __future__ import annotations

import torch
from torch import nn

from model.core.config import GPTConfig


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) * weight."""

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
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.norm_bias, device=device)


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
