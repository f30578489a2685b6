"""LLMs-from-scratch checkpoints (Raschka, *Build a Large Language Model (From Scratch)*, ch. 4-5).

``model.pth`` is the ``GPTModel``'s bare state dict; ``model_and_optimizer.pth`` holds it under
``model_state_dict``. Keys saved from a ``torch.compile``'d model start with ``_orig_mod.`` (from a
DDP-wrapped one, ``module.``): read as the plain names. Its layout is ours (pre-LayerNorm with scale/shift, eps 1e-5, heads as
contiguous column groups) with the tanh-approximate GELU and an untied ``out_head``. The file
holds no config: vocab_size, d_model, context_length, n_layers and qkv_bias follow from the
shapes and keys; n_heads cannot, and comes from a sidecar JSON in the book's key names (beside
the file: ``<stem>.json`` or ``<stem>_config.json``), from the caller, or from the user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model.formats.base import CheckpointError, NotThisFormat, OpenOptions, Source, is_file
from model.formats.common import (
    Converted, Keys, check_n_heads, first_keys, foreign_object, make_config, opening, resolve_n_heads,
    strip_prefixes,
)
from model.formats.opening import Opening, Question
from model.formats.vocab import (
    GPT2_VOCAB_SIZE, find_gpt2_tokenizer, find_word_vocab, gpt2_search_dirs, read_json,
    tokenizer_from_path,
)
from model.core.plain import short_repr

FORMAT = "llms-from-scratch"
DESCRIPTION = "LLMs-from-scratch model.pth / model_and_optimizer.pth"
_ATT = {"W_query": "W_Q", "W_key": "W_K", "W_value": "W_V"}


def recognise(path: Path, obj: Any) -> dict | None:
    """The state dict (``_orig_mod.`` / ``module.`` prefixes removed) when ``obj`` is an
    LLMs-from-scratch ``GPTModel``'s (bare or wrapped), else None."""
    if isinstance(obj, dict) and isinstance(obj.get("model_state_dict"), dict):
        obj = obj["model_state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        return None
    state = strip_prefixes(path, obj)
    if "tok_emb.weight" in state and any(k.startswith("trf_blocks.") for k in state):
        return state
    return None


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Read an LLMs-from-scratch ``GPTModel`` state dict as our model, asking for n_heads (no sidecar
    config) and the vocabulary (no word vocabulary beside it, not GPT-2's size) where it cannot tell.

    Raises
    ------
    NotThisFormat
        When the file holds no such state dict.
    CheckpointError
        As :func:`model.checkpoint.load_any`.
    """
    obj = foreign_object(source)
    state = recognise(source.path, obj)
    if state is None:
        raise NotThisFormat(first_keys(obj))
    return opening(source, convert(source.path, state, options.n_heads), options)


def sidecar_paths(path: Path) -> list[Path]:
    """Where a config JSON for ``path`` may be: ``<stem>.json``, ``<stem>_config.json``."""
    return [path.with_suffix(".json"), path.with_name(path.stem + "_config.json")]


def read_sidecar(path: Path) -> tuple[Path, dict] | None:
    """(file, config dict) of the first sidecar that holds the book's ``n_heads``, or None."""
    for side in sidecar_paths(path):
        data = read_json(side) if is_file(side) else None
        if isinstance(data, dict) and "n_heads" in data:
            return side, data
    return None


def _check_sidecar(path: Path, side: Path, cfg: dict, facts: dict[str, Any]) -> None:
    """The sidecar's sizes must be the weights' sizes."""
    for key, value in facts.items():
        if key in cfg and cfg[key] != value:
            raise CheckpointError(
                f"{path.name}: {side.name} says {key}={short_repr(cfg[key])} but the weights say {value!r}"
            )


def _resolve_n_heads(path: Path, d: int, facts: dict[str, Any], n_heads: int | None) -> tuple[int, Question | None]:
    """The sidecar's heads, else the caller's, else the proposed number with the question."""
    side = read_sidecar(path)
    if side is not None:
        _check_sidecar(path, side[0], side[1], facts)
        return check_n_heads(path, side[1]["n_heads"], d, side[0].name), None
    names = " or ".join(p.name for p in sidecar_paths(path))
    return resolve_n_heads(path, d, n_heads, f"No sidecar config ({names}) was found beside it.")


def _map_block(keys: Keys, i: int, d: int, d_mlp: int, qkv_bias: bool, bias: bool, out: dict) -> None:
    """Our blocks.i.* from the book's trf_blocks.i.*."""
    src, dst = f"trf_blocks.{i}.", f"blocks.{i}."
    keys.take_opt(src + "att.mask")  # the causal-mask buffer; ours is rebuilt
    for theirs, ours in _ATT.items():
        out[f"{dst}attn.{ours}.weight"] = keys.take(f"{src}att.{theirs}.weight", (d, d))
        if qkv_bias:
            out[f"{dst}attn.{ours}.bias"] = keys.take(f"{src}att.{theirs}.bias", (d,))
    linears = [("att.out_proj", "attn.W_O", (d, d)), ("ff.layers.0", "mlp.fc_in", (d_mlp, d)),
               ("ff.layers.2", "mlp.fc_out", (d, d_mlp))]
    keys.take_linears(out, src, dst, linears, bias)
    for theirs, ours in (("norm1", "ln1"), ("norm2", "ln2")):
        out[f"{dst}{ours}.weight"] = keys.take(f"{src}{theirs}.scale", (d,))
        out[f"{dst}{ours}.bias"] = keys.take(f"{src}{theirs}.shift", (d,))


def convert(path: Path, state: dict, n_heads: int | None) -> Converted:
    """Translate the book's ``GPTModel`` state dict to our config and names.

    When no sidecar says n_heads and ``n_heads`` is None, the config has the proposed number and
    the result the question (``heads_question``).

    Raises
    ------
    CheckpointError
        On missing, misshapen or unexpected tensors, an ``out_head`` that is not
        vocab_size x d_model (a classifier head), or a sidecar that contradicts the weights.
    """
    keys = Keys(path, "LLMs-from-scratch", state)
    tok = keys.take_matrix("tok_emb.weight")
    vocab, d = tok.shape
    ctx = keys.rows("pos_emb.weight")
    pos = keys.take("pos_emb.weight", (ctx, d))
    n_layers = keys.layers("trf_blocks")
    qkv_bias = keys.has("trf_blocks.0.att.W_query.bias")
    bias = keys.has("trf_blocks.0.att.out_proj.bias")
    d_mlp = keys.rows("trf_blocks.0.ff.layers.0.weight")
    head = keys.peek("out_head.weight")
    if tuple(head.shape) != (vocab, d):
        raise CheckpointError(
            f"{path.name}: out_head has shape {tuple(head.shape)} but tok_emb is {(vocab, d)}; only "
            "a language-model head (vocab_size x emb_dim) is supported, not a classifier head"
        )
    if keys.has("out_head.bias"):
        raise CheckpointError(f"{path.name}: out_head has a bias, which this app's model does not have")
    facts = {"vocab_size": vocab, "emb_dim": d, "context_length": ctx, "n_layers": n_layers,
             "qkv_bias": qkv_bias}
    heads, question = _resolve_n_heads(path, d, facts, n_heads)
    out = {"tok_emb.weight": tok, "pos_emb.weight": pos}
    for i in range(n_layers):
        _map_block(keys, i, d, d_mlp, qkv_bias, bias, out)
    out["ln_f.weight"] = keys.take("final_norm.scale", (d,))
    out["ln_f.bias"] = keys.take("final_norm.shift", (d,))
    out["unembed.weight"] = keys.take("out_head.weight")
    keys.finish()
    config = make_config(
        path, vocab_size=vocab, context_length=ctx, d_model=d, n_heads=heads, n_layers=n_layers,
        d_mlp=d_mlp, qkv_bias=qkv_bias, o_bias=bias, mlp_bias=bias, norm_bias=True, gelu="tanh", norm_eps=1e-5,
        tied_unembed=False,
    )
    training = {"source": "LLMs-from-scratch", "file": path.name}
    return Converted(FORMAT, config, out, training, find_tokenizer=lambda: find_tokenizer(path, vocab),
                     heads_question=question)


def find_tokenizer(path: Path, vocab: int):
    """(tokenizer or None, places searched): a word-vocabulary JSON beside the file whose
    ``itos`` has ``vocab`` entries, else GPT-2's BPE for 50,257 rows."""
    folder = path.resolve().parent
    places = [folder / "*.json (a word vocabulary with an 'itos' list)"]
    found = find_word_vocab(folder, vocab)
    if found is not None:
        return tokenizer_from_path(found), places
    if vocab == GPT2_VOCAB_SIZE:
        return find_gpt2_tokenizer(), places + gpt2_search_dirs()
    return None, places
