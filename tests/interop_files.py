"""What the interop tests share: the fixtures' paths, GPT-2's shipped files offline (and under
tiktoken's cache names), a random nanoGPT state dict and a checkpoint's logits."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

FIX = Path(__file__).parent / "fixtures" / "interop"
GPT2_DIR = Path(__file__).resolve().parents[1] / "assets" / "gpt2-bpe"  # shipped with the project
NANO, RASCHKA = FIX / "ckpt_nanogpt.pt", FIX / "ckpt_raschka.pth"
META = FIX / "nanogpt_shakespeare_char_meta.pkl"


def offline_gpt2(monkeypatch, tmp_path) -> None:
    """GPT-2's files as the project ships them (never the network): no override set, no stray
    tiktoken cache in /tmp."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))


def tiktoken_cache(folder: Path) -> Path:
    """A folder holding GPT-2's shipped files under the names tiktoken caches them by."""
    from model.formats.vocab import GPT2_FILES

    folder.mkdir()
    for name, cached in GPT2_FILES.items():
        shutil.copyfile(GPT2_DIR / name, folder / cached)
    return folder


def logits(ckpt, ids) -> np.ndarray:
    return ckpt.model.trace(ids).logits


def random_nanogpt(vocab=50, ctx=16, d=32, layers=2, bias=True, seed=0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen) * 0.3  # noqa: E731
    sd = {"transformer.wte.weight": r(vocab, d), "transformer.wpe.weight": r(ctx, d)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        shapes = {"ln_1": (d, d), "attn.c_attn": (3 * d, d), "attn.c_proj": (d, d), "ln_2": (d, d),
                  "mlp.c_fc": (4 * d, d), "mlp.c_proj": (d, 4 * d)}
        for name, (o, n) in shapes.items():
            sd[p + name + ".weight"] = 1 + r(d) if name.startswith("ln") else r(o, n)
            if bias:
                sd[p + name + ".bias"] = r(o)
    sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"] = 1 + r(d), r(d)
    if not bias:
        sd = {k: v for k, v in sd.items() if not k.endswith(".bias")}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd
