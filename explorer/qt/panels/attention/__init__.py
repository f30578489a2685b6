"""The attention panel (``panel``): the selected head's scores and weights, every head's mosaic, and
the head types (``head_types``: previous-token, duplicate-token and induction scores)."""

from explorer.qt.panels.attention.panel import AttentionPanel, HeadGrid

__all__ = ["AttentionPanel", "HeadGrid"]
