"""Next-token panel: the top-k next tokens as horizontal bars, with temperature and entropy.

k goes up to the vocabulary's size. Bars keep a readable height: when k of them do not fit, the
list scrolls (a scroll bar, or the mouse wheel), and only the bars in view are drawn and labelled.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QScrollBar,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from explorer.core.nexttoken import TopK, top_k
from explorer.core.views import token_label
from explorer.qt import theme
from explorer.qt.widgets.explain_target import ExplainTarget
from explorer.qt.widgets.steady import LiveLabel
from explorer.qt.widgets.wrapped_label import wrapped_label
from explorer.qt.plots.heatmap import settle_view, widen_axis
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.plots.label_axis import LabelAxis
from explorer.qt.plots.plot_items import plain_numbers, scroll_by_wheel
from explorer.qt.session import Session
from explorer.qt.settings import NEXT_TOKEN_K, NEXT_TOKEN_TEMPERATURE
from model.tokens.names import token_name

BAR_HEIGHT = 0.8
BAR_COLOUR, TARGET_COLOUR = "#4477aa", "#ee7733"  # the Why panel's chosen target in orange
MIN_VIEW_PX = 60  # the bars' view at least this high ...
CHROME_PX = 60  # ... above the bottom axis, its numbers and the layout's margins
ROW_GAP_PX = 4  # a bar's row is a text line plus this: below that, the list scrolls


class NextTokenPanel(RefreshWhenShown, QWidget):
    """Bars of the k most likely next tokens at the selected position (the last by default).

    Temperature 0 is greedy (all probability on the argmax); the spin box cannot go below 0.
    Clicking a bar puts that token in the text: after the selected token when an earlier one is
    pinned or hovered (the note under the bars says "insert after 'time'"), else at the end
    ("append"). Right-clicking it offers that or explaining it in the Why panel, and Shift+click
    explains it at once (the Why panel's target is drawn in orange).
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.top: TopK | None = None
        self.k_wanted = NEXT_TOKEN_K.default  # the user's k; shown clamped to the vocabulary
        self.k_box = QSpinBox()
        self.k_box.setRange(NEXT_TOKEN_K.lo, NEXT_TOKEN_K.default)
        self.k_box.setValue(NEXT_TOKEN_K.default)
        self.temperature_box = QDoubleSpinBox()
        self.temperature_box.setRange(NEXT_TOKEN_TEMPERATURE.lo, NEXT_TOKEN_TEMPERATURE.hi)
        self.temperature_box.setSingleStep(0.1)
        self.temperature_box.setDecimals(2)
        self.temperature_box.setValue(NEXT_TOKEN_TEMPERATURE.default)
        self.temperature_box.setToolTip("0 = greedy: all probability on the most likely token")
        self.info = LiveLabel()  # no least width; a new text lays out the panel only when its height changes
        self.info.setMinimumHeight(2 * QFontMetrics(self.info.font()).lineSpacing())  # wrapping never moves the bars
        self.info.setAutoFillBackground(True)  # opaque: its new text every keystroke repaints it alone, not the panel
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(theme.plot_background(self))
        self.plot = self.graphics.addPlot(axisItems={"left": LabelAxis("left")})
        self.plot.invertY(True)  # most likely at the top
        self.plot.setMouseEnabled(False, False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self._window = (-1, -1)  # (first rank, rows) drawn
        self._range_shown = (-1, -1)  # (first rank, rows) of the view's range
        self.first = 0  # the first rank in view (the list scrolls when k bars do not fit)
        self.click_action = ""
        self.click_note = wrapped_label()  # what a click on a bar does: "append", or "insert after 'time'"
        self.bars = pg.BarGraphItem(x0=[], y=[], height=BAR_HEIGHT, width=[], brush=BAR_COLOUR)
        self.target = ExplainTarget.of(session)
        self.target.sig_target_changed.connect(self.schedule_refresh)
        self.bar_menu: QMenu | None = None  # the last right-click menu (tests trigger its actions)
        self.plot.addItem(self.bars)
        ink = theme.plot_text(self)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setTextPen(ink)
            self.plot.getAxis(name).setPen(ink)
        self.plot.getAxis("bottom").setLabel("probability", color=ink.name())
        plain_numbers(self.plot)
        self.scroll = QScrollBar(Qt.Orientation.Vertical)
        self.scroll.setVisible(False)
        self.scroll.valueChanged.connect(self._on_scroll_changed)
        self.plot.getViewBox().sigResized.connect(lambda *_: self._draw_window())
        self._build_layout()
        self.k_box.valueChanged.connect(self._on_k_changed)
        self.temperature_box.valueChanged.connect(self.refresh)
        self.graphics.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.follow(session, self._on_session_model_changed)
        self._on_session_model_changed()

    def _build_layout(self) -> None:
        controls = QHBoxLayout()
        controls.addWidget(QLabel("top k"))
        controls.addWidget(self.k_box)
        controls.addWidget(QLabel("temperature"))
        controls.addWidget(self.temperature_box)
        controls.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(controls)
        layout.addWidget(self.info)
        bars = QHBoxLayout()
        bars.setSpacing(0)
        bars.addWidget(self.graphics, 1)
        bars.addWidget(self.scroll)
        layout.addLayout(bars, 1)
        # The bars' view at least 60 px high above its axis and margins: the dock scrolls instead (the
        # view was 22 px at 960 x 540).
        self.graphics.setMinimumHeight(MIN_VIEW_PX + CHROME_PX)
        layout.addWidget(self.click_note)

    def _on_session_model_changed(self) -> None:
        cfg = self.session.config
        # k is clamped to the vocabulary (the list scrolls; ranking all of GPT-2's 50,257 tokens
        # costs a few ms per keystroke, paid only by a user who asks for them all).
        with QSignalBlocker(self.k_box):
            self.k_box.setMaximum(min(cfg.vocab_size, NEXT_TOKEN_K.hi) if cfg else 1)
            self.k_box.setValue(self.k_wanted)
        self.schedule_refresh()

    def _on_k_changed(self, k: int) -> None:
        self.k_wanted = k
        self.refresh()

    def token_name(self, token_id: int) -> str:
        """The display name of a token id (``#id`` when the model has no tokenizer)."""
        return token_name(self.session.tokenizer, token_id)

    def refresh(self) -> None:
        """Recompute top-k for the selected position and redraw the bars (cleared when T == 0)."""
        s = self.session
        pos = s.selected_position()
        if s.trace is None or pos is None:
            self._clear("no tokens yet: type some text")
            return
        logits = s.trace.logits[pos]
        if not np.isfinite(logits).all():  # no probabilities, no entropy: say so, draw nothing
            self._clear(f"After position {pos} the logits are not numbers (NaN or inf): no probabilities to "
                        f"show. The {s.trace.nonfinite or 'status bar says where they start'}.", warn=True)
            return
        self.info.setStyleSheet("")
        self.top = top_k(logits, self.k_box.value(), self.temperature_box.value())
        self._window = (-1, -1)  # new bars: drawn again whatever is in view
        self._draw_window()
        last = pos == s.trace.n_tokens - 1
        token = token_label(s.tokens[pos]) if pos < len(s.tokens) else "?"
        self.info.setText(
            f"after position {pos} {token!r}{' (last)' if last else ''} · entropy {self.top.entropy:.3f} bits "
            f"(max {math.log2(s.config.vocab_size):.3f})"
        )
        self._say_click_action("append" if last else f"insert after {token!r}")

    def _say_click_action(self, action: str) -> None:
        """Name what a click on a bar does, under the bars (and in the tooltip)."""
        if action != self.click_action:
            self.click_action = action
            self.click_note.setText(f"click a bar: {action} · right-click or Shift+click: explain why")
            self.graphics.setToolTip(f"click a bar to {action} that token"
                                     + (" (at the end of the text)" if action == "append" else "")
                                     + "; right-click or Shift+click it to explain it in the Why panel")

    def rows_in_view(self) -> int:
        """How many bars fit at a readable height (a text line and a gap each)."""
        row_px = QFontMetrics(self.font()).height() + ROW_GAP_PX
        return max(1, int(self.plot.getViewBox().height() // row_px))

    def _draw_window(self) -> None:
        """Draw and label the bars in view: all k when they fit, else ``rows_in_view`` from ``first``."""
        if self.top is None:
            return
        k, rows = len(self.top.ids), self.rows_in_view()
        scrolls = k > rows
        rows = rows if scrolls else k
        with QSignalBlocker(self.scroll):
            self.scroll.setRange(0, max(0, k - rows))
            self.scroll.setPageStep(rows)
            self.first = min(self.first, max(0, k - rows)) if scrolls else 0
            self.scroll.setValue(self.first)
        if self.scroll.isVisibleTo(self) != scrolls:
            self.scroll.setVisible(scrolls)
        if (self.first, rows) == self._window:
            return
        self._window = (self.first, rows)
        ranks = np.arange(self.first, self.first + rows)
        probs = self.top.probs[ranks]
        plain, target = (theme.curve_colour(c, self) for c in (BAR_COLOUR, TARGET_COLOUR))  # read on the ground
        brushes = [target if int(self.top.ids[r]) == self.target.target else plain for r in ranks]
        self.bars.setOpts(x0=np.zeros(rows), y=ranks.astype(float), width=probs, height=BAR_HEIGHT, brushes=brushes)
        ticks = [(float(r), f"{r + 1}. {token_label(self.token_name(int(self.top.ids[r])), 14)}  {p:.3f}"
                  if scrolls else f"{token_label(self.token_name(int(self.top.ids[r])), 14)}  {p:.3f}")
                 for r, p in zip(ranks, probs)]
        widen_axis(self.plot.getAxis("left"), [label for _, label in ticks], QFontMetrics(self.font()))
        self.plot.getAxis("left").setTicks([ticks, []])
        if (self.first, rows) != self._range_shown:  # the view range changes only with the window
            self._range_shown = (self.first, rows)
            self.plot.setRange(xRange=(0, 1), yRange=(self.first - 0.5, self.first + max(rows, 1) - 0.5), padding=0.02)
        settle_view(self.plot.getViewBox())

    def _on_scroll_changed(self, value: int) -> None:
        self.first = int(value)
        self._draw_window()

    def wheelEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        """The mouse wheel scrolls a list of bars longer than the view."""
        if not scroll_by_wheel(self.scroll, event):
            super().wheelEvent(event)

    def _clear(self, message: str, warn: bool = False) -> None:
        """No bars; ``message`` in the info line (in red when ``warn``)."""
        self.top = None
        self.bars.setOpts(x0=[], y=[], width=[], height=BAR_HEIGHT, brushes=[])
        self.plot.getAxis("left").setTicks([[], []])
        self._window = (-1, -1)
        self.scroll.setVisible(False)
        self.info.setText(message)
        self.info.setStyleSheet(theme.note_style(self) if warn else "")

    def append(self, rank: int) -> None:
        """Put the token with this rank (0 = most likely) where the bars predict it: at the end
        of the text, or, when an earlier position is selected, right after that token (which
        then selects the inserted token). The token goes in as the id it is (its text is its
        rendering: :meth:`Session.insert_tokens`), so the next trace has exactly that token."""
        if self.top is None or not 0 <= rank < len(self.top.ids):
            return
        s = self.session
        pos = s.selected_position()
        if pos is None or pos == s.trace.n_tokens - 1:
            s.insert_tokens(len(s.encoding), [int(self.top.ids[rank])])
            return
        s.insert_tokens(s.trace.dropped + pos + 1, [int(self.top.ids[rank])])
        s.set_position(pos + 1)

    def _on_scene_clicked(self, event) -> None:
        if self.top is None or not self.plot.sceneBoundingRect().contains(event.scenePos()):
            return
        p = self.plot.getViewBox().mapSceneToView(event.scenePos())
        rank = int(round(p.y()))
        if not 0 <= rank < len(self.top.ids):  # anywhere on the bar's row, label included
            return
        if event.button() == Qt.MouseButton.RightButton:
            self._show_bar_menu(rank, event.screenPos().toPoint())
        elif event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.explain(rank)
        else:
            self.append(rank)

    def explain(self, rank: int) -> None:
        """Make the token with this rank the Why panel's target and bring that panel forward."""
        if self.top is not None and 0 <= rank < len(self.top.ids):
            self.target.explain(int(self.top.ids[rank]))

    def _show_bar_menu(self, rank: int, where) -> None:
        name = token_label(self.token_name(int(self.top.ids[rank])), 20)
        self.bar_menu = menu = QMenu(self)
        after = self.click_action.removeprefix("insert ")  # "after 'time'", as the note under the bars says
        menu.addAction(f"Append {name!r} to the text" if self.click_action == "append" else f"Insert {name!r} {after}",
                       lambda: self.append(rank))
        menu.addAction(f"Explain {name!r} (Why panel)", lambda: self.explain(rank))
        menu.popup(where)

    def save_settings(self, settings) -> None:
        """Remember k and the temperature."""
        NEXT_TOKEN_K.write(settings, self.k_wanted)
        NEXT_TOKEN_TEMPERATURE.write(settings, self.temperature_box.value())

    def restore_settings(self, settings) -> None:
        """Restore k and the temperature; a value of another type or out of range (a damaged
        settings file) gives the default (:mod:`explorer.qt.settings`), so it cannot stop the app."""
        self.k_wanted = NEXT_TOKEN_K.read(settings)
        self.k_box.setValue(self.k_wanted)
        self.temperature_box.setValue(NEXT_TOKEN_TEMPERATURE.read(settings))
