"""The Why this prediction? panel (``panel``) with its bars and its pages of views.
"""
