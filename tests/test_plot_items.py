"""Our plot items: LabelAxis (token labels beside their own rows, laid out once per string, and
repainted where they changed) and MatrixImage (the colours pyqtgraph would draw, made faster)."""

import numpy as np
import pytest
from PySide6.QtCore import QAbstractEventDispatcher, QEvent, QEventLoop, QObject, QPointF, Qt
from PySide6.QtWidgets import QApplication

import pyqtgraph as pg
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QRegion

from explorer.qt.plots.heatmap import DIVERGING, SEQUENTIAL, Heatmap, colormap
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import MatrixImage

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
    """x positions (graphics widget px) between the axis title and the plot where the text colour
    darkens the white background, on the horizontal line through ``row_fraction`` (in rows)."""
    image = hm.graphics.grab().toImage()
    y = hm.graphics.mapFromScene(hm.plot.getViewBox().mapViewToScene(QPointF(0, row_fraction))).y()
    x_plot = hm.graphics.mapFromScene(hm.plot.getViewBox().mapViewToScene(QPointF(0, 0))).x()
    title = hm.plot.getAxis("left").label
    x_title = hm.graphics.mapFromScene(title.sceneBoundingRect().topRight()).x() if title.isVisible() else 0
    ratio = image.devicePixelRatio()
    dark = [x for x in range(x_title + 1, x_plot - 2)
            if image.pixelColor(int(x * ratio), int(y * ratio)).lightness() < 200]
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


def _argb(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    return np.frombuffer(image.constBits(), np.uint32, image.width() * image.height()).reshape(
        image.height(), image.width()).copy()


@pytest.mark.parametrize("cmap", [DIVERGING, SEQUENTIAL])
def test_matrix_image_draws_the_colours_pyqtgraph_draws(qapp, cmap):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((7, 40)) * 2).astype(np.float32)  # some values beyond the levels
    data[2, 3] = data[5, :6] = np.nan  # masked cells
    ours, theirs = MatrixImage(), pg.ImageItem(axisOrder="row-major")
    for item in (ours, theirs):
        item.setColorMap(colormap(cmap))
        item.setImage(data, levels=(-1.5, 2.5), autoLevels=False)
        item.render()
    assert ours.qimage.format() == QImage.Format.Format_ARGB32_Premultiplied  # no per-draw conversion
    a, b = _argb(ours.qimage), _argb(theirs.qimage)
    nan = np.isnan(data)
    np.testing.assert_array_equal(a[~nan], b[~nan])
    assert not (a[nan] >> 24).any() and not (b[nan] >> 24).any()  # transparent in both
    assert len(np.unique(a[~nan])) > 20  # a real spread of colours was compared


def test_matrix_image_keeps_pyqtgraph_s_path_for_other_images(qapp):
    item = MatrixImage()
    rgb = np.zeros((3, 4, 3), np.uint8)
    rgb[..., 0] = 200
    item.setImage(rgb, levels=(0, 255), autoLevels=False)
    item.render()
    assert item.qimage is not None and QColor(item.qimage.pixel(1, 1)).red() == 200


def test_an_axis_without_a_fixed_width_grows_to_its_labels(qtbot):
    """The positional panel's next-token bars: an auto-sized axis must show its long labels."""
    view = pg.GraphicsLayoutWidget()
    qtbot.addWidget(view)
    plot = view.addPlot(axisItems={"left": LabelAxis("left")})
    view.resize(400, 300)
    view.show()
    labels = ["and 0.496/0.457", "with 0.014/0.012", "was 0.006/0.021"]
    axis = plot.getAxis("left")
    axis.setTicks([[(i + 0.5, t) for i, t in enumerate(labels)], []])
    plot.setRange(yRange=(0, 3), padding=0)
    for _ in range(3):  # the first paint asks for room; the next ones draw in it
        view.grab()
        QApplication.processEvents()
    widest = max(axis.label_width(t) for t in labels)
    assert axis.width() >= widest
    ticks, drawn = axis._placed(axis.mapRectFromParent(axis.geometry()), axis.style["tickFont"] or QFont())
    assert sorted(st.text() for _, st in drawn) == sorted(labels)


def test_the_same_matrix_again_is_not_rendered_again_but_a_change_is(heatmap):
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    heatmap.graphics.grab()
    first = heatmap.image.qimage
    heatmap.set_data(data.copy(), (0, 7), ["0 a", "1 b", "2 c", "3 changed label"], None)
    heatmap.graphics.grab()
    assert heatmap.image.qimage is first  # labels changed, picture did not: no new render
    data[3, 1] = 0.0
    heatmap.set_data(data, (0, 7), ["0 a", "1 b", "2 c", "3 d"], None)
    heatmap.graphics.grab()
    assert heatmap.image.qimage is not first
    np.testing.assert_array_equal(heatmap.image.image, data)
    heatmap.clear()
    heatmap.set_data(data, (0, 7), ["0 a", "1 b", "2 c", "3 d"], None)  # shown again after a clear
    np.testing.assert_array_equal(heatmap.image.image, data)


def test_label_widths_follow_a_new_tick_font(heatmap):
    axis = heatmap.plot.getAxis("left")
    small = axis.label_width(LONG)
    big = QFont()
    big.setPointSizeF(QFont().pointSizeF() * 2)
    axis.setTickFont(big)
    assert axis.label_width(LONG) > 1.5 * small


def test_a_long_title_never_pushes_the_colour_bar_out_of_a_narrow_heatmap(qtbot):
    hm = Heatmap("a rather long title for such a narrow heatmap")
    qtbot.addWidget(hm)
    hm.resize(220, 300)
    hm.show()
    hm.set_data(np.zeros((4, 64), np.float32), (-0.1116, 0.1116), ["0 a", "1 b", "2 c", "3 d"], None)
    QApplication.processEvents()
    title_width = hm.plot.titleLabel.item.boundingRect().width()
    assert hm.graphics.ci.minimumWidth() < title_width  # the title does not set the plot's width
    bar_right = hm.graphics.mapFromScene(hm.bar.getViewBox().sceneBoundingRect().topRight()).x()
    assert bar_right <= hm.graphics.width()  # the colour bar is inside the widget
    painter = QPainter(QImage(8, 8, QImage.Format.Format_ARGB32))
    try:
        texts = hm.bar.axis.generateDrawSpecs(painter)[2]
    finally:
        painter.end()
    for rect, _, _ in texts:  # and so are its labels
        assert hm.graphics.mapFromScene(hm.bar.axis.mapRectToScene(rect).topRight()).x() <= hm.graphics.width()


def test_an_array_changed_in_place_and_given_again_is_drawn_again(heatmap):
    data = np.zeros((4, 2), np.float32)
    heatmap.set_data(data, (0, 1), ["0 a", "1 b", "2 c", "3 d"], None)
    data[0, 0] = 1.0
    heatmap.set_data(data, (0, 1), ["0 a", "1 b", "2 c", "3 d"], None)
    assert heatmap.image.image[0, 0] == 1.0


def test_the_pyqtgraph_internals_we_use_are_there(qapp):
    """plot_items.py relies on these non-public details of pyqtgraph 0.14 (pinned ~=0.14.0)."""
    assert pg.__version__.split(".")[:2] == ["0", "14"]
    axis = pg.AxisItem("left")
    assert axis._tickLevels is None  # None until setTicks; then the list of tick levels
    axis.setTicks([[(0.5, "a")]])
    assert axis._tickLevels == [[(0.5, "a")]] and callable(axis._updateMaxTextSize)
    label = pg.LabelItem("title")
    assert isinstance(label._sizeHint, dict) and Qt.SizeHint.MinimumSize in label._sizeHint
    image = pg.ImageItem(np.zeros((2, 2), np.float32))
    for name in ("qimage", "_renderRequired", "_unrenderable"):
        assert hasattr(image, name), name


def _until_idle() -> None:
    """Run the event loop until three turns in a row found nothing to do."""
    dispatcher, idle = QAbstractEventDispatcher.instance(), 0
    while idle < 3:
        idle = 0 if dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents) else idle + 1


class _Regions(QObject):
    """The regions of the paint events a widget gets."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.regions: list[QRegion] = []
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if event.type() == QEvent.Type.Paint:
            self.regions.append(QRegion(event.region()))
        return False


def test_a_changed_label_repaints_its_place_only_and_the_window_shows_a_whole_paint(qtbot):
    """Typing changes the newest token's label: its axes repaint that label's place, not every
    label, and what the window then shows is what painting the whole heatmap again shows."""
    n = 20
    hm = Heatmap("typing", col_axis="top")
    qtbot.addWidget(hm)
    hm.resize(500, 600)
    hm.show()
    qtbot.waitExposed(hm)
    data = np.tril((np.arange(n * n) % 7 * 5).astype(np.float32).reshape(n, n))
    data[np.triu_indices(n, 1)] = np.nan
    labels = [f"{i} w{i}" for i in range(n)]
    hm.set_data(data, (0, 40), labels, labels)
    _until_idle()
    viewport = hm.graphics.viewport()
    paints = _Regions(viewport)
    for i, last in enumerate(("19 zz", "19 yy")):  # the first change after showing is painted whole
        data = data.copy()
        data[-1, :] = np.arange(n) * (3.0 + i)
        labels = labels[:-1] + [last]
        paints.regions.clear()
        hm.set_data(data, (0, 40), labels, labels, unchanged_rows=n - 1)
        qtbot.waitUntil(lambda: bool(paints.regions))
        _until_idle()
    painted = QRegion()
    for region in paints.regions:
        painted = painted.united(region)
    left = hm.plot.getAxis("left")
    first = left._placed_cache[2][1][0][0]  # where the label of row 0 is drawn (axis coordinates)
    assert not painted.contains(hm.graphics.mapFromScene(left.mapToScene(first + QPointF(2, 2))))
    assert "19 yy" in [st.text() for _, st in left._placed_cache[2][1]]
    shown = QApplication.primaryScreen().grabWindow(hm.winId()).toImage()
    whole = hm.grab().toImage()
    assert shown.convertToFormat(whole.format()) == whole


def test_a_narrow_numbered_axis_labels_only_ticks_its_numbers_fit_between(qtbot):
    """pyqtgraph spaced a numbered axis's ticks by its length alone: a 40 px strip of 32 dimensions
    drew "0 10 20 30" over one another. The kept ticks are at least their labels' width apart."""
    axis = LabelAxis("bottom")
    for size, (lo, hi) in ((40.0, (0.0, 32.0)), (90.0, (0.0, 32.0)), (600.0, (0.0, 32.0)), (60.0, (-0.7, 0.7))):
        levels = axis.tickSpacing(lo, hi, size)
        px = size / (hi - lo)
        widest = axis.widest_label(axis.tickStrings([lo, hi, -levels[0][0]], 1, levels[0][0]))
        assert levels and all(spacing * px >= widest + 6 for spacing, _ in levels), (size, levels)
    assert axis.tickSpacing(0.0, 32.0, 600.0)[0][0] <= 10  # a wide axis keeps pyqtgraph's ticks
