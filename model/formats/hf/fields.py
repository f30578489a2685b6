"""A Hugging Face ``config.json``, read field by field: every refusal names the field and its value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.core.config import MAX_CONTEXT_LENGTH
from model.formats.base import CheckpointError
from model.core.plain import finite_number, short_repr

_MISSING = object()


class HFConfig:
    """The values of a model folder's ``config.json``.

    Parameters
    ----------
    folder : Path
        The model folder (named in messages).
    data : dict
        ``config.json``'s object.
    """

    def __init__(self, folder: Path, data: dict[str, Any], weights: str = "the weights") -> None:
        self.folder = folder
        self.data = data
        self.weights = weights  # the weight file(s) read, named in a mismatch ("model.safetensors")
        #: Notes for the Model panel's facts, made while the folder is read (key -> sentence).
        self.notes: dict[str, str] = {}

    @property
    def model_type(self) -> str:
        value = self.data.get("model_type")
        return value if isinstance(value, str) else ""

    @property
    def architectures(self) -> list[str]:
        value = self.data.get("architectures")
        return [a for a in value if isinstance(a, str)] if isinstance(value, list) else []

    def error(self, problem: str) -> CheckpointError:
        """A CheckpointError naming the folder and its config.json."""
        return CheckpointError(f"{self.folder.name}: config.json: {problem}")

    def refuse(self, name: str, why: str) -> CheckpointError:
        """The error for a field whose value this app cannot honour: ``name = value: why``."""
        return self.error(f"{name} = {short_repr(self.data.get(name))}: {why}")

    def disagrees(self, name: str, found: Any, unit: str = "") -> CheckpointError:
        """The error for a field the weights contradict, naming the weight file they were read from:
        ``num_hidden_layers = 2: but model.safetensors has 1 blocks``."""
        return self.refuse(name, f"but {self.weights} {'have' if self.weights == 'the weights' else 'has'} "
                                 f"{found}{unit}")

    def get(self, name: str, default: Any = None) -> Any:
        """The raw value (``default`` when the field is absent or null)."""
        value = self.data.get(name)
        return default if value is None else value

    def positive_int(self, name: str, default: Any = _MISSING) -> int:
        """A whole number >= 1; ``default`` when absent or null, else an error naming the field."""
        value = self.data.get(name)
        if value is None:
            if default is _MISSING:
                raise self.error(f"{name} is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.refuse(name, "expected a whole number of at least 1")
        return value

    def number(self, name: str, default: float) -> float:
        """A finite positive number; ``default`` when absent or null."""
        value = self.data.get(name)
        if value is None:
            return default
        number = finite_number(value)
        if number is None or number <= 0:
            raise self.refuse(name, "expected a positive number")
        return number

    def flag(self, name: str, default: bool) -> bool:
        """A true/false field; ``default`` when absent or null."""
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.refuse(name, "expected true or false")
        return value

    def expect(self, name: str, allowed: tuple, why: str) -> None:
        """Refuse the field unless it is absent, null or one of ``allowed``."""
        value = self.data.get(name)
        if value is not None and value not in allowed:
            raise self.refuse(name, why)


#: Hugging Face's names of the GELU variants we build, as our GPTConfig.gelu.
GELU_NAMES = {"gelu": "exact", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}


def gelu_variant(cfg: HFConfig, name: str = "activation_function") -> str:
    """Our ``gelu`` ("exact" or "tanh") for the config's activation, or an error naming it."""
    value = cfg.get(name, "gelu_new")
    if not isinstance(value, str) or value not in GELU_NAMES:
        raise cfg.refuse(name, f"not supported (this app builds {', '.join(GELU_NAMES)})")
    return GELU_NAMES[value]


def base_prefix(keys, prefix: str, probe: str) -> str:
    """``prefix`` when the weights are stored under it (``transformer.``, ``model.``), "" when they
    are a base model's own names (``wte.weight``), else an error naming what was looked for."""
    if keys.has(prefix + probe):
        return prefix
    if keys.has(probe):
        return ""
    raise CheckpointError(f"{keys.path.name}: the weights have neither {prefix}{probe} nor {probe}")


def layer_sizes(cfg: HFConfig, keys, prefix: str, emb) -> tuple[int, int, int]:
    """(vocab_size, d_model, n_layers) from the embedding table ``emb`` (vocab, d) and the blocks
    ``prefix + "layers.N"``, each refused where the config says otherwise (naming the field)."""
    vocab, d = emb.shape
    n_layers = keys.layers(prefix + "layers")
    for name, found, what in (("vocab_size", vocab, ""), ("hidden_size", d, ""), ("num_hidden_layers", n_layers, " blocks")):
        if cfg.get(name) not in (None, found):
            raise cfg.disagrees(name, found, what)
    return vocab, d, n_layers


def context_length(cfg: HFConfig, default: int) -> int:
    """``max_position_embeddings`` (``default`` when absent), refused beyond what this app builds."""
    ctx = cfg.positive_int("max_position_embeddings", default)
    if ctx > MAX_CONTEXT_LENGTH:
        raise cfg.refuse("max_position_embeddings", f"more positions than this app builds ({MAX_CONTEXT_LENGTH:,})")
    return ctx


def mlp_width(cfg: HFConfig, keys, name: str) -> int:
    """The MLP's hidden width: the rows of the weight ``name`` (its first linear layer), refused where
    ``intermediate_size`` says otherwise."""
    d_mlp = keys.peek_matrix(name).shape[0]
    if cfg.get("intermediate_size") not in (None, d_mlp):
        raise cfg.disagrees("intermediate_size", d_mlp)
    return d_mlp


def drop_buffers(tensors: dict[str, Any], suffixes: tuple[str, ...]) -> dict[str, Any]:
    """Without the non-weight buffers some files carry (causal masks, RoPE's inv_freq)."""
    return {k: v for k, v in tensors.items() if not k.endswith(suffixes)}


def take_unembed(cfg: HFConfig, keys, tied_default: bool, out: dict, vocab: int, d: int,
                 name: str = "lm_head.weight") -> bool:
    """The LM head: whether it is tied to the token embedding (``out["tok_emb.weight"]``); untied puts
    ``unembed.weight`` in ``out``.

    With ``tie_word_embeddings`` (default ``tied_default``) the head is the embedding table, unless
    the file holds an ``lm_head.weight`` (``name``: GPT-NeoX's ``embed_out.weight``) with other
    values: that stored head is used, and a note says so (transformers, too, loads such a file
    untied: "both are present in the checkpoints with different values, so we will NOT tie them";
    cf. transformers#42612). Without it, the head must be there.
    """
    tied = cfg.flag("tie_word_embeddings", tied_default)
    head = keys.take_opt(name, (vocab, d))
    emb = out["tok_emb.weight"]
    if tied and (head is None or head is emb or torch.equal(head.to(emb.dtype), emb)):
        return True
    if tied:
        differ = float((head.double() - emb.double()).abs().max())
        cfg.notes["unembedding"] = (
            f"config.json says tie_word_embeddings ({'default' if cfg.get('tie_word_embeddings') is None else 'true'}), "
            f"but {cfg.weights} holds an {name} that differs from the token embedding (by up to "
            f"{differ:.3g}): the stored head is used, untied, as transformers does")
    if head is None:
        raise cfg.error(
            f"tie_word_embeddings is false but the weights have no {name}: a base model saved "
            "without its language-model head (e.g. GPT2Model or LlamaModel rather than ...ForCausalLM / "
            "...LMHeadModel) cannot predict tokens"
        )
    out["unembed.weight"] = head
    return False
