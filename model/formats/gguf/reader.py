"""Opening a GGUF file (llama.cpp's format) as our model, with the vocabulary it carries.

A file is GGUF when it starts with the magic ``GGUF`` (:class:`~model.formats.base.Source`'s
container ``"gguf"``). The architecture comes first (:mod:`model.formats.gguf.archs`), so that an
unknown one is refused before anything is decoded; then every tensor's type is checked and the
tensors are dequantised to float32 (:mod:`model.formats.gguf.tensors`), translated to our names
(q and k un-permuted for a ``llama`` file) and built; the vocabulary is the file's own
(:mod:`model.formats.gguf.vocab`). The checkpoint's ``storage`` says how each tensor was stored
and what dequantising cost.
"""

from __future__ import annotations

import dataclasses

from model.formats.base import NotThisFormat, OpenOptions, Source
from model.formats.common import Converted, Keys, opening
from model.formats.gguf.archs import architecture_of, architectures_opened, convert
from model.formats.gguf.file import GGUFFile
from model.formats.gguf.tensors import check_types, dequantize_all, supported_names
from model.formats.gguf.vocab import gguf_tokenizer
from model.formats.opening import Opening

DESCRIPTION = (f"a GGUF file (llama.cpp's format; {architectures_opened()}; tensors in "
               f"{supported_names()})")


def inspect(source: Source, options: OpenOptions) -> Opening:
    """Read a GGUF file as our model, with the file's vocabulary (asked for when it has none).

    Returns
    -------
    Opening
        Its load gives a checkpoint with ``source_format`` ``"gguf-llama"``, ``"gguf-qwen2"`` or ``"gguf-qwen3"`` and
        ``storage`` the file's tensor types.

    Raises
    ------
    NotThisFormat
        When the file does not start with the magic ``GGUF``.
    CheckpointError
        As :func:`model.checkpoint.load_any`: a file cut short or damaged, an architecture or a
        tensor type this app does not open (naming it), a key that disagrees with the weights.
    """
    if source.container != "gguf":
        raise NotThisFormat("It does not start with GGUF's magic.")
    gf = GGUFFile(source.path)
    arch = architecture_of(gf)
    check_types(gf)
    tensors, storage = dequantize_all(gf)
    config, ours, facts = convert(gf, arch, Keys(gf.path, "GGUF", tensors))
    tokenizer = gguf_tokenizer(gf)
    conv = Converted(f"gguf-{arch.name}", config, ours, facts,
                     find_tokenizer=lambda: (tokenizer, [gf.path]))
    return opening(source, conv, options).wrapped(lambda load: dataclasses.replace(load(), storage=storage))
