"""Head types over training, a tab of the Training panel: one plot per head type with every head's
score over the snapshots (the head with the highest final score in colour, the others grey), the probe's loss on its
first and second copy, a dashed line at the step where an induction head forms, and the lesson
paragraph about that step (:func:`explorer.core.head_types.formation_paragraph`)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.core.head_types import TYPE_NAMES, formation_paragraph
from explorer.core.training_views import step_ticks, step_x
from explorer.qt.plots.style import context_pen, mark_context, restyle, style_plots
from explorer.qt import theme
from explorer.qt.panels.training.curves import COLOURS, emit_clicked_x, make_plot, place_lines
from model.explain.heads import HEAD_TYPES
from model.training.heads_over_training import HeadTypeCurves, induction_formation

TYPE_COLOURS = {"previous_token": COLOURS["prev"], "duplicate_token": COLOURS["self"], "induction": COLOURS["text"]}
MIN_HEIGHT_PX = 380  # two rows of plots, as the curves over training
MARK = "#c0392b"  # the dashed line at the step where an induction head forms


def _drawable(x: np.ndarray, y: np.ndarray) -> tuple:
    """(x, y), or nothing when no y is a number (snapshots whose attention overflowed): a curve of
    symbols on NaN alone makes pyqtgraph warn."""
    return (x, y) if np.isfinite(y).any() else ([], [])


class HeadTypeCurvesView(QWidget):
    """Every head's previous-token, duplicate-token and induction score over training, and the probe's in-context loss."""

    sig_x_clicked = Signal(float)
    """A plot was clicked at this x (log10(1 + step))."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setMinimumHeight(MIN_HEIGHT_PX)
        self.plots = {kind: make_plot(self.view.ci, i // 2, i % 2, f"{TYPE_NAMES[kind]} score, every head", "score",
                                      legend=(4, 4)) for i, kind in enumerate(HEAD_TYPES)}  # a 2 x 2 grid
        self.loss = make_plot(self.view.ci, 1, 1, "loss on the probe's two copies", "nats / token", legend=(4, -4))
        every = [*self.plots.values(), self.loss]
        for plot in every:
            plot.setLabel("bottom", "training step (log scale)")
        self.best = {kind: plot.plot(pen=pg.mkPen(TYPE_COLOURS[kind], width=2), symbol="o", symbolSize=4, name="")
                     for kind, plot in self.plots.items()}
        self.others: dict[str, list[pg.PlotDataItem]] = {kind: [] for kind in HEAD_TYPES}
        self.first = self.loss.plot(pen=pg.mkPen(COLOURS["val"], width=2), name="first copy")
        self.second = self.loss.plot(pen=pg.mkPen(COLOURS["text"], width=2), symbol="o", symbolSize=4,
                                     name="second copy")
        self.lines = [pg.InfiniteLine(angle=90, movable=False, pen=theme.curve_pen("#444", self, width=1)) for _ in every]
        self.formed = [pg.InfiniteLine(angle=90, movable=False, pen=theme.curve_pen(MARK, self, width=2, style=Qt.PenStyle.DashLine))
                       for _ in every]
        for plot, line, formed in zip(every, self.lines, self.formed):
            plot.addItem(line, ignoreBounds=True)
            plot.addItem(formed, ignoreBounds=True)
            formed.setVisible(False)
        style_plots(self.view, every)  # after the curves: titles, legends and curves read on the ground
        self.lesson = QLabel()
        self.lesson.setWordWrap(True)
        self.lesson.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.lesson)
        layout.addWidget(self.view, 1)
        self.curves: HeadTypeCurves | None = None
        self.drawn: HeadTypeCurves | None = None  # the curves on the plots (behind another tab: not yet)
        self.view.scene().sigMouseClicked.connect(self._on_scene_clicked)

    def set_curves(self, c: HeadTypeCurves) -> None:
        """Draw the scores of every head over the snapshots, the probe's two losses and the lesson: now
        when on screen, else when next shown (a tab behind another: drawing a run of 3,000 snapshots'
        there took 22 to 75 ms of the GUI thread, while opening its folder, for plots nobody saw)."""
        self.curves = c
        if self.isVisible():
            self._draw(c)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().showEvent(event)
        if self.curves is not None and self.drawn is not self.curves:
            self._draw(self.curves)

    def _draw(self, c: HeadTypeCurves) -> None:
        self.drawn = c
        x = step_x(c.steps)
        right = float(step_x(max(int(c.steps[-1]), 1)))
        for kind, plot in self.plots.items():
            self._draw_type(kind, plot, c, x)
        self.first.setData(*_drawable(x, c.first_half_loss))
        self.second.setData(*_drawable(x, c.second_half_loss))
        top = np.nanmax(np.concatenate([c.first_half_loss, c.second_half_loss, [1.0]]))
        self.loss.setYRange(0, float(top) * 1.05, padding=0)
        for plot in (*self.plots.values(), self.loss):
            plot.getAxis("bottom").setTicks([step_ticks(int(c.steps[-1])), []])
            plot.setXRange(-0.05 * right, right * 1.05, padding=0)
        f = induction_formation(c)
        for line in self.formed:
            line.setVisible(f is not None)
            if f is not None:
                line.setValue(float(step_x(f.after_step)))
        self.lesson.setText(formation_paragraph(c))
        restyle(self.view)  # curves made or renamed now read on the ground as those made before

    def _draw_type(self, kind: str, plot: pg.PlotItem, c: HeadTypeCurves, x: np.ndarray) -> None:
        scores = c.by_type[kind]  # (S, L, H)
        best = c.best_head(kind)
        heads = [(li, h) for li in range(scores.shape[1]) for h in range(scores.shape[2]) if (li, h) != best]
        items = self.others[kind]
        while len(items) < len(heads):
            items.append(mark_context(plot.plot(pen=context_pen(self, width=1))))
        for item, (li, h) in zip(items, heads):
            item.setData(x, scores[:, li, h])
            item.setVisible(True)
        for item in items[len(heads):]:
            item.setVisible(False)
        curve = self.best[kind]
        curve.setData(*_drawable(x, scores[:, best[0], best[1]]) if best is not None else ([], []))
        curve.setZValue(1)
        label = plot.legend.getLabel(curve) if plot.legend is not None else None
        if label is not None:
            label.setText(f"L{best[0]}H{best[1]} (highest at the end)" if best is not None else "")
        plot.setYRange(0, 1.05, padding=0)

    def set_step(self, step: int | None) -> None:
        """Move the thin line to the step shown (hidden for None)."""
        place_lines(self.lines, step)

    def clear_curves(self) -> None:
        """Nothing drawn (no snapshots)."""
        self.curves = self.drawn = None
        for item in (*self.best.values(), self.first, self.second, *sum(self.others.values(), [])):
            item.setData([], [])
        for line in self.formed:
            line.setVisible(False)
        self.lesson.setText("")

    def _on_scene_clicked(self, event) -> None:
        emit_clicked_x([*self.plots.values(), self.loss], event, self.sig_x_clicked)
