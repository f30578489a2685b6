"""Checkpoint formats, each a reader module beside the others; :mod:`model.checkpoint` dispatches.

- :mod:`model.formats.base`: what every format shares (``Checkpoint``, the errors, the sniffed
  ``Source``, building and validating a model from tensors);
- :mod:`model.formats.native`: our own ``.safetensors``;
- :mod:`model.formats.gguf`: llama.cpp's GGUF files, read and dequantised with the ``gguf`` package;
- foreign formats, translated to our config and state-dict names: :mod:`~model.formats.pickled.nanogpt`,
  :mod:`~model.formats.pickled.raschka` (LLMs-from-scratch); with :mod:`~model.formats.common` (what they
  share), :mod:`~model.formats.vocab` (their vocabularies) and :mod:`~model.formats.pickled.safe_pickle`
  (reading pickles without running them).

Torch files are read with ``torch.load(map_location="cpu", weights_only=True)`` only; vocabulary
pickles with an unpickler that looks nothing up.
"""
