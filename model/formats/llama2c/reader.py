"""llama2.c's files (Karpathy's Llama 2 in one file of C): ``model.bin`` and ``ckpt.pt``.

- ``model.bin``, version 0 (``export.py``'s ``legacy_export``, what ``train.py`` writes): seven
  int32 ``dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len`` (a negative
  vocab_size: the classifier is not the embedding and comes last), then float32 tensors grouped
  by kind across layers: the embedding, all attention_norm, all wq, wk, wv, wo, all ffn_norm, all
  w1, w2, w3, the final norm, the RoPE tables freqs_cos and freqs_sin (max_seq_len x head_size/2
  each; ``run.c`` skips them and so do we), the classifier. No magic number: a file is one when
  its header is plausible and its size is exactly what the header implies.
- ``model.bin``, version 1 (``version1_export``): uint32 magic ``0x616b3432`` ("ak42"), int32
  version 1, the seven fields (vocab_size positive), a uint8 shared-classifier flag, zeros up to
  256 bytes; then float32: all attention_norm, all ffn_norm, the final norm, the embedding, all wq,
  wk, wv, wo, w1, w2, w3, the classifier when not shared. Version 2 (int8 Q8_0) is refused.
- ``ckpt.pt`` (``train.py``): ``model`` (``model.py``'s state dict, ``_orig_mod.`` prefixes from
  ``torch.compile``; ``output.weight`` shares ``tok_embeddings.weight``'s storage when tied),
  ``model_args``, ``optimizer``, ``iter_num``, ``best_val_loss`` (a 0-d tensor), ``config``. A bare
  ``model.py`` state dict is refused with a message: it holds neither n_heads nor the context
  length. Old model.py (no flash attention) also saved a causal-mask buffer per layer: dropped.
- A folder holding one of these (``train.py``'s ``out/``): its ``ckpt.pt`` (which has the training
  facts), else its ``model.bin``.

The model (``model.py``, ``run.c``): pre-RMSNorm (eps 1e-5) blocks, RoPE on interleaved pairs
(2j, 2j+1) with θ = 10000, grouped-query attention (query head h reads key/value head
h // (n_heads / n_kv_heads)), a SwiGLU MLP w2(silu(w1 x) ⊙ w3 x), no biases. All files are
little-endian. :mod:`model.formats.llama2c.bin` reads the binary files; the tokenizer is a
``tokenizer.bin`` (:mod:`model.formats.llama2c.vocab`).
"""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path
from typing import Any

import torch

from model.formats.base import CheckpointError, NotThisFormat, OpenOptions, Source, fail, run_facts
from model.formats.common import Converted, Keys, check_n_heads, first_keys, make_config, opening, scalars, strip_prefixes
from model.formats.llama2c.bin import EMB, BinHeader, read_bin, read_header
from model.formats.llama2c.vocab import find_llama2c_tokenizer
from model.formats.opening import Opening
from model.formats.pickled.safe_pickle import DATA_PKL_MAX_BYTES
from model.core.plain import short_repr

FORMAT = "llama2.c"
DESCRIPTION = "llama2.c model.bin (version 0 or 1), ckpt.pt or its folder"
NORM_EPS = 1e-5  # model.py's ModelArgs default; run.c's rmsnorm hard-codes it
ROPE_THETA = 10000.0  # model.py's precompute_freqs_cis default; run.c hard-codes it
MAX_FOLDER_FILES = 64  # files of a folder looked at for a model
_WQ = "layers.0.attention.wq.weight"
# Our names for model.py's per-layer tensors (the MLP: fc_gate = w1, fc_in = w3, fc_out = w2).
LAYER_NAMES = {"attention_norm": "ln1", "attention.wq": "attn.W_Q", "attention.wk": "attn.W_K",
               "attention.wv": "attn.W_V", "attention.wo": "attn.W_O", "ffn_norm": "ln2",
               "feed_forward.w1": "mlp.fc_gate", "feed_forward.w2": "mlp.fc_out", "feed_forward.w3": "mlp.fc_in"}


def _training(path: Path, extra: dict[str, Any]) -> dict[str, Any]:
    return {"source": "llama2.c", "file": path.name, **extra}


def _bin_converted(path: Path, header: BinHeader) -> Converted:
    state = read_bin(path, header)
    if header.shared:
        state["output.weight"] = state[EMB]
    args = {"n_heads": header.n_heads, "n_kv_heads": header.n_kv_heads, "max_seq_len": header.max_seq_len}
    return convert(path, state, args, _training(path, {"export": f"model.bin version {header.version}"}))


def recognise(path: Path, obj: Any) -> tuple[dict, dict | None, dict] | None:
    """(state dict, model_args or None, train.py's facts) when ``obj`` is llama2.c's, else None.

    model_args is None for a bare state dict (which cannot be opened: see :func:`read`)."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("model"), dict):
        state = strip_prefixes(path, obj["model"])
        if EMB in state and _WQ in state:
            args = scalars(obj["model_args"]) if isinstance(obj.get("model_args"), dict) else None
            run = scalars(obj.get("config"))
            run.update(scalars({k: obj[k] for k in ("iter_num", "best_val_loss") if k in obj}))
            return state, args, run
    if all(isinstance(k, str) for k in obj):
        state = strip_prefixes(path, obj)
        if EMB in state and _WQ in state:
            return state, None, {}
    return None


def _run_facts(path: Path, run: dict) -> dict[str, Any]:
    """steps (iter_num) and val_loss (best_val_loss: train.py saves when it sets it, so it is the
    saved weights' own validation loss, nats per token), vocab_source."""
    return _training(path, run_facts(run, (("steps", "iter_num", int), ("val_loss", "best_val_loss", float),
                                           ("vocab_source", "vocab_source", str))))


def _heads(path: Path, args: dict, d: int, kv_dim: int) -> tuple[int, int]:
    """(n_heads, n_kv_heads): n_heads from model_args; n_kv_heads from wk's rows (checked against
    model_args when it says)."""
    heads = check_n_heads(path, args.get("n_heads"), d, "model_args")
    head = d // heads
    kv = kv_dim // head
    if kv_dim % head or kv < 1 or heads % kv:
        raise CheckpointError(f"{path.name}: wk has {kv_dim} rows, not a whole number of key/value heads of "
                              f"width {head} that divides {heads} heads")
    if args.get("n_kv_heads") not in (None, kv):
        raise CheckpointError(f"{path.name}: model_args says n_kv_heads={short_repr(args['n_kv_heads'])} but wk says {kv}")
    return heads, kv


def _check_args(path: Path, args: dict, found: dict[str, int]) -> None:
    """model_args must agree with the weights (hidden_dim as FeedForward computes it when absent)."""
    expect = dict(args)
    if expect.get("hidden_dim") is None and isinstance(expect.get("multiple_of"), int) and isinstance(expect.get("dim"), int):
        m, hidden = expect["multiple_of"], 8 * expect["dim"] // 3  # FeedForward's int(2 * 4 * dim / 3), in integers
        expect["hidden_dim"] = m * ((hidden + m - 1) // m) if m > 0 else None
    for name, value in found.items():
        if expect.get(name) is not None and expect[name] != value:
            raise CheckpointError(f"{path.name}: model_args says {name}={short_repr(expect[name])} but the weights say {value}")


def convert(path: Path, state: dict, args: dict, training: dict) -> Converted:
    """Translate a model.py state dict (prefixes stripped) to our config and names.

    ``args`` is ``model_args`` (ckpt.pt) or what a model.bin header says: n_heads and
    max_seq_len are needed; dim, n_layers, vocab_size, n_kv_heads, hidden_dim (or multiple_of)
    are checked against the weights.

    Raises
    ------
    CheckpointError
        On missing, misshapen or unexpected tensors, or model_args that contradict the weights.
    """
    state = {k: v for k, v in state.items()  # old model.py without flash attention kept a causal-mask buffer
             if not (k.endswith(".attention.mask") and isinstance(v, torch.Tensor) and v.dim() == 4)}
    keys = Keys(path, "llama2.c", state)
    emb = keys.take_matrix(EMB)
    vocab, d = emb.shape
    n_layers = keys.layers("layers")
    kv_dim, hidden = keys.rows("layers.0.attention.wk.weight"), keys.rows("layers.0.feed_forward.w1.weight")
    _check_args(path, args, {"dim": d, "n_layers": n_layers, "vocab_size": vocab, "hidden_dim": hidden})
    heads, kv_heads = _heads(path, args, d, kv_dim)
    shapes = {"attention_norm": (d,), "attention.wq": (d, d), "attention.wk": (kv_dim, d), "attention.wv": (kv_dim, d),
              "attention.wo": (d, d), "ffn_norm": (d,), "feed_forward.w1": (hidden, d),
              "feed_forward.w2": (d, hidden), "feed_forward.w3": (hidden, d)}
    out = {"tok_emb.weight": emb, "ln_f.weight": keys.take("norm.weight", (d,))}
    for i in range(n_layers):
        for theirs, ours in LAYER_NAMES.items():
            out[f"blocks.{i}.{ours}.weight"] = keys.take(f"layers.{i}.{theirs}.weight", shapes[theirs])
    output = keys.take_opt("output.weight", (vocab, d))
    tied = output is None or output is emb or (output.dtype == emb.dtype and torch.equal(output, emb))  # export.py's test
    if not tied:
        out["unembed.weight"] = output
    keys.finish()
    context = args.get("max_seq_len")
    if not isinstance(context, int) or isinstance(context, bool) or context < 1:
        raise CheckpointError(f"{path.name}: no max_seq_len (context length) in model_args")
    eps = args.get("norm_eps", NORM_EPS)
    config = make_config(
        path, vocab_size=vocab, context_length=context, d_model=d, n_heads=heads, n_kv_heads=kv_heads,
        n_layers=n_layers, d_mlp=hidden, positional="rope", rope_theta=ROPE_THETA, rope_pairs="interleaved",
        norm="rmsnorm", norm_eps=eps, norm_bias=False, mlp="swiglu", qkv_bias=False, o_bias=False,
        mlp_bias=False, tied_unembed=tied,
    )
    return Converted(FORMAT, config, out, training, find_tokenizer=lambda: find_llama2c_tokenizer(path, vocab))


def _inspect_torch(source: Source, options: OpenOptions) -> Opening:
    obj = source.torch_object
    found = recognise(source.path, obj)
    if found is None:
        raise NotThisFormat(first_keys(obj))
    state, args, run = found
    if args is None:
        raise fail(source.path, "a llama2.c model.py state_dict without model_args: the number of heads and "
                                "the context length are not in it. Open the ckpt.pt that train.py writes "
                                "(or the model.bin exported from it).")
    return opening(source, convert(source.path, state, args, _run_facts(source.path, run)), options)


def _pickle_mentions(path: Path, *names: str) -> bool:
    """Whether a torch file's pickle holds each of ``names`` as a string: read from the zip's
    ``data.pkl`` without the tensors, so that a folder's other big torch files are not loaded.
    A legacy (non-zip) torch file can only be told by loading it: True."""
    try:
        if not zipfile.is_zipfile(path):
            return True
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if i.filename.endswith("data.pkl")]
            if any(i.file_size > DATA_PKL_MAX_BYTES for i in infos):
                return False  # not a checkpoint's pickle (torch_load refuses it too)
            data = b"".join(zf.read(i) for i in infos)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError):  # a damaged zip
        return False
    return all(name.encode() in data for name in names)


def _inspect_folder(source: Source, options: OpenOptions) -> Opening:
    """The llama2.c model in a folder: its one ckpt.pt-style file, else its one model.bin.

    The checkpoint's ``path`` is the folder (what was opened, and what Reload opens again); its
    training facts name the file (``file``)."""
    try:
        files = sorted(p for p in source.path.iterdir() if p.is_file())[:MAX_FOLDER_FILES]
    except OSError as exc:
        raise fail(source.path, f"cannot list the folder ({exc.strerror or exc})") from None
    bins, ckpts = [], []
    for path in files:
        try:
            sub = Source(path)
            if sub.container in ("torch-zip", "pickle") and _pickle_mentions(path, EMB, "model_args"):
                if recognise(path, sub.torch_object) is not None:
                    ckpts.append(sub)
            elif sub.container in ("unknown", "pickle") and read_header(path) is not None:
                bins.append(sub)
        except CheckpointError:
            continue  # a file of another kind, or a bad one: the folder is judged by what it holds
    for found in (ckpts, bins):
        if len(found) > 1:
            names = ", ".join(s.path.name for s in found)
            raise fail(source.path, f"the folder holds several llama2.c models ({names}): open one of them")
        if found:
            return inspect(found[0], options).wrapped(lambda load: dataclasses.replace(load(), path=source.path))
    raise NotThisFormat(f"{source.path.name}: no llama2.c ckpt.pt or model.bin in the folder")


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Read a llama2.c ``model.bin`` (version 0 or 1), ``ckpt.pt``, or a folder with one, asking for
    the vocabulary when no ``tokenizer.bin`` is found.

    Raises
    ------
    NotThisFormat
        When the file is none of them.
    CheckpointError
        As :func:`model.checkpoint.load_any`; a version-2 (int8) file, and a model.bin whose size
        is not what its header implies, are CheckpointErrors naming the problem.
    """
    if source.container == "folder":
        return _inspect_folder(source, options)
    if source.container in ("unknown", "pickle"):  # a model.bin starting 0x80 0x02..0x05 sniffs as a pickle
        header = read_header(source.path)
        if header is not None:
            return opening(source, _bin_converted(source.path, header), options)
    if source.container in ("torch-zip", "pickle"):
        return _inspect_torch(source, options)
    raise NotThisFormat(f"{source.path.name}: neither a llama2.c model.bin header nor a torch file")
