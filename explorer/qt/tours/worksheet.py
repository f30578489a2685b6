"""Writing the worksheet: every step of the open tour (or, without one, the current panel) shown in
turn, its panel drawn by the app itself (``QWidget.grab``) and its sentences computed, in one HTML
file (:mod:`explorer.core.tours.worksheet`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtWidgets import QApplication, QWidget

from explorer.core.tours.worksheet import Page, worksheet_html
from explorer.core.views import token_label
from model.tokens.names import token_names

SETTLE_TURNS = 4  # event-loop turns for a shown panel to lay out and draw


def png_bytes(widget: QWidget) -> bytes:
    """The widget as the app draws it, as PNG bytes."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    widget.grab().save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def _settle(session) -> None:
    """Let the trace (worker thread, for a slow model) and the panels' drawing finish."""
    app = QApplication.instance()
    while session.busy:
        app.processEvents()
    for _ in range(SETTLE_TURNS):
        app.processEvents()


def _model_name(session) -> str:
    ckpt = session.checkpoint
    return ckpt.name if ckpt is not None else "no model"


def step_page(controller) -> Page:
    """The page of the step the controller shows, as it is now (its panel drawn, its numbers computed)."""
    window, step = controller.window, controller.step
    _settle(window.session)
    answer = controller.answers.get(controller.index)
    reveal = ""
    if answer is not None and answer.revealed is not None:
        reveal = answer.revealed.text + (f" {controller.explain.text}" if controller.explain is not None else "")
    say = controller.say
    return Page(step.title, _model_name(window.session), window.session.text,
                (say.text,) if say is not None else (), png_bytes(window.panels[step.panel]),
                f"the {step.panel} panel", controller.ask.text if controller.ask is not None else "",
                answer.words if answer is not None else "", reveal,
                tuple(say.errors if say is not None else ()) + ((controller.problem,) if controller.problem else ()))


def current_page(window) -> Page:
    """A page of the current view: the panel last worked in, and the most likely next tokens."""
    s, name = window.session, window.current_panel()
    _settle(s)
    lines = []
    trace = s.trace
    if trace is not None and trace.n_tokens:
        pos = s.selected_position()
        probs = trace.probs[pos]
        top = probs.argsort()[::-1][:5]
        words = token_names(s.tokenizer, [int(i) for i in top])
        after = f"After '{token_label(s.tokens[pos])}' (token {pos}) the model predicts: "
        lines.append(after + ", ".join(f"'{token_label(w)}' {float(probs[i]):.3f}" for w, i in zip(words, top)) + ".")
    title = window.docks[name].windowTitle() if name in window.docks else name
    return Page(title, _model_name(s), s.text, tuple(lines), png_bytes(window.panels[name]), f"the {title} panel")


def write_worksheet(controller, path: str | Path) -> int:
    """Write the open tour's every step (or the current view) as one HTML file; returns the pages
    written. The step shown before is shown again afterwards.

    Raises
    ------
    OSError
        When the file cannot be written.
    """
    window, tour = controller.window, controller.tour
    if tour is None:
        pages = [current_page(window)]
        title, about = "Transformer Explorer worksheet", ""
    else:
        shown, pages = controller.index, []
        for k in range(len(tour.steps)):
            controller.go(k)
            pages.append(step_page(controller))
        controller.go(shown)
        title, about = tour.title, tour.about
    Path(path).write_text(worksheet_html(title, about, pages), encoding="utf-8")
    return len(pages)
