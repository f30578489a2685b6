"""The panel registry: every dockable panel, in the order the main window builds its docks.

Each entry is ``(name, title, factory)``: ``name`` is what ``--screenshot --panel NAME`` takes,
``title`` the dock's title, and ``factory(session)`` returns the panel widget. To add a panel,
append one entry to :data:`PANELS` with ``Lazy("explorer.qt.panels.MODULE", "ClassName")`` as its
factory. The panels import torch; the lazy factory imports a panel's module only when the first
one is built, so that the main window can show its docks (and the command line read its panel
names) before torch has been imported.
"""

from __future__ import annotations

from importlib import import_module


class Lazy:
    """A panel class named by its module and its name, imported when it is first called.

    Parameters
    ----------
    module : str   the module that defines it, e.g. ``"explorer.qt.panels.attention"``.
    name : str     the class, e.g. ``"AttentionPanel"``.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def resolve(self) -> type:
        """The class (its module imported now, if it was not).

        Raises
        ------
        ImportError, AttributeError
            When the module or the class does not exist (a typo here: the registry test catches it).
        """
        return getattr(import_module(self.module), self.name)

    def __call__(self, session):
        """A new panel following ``session``."""
        return self.resolve()(session)

    def __repr__(self) -> str:
        return f"Lazy({self.module!r}, {self.name!r})"


_P = "explorer.qt.panels."
PANELS = [
    ("tokens", "Text and tokens", Lazy(_P + "tokens", "TokensPanel")),
    ("embeddings", "Embeddings", Lazy(_P + "embeddings", "EmbeddingsPanel")),
    ("qkv", "Q / K / V", Lazy(_P + "qkv", "QKVPanel")),
    ("attention", "Attention", Lazy(_P + "attention.panel", "AttentionPanel")),
    ("next-token", "Next token", Lazy(_P + "next_token", "NextTokenPanel")),
    ("model", "Model", Lazy(_P + "model_info", "ModelInfoPanel")),
    ("generate", "Generate", Lazy(_P + "generate", "GeneratePanel")),
    ("positional", "Positional encoding and order", Lazy(_P + "lessons.positional.panel", "PositionalPanel")),
    ("formula", "Attention formula", Lazy(_P + "lessons.formula", "FormulaPanel")),
    ("variants", "Attention variants", Lazy(_P + "lessons.variants.panel", "VariantsPanel")),
    ("training", "Training", Lazy(_P + "training.panel", "TrainingPanel")),
    ("why", "Why this prediction?", Lazy(_P + "why.panel", "WhyPanel")),
    ("map", "Model map", Lazy(_P + "model_map.panel", "ModelMapPanel")),
    ("why-attention", "Why attention?", Lazy(_P + "lessons.why_attention.panel", "WhyAttentionPanel")),
]


def panel_names() -> list[str]:
    """The names of every registered panel, in order."""
    return [name for name, _, _ in PANELS]
