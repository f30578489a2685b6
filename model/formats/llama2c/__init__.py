"""llama2.c's files: ``model.bin`` (v0 and v1, ``bin``), ``ckpt.pt`` and ``tokenizer.bin``
(``vocab``), read by ``reader``.
"""
