"""Help ▸ About: the version, the default model, the torch and Qt versions, where settings are stored."""

from __future__ import annotations

import platform

import PySide6
from PySide6.QtCore import qVersion
from PySide6.QtGui import QAction

from explorer.core.about import version
from explorer.qt import dialogs

TITLE = "About Transformer Explorer"


def about_text(window) -> str:
    """What Help ▸ About says for ``window`` (its settings file is named), one fact a line."""
    import torch

    from explorer.core.defaults import ASSETS, DEFAULT_CHECKPOINT, DEFAULT_MODEL

    default = f"{DEFAULT_MODEL.spec} ({DEFAULT_CHECKPOINT})" if DEFAULT_CHECKPOINT.is_file() else (
        f"{DEFAULT_MODEL.spec}, missing: {DEFAULT_CHECKPOINT} (a seeded random model is shown instead)")
    return "\n".join([
        f"Transformer Explorer {version()}",
        "Look inside a small language model while you type.",
        "",
        f"Default model: {default}",
        f"Shipped files: {ASSETS}",
        f"PyTorch {torch.__version__}",
        f"Qt {qVersion()} (PySide6 {PySide6.__version__})",
        f"Python {platform.python_version()}",
        f"Settings are stored in: {window.settings.fileName()}",
    ])


def add_help_menu(window) -> None:
    """The window's Help menu, with About (on macOS Qt moves it to the application menu)."""
    menu = window.menuBar().addMenu("&Help")
    action = QAction("&About Transformer Explorer", window)
    action.setMenuRole(QAction.MenuRole.AboutRole)
    action.triggered.connect(lambda *_: dialogs.info(window, TITLE, about_text(window)))
    menu.addAction(action)
