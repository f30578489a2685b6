"""Opening a Hugging Face model folder: its ``config.json`` picks the family, then weights and tokenizer.

The families: GPT-2, GPT-Neo (:mod:`~model.formats.hf.gpt`); Llama, Mistral, Qwen2, Qwen3, SmolLM3,
OLMo-2 (:mod:`~model.formats.hf.llama`); Gemma 2 and 3 (:mod:`~model.formats.hf.gemma`); GPT-NeoX /
Pythia and Phi (:mod:`~model.formats.hf.neox`).

A folder (or its ``config.json``, or one of its weight files) is a Hugging Face model when its
``config.json`` has a ``model_type`` or ``architectures``. The family comes from ``model_type``
(:data:`FAMILIES`), or, for another model_type, from an architecture whose layout we build
(:data:`ARCHITECTURES`, e.g. a ``LlamaForCausalLM`` with its own model_type). Anything else is
refused in one message that names it and lists the families this app opens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from model.formats.base import CheckpointError, NotThisFormat, OpenOptions, Source, broken_link, dangling
from model.formats.common import Converted, Keys, opening, strip_prefixes
from model.formats.opening import Opening
from model.formats.hf import gemma, gpt, llama, neox
from model.formats.hf.fields import HFConfig, drop_buffers
from model.formats.hf.tokenizer import folder_tokenizer
from model.formats.hf.weights import WEIGHT_FILES, described, is_weight_file, read_weights
from model.core.plain import clip, read_json_file, short_repr

CONFIG_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Family:
    """One architecture family: our format name, its converter and the buffers its files may carry."""

    format: str
    convert: Callable
    buffers: tuple[str, ...]
    example: str


FAMILIES = {
    "gpt2": Family("hf-gpt2", gpt.convert_gpt2, gpt.GPT2_BUFFERS, "GPT2LMHeadModel"),
    "gpt_neo": Family("hf-gpt-neo", gpt.convert_gpt_neo, gpt.GPT_NEO_BUFFERS, "GPTNeoForCausalLM: the TinyStories models"),
    "gpt_neox": Family("hf-gpt-neox", neox.convert_gpt_neox, neox.NEOX_BUFFERS, "GPTNeoXForCausalLM: Pythia"),
    "llama": Family("hf-llama", llama.convert_llama, llama.LLAMA_BUFFERS, "LlamaForCausalLM: Llama 2, TinyLlama, SmolLM2"),
    "mistral": Family("hf-mistral", llama.convert_llama, llama.LLAMA_BUFFERS, "MistralForCausalLM"),
    "qwen2": Family("hf-qwen2", llama.convert_qwen, llama.LLAMA_BUFFERS, "Qwen2ForCausalLM: Qwen2, Qwen2.5"),
    "qwen3": Family("hf-qwen3", llama.convert_qwen, llama.LLAMA_BUFFERS, "Qwen3ForCausalLM"),
    "gemma2": Family("hf-gemma2", gemma.convert_gemma2, llama.LLAMA_BUFFERS, "Gemma2ForCausalLM"),
    "gemma3_text": Family("hf-gemma3", gemma.convert_gemma3_text, llama.LLAMA_BUFFERS,
                          "Gemma3ForCausalLM: Gemma-3-270M, 1B"),
    "gemma3": Family("hf-gemma3", gemma.convert_gemma3, llama.LLAMA_BUFFERS,
                     "Gemma3ForConditionalGeneration: Gemma 3 4B and up, its language model"),
    "phi": Family("hf-phi", neox.convert_phi, neox.PHI_BUFFERS, "PhiForCausalLM: phi-1.5, phi-2"),
    "olmo2": Family("hf-olmo2", llama.convert_olmo2, llama.LLAMA_BUFFERS, "Olmo2ForCausalLM"),
    "smollm3": Family("hf-smollm3", llama.convert_smollm3, llama.LLAMA_BUFFERS, "SmolLM3ForCausalLM"),
}
#: Architectures (``config.json``'s ``architectures``) whose layout a family builds, for other model_types.
ARCHITECTURES = {"GPT2LMHeadModel": "gpt2", "GPTNeoForCausalLM": "gpt_neo", "GPTNeoXForCausalLM": "gpt_neox",
                 "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
                 "Qwen3ForCausalLM": "qwen3", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
                 "Gemma3ForConditionalGeneration": "gemma3",
                 "PhiForCausalLM": "phi", "Olmo2ForCausalLM": "olmo2", "SmolLM3ForCausalLM": "smollm3"}


def families_opened() -> str:
    """The families this reader opens, for messages."""
    names = [f"{name} ({family.example})" for name, family in FAMILIES.items()]
    return ", ".join(names[:-1]) + " and " + names[-1]


def model_folder(source: Source) -> Path:
    """The model folder a source stands for: itself, or the folder of one of its weight files.

    Raises
    ------
    NotThisFormat
        When the source is a file that is not a weight file beside a ``config.json``.
    """
    if source.container == "folder":
        return source.path
    if is_weight_file(source.path.name) and (source.path.parent / "config.json").is_file():
        return source.path.parent
    raise NotThisFormat(f"{source.path.name}: not a Hugging Face model folder, its config.json or one of "
                        f"its weight files ({', '.join(WEIGHT_FILES)})")


def read_config(folder: Path) -> HFConfig:
    """The folder's ``config.json``.

    Raises
    ------
    NotThisFormat
        When there is none, or it names no model_type and no architectures (not a Hugging Face model).
    CheckpointError
        When it cannot be read as a JSON object.
    """
    path = folder / "config.json"
    if dangling(path):
        raise broken_link(path)
    if not path.is_file():
        try:
            files = sorted(p.name for p in folder.iterdir())[:8]
        except OSError:
            files = []
        raise NotThisFormat(f"{folder.name} is a folder without a config.json (a Hugging Face model folder has "
                            f"one); it holds: {', '.join(files) or 'nothing'}")
    try:
        data = read_json_file(path, CONFIG_MAX_BYTES)
    except ValueError as exc:
        raise CheckpointError(f"{folder.name}: config.json is not readable JSON: {clip(str(exc))}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{folder.name}: config.json holds a {type(data).__name__}, not an object")
    config = HFConfig(folder, data)
    if not config.model_type and not config.architectures:
        raise NotThisFormat(f"{folder.name}: its config.json names no model_type (not a Hugging Face model config)")
    return config


def family_of(config: HFConfig) -> Family:
    """The family of a config: by model_type, else by a known architecture.

    Raises
    ------
    CheckpointError
        Naming the model_type and architectures, and listing the families this app opens.
    """
    if config.model_type in FAMILIES:
        return FAMILIES[config.model_type]
    for architecture in config.architectures:
        if architecture in ARCHITECTURES:
            return FAMILIES[ARCHITECTURES[architecture]]
    names = f"model_type {short_repr(config.model_type)}" + (f" ({clip(', '.join(config.architectures), 200)})" if config.architectures else "")
    raise CheckpointError(f"{config.folder.name}: {names} is not a model family this app opens; "
                          f"it opens Hugging Face {families_opened()}.")


#: A Hub repository id (``owner/name`` or a legacy ``name``), as huggingface_hub's validate_repo_id allows it.
REPO_ID = re.compile(r"(?!.*(--|\.\.))[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def repo_id_of(name_or_path: Any) -> str | None:
    """config.json's ``_name_or_path`` when it is a Hub repository id (``roneneldan/TinyStories-1M``);
    None for a local path (``/home/alice/models/TinyStories-1M``, ``./out``, ``C:\\models\\x``),
    which names someone's disk and is neither shown nor saved."""
    if not isinstance(name_or_path, str) or not REPO_ID.fullmatch(name_or_path) or name_or_path.endswith((".", "-")):
        return None
    return name_or_path


def _training(config: HFConfig, family: Family, weights: dict[str, Any], notes: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready facts for the Model panel: where the model came from, and any note on it."""
    facts: dict[str, Any] = {"source": "Hugging Face", "folder": config.folder.name,
                             "model_type": config.model_type or family.format.removeprefix("hf-")}
    if config.architectures:
        facts["architectures"] = ", ".join(config.architectures)
    if repo_id_of(config.data.get("_name_or_path")):
        facts["name_or_path"] = config.data["_name_or_path"]
    if isinstance(config.data.get("transformers_version"), str) and config.data["transformers_version"]:
        facts["transformers_version"] = config.data["transformers_version"]
    return {**facts, **weights, **config.notes, **notes}


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Read a Hugging Face model folder as our model, with the folder's tokenizer (asked for when the
    folder has none).

    Raises
    ------
    NotThisFormat
        When the source is not a Hugging Face model folder (see :func:`model_folder`, :func:`read_config`).
    CheckpointError
        As :func:`model.checkpoint.load_any`; an unknown family names its model_type.
    """
    folder = model_folder(source)
    config = read_config(folder)
    family = family_of(config)
    tensors, weights = read_weights(folder)
    config.weights = described(weights)
    keys = Keys(folder, f"Hugging Face {config.model_type or family.format} ({config.weights})",
                drop_buffers(strip_prefixes(folder, tensors), family.buffers))
    gpt_config, ours, notes = family.convert(config, keys)
    conv = Converted(family.format, gpt_config, ours, _training(config, family, weights, notes),
                     find_tokenizer=lambda: folder_tokenizer(folder))
    return opening(source if source.path == folder else Source(folder), conv, options)
