"""GGUF files (llama.cpp's format), read with the ``gguf`` package by llama.cpp's authors.

- :mod:`~model.formats.gguf.file`: the file, its metadata and tensor records, every read bounded;
- :mod:`~model.formats.gguf.tensors`: the storage types read and dequantising them;
- :mod:`~model.formats.gguf.archs`: the architectures built (``llama``, ``qwen2``, ``qwen3``), key by key;
- :mod:`~model.formats.gguf.vocab`: the vocabulary in ``tokenizer.ggml.*``;
- :mod:`~model.formats.gguf.reader`: the reader the dispatcher calls.
"""
