"""Seeded tiny models of every family the transformer builds, with weights that are not at their
initial values (norm scales and biases perturbed), for the explain and interventions tests."""

import torch

from model import GPT, GPTConfig

BASE = dict(vocab_size=23, context_length=8, d_model=16, n_heads=2, n_layers=2, d_mlp=24)
FAMILIES = {
    "gpt2": {},
    "llama": dict(positional="rope", rope_pairs="interleaved", norm="rmsnorm", norm_bias=False, mlp="swiglu",
                  n_kv_heads=1, o_bias=False, mlp_bias=False, tied_unembed=False),
    "rope-layernorm": dict(positional="rope", qkv_bias=True),
    "neo": dict(scale_scores=False, attn_windows=(0, 3), qkv_bias=True),
    "nope": dict(positional="none", gelu="tanh", qkv_bias=True, o_bias=False, mlp_bias=False, norm_bias=False,
                 tied_unembed=False),
    "learned-rmsnorm-gqa": dict(norm="rmsnorm", norm_bias=False, qkv_bias=True, n_kv_heads=1, n_heads=4),
}
LEARNED = ("gpt2", "neo", "learned-rmsnorm-gqa")
IDS = [3, 1, 4, 1, 5, 9, 2]


def family_model(name: str, seed: int = 7) -> GPT:
    """The family's tiny model: nanoGPT init, then every parameter moved by N(0, 0.2²) noise."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**BASE, **FAMILIES[name]})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model
