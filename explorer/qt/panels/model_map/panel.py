"""The Model map panel: the loaded model drawn as the chapter draws it, every stage a box that holds
its live tensor, arrows between them, one column per token.

What is drawn is the trace's own schema (:mod:`explorer.core.model_map.layout`): the map follows
the loaded architecture (a positional table or RoPE's rotation of q and k, grouped heads, a
family's extra rows) without a drawing per family. The selected layer is drawn in full; the other
blocks are one row each (a click expands one: it selects that layer). Hovering a box says what
it holds and its shape in config names; clicking it opens the panel that shows it in full.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.core.model_map.boxes import BoxImage, box_image, describe_box, describe_cell, token_window
from explorer.core.model_map.layout import MapLayout, map_layout
from explorer.core.views import token_label
from explorer.qt import theme
from explorer.qt.panels.model_map.canvas import MapCanvas
from explorer.qt.scheduling.pacing import RefreshWhenShown
from explorer.qt.session import Session
from model.tokens.names import token_names

SIDE_TOKENS = 5  # the most likely next tokens written beside the probabilities


class ModelMapPanel(RefreshWhenShown, QWidget):
    """The whole computation as one picture (see the module's docstring)."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.canvas = MapCanvas()
        self.readout = QLabel(" ")
        self.readout.setWordWrap(True)
        self.readout.setStyleSheet(f"QLabel {{ color:{theme.muted_text(self).name()}; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.caption)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.readout)
        self.map: MapLayout | None = None
        self._map_key: tuple | None = None
        self.canvas.sig_box_clicked.connect(self._on_canvas_box_clicked)
        self.canvas.sig_lane_clicked.connect(session.set_layer)
        self.canvas.sig_hovered.connect(self._on_canvas_hovered)
        self.follow(session)
        self.refresh()

    def set_highlight(self, key: str | None) -> None:
        """Outline the box of a dotted name (a tour step's), or none."""
        self.canvas.set_highlight(key)

    def _layout(self) -> MapLayout | None:
        """The map for the session's model and layer (made again only when they change)."""
        s, trace = self.session, self.session.trace
        schema = getattr(trace, "schema", None)
        if s.config is None or schema is None:
            return None
        key = (id(schema), s.config, s.layer)
        if key != self._map_key:
            self._map_key, self.map = key, map_layout(schema, s.config, s.layer)
            self.canvas.set_layout(self.map)
        return self.map

    def refresh(self) -> None:
        """Draw every box from the session's trace, for its head and selected token."""
        s, trace = self.session, self.session.trace
        layout = self._layout()
        if layout is None or trace is None or trace.n_tokens == 0:
            self.caption.setText("Type some text: the map draws the model's computation on it." if layout
                                 else "No model (or this model's trace has no schema the map can draw).")
            self.canvas.set_images({}, [], 0, None, [])
            return
        position = s.selected_position()
        start, stop = token_window(trace.n_tokens, position)
        def names(ids):
            return token_names(s.tokenizer, ids)

        images = {key: box_image(trace, layout.box(key), s.head, position, names) for key in layout.keys}
        shown = s.hover if s.hover is not None else s.position  # outlined only when pinned or hovered
        selected = None if shown is None or not start <= shown < stop else shown - start
        self.canvas.set_images(images, s.tokens, start, selected, self._side_lines(images, layout, position, start))
        self.caption.setText(self._caption(trace.n_tokens, start, stop))

    def _side_lines(self, images: dict[str, BoxImage], layout: MapLayout, position: int, start: int) -> list[str]:
        """The most likely next tokens after the selected token (``position``), with their probabilities."""
        probs = next((images[b.key] for b in layout.lanes[-1].boxes if b.row.attr == "probs"), None)
        if probs is None or not probs.row_names:
            return []
        head = f"after '{token_label(self.session.tokens[position])}':"
        return [head] + [f"'{token_label(name)}'  {probs.data[k, position - start]:.3f}"
                         for k, name in enumerate(probs.row_names[:SIDE_TOKENS])]

    def _caption(self, n_tokens: int, start: int, stop: int) -> str:
        cfg, s = self.session.config, self.session
        n_heads, n_kv = getattr(cfg, "n_heads", 0), getattr(cfg, "n_kv_heads", 0)
        heads = f"head {s.head} of {n_heads}" if n_heads > 1 else "one head" if n_heads else "no attention"
        if n_heads and n_kv < n_heads:  # grouped-query attention: which k and v the head reads
            heads += f" (k, v: kv head {s.kv_head(s.layer, s.head)} of {n_kv})"
        window = (f"tokens {start}–{stop - 1} of {n_tokens} (the 32 that end at the selected one)"
                  if stop - start < n_tokens else f"{n_tokens} token{'s' * (n_tokens != 1)}")
        block = f"block {s.layer} in full · " if getattr(cfg, "n_layers", 0) else ""
        return (f"One column per token ({window}) · {heads} · {block}hover a box for what it holds, click it for "
                "its panel")

    def _on_canvas_box_clicked(self, key: str) -> None:
        box = self.map.box(key) if self.map is not None else None
        if box is None:
            return
        if box.layer is not None:
            self.session.set_layer(box.layer)
        if box.panel is not None:
            self.session.request_panel(box.panel)

    def _on_canvas_hovered(self, key: str, point: QPointF) -> None:
        box = self.map.box(key) if self.map is not None and key else None
        trace = self.session.trace
        if box is None or trace is None:
            self.readout.setText(" ")
            self.canvas.setToolTip("")
            return
        image = self.canvas.images.get(key)
        text = describe_box(box, self.session.config, trace.n_tokens, image)
        cell = self.canvas.cell_at(key, point)
        if cell is not None and image is not None:
            text += "\n" + describe_cell(box, image, *cell, self.session.tokens, self.canvas.start)
        if box.panel is not None:
            text += f"\nclick: the {box.panel} panel"
        self.canvas.setToolTip(text)
        self.readout.setText(text.replace("\n", " · "))
