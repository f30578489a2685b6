"""LabelAxis: token labels drawn beside their own rows, laid out once per string."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QApplication

from explorer.qt.heatmap import Heatmap
from explorer.qt.label_axis import LabelAxis

SHORT, LONG = "0 a", "3 somewhat-longer-word"


@pytest.fixture
def heatmap(qtbot):
    hm = Heatmap("labels")
    qtbot.addWidget(hm)
    hm.resize(420, 320)
    hm.show()
    hm.set_data(np.arange(8, dtype=np.float32).reshape(4, 2), (0, 7), [SHORT, "1 b", "2 c", LONG], None)
    QApplication.processEvents()
    return hm


def _ink_columns(hm, row_fraction: float) -> np.ndarray:
    """x positions (graphics widget px) left of the plot where the text colour darkens the white
    background, on the horizontal line through ``row_fraction`` (in rows) of the view."""
    image = hm.graphics.grab().toImage()
    y = hm.graphics.mapFromScene(hm.plot.getViewBox().mapViewToScene(QPointF(0, row_fraction))).y()
    x_plot = hm.graphics.mapFromScene(hm.plot.getViewBox().mapViewToScene(QPointF(0, 0))).x()
    ratio = image.devicePixelRatio()
    dark = [x for x in range(0, x_plot - 2) if image.pixelColor(int(x * ratio), int(y * ratio)).lightness() < 200]
    return np.array(dark)


def test_labels_are_drawn_beside_their_rows_row_zero_on_top(heatmap):
    axis = heatmap.plot.getAxis("left")
    assert isinstance(axis, LabelAxis)
    top, bottom = _ink_columns(heatmap, 0.5), _ink_columns(heatmap, 3.5)
    assert top.size and bottom.size, "a label is missing"
    # The long label (row 3, the bottom row) reaches much further left than "0 a" (row 0, top).
    assert bottom.min() < top.min() - 40
    # Between the rows (at a row boundary) there is no text.
    assert _ink_columns(heatmap, 2.0).size == 0


def test_value_to_pixel_follows_the_inverted_view(heatmap):
    axis = heatmap.plot.getAxis("left")
    bounds = axis.mapRectFromParent(axis.geometry())
    row_height = bounds.height() / 4
    assert axis.value_to_pixel(0.5, bounds) == pytest.approx(row_height / 2, abs=1.5)
    assert axis.value_to_pixel(3.5, bounds) == pytest.approx(bounds.height() - row_height / 2, abs=1.5)


def test_a_changed_label_is_the_only_one_laid_out_again(heatmap):
    axis = heatmap.plot.getAxis("left")
    heatmap.graphics.grab()
    before = dict(axis._static)
    assert set(before) == {SHORT, "1 b", "2 c", LONG}
    heatmap.set_data(np.zeros((4, 2), np.float32), (0, 1), [SHORT, "1 b", "2 c", "3 other"], None)
    heatmap.graphics.grab()
    assert set(axis._static) - set(before) == {"3 other"}
    assert all(axis._static[t] is before[t] for t in before)  # reused, not laid out again


def test_numbered_axes_are_still_painted_by_pyqtgraph(heatmap):
    axis = heatmap.col_axis  # dimensions: setTicks(None)
    assert isinstance(axis, LabelAxis) and axis._tickLevels is None
    heatmap.graphics.grab()
    assert axis.picture is not None and not axis._static
