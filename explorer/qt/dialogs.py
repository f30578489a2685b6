"""The one seam for every dialog the app shows.

All message boxes and file pickers go through these functions, called as ``dialogs.error(...)``
(module attribute look-up), so tests can replace them with ``monkeypatch.setattr`` and no test
ever waits on a modal window.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

CHECKPOINT_FILTER = "Checkpoints (*.safetensors *.pt *.pth *.bin);;All files (*)"


def error(parent: QWidget | None, title: str, text: str) -> None:
    """Show an error message and wait until it is dismissed."""
    QMessageBox.critical(parent, title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    """Show an information message and wait until it is dismissed."""
    QMessageBox.information(parent, title, text)


def open_file(parent: QWidget | None, title: str, directory: str = "", filter: str = CHECKPOINT_FILTER) -> str | None:
    """Ask for an existing file; None when cancelled."""
    path, _ = QFileDialog.getOpenFileName(parent, title, directory, filter)
    return path or None


def save_file(parent: QWidget | None, title: str, directory: str = "", filter: str = "") -> str | None:
    """Ask for a file name to write; None when cancelled."""
    path, _ = QFileDialog.getSaveFileName(parent, title, directory, filter)
    return path or None


def ask_int(parent: QWidget | None, title: str, label: str, value: int, lo: int, hi: int) -> int | None:
    """Ask for an integer in [lo, hi]; None when cancelled."""
    number, ok = QInputDialog.getInt(parent, title, label, value, lo, hi)
    return int(number) if ok else None


def open_folder(parent: QWidget | None, title: str, directory: str = "") -> str | None:
    """Ask for an existing folder; None when cancelled."""
    path = QFileDialog.getExistingDirectory(parent, title, directory)
    return path or None


def ask_choice(parent: QWidget | None, title: str, text: str, choices: list[str]) -> int | None:
    """Ask the user to pick one of ``choices`` (one button each, plus Cancel).

    Returns
    -------
    int or None
        The index of the chosen entry; None when cancelled (Cancel, Escape or closing the box).
    """
    box = QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.Cancel, parent)
    buttons = [box.addButton(choice, QMessageBox.ButtonRole.AcceptRole) for choice in choices]
    box.exec()
    clicked = box.clickedButton()
    return buttons.index(clicked) if clicked in buttons else None
