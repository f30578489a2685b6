"""The attention variants lesson (``panel``) and the book's pages (``book``).
"""
