"""nanoGPT checkpoints (Karpathy's ``train.py`` ``ckpt.pt``), translated to our GPT.

A ``ckpt.pt`` is a dict with ``model`` (the state dict), ``model_args`` (n_layer, n_head, n_embd,
block_size, bias, vocab_size), ``optimizer``, ``iter_num``, ``best_val_loss`` and ``config``. A
bare nanoGPT state dict opens too, with n_heads supplied by the caller.

nanoGPT's layout is ours (pre-LayerNorm, exact GELU, lm_head tied to wte); the names differ and
``c_attn`` holds W_Q, W_K and W_V stacked by rows (each with heads as contiguous row groups,
as ours). Keys of a ``torch.compile``'d model start with ``_orig_mod.``, of a DDP-wrapped one with
``module.``; older checkpoints carry each block's 4-D causal-mask buffer ``attn.bias``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.formats.base import CheckpointError, NotThisFormat, OpenOptions, Source, is_file, run_facts
from model.formats.common import (
    Converted, Keys, check_n_heads, first_keys, foreign_object, make_config, opening, resolve_n_heads, scalars,
    strip_prefixes,
)
from model.formats.opening import Opening
from model.formats.pickled.safe_pickle import load_restricted
from model.core.plain import short_repr
from model.formats.vocab import (
    GPT2_PADDED_ROWS, GPT2_VOCAB_SIZE, find_gpt2_tokenizer, gpt2_search_dirs, tokenizer_from_meta,
)

FORMAT = "nanogpt"
DESCRIPTION = "nanoGPT ckpt.pt (or its bare state_dict)"
_WTE = "transformer.wte.weight"


def recognise(path: Path, obj: Any) -> tuple[dict, dict | None, dict] | None:
    """(state dict, model_args or None, run facts) when ``obj`` is nanoGPT's, else None.

    The run facts are ``config`` (train.py's settings) plus ``iter_num`` and ``best_val_loss``;
    they and model_args keep only their plain values (see :func:`~model.formats.common.scalars`).
    """
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("model"), dict):
        state = strip_prefixes(path, obj["model"])
        if _WTE in state:
            args = scalars(obj["model_args"]) if isinstance(obj.get("model_args"), dict) else None
            run = scalars(obj.get("config"))
            run.update(scalars({k: obj[k] for k in ("iter_num", "best_val_loss") if k in obj}))
            return state, args, run
    if all(isinstance(k, str) for k in obj):
        state = strip_prefixes(path, obj)
        if _WTE in state:
            return state, None, {}
    return None


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Read a nanoGPT checkpoint (or bare state dict) as our model, asking for n_heads (a bare state
    dict) and the vocabulary (no meta.pkl found) where the file cannot tell.

    Raises
    ------
    NotThisFormat
        When the file holds no nanoGPT state dict.
    CheckpointError
        As :func:`model.checkpoint.load_any`.
    """
    obj = foreign_object(source)
    found = recognise(source.path, obj)
    if found is None:
        raise NotThisFormat(first_keys(obj))
    return opening(source, convert(source.path, *found, n_heads=options.n_heads), options)


def _drop_mask_buffers(state: dict[str, Any]) -> dict[str, Any]:
    """Without the 4-D ``attn.bias`` causal masks (a Linear's bias is 1-D and stays)."""
    return {
        k: v for k, v in state.items()
        if not (k.endswith(".attn.bias") and isinstance(v, torch.Tensor) and v.dim() == 4)
    }


def _agree(path: Path, args: dict | None, name: str, value: Any) -> None:
    if args is not None and name in args and args[name] != value:
        raise CheckpointError(
            f"{path.name}: model_args says {name}={short_repr(args[name])} but the weights say {value!r}"
        )


def _map_block(keys: Keys, i: int, d: int, d_mlp: int, bias: bool, out: dict) -> None:
    """Our blocks.i.* from nanoGPT's transformer.h.i.*."""
    src, dst = f"transformer.h.{i}.", f"blocks.{i}."
    pairs = [("ln_1", "ln1", (d,)), ("ln_2", "ln2", (d,))]
    for a, b, shape in pairs:
        out[dst + b + ".weight"] = keys.take(src + a + ".weight", shape)
        if bias:
            out[dst + b + ".bias"] = keys.take(src + a + ".bias", shape)
    w = keys.take(src + "attn.c_attn.weight", (3 * d, d))  # rows: W_Q, then W_K, then W_V
    b = keys.take(src + "attn.c_attn.bias", (3 * d,)) if bias else None
    for j, name in enumerate(("W_Q", "W_K", "W_V")):
        out[f"{dst}attn.{name}.weight"] = w[j * d:(j + 1) * d]  # (d_model, d_model)
        if bias:
            out[f"{dst}attn.{name}.bias"] = b[j * d:(j + 1) * d]
    linears = [("attn.c_proj", "attn.W_O", (d, d)), ("mlp.c_fc", "mlp.fc_in", (d_mlp, d)),
               ("mlp.c_proj", "mlp.fc_out", (d, d_mlp))]
    keys.take_linears(out, src, dst, linears, bias)


def convert(path: Path, state: dict, args: dict | None, run: dict, n_heads: int | None) -> Converted:
    """Translate a nanoGPT state dict (prefixes already stripped) to our config and names.

    A bare state dict without ``n_heads`` gets the proposed number and the question
    (``heads_question``).

    Raises
    ------
    CheckpointError
        On missing, misshapen or unexpected tensors, or model_args that contradict the weights.
    """
    keys = Keys(path, "nanoGPT", _drop_mask_buffers(state))
    wte = keys.take_matrix(_WTE)
    vocab, d = wte.shape
    ctx = keys.rows("transformer.wpe.weight")
    wpe = keys.take("transformer.wpe.weight", (ctx, d))
    n_layers = keys.layers("transformer.h")
    bias = keys.has("transformer.h.0.attn.c_attn.bias")
    d_mlp = keys.rows("transformer.h.0.mlp.c_fc.weight")
    for name, value in (("vocab_size", vocab), ("n_embd", d), ("block_size", ctx),
                        ("n_layer", n_layers), ("bias", bias)):
        _agree(path, args, name, value)
    question = None
    if args is not None and "n_head" in args:
        heads = check_n_heads(path, args["n_head"], d, "model_args")
    else:
        heads, question = resolve_n_heads(path, d, n_heads, "This nanoGPT state_dict has no model_args.")
    out = {"tok_emb.weight": wte, "pos_emb.weight": wpe}
    for i in range(n_layers):
        _map_block(keys, i, d, d_mlp, bias, out)
    out["ln_f.weight"] = keys.take("transformer.ln_f.weight", (d,))
    if bias:
        out["ln_f.bias"] = keys.take("transformer.ln_f.bias", (d,))
    lm_head = keys.take_opt("lm_head.weight", (vocab, d))
    tied = lm_head is None or (lm_head.dtype == wte.dtype and torch.equal(lm_head, wte))
    if not tied:
        out["unembed.weight"] = lm_head
    keys.finish()
    config = make_config(
        path, vocab_size=vocab, context_length=ctx, d_model=d, n_heads=heads, n_layers=n_layers,
        d_mlp=d_mlp, qkv_bias=bias, o_bias=bias, mlp_bias=bias, norm_bias=bias, gelu="exact", norm_eps=1e-5,
        tied_unembed=tied,
    )
    return Converted(FORMAT, config, out, _training(run, path),
                     find_tokenizer=lambda: find_tokenizer(path, run, vocab), heads_question=question)


def _training(run: dict, path: Path) -> dict[str, Any]:
    """JSON-ready facts: steps (iter_num), val_loss (best_val_loss, nats per token), dataset."""
    return {"source": "nanoGPT", "file": path.name,
            **run_facts(run, (("steps", "iter_num", int), ("val_loss", "best_val_loss", float),
                              ("dataset", "dataset", str)))}


def meta_candidates(path: Path, run: dict) -> list[Path]:
    """Where nanoGPT keeps the vocabulary: beside the checkpoint, then data/<dataset>/meta.pkl."""
    folder = path.resolve().parent
    places = [folder / "meta.pkl"]
    dataset = run.get("dataset")
    if isinstance(dataset, str) and dataset not in ("", ".", "..") and Path(dataset).name == dataset:
        for base in (folder, *list(folder.parents)[:2]):
            places.append(base / "data" / dataset / "meta.pkl")
    return places


def find_tokenizer(path: Path, run: dict, vocab: int):
    """(tokenizer or None, places searched): a meta.pkl, else GPT-2's for 50,257 / 50,304 rows."""
    places = meta_candidates(path, run)
    for meta_path in places:
        if is_file(meta_path):
            return tokenizer_from_meta(meta_path, load_restricted(meta_path)), places
    if vocab in (GPT2_VOCAB_SIZE, GPT2_PADDED_ROWS):
        return find_gpt2_tokenizer(), places + gpt2_search_dirs()
    return None, places
