"""File ▸ Export: the current panel as PNG or SVG, the whole trace as .npz, attention weights as CSV."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QMenu, QWidget

from explorer.core.applicability import not_applicable
from explorer.core.export import (ExportCancelled, attention_csv_bytes, attention_csv_rows, trace_npz_bytes,
                                  write_attention_csv, write_trace_npz)
from explorer.qt import dialogs
from explorer.qt.scheduling.background import run_with_progress
from explorer.qt.settings import LAST_EXPORT_DIR
from model.core.architectures import has_attention


def export_png(widget: QWidget, path: str | os.PathLike) -> None:
    """Save a widget as it is drawn on screen (``QWidget.grab``) to a PNG file.

    Raises
    ------
    OSError
        When the image cannot be written.
    """
    if not widget.grab().save(str(path), "PNG"):
        raise OSError(f"could not write {path}")


def export_svg(widget: QWidget, path: str | os.PathLike, title: str = "") -> None:
    """Render a widget through ``QtSvg.QSvgGenerator`` to an SVG file (pyqtgraph's SVGExporter is
    broken with pyqtgraph 0.14 and PySide6 6.11). Heatmaps draw their cells as one vector rectangle
    each (:meth:`explorer.qt.plots.matrix_view.MatrixView.paint_cells`), not as an embedded bitmap.

    Raises
    ------
    OSError
        When nothing could be written.
    """
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(QSize(widget.width(), widget.height()))
    generator.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    generator.setTitle(title)
    painter = QPainter()
    if not painter.begin(generator):
        raise OSError(f"could not write {path}")
    try:
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    if not Path(path).is_file():
        raise OSError(f"could not write {path}")


CONFIRM_BYTES = 50_000_000  # a larger export asks first, saying its size


class ExportMenu:
    """Fills the File ▸ Export menu of a main window and runs its four exports.

    Every file name is asked through :mod:`explorer.qt.dialogs`; every failure is shown there too.
    The trace exports say their size first (in the file dialog's title; above
    :data:`CONFIRM_BYTES` they ask) and are written on a worker thread, with a progress dialog
    and Cancel; a cancelled export leaves no file.
    """

    def __init__(self, window, menu: QMenu) -> None:
        self.window = window
        self.actions = {}
        for key, text, slot in (("png", "Current Panel as &PNG…", self._on_png),
                                ("svg", "Current Panel as &SVG…", self._on_svg),
                                ("npz", "Trace as .&npz…", self._on_npz),
                                ("csv", "Attention Weights as &CSV…", self._on_csv)):
            self.actions[key] = menu.addAction(text)
            self.actions[key].triggered.connect(lambda *_, slot=slot: slot())
        menu.aboutToShow.connect(self._on_menu_about_to_show)

    def _on_menu_about_to_show(self) -> None:
        """Name the panel that will be exported (the one last clicked or focused)."""
        title = self.window.docks[self.window.current_panel()].windowTitle()
        self.actions["png"].setText(f"Panel “{title}” as &PNG…")
        self.actions["svg"].setText(f"Panel “{title}” as &SVG…")
        config = self.window.session.config
        attention = config is None or has_attention(config)  # the model before attention has no weights
        self.actions["csv"].setEnabled(attention)
        self.actions["csv"].setText("Attention Weights as &CSV…" if attention
                                    else "Attention Weights as CSV (this model has no attention)")

    def _ask(self, title: str, suffix: str, filter: str) -> str | None:
        start = Path(LAST_EXPORT_DIR.read(self.window.settings) or Path.home())
        name = f"{self.window.current_panel()}{suffix}" if suffix in (".png", ".svg") else f"trace{suffix}"
        path = dialogs.save_file(self.window, title, str(start / name), filter)
        if path:
            if not path.endswith(suffix):
                path += suffix
            LAST_EXPORT_DIR.write(self.window.settings, str(Path(path).parent))
        return path

    def _run(self, what: str, write) -> None:
        try:
            write()
        except OSError as exc:
            dialogs.error(self.window, f"Could not export {what}", str(exc))

    def _needs_trace(self) -> bool:
        s = self.window.session
        if s.trace is None or s.trace.n_tokens == 0:
            dialogs.info(self.window, "Nothing to export", "Type some text first: the trace is empty.")
            return False
        return True

    def _on_png(self) -> None:
        panel = self.window.panels[self.window.current_panel()]
        path = self._ask("Export Panel as PNG", ".png", "PNG images (*.png)")
        if path:
            self._run("the panel", lambda: export_png(panel, path))

    def _on_svg(self) -> None:
        name = self.window.current_panel()
        path = self._ask("Export Panel as SVG", ".svg", "SVG images (*.svg)")
        if path:
            self._run("the panel", lambda: export_svg(self.window.panels[name], path, name))

    def _on_npz(self) -> None:
        if self._needs_trace():
            s = self.window.session
            size = trace_npz_bytes(s.trace)  # computes nothing (scores, probs) on this thread
            self._export_trace("Export Trace", ".npz", "NumPy archives (*.npz)", "the trace",
                               f"every tensor of the trace, {_megabytes(size)}", size, write_trace_npz)

    def _on_csv(self) -> None:
        config = self.window.session.config
        if config is not None and not has_attention(config):
            dialogs.info(self.window, "No attention weights", not_applicable("attention", config))
            return
        if self._needs_trace():
            trace = self.window.session.trace
            rows, size = attention_csv_rows(trace), attention_csv_bytes(trace, self.window.session.tokens)
            self._export_trace("Export Attention Weights", ".csv", "CSV files (*.csv)", "the attention weights",
                               f"{rows:,} rows, {_megabytes(size)}", size, write_attention_csv)

    def _export_trace(self, title: str, suffix: str, filter: str, what: str, size_text: str, size: int,
                      write) -> None:
        """Say the size (ask first when it is large), ask for a file, and ``write(path, trace, tokens,
        progress)`` the current trace on a worker thread with a progress dialog and Cancel."""
        s = self.window.session
        trace, tokens = s.trace, s.tokens  # this trace, whatever is typed meanwhile
        if size > CONFIRM_BYTES and not dialogs.confirm(
                self.window, title, f"Exporting {what} writes {size_text}. Go on?"):
            return
        path = self._ask(f"{title} ({size_text})", suffix, filter)
        if not path:
            return
        bar = self.window.statusBar()
        done_of = [0, 1]  # rows written, of how many (written by the worker, read by the dialog)

        def work(cancel) -> None:
            def progress(done: int, total: int) -> bool:  # False after Cancel: the writer then stops
                done_of[:] = done, max(total, 1)
                return not cancel.is_set()

            write(path, trace, tokens, progress)

        try:
            outcome = run_with_progress(self.window, title, f"Writing {what} ({size_text}) to {Path(path).name}…",
                                        work, lambda: (None, done_of[0] / done_of[1]),
                                        cancelled_by=(ExportCancelled,))
        except OSError as exc:  # the message names the chosen file
            dialogs.error(self.window, f"Could not export {what}", str(exc))
            return
        if not outcome.cancelled:
            bar.showMessage(f"Wrote {what} to {path} ({size_text}).", 8000)
        else:
            bar.showMessage(f"Export cancelled: {Path(path).name} was not written.", 8000)


def _megabytes(n: int) -> str:
    """``"0.04 MB"``, ``"312 MB"``, ``"6.1 GB"``: a size in decimal units."""
    if n >= 10**9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.2f} MB" if n < 10**7 else f"{n / 1e6:,.0f} MB"
