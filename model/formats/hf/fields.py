"""A Hugging Face ``config.json``, read field by field: every refusal names the field and its value."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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

    def __init__(self, folder: Path, data: dict[str, Any]) -> None:
        self.folder = folder
        self.data = data

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


def drop_buffers(tensors: dict[str, Any], suffixes: tuple[str, ...]) -> dict[str, Any]:
    """Without the non-weight buffers some files carry (causal masks, RoPE's inv_freq)."""
    return {k: v for k, v in tensors.items() if not k.endswith(suffixes)}


def take_unembed(cfg: HFConfig, keys, tied_default: bool, out: dict, vocab: int, d: int) -> bool:
    """The LM head: whether it is tied to the token embedding; untied puts ``unembed.weight`` in ``out``.

    With ``tie_word_embeddings`` (default ``tied_default``) the head is the embedding table and
    any ``lm_head.weight`` in the file is not used, as in transformers (which ties them after
    loading). Without it, ``lm_head.weight`` must be there.
    """
    tied = cfg.flag("tie_word_embeddings", tied_default)
    head = keys.take_opt("lm_head.weight", (vocab, d))
    if tied:
        return True
    if head is None:
        raise cfg.error(
            "tie_word_embeddings is false but the weights have no lm_head.weight: a base model saved "
            "without its language-model head (e.g. GPT2Model or LlamaModel rather than ...ForCausalLM / "
            "...LMHeadModel) cannot predict tokens"
        )
    out["unembed.weight"] = head
    return False
