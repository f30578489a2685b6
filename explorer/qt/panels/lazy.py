"""Panels that skip work while hidden (a closed dock, a tab behind another) and catch up when shown."""

from __future__ import annotations


class RefreshWhenShown:
    """Mixin for a panel QWidget with a ``refresh()`` method; list it before QWidget in the bases.

    Connect session signals to :meth:`schedule_refresh`: it refreshes at once when the panel can
    be seen, and otherwise marks it stale. A stale panel refreshes in ``showEvent`` and in
    :meth:`catch_up`, which the main window calls when the panel's dock becomes visible (a dock
    tabbed behind another is still ``isVisible()`` in Qt 6, but has an empty visible region).
    """

    _stale = False

    def is_shown(self) -> bool:
        """True when some of the panel is on screen."""
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def follow(self, session, on_model_changed=None) -> None:
        """Refresh (when shown) on every new trace and selection, and on a new model through
        ``on_model_changed`` when given (it should end by scheduling a refresh itself)."""
        session.sig_model_changed.connect(on_model_changed or self.schedule_refresh)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self.schedule_refresh)

    def schedule_refresh(self, *_args) -> None:
        """Refresh now if shown, else when next shown."""
        if self.is_shown():
            self._stale = False
            self.refresh()
        else:
            self._stale = True

    def catch_up(self) -> None:
        """Refresh if an update was skipped while hidden."""
        if self._stale:
            self._stale = False
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().showEvent(event)
        self.catch_up()
