"""The token the Why panel explains, shared by the panels that choose it (next token, Why)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


class ExplainTarget(QObject):
    """The target token id of the Why panel, or None for the top-1 at the selected position.

    One per session (get it with :meth:`of`); a new model resets it to None (another vocabulary).
    """

    sig_target_changed = Signal()
    """The target changed (``target`` holds it)."""
    sig_show_requested = Signal()
    """A panel asked for the target to be explained now: the Why panel brings its first tab forward
    (its dock is shown by the window, through :meth:`Session.request_panel
    <explorer.qt.session.Session.request_panel>`, which builds the panel if it was not yet)."""

    def __init__(self, session) -> None:
        super().__init__(session)
        self._target: int | None = None
        session.sig_model_changed.connect(lambda: self.set_target(None))

    @classmethod
    def of(cls, session) -> ExplainTarget:
        """The session's target (made on first use, a child of the session)."""
        found = session.findChild(ExplainTarget)
        return found if found is not None else cls(session)

    @property
    def target(self) -> int | None:
        """The chosen token id, or None: the most likely next token."""
        return self._target

    def set_target(self, token_id: int | None) -> None:
        """Explain ``token_id`` (None: the top-1) from now on, at every position and text."""
        token_id = None if token_id is None else int(token_id)
        if token_id != self._target:
            self._target = token_id
            self.sig_target_changed.emit()

    def explain(self, token_id: int) -> None:
        """Choose ``token_id`` and ask for the Why panel to be shown (the next-token panel's "Explain"):
        its dock first (the panel may not exist before it is first shown), then its first tab."""
        self.set_target(token_id)
        self.parent().request_panel("why")
        self.sig_show_requested.emit()
