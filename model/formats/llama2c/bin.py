"""The binary ``model.bin`` of llama2.c (versions 0 and 1): its header and its tensors.

See :mod:`model.formats.llama2c.reader` for the layouts (export.py's ``legacy_export`` and
``version1_export``); this module only reads them. All little-endian float32.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model.formats.base import fail

MAGIC = 0x616B3432  # "ak42", written by export.py as a native (little-endian) uint32
HEADER_BYTES = {0: 7 * 4, 1: 256}
# Sanity bounds for a header without a magic number (far above any llama2.c or Llama 2 model).
LIMITS = {"dim": 1 << 16, "hidden_dim": 1 << 18, "n_layers": 1 << 10, "vocab": 1 << 22, "max_seq_len": 1 << 22}
EMB = "tok_embeddings.weight"


@dataclass(frozen=True)
class BinHeader:
    """The header of a llama2.c ``model.bin`` (version 0 or 1)."""

    version: int
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int  # always positive here
    max_seq_len: int
    shared: bool  # the classifier is the token embedding (tied)

    @property
    def head_size(self) -> int:
        return self.dim // self.n_heads

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """(model.py state-dict name, shape) of every float32 tensor, in file order; the RoPE
        tables as ``freqs_cos`` / ``freqs_sin``. Matrices are ``nn.Linear`` weights (out, in)."""
        d, h, kv = self.dim, self.hidden_dim, self.n_kv_heads * self.head_size
        per_layer = {"attention_norm": (d,), "attention.wq": (d, d), "attention.wk": (kv, d),
                     "attention.wv": (kv, d), "attention.wo": (d, d), "ffn_norm": (d,),
                     "feed_forward.w1": (h, d), "feed_forward.w2": (d, h), "feed_forward.w3": (h, d)}

        def layers(*kinds: str) -> list[tuple[str, tuple[int, ...]]]:  # all layers of a kind, then the next kind
            return [(f"layers.{i}.{k}.weight", per_layer[k]) for k in kinds for i in range(self.n_layers)]

        emb, norm = [(EMB, (self.vocab_size, d))], [("norm.weight", (d,))]
        attn = ("attention.wq", "attention.wk", "attention.wv", "attention.wo")
        mlp = ("feed_forward.w1", "feed_forward.w2", "feed_forward.w3")
        if self.version == 0:  # export.py's legacy_export
            rope = [(n, (self.max_seq_len, self.head_size // 2)) for n in ("freqs_cos", "freqs_sin")]
            out = emb + layers("attention_norm", *attn) + layers("ffn_norm", *mlp) + norm + rope
        else:  # version1_export
            out = layers("attention_norm") + layers("ffn_norm") + norm + emb + layers(*attn, *mlp)
        return out + ([] if self.shared else [("output.weight", (self.vocab_size, d))])

    def file_size(self) -> int:
        """Bytes the header implies: the header, then 4 per float."""
        return HEADER_BYTES[self.version] + 4 * sum(int(np.prod(s)) for _, s in self.shapes())

    def describe(self) -> str:
        """The header in words, for messages."""
        return (f"version {self.version}: dim {self.dim}, hidden_dim {self.hidden_dim}, {self.n_layers} layers, "
                f"{self.n_heads} heads, {self.n_kv_heads} kv heads, vocab {self.vocab_size}"
                f"{'' if self.shared else ' (separate classifier)'}, max_seq_len {self.max_seq_len}")


def _plausible(dim: int, hidden: int, layers: int, heads: int, kv: int, vocab: int, seq: int) -> bool:
    """Whether seven header ints can describe a llama2.c model (a file without magic needs this)."""
    return (0 < dim <= LIMITS["dim"] and 0 < hidden <= LIMITS["hidden_dim"] and 0 < layers <= LIMITS["n_layers"]
            and 0 < heads <= dim and dim % heads == 0 and 0 < kv <= heads and heads % kv == 0
            and (dim // heads) % 2 == 0 and 0 < abs(vocab) <= LIMITS["vocab"] and 0 < seq <= LIMITS["max_seq_len"])


def read_header(path: Path) -> BinHeader | None:
    """The header of a llama2.c ``model.bin``, or None when the file is not one.

    Raises
    ------
    CheckpointError
        For a version-2 (int8) or unknown-version file with llama2.c's magic, and for a file whose
        plausible header implies another size than the file has (cut short, or extra bytes).
    """
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES[1])
        size = path.stat().st_size
    except OSError as exc:
        raise fail(path, f"cannot read ({exc.strerror or exc})") from None
    if len(head) >= 8 and struct.unpack_from("<I", head)[0] == MAGIC:
        version = struct.unpack_from("<i", head, 4)[0]
        if version == 2:
            raise fail(path, "a llama2.c model.bin of version 2 (weights quantized to int8, Q8_0): this app "
                             "reads float32 weights; export version 0 or 1 (export.py --version 1), or open ckpt.pt")
        if version != 1 or len(head) < HEADER_BYTES[1]:
            raise fail(path, f"a llama2.c model.bin of version {version}, which this app does not know "
                             "(it reads versions 0 and 1)")
        fields = struct.unpack_from("<7i", head, 8)
        shared = bool(head[36])
        if fields[5] <= 0 or not _plausible(*fields):
            raise fail(path, f"a llama2.c model.bin (version 1) with an impossible header {fields}")
    elif len(head) >= HEADER_BYTES[0] and _plausible(*(fields := struct.unpack_from("<7i", head))):
        version, shared = 0, fields[5] > 0
    else:
        return None
    header = BinHeader(version, *fields[:5], abs(fields[5]), fields[6], shared)
    expected = header.file_size()
    if size != expected:
        how = ("cut short (an incomplete download or copy?)" if size < expected
               else f"{size - expected:,} bytes more than the header describes")
        raise fail(path, f"a llama2.c model.bin ({header.describe()}) should have {expected:,} bytes but has "
                         f"{size:,}: {how}")
    return header


def read_bin(path: Path, header: BinHeader) -> dict[str, torch.Tensor]:
    """Every tensor of a ``model.bin`` under model.py's state-dict names (RoPE tables dropped)."""
    floats = np.fromfile(path, dtype="<f4", offset=HEADER_BYTES[header.version])
    out, at = {}, 0
    for name, shape in header.shapes():
        n = int(np.prod(shape))
        if not name.startswith("freqs_"):  # run.c skips the RoPE tables; the model computes its angles
            out[name] = torch.from_numpy(floats[at:at + n].reshape(shape))
        at += n
    return out
