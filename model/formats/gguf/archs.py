"""The GGUF architectures this app builds (``general.architecture``), read key by key.

``llama`` (what ``convert_hf_to_gguf.py`` writes for Llama 2 and 3, TinyLlama, SmolLM/SmolLM2,
Mistral 7B), ``qwen2`` (Qwen2, Qwen2.5) and ``qwen3`` (Qwen3): pre-RMSNorm blocks, RoPE,
grouped-query attention, a SwiGLU MLP, an output head tied to the token embedding when the file
has no ``output.weight``. They differ where llama.cpp's files differ: llama.cpp turns a ``llama``
model's q and k with interleaved pairs and so stores W_Q and W_K permuted (undone here, see
:func:`~model.formats.gguf.tensors.unpermute`); ``qwen2`` and ``qwen3`` models are turned in halves
(NEOX style) and stored as they are, ``qwen2`` with biases on q, k and v, ``qwen3`` with QK-norm
(``blk.N.attn_q_norm`` / ``attn_k_norm``, one RMSNorm over each head's dimensions) and its head width
stated (``attention.key_length``: Qwen3-0.6B's 128 with embedding_length 1024 and 16 heads).

Every metadata key ``ARCH.*`` of the file must be one this reader understands (:data:`KEYS`), so
that nothing that changes the computation is ignored: a scaled RoPE, mixture-of-experts, a RoPE over
part of the head, keys and values of different widths, per-layer head counts are refused naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gguf import LlamaFileType

from model.core.config import MAX_CONTEXT_LENGTH, GPTConfig
from model.formats.base import fail
from model.formats.common import Keys, make_config
from model.formats.gguf.file import GGUFFile
from model.formats.gguf.tensors import unpermute


@dataclass(frozen=True)
class Architecture:
    """One ``general.architecture``: its examples, whether llama.cpp permuted its q and k, and whether
    it normalises each head's q and k (QK-norm)."""

    name: str
    examples: str
    permuted_qk: bool
    qk_norm: bool = False


ARCHITECTURES = {
    "llama": Architecture("llama", "Llama 2 and 3, TinyLlama, SmolLM2, Mistral 7B", permuted_qk=True),
    "qwen2": Architecture("qwen2", "Qwen2, Qwen2.5", permuted_qk=False),
    "qwen3": Architecture("qwen3", "Qwen3", permuted_qk=False, qk_norm=True),
}
#: The ``ARCH.`` keys read (after the prefix); any other is refused, naming it.
KEYS = ("block_count", "context_length", "embedding_length", "feed_forward_length", "vocab_size",
        "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
        "attention.key_length", "attention.value_length", "attention.causal", "rope.freq_base",
        "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor", "expert_count", "expert_used_count")
#: Each block's linear layers: (GGUF name, ours, its weight's shape, which biases it has).
LINEARS = (("attn_q", "attn.W_Q", "q", "qkv"), ("attn_k", "attn.W_K", "kv", "qkv"), ("attn_v", "attn.W_V", "kv", "qkv"),
           ("attn_output", "attn.W_O", "o", "o"), ("ffn_gate", "mlp.fc_gate", "mlp_in", "mlp"),
           ("ffn_up", "mlp.fc_in", "mlp_in", "mlp"), ("ffn_down", "mlp.fc_out", "mlp_out", "mlp"))


def architectures_opened() -> str:
    """The architectures this reader opens, for messages."""
    names = [f"{a.name} ({a.examples})" for a in ARCHITECTURES.values()]
    return ", ".join(names[:-1]) + " and " + names[-1]


def architecture_of(gf: GGUFFile) -> Architecture:
    """The file's architecture.

    Raises
    ------
    CheckpointError
        When ``general.architecture`` is missing or names another architecture (naming it and
        the ones this app opens).
    """
    name = gf.string("general.architecture")
    if name not in ARCHITECTURES:
        raise gf.error("general.architecture", f"not an architecture this app opens from GGUF; "
                                               f"it opens {architectures_opened()}")
    return ARCHITECTURES[name]


class _Meta:
    """The ``ARCH.`` keys of one file."""

    def __init__(self, gf: GGUFFile, arch: Architecture) -> None:
        self.gf, self.prefix = gf, arch.name + "."
        for key in gf.keys(self.prefix):
            if key[len(self.prefix):] not in KEYS:
                raise gf.error(key, f"a setting this app does not build (it reads {self.prefix}{{{', '.join(KEYS)}}})")

    def key(self, name: str) -> str:
        return self.prefix + name

    def integer(self, name: str, default: Any = None, minimum: int = 1) -> int:
        value = self.gf.integer(self.key(name), default, minimum)
        if value is None:
            raise fail(self.gf.path, f"{self.key(name)} is missing")
        return value

    def agrees(self, name: str, found: int, what: str, required: bool = False) -> None:
        """Refuse a key whose value differs from what the weights (or the other keys) say, and a
        missing one when ``required``."""
        value = self.gf.integer(self.key(name), None, 0)
        if value is None and required:
            raise fail(self.gf.path, f"{self.key(name)} is missing")
        if value is not None and value != found:
            raise self.gf.error(self.key(name), f"but {what} {found}")


def _check_rope(meta: _Meta, d_head: int) -> float:
    """RoPE's base θ; a scaled or partial RoPE, experts and a non-causal model are refused."""
    gf = meta.gf
    if gf.string(meta.key("rope.scaling.type"), "none") != "none":
        raise gf.error(meta.key("rope.scaling.type"), "only RoPE without scaling is supported (not linear, yarn, ...)")
    if gf.number(meta.key("rope.scaling.factor"), 1.0) != 1.0:
        raise gf.error(meta.key("rope.scaling.factor"), "only RoPE without scaling is supported")
    meta.agrees("rope.dimension_count", d_head, "RoPE here turns every dimension of a head of width")
    for name in ("expert_count", "expert_used_count"):
        if gf.integer(meta.key(name), 0, 0):
            raise gf.error(meta.key(name), "mixture-of-experts models are not supported")
    if not gf.flag(meta.key("attention.causal"), True):
        raise gf.error(meta.key("attention.causal"), "only causal (decoder) attention is supported")
    theta = gf.number(meta.key("rope.freq_base"), 10000.0)
    if not theta > 1:
        raise gf.error(meta.key("rope.freq_base"), "expected a number above 1")
    return theta


def _layer(keys: Keys, arch: Architecture, i: int, shapes: dict[str, tuple], biases: dict[str, bool],
           heads: dict[str, int]) -> dict[str, torch.Tensor]:
    """Block i's tensors under our names, q and k (``heads``: their n) un-permuted for a llama file."""
    src, dst = f"blk.{i}.", f"blocks.{i}."
    out = {dst + "ln1.weight": keys.take(src + "attn_norm.weight", shapes["norm"]),
           dst + "ln2.weight": keys.take(src + "ffn_norm.weight", shapes["norm"])}
    if arch.qk_norm:
        out[dst + "attn.q_norm.weight"] = keys.take(src + "attn_q_norm.weight", shapes["head"])
        out[dst + "attn.k_norm.weight"] = keys.take(src + "attn_k_norm.weight", shapes["head"])
    for theirs, ours, shape, bias in LINEARS:
        for part in ("weight", "bias") if biases[bias] else ("weight",):
            name = f"{src}{theirs}.{part}"
            t = keys.take(name, shapes[shape] if part == "weight" else shapes[shape][:1])
            if arch.permuted_qk and theirs in heads:
                t = unpermute(keys.path, name, t, heads[theirs])
            out[f"{dst}{ours}.{part}"] = t
    return out


@dataclass(frozen=True)
class _Sizes:
    """The model's sizes, each read from the file and checked against the weights."""

    vocab: int
    d: int
    n_layers: int
    n_heads: int
    n_kv: int
    ctx: int
    d_mlp: int
    d_head: int

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor shape of a block, by the names of :data:`LINEARS` (and ``norm``, ``head``)."""
        d, d_head = self.d, self.d_head
        return {"norm": (d,), "head": (d_head,), "q": (self.n_heads * d_head, d), "kv": (self.n_kv * d_head, d),
                "o": (d, self.n_heads * d_head), "mlp_in": (self.d_mlp, d), "mlp_out": (d, self.d_mlp)}


def _sizes(meta: _Meta, keys: Keys, emb: torch.Tensor) -> _Sizes:
    """The sizes the keys give, refused where they disagree with the tensors (naming the key)."""
    vocab, d = emb.shape
    meta.agrees("embedding_length", d, "token_embd.weight is", required=True)
    meta.agrees("vocab_size", vocab, "token_embd.weight has rows:")
    n_layers = keys.layers("blk")
    meta.agrees("block_count", n_layers, "the blocks in the file are", required=True)
    n_heads = meta.integer("attention.head_count")
    d_head = meta.gf.integer(meta.key("attention.key_length"), None, 1)
    if d_head is None:
        if d % n_heads:
            raise meta.gf.error(meta.key("attention.head_count"), f"does not divide embedding_length ({d})")
        d_head = d // n_heads
    meta.agrees("attention.value_length", d_head, "only values as wide as the keys are supported: key_length is")
    ctx = meta.integer("context_length")
    if ctx > MAX_CONTEXT_LENGTH:
        raise meta.gf.error(meta.key("context_length"), f"more positions than this app builds ({MAX_CONTEXT_LENGTH:,})")
    return _Sizes(vocab, d, n_layers, n_heads, meta.integer("attention.head_count_kv", n_heads), ctx,
                  meta.integer("feed_forward_length"), d_head)


def convert(gf: GGUFFile, arch: Architecture, keys: Keys) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """The file's config and tensors as our config, state dict and facts for the Model panel.

    Raises
    ------
    CheckpointError
        For a key whose value this app does not build or that disagrees with the weights (naming
        it), a missing, misshapen or unexpected tensor.
    """
    meta = _Meta(gf, arch)
    if keys.has("rope_freqs.weight"):
        raise fail(gf.path, "rope_freqs.weight: Llama 3's scaled RoPE (a factor per frequency) is not supported")
    emb = keys.take_matrix("token_embd.weight")
    n = _sizes(meta, keys, emb)
    theta = _check_rope(meta, n.d_head)
    eps = gf.number(meta.key("attention.layer_norm_rms_epsilon"))
    if eps is None:
        raise fail(gf.path, f"{meta.key('attention.layer_norm_rms_epsilon')} is missing")
    biases = {"qkv": keys.has("blk.0.attn_q.bias"), "o": keys.has("blk.0.attn_output.bias"),
              "mlp": keys.has("blk.0.ffn_up.bias")}
    ours: dict[str, torch.Tensor] = {"tok_emb.weight": emb}
    for i in range(n.n_layers):
        ours.update(_layer(keys, arch, i, n.shapes, biases, {"attn_q": n.n_heads, "attn_k": n.n_kv}))
    ours["ln_f.weight"] = keys.take("output_norm.weight", (n.d,))
    head = keys.take_opt("output.weight", (n.vocab, n.d))
    if head is not None:
        ours["unembed.weight"] = head
    keys.finish()
    config = make_config(
        gf.path, vocab_size=n.vocab, context_length=n.ctx, d_model=n.d, n_heads=n.n_heads, n_kv_heads=n.n_kv,
        d_head=n.d_head, n_layers=n.n_layers, d_mlp=n.d_mlp, positional="rope", rope_theta=theta, rope_pairs="halves",
        qk_norm="head" if arch.qk_norm else "none",
        norm="rmsnorm", norm_bias=False, norm_eps=eps, mlp="swiglu", qkv_bias=biases["qkv"],
        o_bias=biases["o"], mlp_bias=biases["mlp"], tied_unembed=head is None,
    )
    return config, ours, _facts(gf, arch)


def _facts(gf: GGUFFile, arch: Architecture) -> dict[str, Any]:
    """Where the model came from, for the Model panel: ``general.*`` names and the file's type."""
    facts: dict[str, Any] = {"source": "GGUF", "file": gf.path.name, "GGUF version": gf.version,
                             "architecture": arch.name}
    for key in ("general.name", "general.basename", "general.size_label", "general.finetune"):
        value = gf.string(key)
        if value:
            facts[key.removeprefix("general.")] = value
    file_type = gf.integer("general.file_type")
    if file_type is not None:
        try:
            facts["file type"] = LlamaFileType(file_type).name.removeprefix("MOSTLY_")
        except ValueError:
            facts["file type"] = f"type {file_type}"
    return facts
