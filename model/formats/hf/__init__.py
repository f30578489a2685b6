"""Hugging Face model folders: GPT-2, GPT-Neo and Llama-shaped models, with their tokenizers.

A model folder as ``save_pretrained`` writes it (or as the hub's cache holds a snapshot):
``config.json``, the weights (``model.safetensors``, sharded ``model.safetensors.index.json``, or
``pytorch_model.bin`` and its index, read with ``torch.load(weights_only=True)`` only) and the
tokenizer (``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``).

- :mod:`~model.formats.hf.reader`: the folder, its config and the family (the reader's ``inspect``);
- :mod:`~model.formats.hf.gpt`, :mod:`~model.formats.hf.llama`: each family's names and settings
  translated to our config and state dict;
- :mod:`~model.formats.hf.weights`, :mod:`~model.formats.hf.tokenizer`: the folder's files;
- :mod:`~model.formats.hf.fields`: reading config.json fields, every refusal naming its field.
"""

from model.formats.hf.reader import FAMILIES, families_opened, inspect

DESCRIPTION = "Hugging Face model folder (gpt2, gpt_neo, llama, mistral: config.json + weights + tokenizer)"

__all__ = ["DESCRIPTION", "FAMILIES", "families_opened", "inspect"]
