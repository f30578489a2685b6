"""Model panel: the checkpoint's file, parameter count, architecture in words, how a quantised file
stored its weights, and training facts; and, for any model, the difference of its logits from
another file of the same model on the current text.

The comparison (the check box under the description) asks for the other file through
:mod:`explorer.qt.dialogs`, opens it with :func:`model.checkpoint.load_any` (no vocabulary needed:
both models run the current text's token ids), and runs both (as the files are: what-if changes off) on every new trace as a session job:
the largest |Δ logit| and where it is, and at how many positions both predict the same token.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import torch
from PySide6.QtWidgets import QCheckBox, QLabel, QTextBrowser, QVBoxLayout, QWidget

from explorer.core.architecture import describe_architecture
from explorer.core.model_facts import describe_training, fmt_value
from explorer.core.quantization import LogitsDelta, compare_logits, storage_rows
from explorer.qt import dialogs, theme
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from model import Checkpoint, Tokenizer
from model.checkpoint import CheckpointError, load_any
from model.core.architectures import architecture_of
from model.core.plain import clip, readable
from model.tokens.names import KIND_DESCRIPTIONS

COMPARE_TEXT = "Compare logits with another file…"  # short: the Model dock is narrow (the tooltip says more)
COMPARE_TITLE = "Compare with another file of this model"
#: Config fields two files must share for their logits to be compared (the same vocabulary and shape).
SAME_MODEL_FIELDS = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads")


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
    stored = ""
    if ckpt.storage is not None:
        stored = (f"<h3>Weights in the {html.escape(ckpt.storage.container)} file</h3><table>"
                  + "".join(_row(k, v) for k, v in storage_rows(ckpt.storage)) + "</table>")
    sections = describe_training(ckpt.training) or [("Training", [("(none recorded)", "")])]
    training = "".join(f"<h3>{html.escape(title)}</h3><table>" + "".join(_row(k, v) for k, v in rows) + "</table>"
                       for title, rows in sections)
    return (
        "<h3>Checkpoint</h3><table>" + "".join(rows) + "</table>"
        "<h3>Architecture</h3><table>" + "".join(config) + "</table>" + stored + training
    )


def incompatible(ckpt: Checkpoint, other: Checkpoint) -> str:
    """Why ``other``'s logits cannot be compared with ``ckpt``'s ("" when they can): the config fields
    of :data:`SAME_MODEL_FIELDS` that differ."""
    a, b = ckpt.config, other.config
    if type(a) is not type(b):  # the transformer and the model before attention
        return f"a {architecture_of(a)} here, a {architecture_of(b)} there"
    diffs = [f"{name} {getattr(a, name)} here, {getattr(b, name)} there" for name in SAME_MODEL_FIELDS
             if getattr(a, name, None) != getattr(b, name, None)]
    return "; ".join(diffs)


def _compare_job(_checkpoint, inputs) -> LogitsDelta:
    """Both models' logits on the ids (a session job: runs on the worker thread for a slow model)."""
    model, other, ids = inputs
    with torch.inference_mode():
        ids = torch.tensor(ids, dtype=torch.long)  # (T,)
        logits, theirs = model(ids).numpy(), other(ids).numpy()  # (T, vocab_size) each
    return compare_logits(logits, theirs)


def describe_delta(delta: LogitsDelta, other: str, tokenizer: Tokenizer | None, ids) -> str:
    """The comparison in words: where the largest |Δ logit| is (after which token, whose logit),
    its mean, and the top-1 agreement."""
    def name(i: int) -> str:
        return f"“{tokenizer.display(int(i))}”" if tokenizer is not None else f"token id {int(i)}"

    return (f"Against {other} on these {delta.n_positions} tokens: the largest |Δ logit| is "
            f"{delta.max_abs:.4g}, at position {delta.position} (after {name(ids[delta.position])}), on the logit "
            f"of {name(delta.token_id)}; mean |Δ logit| {delta.mean_abs:.3g}. The same top-1 token at "
            f"{delta.top1_same} of {delta.n_positions} positions ({100 * delta.top1_agreement:.1f} %).")


class ModelInfoPanel(RefreshWhenShown, QWidget):
    """Read-only description of the loaded checkpoint; refreshed when the model changes (a training
    snapshot shown by the Training panel's slider only when the panel is on screen: setHtml took
    about 25 ms, longer than the rest of a slider step). Below it, the logits comparison with
    another file (see the module docstring)."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.other: Checkpoint | None = None  # the file compared with, while the box is checked
        self.browser = QTextBrowser()
        self.compare_box = QCheckBox(COMPARE_TEXT)
        self.compare_box.setToolTip("compare the logits with another file of this model: run another file of the same model (its F16, a Hugging Face folder, ...) on the "
                                    "current text and show how far its logits are from this one's")
        self.compare_label = QLabel()
        self.compare_label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.browser)
        layout.addWidget(self.compare_box)
        layout.addWidget(self.compare_label)
        session.sig_model_changed.connect(self._on_session_model_changed)
        session.sig_trace_changed.connect(self._compare)
        self.compare_box.toggled.connect(self._on_compare_box_toggled)
        self.refresh()

    def _on_session_model_changed(self) -> None:
        if self.session.snapshot_step is None:
            self.refresh()
        else:
            self.schedule_refresh()
        if self.other is not None and self.session.checkpoint is not None:
            why = incompatible(self.session.checkpoint, self.other)
            if why:
                self._stop(f"{self.other.name} is not a file of this model ({why}); the comparison is off.")

    def refresh(self) -> None:
        """Rewrite the description from the session's checkpoint."""
        self.browser.setHtml(describe_checkpoint(self.session))

    # ---- the comparison with another file
    def _on_compare_box_toggled(self, on: bool) -> None:
        if not on:
            self._stop("")
            return
        if self.session.checkpoint is None:
            self._stop("Open a model first.")
            return
        path = dialogs.open_file(self, COMPARE_TITLE, self._start_folder())
        other = self._open_other(path) if path else None
        if other is None:
            self._stop("")
            return
        self.other = other
        self.compare_label.setText(f"Comparing with {other.name}…")
        self._compare()

    def _start_folder(self) -> str:
        path = self.session.checkpoint.path
        return str(path.parent if path is not None and path.is_file() else (path or Path.cwd()))

    def _open_other(self, path: str | os.PathLike) -> Checkpoint | None:
        """The other file's checkpoint, or None after saying why it cannot be compared."""
        try:
            other = load_any(path, allow_no_tokenizer=True)
        except CheckpointError as exc:
            dialogs.error(self, COMPARE_TITLE, str(exc))
            return None
        why = incompatible(self.session.checkpoint, other)
        if why:
            dialogs.error(self, COMPARE_TITLE, f"{readable(Path(path).name)}: not a file of this model ({why})")
            return None
        return other

    def _stop(self, message: str) -> None:
        self.other = None
        self.session.cancel(self, "compare")
        self.compare_box.blockSignals(True)
        self.compare_box.setChecked(False)
        self.compare_box.blockSignals(False)
        self.compare_label.setText(message)

    def _compare(self) -> None:
        """Run both models on the current trace's ids (the newest request wins)."""
        trace, ckpt = self.session.trace, self.session.checkpoint
        if self.other is None or trace is None or ckpt is None or trace.n_tokens == 0:
            return
        ids = trace.token_ids[-self.other.config.context_length:]
        self.session.submit(self, _compare_job, (ckpt.model, self.other.model, ids), self._on_compared,
                            passes=2, name="compare")

    def _on_compared(self, result: JobResult) -> None:
        if self.other is None:
            return
        if result.error:
            self.compare_label.setText(f"The comparison failed: {clip(result.error)}")
            return
        ids = result.inputs[2]
        self.compare_label.setText(describe_delta(result.value, self.other.name, self.session.tokenizer, ids))
