"""The note that says which token is pinned: "pinned: 'time' · Esc to release"."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from explorer.core.views import token_label
from explorer.qt.session import Session


def pin_text(session: Session) -> str:
    """"pinned: 'time' · Esc to release", or "" while nothing is pinned."""
    row, tokens = session.position, session.tokens
    if row is None or row >= len(tokens):
        return ""
    return f"pinned: {token_label(tokens[row])!r} · Esc to release"


class PinNote(QLabel):
    """A label that follows the session's pin; hidden while nothing is pinned."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.setToolTip("every panel shows the pinned token; Esc, or a second click on it, releases it")
        session.sig_selection_changed.connect(self.refresh)
        session.sig_trace_changed.connect(self.refresh)
        self.hide()  # until something is pinned: not shown with its panel (one built into a shown dock)
        self.refresh()

    def refresh(self) -> None:
        """Say what is pinned (cheap: one label, on every selection change)."""
        text = pin_text(self.session)
        if text != self.text():
            self.setText(text)
        if self.isHidden() == bool(text):
            self.setVisible(bool(text))
