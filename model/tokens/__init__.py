"""Tokenizers and token names: the one ``Tokenizer`` wrapper over the ``tokenizers`` library, how a
token is shown (``names``) and the checks of a tokenizer against a model (``checks``).
"""
