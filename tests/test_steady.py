"""SteadyBox and LiveLabel: contents that change on every keystroke lay out their panel only when
their size needs change (explorer/qt/widgets/steady.py)."""

from __future__ import annotations

from PySide6.QtCore import QAbstractEventDispatcher, QEvent, QEventLoop, QObject
from PySide6.QtWidgets import QLabel, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from explorer.qt.widgets.steady import LiveLabel, SteadyBox, set_range


def _until_idle() -> None:
    dispatcher, idle = QAbstractEventDispatcher.instance(), 0
    while idle < 3:
        idle = 0 if dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents) else idle + 1


class _LayoutRequests(QObject):
    """Counts the LayoutRequest events ``widget`` receives."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__()
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def _panel(qtbot, inner: QWidget, width: int = 300) -> QWidget:
    panel = QWidget()
    layout = QVBoxLayout(panel)
    layout.addWidget(QLabel("a title above"))
    layout.addWidget(inner)
    layout.addStretch(1)
    qtbot.addWidget(panel)
    panel.resize(width, 400)
    panel.show()
    qtbot.waitExposed(panel)
    _until_idle()
    return panel


def test_a_new_text_of_as_many_lines_lays_out_nothing_and_is_shown(qtbot):
    label = LiveLabel("mean = -0.008231 · √(var + ε) = 0.1546")
    panel = _panel(qtbot, label)
    height, requests = label.height(), _LayoutRequests(panel)
    for value in (0.1, 0.25, 0.5):
        label.setText(f"mean = {value:.6f} · √(var + ε) = 0.1546")
        _until_idle()
    assert requests.count == 0
    assert label.text() == "mean = 0.500000 · √(var + ε) = 0.1546" and label.label.text() == label.text()
    assert label.height() == height and label.label.geometry() == label.rect()


def test_a_text_of_more_lines_makes_the_label_taller_and_its_panel_follows(qtbot):
    label = LiveLabel("one short line")
    panel = _panel(qtbot, label)
    one_line, requests = label.height(), _LayoutRequests(panel)
    label.setText("a sentence long enough to wrap onto several lines in a panel three hundred pixels wide, "
                  "with the trace's numbers in it: 0.123456, 0.234567, 0.345678")
    _until_idle()
    assert requests.count >= 1
    assert label.height() == label.label.heightForWidth(label.width()) > 2 * one_line
    label.setText("short again")
    _until_idle()
    assert label.height() == one_line


def test_a_text_changed_while_hidden_has_its_height_when_shown(qtbot):
    label = LiveLabel("one line")
    panel = _panel(qtbot, label)
    panel.hide()
    label.setText("a sentence long enough to wrap onto several lines in a panel three hundred pixels wide, "
                  "set while the panel was hidden")
    panel.show()
    _until_idle()
    assert label.height() == label.label.heightForWidth(label.width())
    assert label.height() > 2 * label.label.fontMetrics().lineSpacing()


def test_a_steady_table_lays_out_its_panel_only_when_it_grows(qtbot):
    table = QTableWidget(2, 2)
    table.setSizeAdjustPolicy(QTableWidget.SizeAdjustPolicy.AdjustToContents)
    for r in range(2):
        for c in range(2):
            table.setItem(r, c, QTableWidgetItem("0.1"))
    box = SteadyBox(table)
    panel = _panel(qtbot, box)
    height, requests = box.height(), _LayoutRequests(panel)
    for text in ("0.2", "0.3"):  # new numbers, same size
        table.item(1, 1).setText(text)
        _until_idle()
    assert requests.count == 0 and table.item(1, 1).text() == "0.3"
    table.setRowCount(6)
    _until_idle()
    assert requests.count >= 1 and box.height() > height and table.geometry() == box.rect()


def test_set_range_leaves_an_unchanged_spin_box_alone(qtbot):
    box = QSpinBox()
    panel = _panel(qtbot, box)
    set_range(box, 0, 31, 5)
    _until_idle()
    requests = _LayoutRequests(panel)
    set_range(box, 0, 31, 5)
    _until_idle()
    assert requests.count == 0 and (box.minimum(), box.maximum(), box.value()) == (0, 31, 5)
    set_range(box, 0, 7, 9)  # the value is clamped to the new range
    assert (box.maximum(), box.value()) == (7, 7)
