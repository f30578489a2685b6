"""A GGUF file's tensors as float32 torch tensors, dequantised with the ``gguf`` package's own code.

The types read: F32, F16, BF16 (plain floats), Q8_0, Q4_0 (blocks of 32 weights with one fp16
scale; Q4_0's 4-bit values are offset by 8), Q4_K and Q6_K (super-blocks of 256 weights in
sub-blocks of 32 and 16 with 6- and 8-bit scales), as ``gguf.quants.dequantize`` decodes them.
Any other type is refused by name before anything is decoded. A tensor's dimensions are
(ne0, ne1, …) with ne0 the fastest-varying: its data is the row-major array of shape
(…, ne1, ne0), so a matrix listed as [in, out] is PyTorch's (out, in) ``Linear`` weight.
"""

from __future__ import annotations

import re
import time

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

from model.formats.base import CheckpointError, fail
from model.formats.gguf.file import GGUFFile
from model.formats.storage import StoredTensor, WeightStorage

Q = GGMLQuantizationType
#: The storage types this app dequantises (the others are refused, naming the type).
SUPPORTED = (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_K, Q.Q6_K)
# What each tensor is, from the names convert_hf_to_gguf.py gives them (gguf's tensor_mapping).
_KIND_PATTERNS = (
    (re.compile(r"token_embd\.weight"), "token embedding"),
    (re.compile(r"output\.weight"), "unembedding"),
    (re.compile(r".*norm\.weight"), "norms"),
    (re.compile(r".*\.bias"), "biases"),
    (re.compile(r"blk\.\d+\.attn_.*"), "attention"),
    (re.compile(r"blk\.\d+\.ffn_.*"), "MLP"),
)


def kind_of(name: str) -> str:
    """What a tensor is in the model (one of :data:`model.formats.storage.KINDS`), by its GGUF name;
    "other" for a name outside them (such a tensor is refused later as unexpected)."""
    return next((kind for pattern, kind in _KIND_PATTERNS if pattern.fullmatch(name)), "other")


def supported_names() -> str:
    """The types read, for messages: "F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K"."""
    names = [t.name for t in SUPPORTED]
    return ", ".join(names[:-1]) + " and " + names[-1]


def check_types(gf: GGUFFile) -> None:
    """Refuse a file with a tensor of a type this app does not dequantise, naming it and the type.

    Raises
    ------
    CheckpointError
        ``blk.0.attn_q.weight is stored as Q5_K: this app dequantises F32, F16, …`` (and how many
        other tensors have unsupported types).
    """
    bad = [(name, t.tensor_type.name) for name, t in gf.tensors.items() if t.tensor_type not in SUPPORTED]
    if bad:
        more = f" ({len(bad) - 1} more tensors of types this app does not read)" if len(bad) > 1 else ""
        raise fail(gf.path, f"tensor {bad[0][0]} is stored as {bad[0][1]}: this app dequantises "
                            f"{supported_names()}{more}")


def stored(name: str, tensor) -> StoredTensor:
    """How one tensor is stored (type, block size and bytes, weights)."""
    block_size, block_bytes = GGML_QUANT_SIZES[tensor.tensor_type]
    return StoredTensor(name, kind_of(name), tensor.tensor_type.name, int(block_size), int(block_bytes),
                        int(tensor.n_elements))


def dequantize_all(gf: GGUFFile) -> tuple[dict[str, torch.Tensor], WeightStorage]:
    """Every tensor of the file as float32 (copied out of the mapped file), and how it was stored.

    Returns
    -------
    (dict of str -> Tensor, WeightStorage)
        Tensors under the file's names, of shape (…, ne1, ne0); the storage of each and the
        seconds spent dequantising.

    Raises
    ------
    CheckpointError
        For a type that is not supported (:func:`check_types`). Values that are not finite are
        refused when the model is built (:func:`model.formats.base.validate_state_dict`).
    """
    check_types(gf)
    tensors: dict[str, torch.Tensor] = {}
    start = time.perf_counter()
    for name, tensor in gf.tensors.items():
        values = np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32, copy=True)
        tensors[name] = torch.from_numpy(values)
    seconds = time.perf_counter() - start
    storage = WeightStorage("GGUF", tuple(stored(name, t) for name, t in gf.tensors.items()), seconds)
    return tensors, storage


def unpermute(path, name: str, w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's permutation of a Llama-family q or k projection (weight or bias).

    ``convert_hf_to_gguf.py`` (``LlamaModel.permute``) stores the rows of W_Q (with n_heads) and
    W_K (with n_kv_heads) reordered for llama.cpp's RoPE, which rotates interleaved pairs
    (2i, 2i+1): within each head, row i of the first half and row i of the second half (Hugging
    Face's ``rotate_half`` pair) become rows 2i and 2i+1. Its reshape (n, 2, d_head/2, …), swap of
    axes 1 and 2, reshape back is undone by the reshape (n, d_head/2, 2, …), the same swap, reshape.

    Parameters
    ----------
    w : Tensor (n · d_head, d_model) or (n · d_head,)
        As stored in the file.
    n_heads : int
        n for this projection (query heads for W_Q, key/value heads for W_K).

    Returns
    -------
    Tensor of the same shape, rows in the Hugging Face order (use RoPE with pairs in halves).

    Raises
    ------
    CheckpointError
        When the rows do not split into n heads of an even width.
    """
    rows = w.shape[0]
    if rows % (2 * n_heads):
        raise CheckpointError(f"{path.name}: {name} has {rows} rows, which do not split into {n_heads} heads "
                              "of an even width (RoPE turns pairs)")
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape).contiguous()
