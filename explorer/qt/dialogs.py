"""The one seam for every dialog the app shows.

All message boxes and file pickers go through these functions, called as ``dialogs.error(...)``
(module attribute look-up), so tests can replace them with ``monkeypatch.setattr`` and no test
ever waits on a modal window.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QInputDialog, QLineEdit, QMessageBox, QProgressDialog, QWidget

CHECKPOINT_FILTER = "Checkpoints (*.safetensors *.gguf *.pt *.pth *.bin);;GGUF (*.gguf);;All files (*)"
TEXT_FILTER = "Text (*.txt);;All files (*)"


def error(parent: QWidget | None, title: str, text: str) -> None:
    """Show an error message and wait until it is dismissed."""
    QMessageBox.critical(parent, title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    """Show an information message and wait until it is dismissed."""
    QMessageBox.information(parent, title, text)


def confirm(parent: QWidget | None, title: str, text: str) -> bool:
    """Ask whether to go on (OK / Cancel) and wait for the answer; True for OK."""
    buttons = QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel
    answer = QMessageBox.question(parent, title, text, buttons, QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Ok


class Progress:
    """A progress dialog with a Cancel button that does not wait (see :func:`progress`)."""

    def __init__(self, parent: QWidget | None, title: str, text: str, maximum: int) -> None:
        self._box = QProgressDialog(text, "Cancel", 0, maximum, parent)
        self._box.setWindowTitle(title)
        self._box.setWindowModality(Qt.WindowModality.WindowModal)
        self._box.setMinimumDuration(400)  # shown only for work that takes longer
        self._box.setAutoClose(False)
        self._box.setAutoReset(False)
        self._box.setValue(0)

    def set_value(self, value: int) -> None:
        """Show how far the work is, in [0, maximum]."""
        self._box.setValue(value)

    def set_maximum(self, maximum: int) -> None:
        """Change the range to [0, maximum]; 0 shows a busy bar (how far is not known)."""
        self._box.setMaximum(maximum)

    def set_text(self, text: str) -> None:
        """Replace the text above the bar."""
        self._box.setLabelText(text)

    def cancelled(self) -> bool:
        """True once the user pressed Cancel (or closed the dialog)."""
        return self._box.wasCanceled()

    def close(self) -> None:
        """Take the dialog away."""
        self._box.close()
        self._box.deleteLater()


def progress(parent: QWidget | None, title: str, text: str, maximum: int) -> Progress:
    """Show a progress dialog with Cancel (after 0.4 s, for long work) and return at once.

    Returns
    -------
    Progress
        ``set_value(n)``, ``set_maximum(n)``, ``set_text(text)``, ``cancelled()`` and ``close()``;
        the caller keeps the event loop running.
    """
    return Progress(parent, title, text, maximum)


def ask_text(parent: QWidget | None, title: str, label: str, text: str = "") -> str | None:
    """Ask for one line of text (``text`` proposed); None when cancelled."""
    answer, ok = QInputDialog.getText(parent, title, label, QLineEdit.EchoMode.Normal, text)
    return answer if ok else None


def open_file(parent: QWidget | None, title: str, directory: str = "", filter: str = CHECKPOINT_FILTER) -> str | None:
    """Ask for an existing file; None when cancelled."""
    path, _ = QFileDialog.getOpenFileName(parent, title, directory, filter)
    return path or None


def open_files(parent: QWidget | None, title: str, directory: str = "", filter: str = TEXT_FILTER) -> list[str]:
    """Ask for one or more existing files; [] when cancelled."""
    paths, _ = QFileDialog.getOpenFileNames(parent, title, directory, filter)
    return list(paths)


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
