"""The lessons: positional encoding and order (``positional``), the attention formula
(``formula``) and the attention variants with the book's worked example (``variants``).
"""
