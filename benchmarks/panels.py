"""Each registered panel in front, one at a time, with the default model: key presses at the end
of a 32-token text, timed to the last paint of the keystroke's own frame and to the last paint of
all (work a panel gave the worker thread drawn too), with the paints and the longest turn.

The panels are walked from :data:`explorer.qt.panels.PANELS`, so that a panel added there is
measured too. A panel in front is its dock raised (its tab brought forward); the text panel is
always in view and is not walked on its own.
"""

from __future__ import annotations

import numpy as np

from benchmarks import frames
from benchmarks.common import stats
from benchmarks.keystroke import text_of

#: Panels that load something once they have stayed shown: what says that they have.
_READY = {"training": lambda p: p.source.view is not None and not p.source.loading}
_SHOWN_S = 0.6  # a panel stays in front this long before its keys (the Training panel loads after 0.3 s)


def _in_front(window, name: str, n_tokens: int) -> None:
    from PySide6.QtGui import QTextCursor

    window.default_layout()
    window.docks[name].raise_()
    editor = window.panels["tokens"].editor
    editor.setPlainText(text_of(n_tokens))
    editor.moveCursor(QTextCursor.MoveOperation.End)
    editor.setFocus()
    frames.settle_for(window, _SHOWN_S)
    ready = _READY.get(name)
    while ready is not None and not ready(window.panels[name]):
        frames.settle_for(window, 0.05)


def measure(app, window, edits: int = 40, n_tokens: int = 32, warmup: int = 4, top: int = 3) -> dict[str, float]:
    """For every panel but the text: ``panel_NAME_keystroke_ms_median`` (and p95), to the last
    paint of the keystroke's own frame; ``panel_NAME_drawn_ms_median``, to the last paint of all;
    ``panel_NAME_paints``, paints per key press; ``panel_NAME_max_turn_ms``, the longest turn of
    the event loop over the key presses."""
    from explorer.qt.panels import panel_names

    out: dict[str, float] = {}
    for name in panel_names():
        if name == "tokens" or name not in window.docks:
            continue
        _in_front(window, name, n_tokens)
        frames.press_keys(window, frames.alternate(warmup))
        strokes = frames.press_keys(window, frames.alternate(edits))
        median, p95 = stats(strokes.frame_ms)
        out[f"panel_{name}_keystroke_ms_median"] = median
        out[f"panel_{name}_keystroke_ms_p95"] = p95
        out[f"panel_{name}_drawn_ms_median"] = stats(strokes.total_ms)[0]
        out[f"panel_{name}_paints"] = float(np.mean(strokes.paints))
        out[f"panel_{name}_max_turn_ms"] = float(np.max(strokes.longest_turn_ms))
        frames.note_top(f"{name} in front", strokes, n=top)
    window.default_layout()  # the sections after this one measure the default layout
    frames.settle_for(window, 0.1)
    return out
