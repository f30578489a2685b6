"""Hugging Face model folders: GPT-2, GPT-Neo, GPT-NeoX (Pythia), Llama, Mistral, Qwen2, Qwen3,
Gemma 2 and 3, Phi, OLMo-2 and SmolLM3, with their tokenizers.

A model folder as ``save_pretrained`` writes it (or as the hub's cache holds a snapshot):
``config.json``, the weights (``model.safetensors``, sharded ``model.safetensors.index.json``, or
``pytorch_model.bin`` and its index, read with ``torch.load(weights_only=True)`` only) and the
tokenizer (``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``).

- :mod:`~model.formats.hf.reader`: the folder, its config and the family (the reader's ``inspect``);
- :mod:`~model.formats.hf.gpt`, :mod:`~model.formats.hf.llama`, :mod:`~model.formats.hf.gemma`,
  :mod:`~model.formats.hf.neox`: each family's names and settings translated to our config and state dict;
- :mod:`~model.formats.hf.rope`, :mod:`~model.formats.hf.layers`: RoPE's keys (transformers 4 and 5)
  and the per-layer types (sliding-window layers);
- :mod:`~model.formats.hf.weights`, :mod:`~model.formats.hf.tokenizer`: the folder's files;
- :mod:`~model.formats.hf.fields`: reading config.json fields, every refusal naming its field.
"""

from model.formats.hf.reader import FAMILIES, families_opened, inspect

DESCRIPTION = ("Hugging Face model folder (gpt2, gpt_neo, gpt_neox, llama, mistral, qwen2, qwen3, gemma2, "
               "gemma3_text, phi, olmo2, smollm3: config.json + weights + tokenizer)")

__all__ = ["DESCRIPTION", "FAMILIES", "families_opened", "inspect"]
