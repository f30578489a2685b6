"""The weights of a Hugging Face model folder: one file or shards listed by an index.

``model.safetensors``, or ``model.safetensors.index.json`` whose ``weight_map`` names the shard
of every tensor; else ``pytorch_model.bin`` (or its ``.index.json``), read with
``torch.load(weights_only=True)`` only (:func:`model.formats.pickled.safe_pickle.torch_load`). Shards
must be plain file names inside the folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.formats.base import CheckpointError, Source, broken_link, dangling, is_file
from model.core.plain import clip, read_json_file, short_repr

#: The weight files of a model folder, in the order they are looked for.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
#: Weights in formats this app does not read, named in the message when nothing else is there.
OTHER_WEIGHTS = ("tf_model.h5", "flax_model.msgpack", "model.ckpt.index", "*.onnx")
INDEX_MAX_BYTES = 64 * 1024 * 1024


def is_weight_file(name: str) -> bool:
    """Whether a file name is one of a folder's weight files (or a shard or index of them)."""
    stem = name.split("-0", 1)[0]
    return name in WEIGHT_FILES or (stem in ("model", "pytorch_model") and name.endswith((".safetensors", ".bin")))


def _state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of one weight file (safetensors or torch), checked to be a flat dict of tensors."""
    source = Source(path)
    if source.container == "safetensors":
        return source.tensors
    if source.container not in ("torch-zip", "pickle"):
        raise CheckpointError(f"{path.name}: neither a safetensors nor a torch file")
    obj = source.torch_object
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise CheckpointError(f"{path.name}: expected a state_dict (names -> tensors), "
                              f"found a {type(obj).__name__} holding other things")
    return obj


def _weight_map(index: Path) -> dict[str, str]:
    """An index's ``weight_map``: tensor name -> shard file name, shards checked to be in the folder."""
    try:
        data = read_json_file(index, INDEX_MAX_BYTES)
    except ValueError as exc:
        raise CheckpointError(f"{index.name}: not a readable JSON index ({clip(str(exc))})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index.name}: no weight_map (tensor name -> shard file)")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", "..") or "\0" in shard:
            raise CheckpointError(f"{index.name}: tensor {short_repr(name)} is in {short_repr(shard)}, which is not a file in this folder")
        if dangling(index.parent / shard):
            raise broken_link(index.parent / shard)
        if not is_file(index.parent / shard):
            raise CheckpointError(f"{index.name}: shard {clip(shard, 100)} (of tensor {short_repr(name)}) is missing from the folder")
    return weight_map


def _sharded(index: Path) -> tuple[dict[str, torch.Tensor], int]:
    """The tensors of every shard an index names, and the number of shards."""
    weight_map = _weight_map(index)
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        for name, t in _state_dict(index.parent / shard).items():
            if name in tensors:
                raise CheckpointError(f"{index.name}: tensor {name} is in more than one shard")
            tensors[name] = t
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise CheckpointError(f"{index.name}: tensor {missing[0]} is not in its shard {weight_map[missing[0]]}")
    return tensors, len(set(weight_map.values()))


#: (one file, its sharded index): safetensors first, as transformers looks for them.
PAIRS = (("model.safetensors", "model.safetensors.index.json"), ("pytorch_model.bin", "pytorch_model.bin.index.json"))


def read_weights(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Every tensor of the folder's weights, and facts about where they came from.

    One file or a sharded index; where both are there (a file left from an earlier save beside
    the shards, or a merged copy), :func:`_both` says which was read and why.

    Returns
    -------
    (dict of str -> Tensor, dict)
        The tensors under the file's own names; ``{"weights": file name, "shards": n}``, and a
        ``"weights note"`` when a single file and an index were both there.

    Raises
    ------
    CheckpointError
        When the folder has no weight file this app reads (naming what it looked for), a weight
        file is a link to nothing (not downloaded), or a file, index or shard is bad.
    """
    for single, index in PAIRS:
        for name in (single, index):
            if dangling(folder / name):
                raise broken_link(folder / name)
        one, sharded = (folder / single).is_file(), (folder / index).is_file()
        if one and sharded:
            return _both(folder, single, index)
        if sharded:
            tensors, shards = _sharded(folder / index)
            return tensors, {"weights": index, "shards": shards}
        if one:
            return _state_dict(folder / single), {"weights": single}
    others = [p.name for pattern in OTHER_WEIGHTS for p in sorted(folder.glob(pattern))]
    found = f"; it has {', '.join(others)}, which this app does not read" if others else ""
    ggufs = sorted(p.name for p in folder.glob("*.gguf"))
    if ggufs:  # a GGUF file is a whole model of its own (model.formats.gguf)
        more = {1: "", 2: " (or the other one)"}.get(len(ggufs), f" (or one of the {len(ggufs) - 1} others)")
        found += f"; a GGUF file is a model by itself: open {ggufs[0]}{more}"
    raise CheckpointError(f"{folder.name}: no weights: looked for {', '.join(WEIGHT_FILES)}{found}")


def described(facts: dict[str, Any]) -> str:
    """The weights read, for messages: ``model.safetensors`` or ``the 2 shards of model.safetensors.index.json``."""
    return f"the {facts['shards']} shards of {facts['weights']}" if "shards" in facts else facts["weights"]


def _first_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> str | None:
    """The first tensor name (in order) whose shape or values differ between two state dicts of the same names."""
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.shape != y.shape or not torch.equal(x, y.to(x.dtype)):
            return name
    return None


def _both(folder: Path, single: str, index: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A single weight file beside a sharded index (cf. sglang#32279): the one that holds the other's
    tensors is read, or, holding the same names, the single file (as transformers reads it); a note
    says which and how the other differs. Neither holding the other's names is refused."""
    try:
        sharded, n = _sharded(folder / index)
    except CheckpointError as exc:  # a broken index beside a whole file: the file is the model
        return _state_dict(folder / single), {"weights": single, "weights note": f"{index} beside it was not read: {exc}"}
    one = _state_dict(folder / single)
    shards = f"the {n} shards of {index}"
    if set(one) < set(sharded):
        return sharded, {"weights": index, "shards": n, "weights note": (
            f"{single} beside it holds only {len(one)} of the {len(sharded)} tensors and was not read")}
    if set(sharded) < set(one):
        return one, {"weights": single, "weights note": (
            f"{index} beside it lists only {len(sharded)} of its {len(one)} tensors and was not read")}
    if set(one) != set(sharded):
        extra = sorted(set(one) - set(sharded))[0]
        raise CheckpointError(f"{folder.name}: {single} and {shards} hold different tensors ({single} has {extra}, "
                              f"the shards do not, and the other way round): move the one that is not this model's "
                              "out of the folder")
    differ = _first_difference(one, sharded)
    if differ is None:
        return one, {"weights": single, "weights note": f"{shards} beside it hold the same tensors"}
    return one, {"weights": single, "weights note": (
        f"{single} and {shards} hold different values (first: {differ}): {single} is read, as transformers reads "
        "it; move it out of the folder to open the shards")}
