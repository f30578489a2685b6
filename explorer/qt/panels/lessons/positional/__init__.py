"""The positional lesson: the panel, its shift box (``shift``) and the reordering chips (``order_chips``).
"""
