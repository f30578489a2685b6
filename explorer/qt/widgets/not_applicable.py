"""One sentence in place of a panel whose views do not apply to the loaded model.

A panel that needs attention (Q/K/V, the attention maps, the lessons of the attention formula) has
nothing to draw for the model before attention. It makes a :class:`NotApplicable` once its layout is
built and asks :meth:`NotApplicable.applies` at the top of each handler: while it does not apply,
every other child of the panel is hidden and the sentence (:func:`explorer.core.applicability.not_applicable`)
takes the panel's place; when a model it applies to is opened, the children it hid come back.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from explorer.core.applicability import not_applicable
from explorer.qt import theme


class NotApplicable(QLabel):
    """The sentence saying why ``panel`` shows nothing, inserted at the top of its layout (hidden
    while the panel applies).

    Parameters
    ----------
    panel : QWidget
        The panel, with its layout already set.
    name : str
        The panel's registry name (``explorer.qt.panels.PANELS``), which picks the sentence.
    """

    def __init__(self, panel: QWidget, name: str) -> None:
        super().__init__(panel)
        self.panel, self.name = panel, name
        self._hidden: list[QWidget] = []  # the panel's children hidden while it does not apply
        self.setObjectName(f"not-applicable-{name}")
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.setMargin(8)
        panel.layout().insertWidget(0, self)
        self.hide()

    @property
    def closed(self) -> bool:
        """True while the sentence stands in the panel's place."""
        return not self.isHidden()

    def applies(self, config) -> bool:
        """Whether the panel applies to a model with ``config``; shows or hides the sentence (and the
        panel's other children) to match."""
        reason = not_applicable(self.name, config)
        if reason:
            self._close(reason)
        elif self.closed:
            self._open()
        return not reason

    def _close(self, reason: str) -> None:
        self.setText(reason)
        if self.closed:
            return
        self.setStyleSheet(theme.soft_box_style(self.panel))
        self._hidden = [w for w in self.panel.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                        if w is not self and not w.isHidden() and not w.isWindow()]
        for w in self._hidden:
            w.hide()
        self.show()

    def _open(self) -> None:
        self.hide()
        for w in self._hidden:
            w.show()
        self._hidden = []
