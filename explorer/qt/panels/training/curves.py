"""Curves over training for the current text: four plots on a log step axis, a line at the
snapshot shown, markers where the top-1 prediction changed; a click picks the nearest snapshot."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal

from explorer.core.training_views import head_curves, spread_indices, step_ticks, step_x, top1_changes
from explorer.core.views import token_label
from explorer.qt.plots.style import context_pen, mark_context, restyle, style_plots
from explorer.qt import theme
from explorer.qt.plots.heatmap import settle_view
from explorer.qt.plots.plot_items import plain_numbers, use_shrinking_title
from model.training.over_training import TrainingCurves

COLOURS = {"text": "#1f5fa8", "val": "#d0700a", "target": "#1f5fa8", "top1": "#888888",
           "first": "#2a9d3a", "prev": "#c0392b", "self": "#7b3fa0", "entropy": "#1f5fa8", "other": "#cfcfcf"}
MARKER = "#c0392b"


def make_plot(layout: pg.GraphicsLayout, row: int, col: int, title: str, y_label: str,
          legend: tuple[int, int] = (-4, 4)) -> pg.PlotItem:
    """A plot of the grid; ``legend`` is its offset (negative: from the right or bottom)."""
    plot = layout.addPlot(row=row, col=col)
    use_shrinking_title(plot, title)  # a long title never widens the plot past its widget
    plot.setLabel("left", y_label)
    plain_numbers(plot)
    if row == 1:  # the lower row names the shared axis
        plot.setLabel("bottom", "training step (log scale)")
    plot.setMouseEnabled(False, False)
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.addLegend(offset=legend, labelTextSize="8pt", verSpacing=-6)  # its colours: plots.style.style_plots
    return plot


MIN_HEIGHT_PX = 380  # two rows of plots with their titles, axes and a readable curve


CHANGE_LABELS = 12  # top-1 changes named on the curve; the others are marked only


class CurvesView(pg.GraphicsLayoutWidget):
    """Loss on the text and the validation curve; the target's and the top-1's probability; the
    selected head's attention mass on the first, previous and same token; attention entropy."""

    sig_x_clicked = Signal(float)
    """A plot was clicked at this x (log10(1 + step))."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        # The loss falls from the left's high start: its legend in the lower left corner is off both
        # curves (in the upper right it covered the validation curve's fall in a 960-px window).
        self.loss = make_plot(self.ci, 0, 0, "loss on this text", "nats / token", legend=(4, -4))
        self.prob = make_plot(self.ci, 0, 1, "next-token probability", "probability", legend=(4, 4))
        self.mass = make_plot(self.ci, 1, 0, "attention mass, selected head", "mean weight", legend=(4, 4))
        self.entropy = make_plot(self.ci, 1, 1, "attention entropy", "nats", legend=(-4, -4))
        self.plots = (self.loss, self.prob, self.mass, self.entropy)
        self.setMinimumHeight(MIN_HEIGHT_PX)  # a small dock scrolls (panel_scroll) rather than squash the plots
        pen = lambda key, **kw: pg.mkPen(COLOURS[key], width=2, **kw)  # noqa: E731
        self.text_curve = self.loss.plot(pen=pen("text"), symbol="o", symbolSize=5, name="on this text")
        self.val_curve = self.loss.plot(pen=pen("val", style=Qt.PenStyle.DashLine), name="validation (stored)")
        self.target_curve = self.prob.plot(pen=pen("target"), symbol="o", symbolSize=5, name="target")
        self.top1_curve = self.prob.plot(pen=pen("top1", style=Qt.PenStyle.DashLine), name="top-1")
        self.changes = pg.ScatterPlotItem(size=10, symbol="t", brush=MARKER, pen=None)
        self.prob.addItem(self.changes)
        self.change_labels: list[pg.TextItem] = []
        # Symbols (one per snapshot) on the upper plots only: repainting them when the line at the
        # step shown moves cost about 0.4 ms a curve.
        self.mass_curves = {k: self.mass.plot(pen=pen(k), name=name)
                            for k, name in (("first", "first token"), ("prev", "previous token"),
                                            ("self", "token itself"))}
        self.other_heads: list[pg.PlotDataItem] = []
        self.entropy_curve = self.entropy.plot(pen=pen("entropy"), name="selected head")
        self.lines = [pg.InfiniteLine(angle=90, movable=False, pen=theme.curve_pen("#444", self, width=1))
                      for _ in self.plots]
        for plot, line in zip(self.plots, self.lines):
            plot.addItem(line, ignoreBounds=True)
        style_plots(self, self.plots)  # after the curves: titles, legends and curves read on the ground
        self._max_step = -1
        self._shown: TrainingCurves | None = None  # the curves set last (a half drawn later checks it)
        self.scene().sigMouseClicked.connect(self._on_scene_clicked)

    def set_curves(self, curves: TrainingCurves, layer: int, head: int, name: Callable[[int], str],
                   target_note: str, later: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Draw the curves of one text; ``name(id)`` shows a token; ``target_note`` titles the probability plot.

        ``later(work)``, when given, runs the two attention plots' half in a later event-loop turn (the
        session's pacer): each half is then drawn and painted in a turn of its own (a run of 3,000
        snapshots' curves, drawn and painted in one turn, took 30 to 70 ms of the GUI thread)."""
        self._shown = curves
        x = step_x(curves.steps)
        self._set_axis(int(curves.steps[-1]) if len(curves.steps) else 0)
        self.text_curve.setData(x, curves.loss_on_text)
        vc = curves.val_curve
        self.val_curve.setData(step_x(vc[:, 0]) if len(vc) else [], vc[:, 1] if len(vc) else [])
        top = np.nanmax(np.concatenate([curves.loss_on_text, vc[:, 1] if len(vc) else [], [1.0]]))
        self.loss.setYRange(0, float(top) * 1.05, padding=0)
        self.target_curve.setData(x, curves.target_prob)
        self.top1_curve.setData(x, curves.top1_prob)
        self.prob.setTitle(target_note)
        self._mark_changes(curves, x, name)
        if later is None:
            self._draw_head(curves, layer, head)
            return
        self._settle(self.loss, self.prob)
        restyle(self)  # the change labels made just now read on the ground
        later(lambda: self._shown is curves and self._draw_head(curves, layer, head))

    def _draw_head(self, curves: TrainingCurves, layer: int, head: int) -> None:
        self.show_head(curves, layer, head)  # ends with restyle: what was drawn reads on the ground
        self._settle(*self.plots)

    @staticmethod
    def _settle(*plots) -> None:
        for plot in plots:  # ranges applied now, not in the first paint (which then paints again)
            settle_view(plot.getViewBox())

    def show_head(self, curves: TrainingCurves, layer: int, head: int) -> None:
        """The selected head's statistics (the others' entropy faint behind it); a model without attention
        (no heads: the model before attention) leaves the two attention plots empty and says so."""
        x = step_x(curves.steps)
        if curves.attn_entropy.shape[1] == 0:
            for item in (*self.mass_curves.values(), self.entropy_curve, *self.other_heads):
                item.setData([], [])
            self.mass.setTitle("attention mass: this model has no attention")
            self.entropy.setTitle("attention entropy: this model has no attention")
            return
        stats = head_curves(curves, layer, head)
        for key, item in self.mass_curves.items():
            item.setData(x, stats[key])
        self.mass.setTitle(f"attention mass, layer {layer} head {head}")
        n_layers, n_heads = curves.attn_entropy.shape[1:]
        others = [(li, h) for li in range(n_layers) for h in range(n_heads) if (li, h) != (layer, head)]
        while len(self.other_heads) < len(others):
            self.other_heads.append(mark_context(self.entropy.plot(pen=context_pen(self, width=1))))
        for item, (li, h) in zip(self.other_heads, others):
            item.setData(x, curves.attn_entropy[:, li, h])
            item.setVisible(True)
        for item in self.other_heads[len(others):]:
            item.setVisible(False)
        self.entropy_curve.setData(x, stats["entropy"])
        self.entropy_curve.setZValue(1)
        self.entropy.setTitle(f"attention entropy, layer {layer} head {head}" + (" (grey: the other heads)" if others else ""))
        finite = curves.attn_entropy[np.isfinite(curves.attn_entropy)]
        self.entropy.setYRange(0, max(float(finite.max()) if finite.size else 0.0, math.log(2)) * 1.05, padding=0)
        restyle(self)  # the other heads' curves made just now read on the ground as the rest

    def _mark_changes(self, curves: TrainingCurves, x: np.ndarray, name: Callable[[int], str]) -> None:
        """A marker on the top-1 curve where the top-1 changed, and the new top-1 token beside at most
        :data:`CHANGE_LABELS` of them (spread evenly: a label per change of a long noisy run was
        hundreds of text items, unreadable, and 70 ms to lay out and more to paint)."""
        where = top1_changes(curves)
        self.changes.setData(x[where], curves.top1_prob[where])
        if len(where) > CHANGE_LABELS:
            where = where[spread_indices(len(where), CHANGE_LABELS)]
        while len(self.change_labels) < len(where):
            label = pg.TextItem(color=MARKER, anchor=(0.5, 1.2))
            self.prob.addItem(label, ignoreBounds=True)
            self.change_labels.append(label)
        for label, i in zip(self.change_labels, where):
            label.setText(f"→ {token_label(name(int(curves.top1[i])), 10)}")
            label.setPos(float(x[i]), float(curves.top1_prob[i]))
            label.setVisible(True)
        for label in self.change_labels[len(where):]:
            label.setVisible(False)

    def _set_axis(self, max_step: int) -> None:
        if max_step == self._max_step:
            return
        self._max_step = max_step
        ticks = [step_ticks(max_step), []]
        right = float(step_x(max(max_step, 1)))
        for plot in self.plots:
            plot.getAxis("bottom").setTicks(ticks)
            plot.setXRange(-0.05 * right, right * 1.05, padding=0)
        for plot in (self.prob, self.mass):
            plot.setYRange(0, 1.08, padding=0)

    def set_step(self, step: int | None) -> None:
        """Move the vertical line to the step shown (hidden for None)."""
        place_lines(self.lines, step)

    def clear_curves(self) -> None:
        """No curves (no snapshots, or no tokens). (Not ``clear``: GraphicsLayoutWidget's ``clear``
        removes every plot.)"""
        self._shown = None
        for item in (self.text_curve, self.val_curve, self.target_curve, self.top1_curve, self.entropy_curve,
                     *self.mass_curves.values(), *self.other_heads):
            item.setData([], [])
        self.changes.setData([], [])
        for label in self.change_labels:
            label.setVisible(False)

    def _on_scene_clicked(self, event) -> None:
        emit_clicked_x(self.plots, event, self.sig_x_clicked)


def place_lines(lines, step: int | None) -> None:
    """Move vertical lines (one per plot) to ``step`` on the log step axis; hide them for None."""
    for line in lines:
        line.setVisible(step is not None)
        if step is not None:
            line.setValue(float(step_x(step)))


def emit_clicked_x(plots, event, signal) -> None:
    """Emit ``signal`` with the x (log10(1 + step)) of a click on one of ``plots``."""
    for plot in plots:
        if plot.getViewBox().sceneBoundingRect().contains(event.scenePos()):
            signal.emit(plot.getViewBox().mapSceneToView(event.scenePos()).x())
            return
