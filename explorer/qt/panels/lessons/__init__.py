"""The lessons: positional encoding and order (``positional``), the attention formula
(``formula``), the attention variants with the book's worked example (``variants``) and why
attention at all, against the model before it (``why_attention``).
"""
