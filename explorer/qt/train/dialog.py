"""File ▸ Train New Model…: choose the texts, the shape and the steps; the command's own checks
explain a bad choice before anything starts; ``python -m model.train`` then runs in a process of
its own (:class:`explorer.qt.train.run.TrainRun`) with a live loss curve, the step, tokens/s and
the time left. Its snapshots stream into the Training panel; Cancel stops it as Ctrl+C does (the
model reached is saved); when it ends, the model opens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from explorer.core.train_log import duration
from explorer.core.train_setup import (
    TrainChoice,
    check,
    command_args,
    default_choice,
    held_out_paths,
    next_free_name,
    snapshot_dir,
    split_for_validation,
    typed_path,
)
from explorer.qt.plots.style import style_plots
from explorer.qt import dialogs, theme
from explorer.qt.scheduling.background import run_with_progress
from explorer.core.save_folder import proposed_save_folder
from explorer.qt.settings import LAST_DIR, LAST_TRAIN_DIR, documents_folder
from explorer.qt.plots.plot_items import plain_numbers
from explorer.qt.train.run import TrainRun
from model.training.data import CorpusError, unknown_warning

SMOOTH = 20  # steps in the running mean of the training loss
SPINS = (("n_layers", "layers", 1, 64), ("n_heads", "heads", 1, 64), ("d_model", "d_model", 1, 8192),
         ("context_length", "context", 2, 8192), ("steps", "steps", 1, 10_000_000), ("snapshots", "snapshots", 0, 1000))
OUTCOME = {0: "done", 130: "stopped", 1: "diverged", 2: "bad input"}


def _with_button(edit: QWidget, text: str, slot) -> QHBoxLayout:
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    button = QPushButton(text)
    button.clicked.connect(slot)
    row.addWidget(button)
    return row


class TrainDialog(QDialog):
    """The Train New Model window (modeless): a form, then the run's progress and loss curve."""

    sig_follow = Signal(str)
    """A run started that writes snapshots into this folder (the Training panel follows it)."""
    sig_open = Signal(str)
    """The run ended with a saved model: open this file."""
    sig_started = Signal(str)
    """A run started that writes its model into this file."""

    def __init__(self, parent: QWidget | None = None, folder: str = "", out_folder: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Train New Model")
        self.folder = folder  # where the text file dialogs start
        self.out_folder = out_folder or folder  # where the model is proposed to go
        self.run: TrainRun | None = None
        self._held_out: tuple[Path, Path] | None = None  # the texts this dialog split for its run
        self.corpus = QListWidget()
        self.corpus.setMaximumHeight(70)
        self.val, self.out = QLineEdit(), QLineEdit()
        self.val.setPlaceholderText("none: the last tenth of the training stories is held out")
        self.spins = {}
        for key, _label, lo, hi in SPINS:
            box = QSpinBox()
            box.setRange(lo, hi)
            self.spins[key] = box
        self.problem, self.summary = QLabel(), QLabel()
        for label in (self.problem, self.summary):
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.setStyleSheet(theme.note_style(self))
        self.start_button, self.cancel_button = QPushButton("Start training"), QPushButton("Cancel training")
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.plot = pg.PlotWidget()
        style_plots(self.plot, [self.plot.getPlotItem()], self)
        self.plot.setLabel("left", "loss (nats / token)")
        self.plot.setLabel("bottom", "step")
        plain_numbers(self.plot)
        self.plot.addLegend(offset=(-4, 4))
        self.raw = self.plot.plot(pen=pg.mkPen("#c8c8c8"), name="training (each step)")
        self.smooth = self.plot.plot(pen=pg.mkPen("#1f5fa8", width=2), name=f"training (mean of {SMOOTH})")
        self.val_curve = self.plot.plot(pen=pg.mkPen("#d0700a", width=2), symbol="o", symbolSize=6,
                                        symbolBrush="#d0700a", name="validation")
        self._build()
        self.set_choice(default_choice())
        for widget in (self.val, self.out):
            widget.textChanged.connect(self.explain)
        for box in self.spins.values():
            box.valueChanged.connect(self.explain)
        self.explain()

    def _build(self) -> None:
        form = QFormLayout()
        files = QVBoxLayout()
        files.addWidget(self.corpus)
        buttons = QHBoxLayout()
        for text, slot in (("Add…", self._on_add_clicked), ("Remove", self._on_remove_clicked)):
            button = QPushButton(text)
            button.clicked.connect(slot)
            buttons.addWidget(button)
        buttons.addStretch(1)
        files.addLayout(buttons)
        form.addRow("Training text (--corpus)", files)
        form.addRow("Validation text (--val)", _with_button(self.val, "Choose…", self._on_choose_val_clicked))
        form.addRow("Save the model as (--out)", _with_button(self.out, "Choose…", self._on_choose_out_clicked))
        for keys, title in ((("n_layers", "n_heads", "d_model", "context_length"), "Shape"),
                            (("steps", "snapshots"), "Training")):
            row = QHBoxLayout()
            for key in keys:
                row.addWidget(QLabel(next(label for k, label, *_ in SPINS if k == key)))
                row.addWidget(self.spins[key])
            row.addStretch(1)
            form.addRow(title, row)
        actions = QHBoxLayout()
        actions.addWidget(self.start_button)
        actions.addWidget(self.cancel_button)
        actions.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addLayout(actions)
        layout.addWidget(self.summary)
        layout.addWidget(self.plot, 1)
        self.resize(720, 640)

    # ---- the form ---------------------------------------------------------------------------------
    def set_choice(self, choice: TrainChoice) -> None:
        """Fill the form (the command's defaults at first)."""
        self.corpus.clear()
        self.corpus.addItems(list(choice.corpus))
        self.val.setText(choice.val or "")
        self.out.setText(choice.out or next_free_name(Path(self.out_folder or Path.home()) / "my-model.safetensors"))
        for key, box in self.spins.items():
            box.setValue(getattr(choice, key))
        self.explain()

    def choice(self) -> TrainChoice:
        """What the form says."""
        return TrainChoice(corpus=[self.corpus.item(i).text() for i in range(self.corpus.count())],
                           val=typed_path(self.val.text()) or None, out=typed_path(self.out.text()),
                           **{key: box.value() for key, box in self.spins.items()})

    def explain(self, *_args) -> str:
        """Check the choice with the command's own checks; show why it cannot start ("" when it can)."""
        running = self.run is not None and self.run.running
        problem = check(self.choice())
        self.problem.setText(problem)
        self.problem.setVisible(bool(problem))
        self.start_button.setEnabled(not problem and not running)
        self.cancel_button.setEnabled(running)
        return problem

    def _on_add_clicked(self) -> None:
        paths = dialogs.open_files(self, "Training Text", self.folder)
        if paths:
            self.folder = str(Path(paths[0]).parent)
            self.corpus.addItems(paths)
            self.explain()

    def _on_remove_clicked(self) -> None:
        for item in self.corpus.selectedItems() or [self.corpus.item(self.corpus.count() - 1)]:
            if item is not None:
                self.corpus.takeItem(self.corpus.row(item))
        self.explain()

    def _on_choose_val_clicked(self) -> None:
        path = dialogs.open_file(self, "Validation Text", self.folder, dialogs.TEXT_FILTER)
        if path:
            self.val.setText(path)

    def _on_choose_out_clicked(self) -> None:
        path = dialogs.save_file(self, "Save the Model As", self.out.text(), "Checkpoints (*.safetensors)")
        if path:
            self.out.setText(path if path.endswith(".safetensors") else path + ".safetensors")

    # ---- the run ---------------------------------------------------------------------------------------
    def start(self) -> bool:
        """Check, hold out validation text when none was chosen, and start the run.

        Returns
        -------
        bool
            True when the process was started; otherwise the dialog says why.
        """
        if self.explain() or (self.run is not None and self.run.running):
            return False
        choice = self.choice()
        if Path(choice.out).exists() and not dialogs.confirm(
                self, "Train New Model", f"{choice.out} exists. Replace it with the model this run trains?"):
            return False
        if choice.val is None and not self._hold_out(choice):
            return False
        self._held_out = held_out_paths(choice.out) if choice.val is None else None
        out = Path(choice.out)
        log_path = out.with_name(out.stem + "-train-log.jsonl")
        self.run = TrainRun(command_args(choice, log_path), log_path, out.parent, parent=self)
        self.run.sig_progress.connect(self._on_progress)
        self.run.sig_finished.connect(self._on_finished)
        for curve in (self.raw, self.smooth, self.val_curve):
            curve.setData([], [])
        self.summary.setText("starting: reading the text and building the vocabulary…")
        self.run.start()
        self.sig_started.emit(choice.out)
        self.explain()
        if choice.snapshots:
            self.sig_follow.emit(str(snapshot_dir(choice.out)))
        return True

    def _hold_out(self, choice: TrainChoice) -> bool:
        train, val = held_out_paths(choice.out)
        try:
            run_with_progress(self, "Train New Model", "Holding out a tenth of the stories for validation…",
                              lambda _cancel: split_for_validation(choice.corpus, train, val),
                              lambda: (None, None))  # a busy bar: the split says nothing of how far it is
        except (CorpusError, OSError) as exc:
            self.problem.setText(str(exc))
            self.problem.setVisible(True)
            return False
        return True

    def cancel(self) -> None:
        """Stop the run as Ctrl+C does: the model reached is saved, then opened."""
        if self.run is not None and self.run.running:
            self.summary.setText(f"stopping after step {self.run.log.step:,}: saving the model reached…")
            self.run.cancel()

    def _on_progress(self) -> None:
        log = self.run.log
        self.summary.setText(log.summary())
        if log.losses:
            steps, losses = np.array(log.losses, dtype=np.float64).T
            self.raw.setData(steps, losses)
            n = min(SMOOTH, len(losses))
            mean = np.convolve(losses, np.ones(n) / n, mode="valid")
            self.smooth.setData(steps[n - 1:], mean)
        if log.val:
            self.val_curve.setData(*np.array(log.val, dtype=np.float64).T)

    def _on_finished(self, code: int) -> None:
        run = self.run
        self.explain()  # the form again (before the run's own message, which stays until an edit)
        self._on_progress()
        log, out = run.log, run.log.out
        saved = code in (0, 130) and out is not None and Path(out).is_file()
        spent = duration(log.train_s)
        if saved:
            what = "done" if code == 0 else f"stopped at step {log.step:,} of {log.steps:,}"
            warning = unknown_warning(log.val_unk_share)
            advice = f" {warning.removeprefix('warning: ')} (python -m model.train)." if warning else ""
            self.summary.setText(f"{what}: saved {out} ({spent} of training); it is now open.{advice}")
            self.out.setText(next_free_name(out))  # a next run gets a name (and snapshot folder) of its own
            self.sig_open.emit(str(out))
            return
        self._remove_held_out()
        if run.stopped_early:
            self.summary.setText("stopped before training started: nothing was written.")
        elif code == 2:
            self.problem.setText(run.error_line())
            self.problem.setVisible(True)
            self.summary.setText("the run did not start: nothing was written.")
        else:
            self.summary.setText(f"the run ended ({OUTCOME.get(code, f'status {code}')}): {run.error_line()}")

    def _remove_held_out(self) -> None:
        """A run that saved no model leaves none of the text this dialog split for it (``OUT-text/``)."""
        for path in self._held_out or ():
            path.unlink(missing_ok=True)
        if self._held_out and self._held_out[0].parent.is_dir() and not any(self._held_out[0].parent.iterdir()):
            self._held_out[0].parent.rmdir()
        self._held_out = None


def open_train_dialog(window) -> TrainDialog:
    """Show the main window's Train dialog (one per window; a run keeps going while it is closed).

    Its run's snapshots stream into the window's Training panel, and the model it saves opens. The
    model is proposed to go into the folder of the last run started (kept in the settings), else the
    user's documents folder, else the home folder: never the folder of the last opened checkpoint,
    which is ``assets/`` after a shipped model (:mod:`explorer.core.save_folder`).
    """
    dialog = window.findChild(TrainDialog)
    if dialog is None:
        out = proposed_save_folder((LAST_TRAIN_DIR.read(window.settings), documents_folder(), str(Path.home())))
        dialog = TrainDialog(window, folder=LAST_DIR.read(window.settings) or str(Path.home()), out_folder=out)
        dialog.sig_started.connect(lambda path: LAST_TRAIN_DIR.write(window.settings, str(Path(path).parent)))

        def follow(folder: str) -> None:
            window.docks["training"].show()
            window.docks["training"].raise_()
            window.panels["training"].follow_folder(folder)

        dialog.sig_follow.connect(follow)
        dialog.sig_open.connect(lambda path: window.files.open_checkpoint(Path(path)))
    dialog.show()
    dialog.raise_()
    return dialog
