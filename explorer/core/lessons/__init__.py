"""The lessons' arithmetic, Qt-free: positional encoding and order, the formula's steps, RoPE's
rotation, the attention variants and the book's chapter-3 example.
"""
