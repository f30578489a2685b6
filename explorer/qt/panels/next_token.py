"""Next-token panel: the top-k next tokens as horizontal bars, with temperature and entropy."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QMenu, QSizePolicy, QSpinBox, QVBoxLayout, QWidget

from explorer.core.nexttoken import TopK, append_token, insert_after, top_k
from explorer.core.token_text import append_id
from explorer.core.views import token_label
from explorer.qt.explain_target import ExplainTarget
from explorer.qt.heatmap import NOTE_STYLE, settle_view, widen_axis
from explorer.qt.plot_items import LabelAxis
from explorer.qt.panels.lazy import RefreshWhenShown
from explorer.qt.session import Session
from explorer.qt.stored import read_float, read_int
from model.token_names import WORD

MAX_K = 200
DEFAULT_K = 10
MAX_TEMPERATURE = 10.0

BAR_HEIGHT = 0.8
BAR_COLOUR, TARGET_COLOUR = "#4477aa", "#ee7733"  # the Why panel's chosen target in orange


class NextTokenPanel(RefreshWhenShown, QWidget):
    """Bars of the k most likely next tokens at the selected position (the last by default).

    Temperature 0 is greedy (all probability on the argmax); the spin box cannot go below 0.
    Clicking a bar appends that token to the text; right-clicking it offers that or explaining it
    in the Why panel, and Shift+click explains it at once.
    """

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.top: TopK | None = None
        self.k_wanted = DEFAULT_K  # the user's k; shown clamped to the vocabulary
        self.k_box = QSpinBox()
        self.k_box.setRange(1, DEFAULT_K)
        self.k_box.setValue(DEFAULT_K)
        self.temperature_box = QDoubleSpinBox()
        self.temperature_box.setRange(0.0, MAX_TEMPERATURE)
        self.temperature_box.setSingleStep(0.1)
        self.temperature_box.setDecimals(2)
        self.temperature_box.setValue(1.0)
        self.temperature_box.setToolTip("0 = greedy: all probability on the most likely token")
        self.info = QLabel()
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # no min width
        self.info.setWordWrap(True)
        self.info.setToolTip("click a bar to append that token to the text; right-click or Shift+click it to "
                             "explain it in the Why panel")
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.plot = self.graphics.addPlot(axisItems={"left": LabelAxis("left")})
        self.plot.invertY(True)  # most likely at the top
        self.plot.setMouseEnabled(False, False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self._k_shown = -1
        self.plot.setLabel("bottom", "probability (click: append · right-click or Shift+click: explain why)")
        self.bars = pg.BarGraphItem(x0=[], y=[], height=BAR_HEIGHT, width=[], brush=BAR_COLOUR)
        self.target = ExplainTarget.of(session)
        self.target.sig_target_changed.connect(self.schedule_refresh)
        self.bar_menu: QMenu | None = None  # the last right-click menu (tests trigger its actions)
        self.plot.addItem(self.bars)
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
        layout.addWidget(self.graphics, 1)

    def _on_session_model_changed(self) -> None:
        cfg = self.session.config
        # k is clamped to the vocabulary, and to MAX_K: more bars are unreadable, and ranking
        # all 50,257 of GPT-2's tokens on every keystroke would cost more than the model.
        with QSignalBlocker(self.k_box):
            self.k_box.setMaximum(min(cfg.vocab_size, MAX_K) if cfg else 1)
            self.k_box.setValue(self.k_wanted)
        self.schedule_refresh()

    def _on_k_changed(self, k: int) -> None:
        self.k_wanted = k
        self.refresh()

    def token_name(self, token_id: int) -> str:
        """The display name of a token id (``#id`` when the model has no tokenizer)."""
        tok = self.session.tokenizer
        return tok.display(token_id) if tok is not None else f"#{token_id}"

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
        k = len(self.top.ids)
        ys = np.arange(k, dtype=float)
        brushes = [TARGET_COLOUR if int(i) == self.target.target else BAR_COLOUR for i in self.top.ids]
        self.bars.setOpts(x0=np.zeros(k), y=ys, width=self.top.probs, height=BAR_HEIGHT, brushes=brushes)
        ticks = [(float(y), f"{token_label(self.token_name(int(i)), 14)}  {p:.3f}")
                 for y, i, p in zip(ys, self.top.ids, self.top.probs)]
        widen_axis(self.plot.getAxis("left"), [label for _, label in ticks], QFontMetrics(self.font()))
        self.plot.getAxis("left").setTicks([ticks, []])
        if k != self._k_shown:  # the view range changes only with k
            self._k_shown = k
            self.plot.setRange(xRange=(0, 1), yRange=(-0.5, max(k, 1) - 0.5), padding=0.02)
        settle_view(self.plot.getViewBox())
        last = " (last)" if pos == s.trace.n_tokens - 1 else ""
        token = token_label(s.tokens[pos]) if pos < len(s.tokens) else "?"
        self.info.setText(
            f"after position {pos} {token!r}{last} · entropy {self.top.entropy:.3f} bits "
            f"(max {math.log2(s.config.vocab_size):.3f})"
        )

    def _clear(self, message: str, warn: bool = False) -> None:
        """No bars; ``message`` in the info line (in red when ``warn``)."""
        self.top = None
        self.bars.setOpts(x0=[], y=[], width=[], height=BAR_HEIGHT, brushes=[])
        self.plot.getAxis("left").setTicks([[], []])
        self.info.setText(message)
        self.info.setStyleSheet(NOTE_STYLE if warn else "")

    def append(self, rank: int) -> None:
        """Put the token with this rank (0 = most likely) where the bars predict it: at the end
        of the text, or, when an earlier position is selected, right after that token (which
        then selects the inserted token)."""
        if self.top is None or not 0 <= rank < len(self.top.ids):
            return
        s = self.session
        token_id = int(self.top.ids[rank])
        tok = s.tokenizer
        pos = s.selected_position()
        if tok is None:  # no vocabulary: the text is typed ids
            s.set_text(append_id(s.text, token_id))
            return
        piece = tok.decode([token_id]) or tok.id_to_token(token_id)
        word_level = tok.kind == WORD
        if pos is None or pos == s.trace.n_tokens - 1:
            s.set_text(append_token(s.text, piece, word_level))
            return
        _, end = s.encoding.spans[s.trace.dropped + pos]
        s.set_text(insert_after(s.text, end, piece, word_level))
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
        menu.addAction(f"Append {name!r} to the text", lambda: self.append(rank))
        menu.addAction(f"Explain {name!r} (Why panel)", lambda: self.explain(rank))
        menu.popup(where)

    def save_settings(self, settings) -> None:
        """Remember k and the temperature."""
        settings.setValue("next_token/k", self.k_wanted)
        settings.setValue("next_token/temperature", self.temperature_box.value())

    def restore_settings(self, settings) -> None:
        """Restore k (1 to MAX_K) and the temperature (0 to 10); a value of another type or out of
        range (a damaged settings file) gives the default, so it cannot stop the app."""
        self.k_wanted = read_int(settings, "next_token/k", DEFAULT_K, 1, MAX_K)
        self.k_box.setValue(self.k_wanted)
        self.temperature_box.setValue(read_float(settings, "next_token/temperature", 1.0, 0.0, MAX_TEMPERATURE))
