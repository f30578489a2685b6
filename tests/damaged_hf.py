"""The Hugging Face part of the damaged-file corpus (:mod:`damaged_files`): model folders with a
config, index or weights damaged, each with the message it must give."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from damaged_files import Damaged, damaged, hf_folder


@damaged("Hugging Face config.json nested 100,000 levels")
def _(tmp):
    folder = hf_folder(tmp)
    (folder / "config.json").write_text('{"model_type": "gpt2", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return Damaged(folder, "hf-gpt2", "config.json is not readable JSON: JSON nested deeper than 64 levels")


def hf_config(tmp: Path, family: str, key: str, value_json: str) -> Path:
    """A copy of a fixture folder whose config.json sets ``key`` to the JSON text ``value_json``."""
    folder = hf_folder(tmp, family)
    config = json.loads((folder / "config.json").read_text())
    config.pop(key, None)
    (folder / "config.json").write_text(json.dumps(config)[:-1] + f', "{key}": {value_json}}}')
    return folder


@damaged("Hugging Face activation_function that is a list")
def _(tmp):
    return Damaged(hf_config(tmp, "hf-gpt2", "activation_function", '["gelu"]'), "hf-gpt2",
                   r"config.json: activation_function = \['gelu'\]: not supported")


@damaged("Hugging Face rope_theta of 400 digits")
def _(tmp):
    folder = hf_config(tmp, "hf-llama", "rope_parameters", '{"rope_type": "default", "rope_theta": 1' + "0" * 400 + "}")
    return Damaged(folder, "hf-llama", "rope_theta = <an integer of 1,329 bits>: expected a number above 1")


@damaged("GPT-Neo window_size of 10^30")
def _(tmp):
    return Damaged(hf_config(tmp, "hf-gpt-neo", "window_size", "1" + "0" * 30), "hf-gpt-neo",
                   "attn_windows entries must be integers from 0")


@damaged("Hugging Face tokenizer.json whose unknown-word token is not in its vocabulary")
def _(tmp):
    folder = hf_folder(tmp)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["model"]["unk_token"] = "<missing>"
    data["pre_tokenizer"] = None  # words outside the byte alphabet now reach the model
    data["normalizer"] = None
    data["model"]["vocab"] = {k: v for k, v in data["model"]["vocab"].items() if v < 5000}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    return Damaged(folder, "hf-gpt2", "tokenizer.json is not a valid tokenizer.json|its tokenizer cannot be used")


@damaged("Hugging Face index naming a shard with a NUL")
def _(tmp):
    folder = hf_folder(tmp)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "x\u0000y"}}))
    return Damaged(folder, "model.safetensors.index.json", "is not a file in this folder")


@damaged("Hugging Face index naming a shard 300 characters long")
def _(tmp):
    folder = hf_folder(tmp)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "s" * 300}}))
    return Damaged(folder, "model.safetensors.index.json", "is missing from the folder")


@damaged("Hugging Face wte 1-D")
def _(tmp):
    folder = hf_folder(tmp)
    ts = load_file(str(folder / "model.safetensors"))
    key = next(k for k in ts if k.endswith("wte.weight"))
    save_file({**ts, key: torch.zeros(7)}, str(folder / "model.safetensors"))
    return Damaged(folder, "hf-gpt2", r"wte.weight has shape \(7,\), expected a matrix")
