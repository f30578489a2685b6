"""The panel registry: every dockable panel, in the order the main window builds its docks.

Each entry is ``(name, title, factory)``: ``name`` is what ``--screenshot --panel NAME`` takes,
``title`` the dock's title, and ``factory(session)`` returns the panel widget. To add a panel,
import its class and append one entry to :data:`PANELS`.
"""

from explorer.qt.panels.attention import AttentionPanel
from explorer.qt.panels.embeddings import EmbeddingsPanel
from explorer.qt.panels.lessons.formula import FormulaPanel
from explorer.qt.panels.generate import GeneratePanel
from explorer.qt.panels.model_info import ModelInfoPanel
from explorer.qt.panels.next_token import NextTokenPanel
from explorer.qt.panels.lessons.positional.panel import PositionalPanel
from explorer.qt.panels.qkv import QKVPanel
from explorer.qt.panels.tokens import TokensPanel
from explorer.qt.panels.training.panel import TrainingPanel
from explorer.qt.panels.lessons.variants.panel import VariantsPanel
from explorer.qt.panels.why.panel import WhyPanel

PANELS = [
    ("tokens", "Text and tokens", TokensPanel),
    ("embeddings", "Embeddings", EmbeddingsPanel),
    ("qkv", "Q / K / V", QKVPanel),
    ("attention", "Attention", AttentionPanel),
    ("next-token", "Next token", NextTokenPanel),
    ("model", "Model", ModelInfoPanel),
    ("generate", "Generate", GeneratePanel),
    ("positional", "Positional encoding and order", PositionalPanel),
    ("formula", "Attention formula", FormulaPanel),
    ("variants", "Attention variants", VariantsPanel),
    ("training", "Training", TrainingPanel),
    ("why", "Why this prediction?", WhyPanel),
]


def panel_names() -> list[str]:
    """The names of every registered panel, in order."""
    return [name for name, _, _ in PANELS]
