"""Write the K-quant GGUF fixture: a small llama model in Q4_K and Q6_K blocks, as a Q4_K_M file.

    python tools/make_gguf_kquants.py [OUT.gguf]

(default ``tests/fixtures/arch3/gguf-kquants/model-Q4_K_M.gguf``). K-quant blocks hold 256 weights,
so every quantised tensor needs rows of a multiple of 256: the F32 fixture's (64 and 160 wide)
cannot be K-quantised. This writes a model of the same kind, wider: llama, d_model 256, 4 query
heads of 64 sharing 2 key/value heads, an MLP of 256, 2 blocks, tied, context 128, RoPE θ 10000,
RMSNorm ε 1e-5, with the F32 fixture's vocabulary (``tokenizer.ggml.*`` of
``tests/fixtures/arch3/gguf-llama/model-F32.gguf``, copied as they are, 512 tokens), so that the
same text gives the same ids. Weights are random with a fixed seed (matrices N(0, 0.1²),
embedding N(0, 0.2²), norm weights 1 + N(0, 0.2²)); W_Q and W_K are stored permuted as
``convert_hf_to_gguf.py`` does for llama. As llama.cpp's Q4_K_M mix: attn_v and ffn_down in
Q6_K, token_embd in Q6_K, the other matrices in Q4_K, norms in F32.

gguf-py writes the file (``GGUFWriter``) but has no K-quant encoder, so the blocks are encoded
here from their layout (the decoder, ``gguf.quants.dequantize``, is gguf-py's): a plain
min/max encoder, not llama.cpp's error-minimising search. The values the file holds are
whatever these blocks decode to; the tests compare the reader with a model built from
``gguf.quants.dequantize`` of the same blocks. Prints, per type, the largest |w − dequantised|
of the weights written (known here, not in the file).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, LlamaFileType
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parents[1]
VOCAB_SOURCE = ROOT / "tests" / "fixtures" / "arch3" / "gguf-llama" / "model-F32.gguf"
OUT = ROOT / "tests" / "fixtures" / "arch3" / "gguf-kquants" / "model-Q4_K_M.gguf"
SEED = 2026
D, N_HEADS, N_KV, D_MLP, N_LAYERS, CTX = 256, 4, 2, 256, 2, 128
QK_K = 256  # weights per K-quant super-block
Q = GGMLQuantizationType


def _fp16(x: np.ndarray) -> np.ndarray:
    """x rounded to float16 (what a block stores), back as float32."""
    return x.astype(np.float16).astype(np.float32)


def _divide(x: np.ndarray, by: np.ndarray) -> np.ndarray:
    """x / by, 0 where by is 0."""
    return np.divide(x, by, out=np.zeros_like(x), where=by > 0)


def quantize_q4_k(w: np.ndarray) -> np.ndarray:
    """(rows, n·256) float32 -> (rows, n·144) uint8 Q4_K blocks.

    A block: fp16 d, fp16 dmin, 12 bytes of eight 6-bit scales and eight 6-bit mins, 128 bytes of
    4-bit values q (sub-block j of 32 weights: w ≈ d·scale_j·q − dmin·min_j). Sub-blocks 2c and
    2c + 1 share bytes 32c … 32c + 31 (low and high nibbles); scales and mins 0–3 fill the low six
    bits of bytes 0–3 and 4–7, those of 4–7 split their low four bits into bytes 8–11 and their
    high two into the top bits of bytes 0–7.
    """
    x = w.reshape(-1, 8, 32)  # (blocks, sub-block, weight)
    lo = np.minimum(x.min(-1), 0.0)
    scale, mins = (x.max(-1) - lo) / 15, -lo
    d, dmin = _fp16(scale.max(-1) / 63), _fp16(mins.max(-1) / 63)  # (blocks,)
    sc = np.clip(np.rint(_divide(scale, d[:, None])), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(_divide(mins, dmin[:, None])), 0, 63).astype(np.uint8)
    step = d[:, None] * sc
    q = np.clip(np.rint(_divide(x + (dmin[:, None] * mn)[..., None], step[..., None])), 0, 15).astype(np.uint8)
    q = q.reshape(-1, 4, 2, 32)  # (blocks, byte group c, nibble, byte)
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)
    scales = np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), mn[:, :4] | ((mn[:, 4:] >> 4) << 6),
                             (sc[:, 4:] & 0x0F) | ((mn[:, 4:] & 0x0F) << 4)], axis=1)
    head = np.stack([d, dmin], axis=1).astype(np.float16).view(np.uint8)  # (blocks, 4)
    return np.concatenate([head, scales, qs], axis=1).reshape(w.shape[0], -1)


def quantize_q6_k(w: np.ndarray) -> np.ndarray:
    """(rows, n·256) float32 -> (rows, n·210) uint8 Q6_K blocks.

    A block: 128 bytes of low four bits, 64 bytes of high two bits, sixteen int8 scales, fp16 d
    (sub-block s of 16 weights: w ≈ d·scale_s·(q − 32), q in 0 … 63). Weight e = 128h + r of the
    block keeps its low bits in nibble r // 64 of byte 64h + r % 64 and its high bits in bits
    2(r // 32), 2(r // 32) + 1 of byte 128 + 32h + r % 32.
    """
    x = w.reshape(-1, 16, 16)  # (blocks, sub-block, weight)
    scale = np.abs(x).max(-1) / 31
    d = _fp16(scale.max(-1) / 127)
    sc = np.clip(np.rint(_divide(scale, d[:, None])), -128, 127).astype(np.int8)
    step = d[:, None] * sc.astype(np.float32)
    q = (np.clip(np.rint(_divide(x, step[..., None])) + 32, 0, 63).astype(np.uint8)).reshape(-1, 2, 128)
    low = (q & 0x0F).reshape(-1, 2, 2, 64)  # (blocks, half h, nibble, byte)
    ql = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(-1, 128)
    high = (q >> 4).reshape(-1, 2, 4, 32)  # (blocks, half h, bit pair, byte)
    qh = (high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)).reshape(-1, 64)
    tail = np.concatenate([sc.view(np.uint8), d.astype(np.float16).view(np.uint8).reshape(-1, 2)], axis=1)
    return np.concatenate([ql, qh, tail], axis=1).reshape(w.shape[0], -1)


ENCODERS = {Q.Q4_K: quantize_q4_k, Q.Q6_K: quantize_q6_k}


def permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Hugging Face row order -> llama.cpp's for q or k: within each head, rows i and d_head/2 + i
    become rows 2i and 2i + 1 (what convert_hf_to_gguf.py's LlamaModel.permute does)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def weights(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, GGMLQuantizationType]]:
    """Every tensor in Hugging Face order and the type it is stored as (in file order)."""
    d_head = D // N_HEADS

    def matrix(rows: int, cols: int, std: float = 0.1) -> np.ndarray:
        return rng.normal(0.0, std, (rows, cols)).astype(np.float32)

    def norm() -> np.ndarray:
        return (1 + rng.normal(0.0, 0.2, D)).astype(np.float32)

    out = {"token_embd.weight": (matrix(512, D, 0.2), Q.Q6_K), "output_norm.weight": (norm(), Q.F32)}
    for i in range(N_LAYERS):
        b = f"blk.{i}."
        out.update({
            b + "attn_norm.weight": (norm(), Q.F32),
            b + "attn_q.weight": (matrix(N_HEADS * d_head, D), Q.Q4_K),
            b + "attn_k.weight": (matrix(N_KV * d_head, D), Q.Q4_K),
            b + "attn_v.weight": (matrix(N_KV * d_head, D), Q.Q6_K),
            b + "attn_output.weight": (matrix(D, N_HEADS * d_head), Q.Q4_K),
            b + "ffn_norm.weight": (norm(), Q.F32),
            b + "ffn_gate.weight": (matrix(D_MLP, D), Q.Q4_K),
            b + "ffn_up.weight": (matrix(D_MLP, D), Q.Q4_K),
            b + "ffn_down.weight": (matrix(D, D_MLP), Q.Q6_K),
        })
    return out


def _copy_vocabulary(writer: GGUFWriter) -> None:
    """The F32 fixture's tokenizer.ggml.* entries, as they are."""
    source = GGUFReader(VOCAB_SOURCE)
    for key, field in source.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            writer.add_token_list(value)
        elif key == "tokenizer.ggml.scores":
            writer.add_token_scores(value)
        elif key == "tokenizer.ggml.token_type":
            writer.add_token_types(value)
        else:
            writer.add_key_value(key, value, field.types[0])


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(out), "llama")
    writer.add_type("model")
    writer.add_name("arch3 gguf-kquants Q4_K_M")
    for add, value in ((writer.add_block_count, N_LAYERS), (writer.add_context_length, CTX),
                       (writer.add_embedding_length, D), (writer.add_feed_forward_length, D_MLP),
                       (writer.add_head_count, N_HEADS), (writer.add_head_count_kv, N_KV),
                       (writer.add_rope_freq_base, 10000.0), (writer.add_layer_norm_rms_eps, 1e-5),
                       (writer.add_file_type, LlamaFileType.MOSTLY_Q4_K_M), (writer.add_vocab_size, 512),
                       (writer.add_rope_dimension_count, D // N_HEADS), (writer.add_quantization_version, 2)):
        add(value)
    _copy_vocabulary(writer)
    worst: dict[str, float] = {}
    for name, (w, qtype) in weights(np.random.default_rng(SEED)).items():
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            w = permute(w, N_HEADS if "attn_q" in name else N_KV)
        if qtype == Q.F32:
            writer.add_tensor(name, w)
            continue
        blocks = ENCODERS[qtype](w)
        error = float(np.abs(dequantize(blocks, qtype) - w).max())
        worst[qtype.name] = max(worst.get(qtype.name, 0.0), error)
        writer.add_tensor(name, blocks, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {out} ({out.stat().st_size:,} bytes); largest |w - dequantised|: "
          + ", ".join(f"{k} {v:.4f}" for k, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
