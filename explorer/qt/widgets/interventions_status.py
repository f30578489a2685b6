"""The status bar's part that lists the interventions in force (heads switched off) with one
button that restores the plain model."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class InterventionsStatus(QWidget):
    """"heads off: L0H1, L2H3" and a "Restore all" button, shown only while the session's
    interventions change the model."""

    def __init__(self, session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.label = QLabel()
        self.label.setStyleSheet("QLabel { color:#a04000; font-weight:bold; }")
        self.restore_button = QPushButton("Restore all")
        self.restore_button.setToolTip("switch every head back on: the plain model in every panel")
        self.restore_button.clicked.connect(lambda: session.set_interventions(None))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.restore_button)
        session.sig_interventions_changed.connect(self._on_session_interventions_changed)
        self._on_session_interventions_changed()

    def _on_session_interventions_changed(self) -> None:
        described = self.session.interventions.describe()
        self.label.setText(described)
        self.setVisible(bool(described))
