"""The variants panel's "book's example" page: Raschka's chapter 3 example, number for number.

The numbers and their labels come from :func:`explorer.core.lessons.book_views.book_variants`; this file
draws each tensor as a small table, four decimals a cell as the chapter prints them, the exact
float32 value in the cell's tooltip, tinted by value: white at 0, light red for the largest positive
and light blue for the most negative value of the tensor (masked −∞ cells grey).
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from explorer.core.lessons import book
from explorer.core.lessons import book_views
from explorer.core.lessons.variants import KEYS
from explorer.core.views import symmetric_levels
from explorer.qt import theme
from explorer.qt.widgets.flow_layout import FlowLayout
from explorer.qt.widgets.wrapped_label import wrapped_label
from explorer.qt.plots.heatmap import MASKED_COLOUR
from explorer.qt.widgets.steady import LiveLabel

POSITIVE, NEGATIVE = (244, 165, 130), (146, 197, 222)  # light ends of ColorBrewer's RdBu: digits stay readable


def tint(value: float, hi: float) -> QColor:
    """Background of a cell: white at 0 to POSITIVE at +hi or NEGATIVE at -hi; grey when masked."""
    if not math.isfinite(value):
        return QColor(MASKED_COLOUR)
    share = min(abs(value) / hi, 1.0)
    end = POSITIVE if value >= 0 else NEGATIVE
    return QColor(*(round(255 + share * (e - 255)) for e in end))


def cell_text(value: float) -> str:
    """A cell as the chapter prints it: four decimals, ``-inf`` for a masked score."""
    return f"{value:.4f}" if math.isfinite(value) else ("-inf" if value < 0 else "inf")


class TensorCard(QWidget):
    """One tensor: its caption (name = code, section) over a table of its values."""

    sig_row_clicked = Signal(int)
    """A row of a tensor with one row per token was clicked (that token becomes the query)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.card: book_views.BookCard | None = None
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.table = QTableWidget()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.cellClicked.connect(self._on_table_clicked)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(1)
        layout.addWidget(self.caption)
        layout.addWidget(self.table)

    def set_card(self, card: book_views.BookCard) -> None:
        """Show ``card``'s values (the table keeps its items; only texts, tints and tooltips change)."""
        self.card = card
        value = card.value
        rows, cols = value.shape
        printed = "" if card.printed else " (not printed in the chapter)"
        self.caption.setText(f"{card.caption}   [{card.section}{printed}]")
        self.caption.setToolTip(book_views.section_title(card.section))
        t = self.table
        t.setRowCount(rows)
        t.setColumnCount(cols)
        t.setHorizontalHeaderLabels(list(card.col_labels))
        t.setVerticalHeaderLabels([("▸ " if r == card.query_row else "") + label
                                   for r, label in enumerate(card.row_labels)])
        hi = symmetric_levels(value)[1]
        for r in range(rows):
            for c in range(cols):
                self._set_cell(r, c, float(value[r, c]), hi, bold=r == card.query_row)
        self._fit()

    def _set_cell(self, r: int, c: int, v: float, hi: float, bold: bool) -> None:
        item = self.table.item(r, c)
        if item is None:
            item = QTableWidgetItem()
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(r, c, item)
        item.setText(cell_text(v))
        item.setToolTip(self.card.tooltip(r, c))
        font = QFont(item.font())
        font.setBold(bold)
        item.setFont(font)
        item.setBackground(QBrush(tint(v, hi)))
        item.setForeground(QBrush(QColor("#000000")))  # a pale tint needs dark ink, in a dark theme too

    def _fit(self) -> None:
        """Size the table to its cells: no scroll bars, no empty space."""
        t = self.table
        t.resizeColumnsToContents()
        t.resizeRowsToContents()
        frame = 2 * t.frameWidth()
        width = t.verticalHeader().sizeHint().width() + t.horizontalHeader().length() + frame
        height = t.horizontalHeader().sizeHint().height() + t.verticalHeader().length() + frame
        t.setFixedSize(width, height)
        self.caption.setFixedWidth(max(width, 200))
        self.setFixedSize(self.sizeHint())

    def _on_table_clicked(self, row: int, _col: int) -> None:
        if self.card is not None and self.card.query_row is not None:
            self.sig_row_clicked.emit(row)


class BookView(QWidget):
    """The four variants on the chapter's example: a query selector, the dropout switch, the
    selected variant's formula and line, and its tensors."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = KEYS[0]
        self.results: tuple[book_views.BookVariant, ...] = ()
        self.query = QComboBox()
        for i, token in enumerate(book.TOKENS):
            self.query.addItem(f"{book_views.x_name(i)} {token}")
        self.query.setCurrentIndex(book.QUERY)
        self.query.currentIndexChanged.connect(lambda _: self.recompute())
        self.dropout = QCheckBox(f"dropout {book.DROPOUT_P} (seed {book.SEED})")
        self.dropout.setToolTip("3.5.2: nn.Dropout(0.5) in training mode after the softmax; the chapter prints "
                                "CausalAttention and the multi-head classes with dropout 0.0")
        self.dropout.toggled.connect(lambda _: self.recompute())
        self.formula = LiveLabel()  # both follow every keystroke
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line = LiveLabel()
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line.setStyleSheet(theme.soft_box_style(self))
        self.cards: list[TensorCard] = []
        self._grid = QWidget()
        self._flow = FlowLayout(self._grid, spacing=8)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self._grid)
        top = QHBoxLayout()
        top.addWidget(QLabel("query"))
        top.addWidget(self.query)
        top.addWidget(self.dropout)
        top.addWidget(wrapped_label("inputs: “Your journey starts with one step”, d_in 3, d_out 2"), 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.formula)
        layout.addWidget(self.line)
        layout.addWidget(scroll, 1)  # nothing is computed before the page is first shown

    def set_query(self, i: int) -> None:
        """Select token i (0-based) as the query."""
        self.query.setCurrentIndex(i)

    def show_variant(self, key: str) -> None:
        """Show the variant with this key (one of :data:`explorer.core.lessons.variants.KEYS`)."""
        self.key = key
        self.draw()

    def current(self) -> book_views.BookVariant:
        """The variant on show."""
        if not self.results:
            self.recompute()
        return next(v for v in self.results if v.key == self.key)

    def recompute(self) -> None:
        """Take the variants for the selected query and dropout switch, and redraw."""
        self.results = book_views.book_variants(self.query.currentIndex(), self.dropout.isChecked())
        self.draw()

    def draw(self) -> None:
        """Draw the current variant's formula, line and tensors (spare cards hidden)."""
        if not self.results:
            self.recompute()
            return
        v = self.current()
        self.formula.setText(v.formula)
        self.line.setText(v.line)
        while len(self.cards) < len(v.cards):
            card = TensorCard()
            card.sig_row_clicked.connect(self.set_query)
            self._flow.addWidget(card)
            self.cards.append(card)
        for i, card in enumerate(self.cards):
            if i < len(v.cards):
                card.set_card(v.cards[i])
            card.setVisible(i < len(v.cards))
        self._flow.invalidate()
