"""Model panel: the checkpoint's file, parameter count, architecture in words and training facts."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from explorer.core.architecture import describe_architecture
from explorer.core.model_facts import describe_training, fmt_value
from explorer.qt import theme
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from model import Tokenizer
from model.tokens.names import KIND_DESCRIPTIONS


def _row(key: str, value, fields: str = "") -> str:
    text = value if isinstance(value, str) else fmt_value(key, value)
    names = f" <span style='color:{theme.muted_text().name()}'>({html.escape(fields)})</span>" if fields else ""
    return (f"<tr><td style='padding-right:8px'><b>{html.escape(str(key))}</b></td>"
            f"<td>{html.escape(text)}{names}</td></tr>")


def describe_tokenizer(tokenizer: Tokenizer | None) -> str:
    """Size and kind of a tokenizer, and the special tokens it puts before every text."""
    if tokenizer is None:
        return "none (tokens shown by id)"
    text = f"{tokenizer.vocab_size:,} tokens, {KIND_DESCRIPTIONS[tokenizer.kind]}"
    if tokenizer.prefix_ids:
        text += "; every text starts with " + " ".join(tokenizer.display(i) for i in tokenizer.prefix_ids)
    return text


def describe_checkpoint(session: Session) -> str:
    """HTML tables of the current checkpoint: file, parameters, tokenizer, the architecture in words
    (every config field once, named in grey: :func:`explorer.core.architecture.describe_architecture`)
    and the training facts."""
    ckpt = session.checkpoint
    if ckpt is None:
        return "<p>No model loaded.</p>"
    cfg = ckpt.config
    rows = [
        _row("name", ckpt.name),
        _row("file", str(ckpt.path) if ckpt.path else "(not from a file)"),
        _row("format", ckpt.source_format),
        _row("parameters", f"{ckpt.model.n_params():,}"),
        _row("tokenizer", describe_tokenizer(ckpt.tokenizer)),
    ]
    config = [_row(label, text, fields) for label, text, fields in describe_architecture(cfg)]
    sections = describe_training(ckpt.training) or [("Training", [("(none recorded)", "")])]
    training = "".join(f"<h3>{html.escape(title)}</h3><table>" + "".join(_row(k, v) for k, v in rows) + "</table>"
                       for title, rows in sections)
    return (
        "<h3>Checkpoint</h3><table>" + "".join(rows) + "</table>"
        "<h3>Architecture</h3><table>" + "".join(config) + "</table>" + training
    )


class ModelInfoPanel(RefreshWhenShown, QWidget):
    """Read-only description of the loaded checkpoint; refreshed when the model changes (a training
    snapshot shown by the Training panel's slider only when the panel is on screen: setHtml took
    about 25 ms, longer than the rest of a slider step)."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.browser = QTextBrowser()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.browser)
        session.sig_model_changed.connect(self._on_session_model_changed)
        self.refresh()

    def _on_session_model_changed(self) -> None:
        if self.session.snapshot_step is None:
            self.refresh()
        else:
            self.schedule_refresh()

    def refresh(self) -> None:
        """Rewrite the description from the session's checkpoint."""
        self.browser.setHtml(describe_checkpoint(self.session))
