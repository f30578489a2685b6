"""The panel registry: every dockable panel, in the order the main window builds its docks.

Each entry is ``(name, title, factory)``: ``name`` is what ``--screenshot --panel NAME`` takes,
``title`` the dock's title, and ``factory(session)`` returns the panel widget. To add a panel,
append one entry to :data:`PANELS` with ``Lazy("explorer.qt.panels.MODULE", "ClassName")`` as its
factory. The panels import torch; the lazy factory imports a panel's module only when the first
one is built, so that the main window can show its docks (and the command line read its panel
names) before torch has been imported. The window holds its panels in a :class:`PanelMap`, which
builds each one the first time it is looked up (its dock first shown, or code asking for it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
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


class PanelMap(Mapping):
    """The window's panels by registry name, in :data:`PANELS` order, each built the first time it is
    looked up: ``panels["why"]`` builds the Why panel then (about 0.1–0.25 s for a lesson), so that
    the panels tabbed out of sight cost nothing at start-up.

    Empty until :meth:`open`. ``in``, ``len`` and iterating over the names never build a panel;
    ``values()``, ``items()`` and ``get`` look every (or that) panel up and so build it, which is
    what a walk over all the panels wants. :meth:`built` gives only those built so far (what the
    window saves the settings of, or looks for the focus in).
    """

    def __init__(self) -> None:
        self._factories: dict[str, Callable] = {}
        self._session = None
        self._on_built: Callable[[str, object], None] | None = None
        self._built: dict[str, object] = {}

    def open(self, session, on_built: Callable[[str, object], None], registry=None) -> None:
        """Make every panel of ``registry`` (default :data:`PANELS`) available, built for ``session``
        when first looked up; ``on_built(name, panel)`` is called then, once per panel (the window
        puts it in its dock there). The panel is in the map before ``on_built`` runs, so that a
        look-up made meanwhile (its dock's visibility changing) finds it and does not build it twice."""
        self._factories = {name: factory for name, _title, factory in (registry or PANELS)}
        self._session, self._on_built = session, on_built

    def __getitem__(self, name: str):
        """The panel ``name``, built now if it was not.

        Raises
        ------
        KeyError
            When no panel of that name is registered (or before :meth:`open`).
        """
        panel = self._built.get(name)
        if panel is None:
            panel = self._built[name] = self._factories[name](self._session)
            self._on_built(name, panel)
        return panel

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def is_built(self, name: str) -> bool:
        """True once the panel ``name`` has been built."""
        return name in self._built

    def built(self) -> dict[str, object]:
        """The panels built so far, by name, in registry order (none is built by this)."""
        return {name: self._built[name] for name in self._factories if name in self._built}

    def __repr__(self) -> str:
        return f"PanelMap(built={list(self.built())}, registered={len(self)})"
