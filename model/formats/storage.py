"""How a file stored its weights, when not as plain float arrays: quantised blocks (GGUF).

A quantised tensor is kept as blocks of ``block_size`` weights, each block ``block_bytes``
bytes (a scale and small integers: Q8_0 is an fp16 scale and 32 int8, 34 bytes per 32 weights).
The readers dequantise every tensor to float32 when they open the file; what the Model panel
can say about the result is the type, the block size and the bits per weight of each tensor,
and what dequantising cost. The largest error of a weight (|w − dequantised|) cannot be known:
the original weights are not in the file.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a tensor is in the model, in the order the Model panel lists them.
KINDS = ("token embedding", "attention", "MLP", "norms", "biases", "unembedding")


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as the file stores it.

    Attributes
    ----------
    name : str           the file's own name (``blk.0.attn_q.weight``).
    kind : str           one of :data:`KINDS`.
    type_name : str      the storage type (``"F32"``, ``"F16"``, ``"BF16"``, ``"Q8_0"``, ``"Q4_K"``, ...).
    block_size : int     weights per block (1 for the float types).
    block_bytes : int    bytes per block.
    n_weights : int      weights in the tensor.
    """

    name: str
    kind: str
    type_name: str
    block_size: int
    block_bytes: int
    n_weights: int

    @property
    def bits_per_weight(self) -> float:
        """Bits of the file per weight, scales included (8.5 for Q8_0, 4.5 for Q4_K)."""
        return 8 * self.block_bytes / self.block_size

    @property
    def n_bytes(self) -> int:
        """Bytes of the tensor's data in the file."""
        return self.n_weights // self.block_size * self.block_bytes


@dataclass(frozen=True)
class WeightStorage:
    """Every tensor of a file as it was stored, and what turning them into float32 cost.

    Attributes
    ----------
    container : str              the file format (``"GGUF"``).
    tensors : tuple of StoredTensor
    dequantize_s : float         seconds spent dequantising (wall time, when the file was opened).
    """

    container: str
    tensors: tuple[StoredTensor, ...]
    dequantize_s: float

    @property
    def stored_bytes(self) -> int:
        """Bytes of tensor data in the file."""
        return sum(t.n_bytes for t in self.tensors)

    @property
    def float32_bytes(self) -> int:
        """Bytes the same weights take as float32 (4 per weight), as the model holds them."""
        return 4 * sum(t.n_weights for t in self.tensors)
