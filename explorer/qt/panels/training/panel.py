"""Training panel: the snapshots of the model's training, scrubbed on your own text.

A slider (◀ ▶ keys, Home/End, a play button) runs over the snapshots by training step and a
last stop for the model you opened; moving it swaps that snapshot's weights into every panel
(:meth:`Session.show_snapshot`: text and selection kept). Below: curves over training for the
current text (a job of the session, across all snapshots) and a difference of two snapshots.
The snapshots are loaded once, off the GUI thread, when the panel is first shown
(:class:`explorer.qt.panels.training.snapshot_source.SnapshotSource`), and a snapshot's weights
are read there too when the slider first asks for them (the step line says so meanwhile).
"""

from __future__ import annotations

import bisect
import functools
import os
from pathlib import Path

from PySide6.QtCore import QSignalBlocker, Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QTabWidget, QVBoxLayout, QWidget

from explorer.core.applicability import not_applicable
from explorer.core.training_views import CURVE_SNAPSHOTS, SliderStop, curve_snapshots, nearest_index, slider_stops
from explorer.core.views import token_label
from explorer.qt import dialogs
from explorer.qt.scheduling.jobs import JobResult
from explorer.qt.scheduling.pacing import Pacer, RefreshWhenShown
from explorer.qt.session import ModelDoesNotRun, Session
from explorer.qt.panels.training.snapshot_diff import DifferenceView
from explorer.qt.panels.training.snapshot_source import SnapshotSource
from explorer.qt.panels.training.curves import CurvesView
from explorer.qt.panels.training.head_curves import HeadTypeCurvesView
from explorer.core.head_types import curves_job as head_types_job
from model.tokens.names import token_name
from model.training.over_training import TrainingCurves, curves_over_training

PLAY_MS = 700  # one snapshot per this many ms while playing
LOAD_DELAY_MS = 300  # shown this long before the snapshots are loaded
KINDS = {"next token": "the next token", "final top-1": "the last snapshot's top-1", "given": "chosen",
         "none": "no token"}


def _curves_job(_checkpoint, inputs) -> TrainingCurves:
    _key, snapshots, ids, position, val_curve, pe, causal = inputs
    return curves_over_training(snapshots, ids, position=position, val_curve=val_curve,
                                positional_encoding=pe, causal=causal)


class TrainingPanel(RefreshWhenShown, QWidget):
    """Snapshots of one training run: a slider that shows each in every panel, curves over
    training for the current text, and the difference of two snapshots."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.source = SnapshotSource(sync=session.compute_mode == "sync", parent=self)
        self.stops: list[SliderStop] = []
        self.curves: TrainingCurves | None = None
        self._curves_have = self._curves_asked = self._curves_drawn = None
        self._known_loaded = None  # the loaded checkpoint whose snapshots the panel has looked for
        self._need_source = False
        self._adopting = False
        self._adopt_on_load = False  # a folder of another run was opened: show its last snapshot
        self._wanted_step: int | None = None
        self._reading = None  # (view, slider position) whose weights are being read, or None
        self._build()
        self.source.sig_changed.connect(self._on_source_changed)
        session.sig_model_changed.connect(self._on_session_model_changed)
        session.sig_trace_changed.connect(self.schedule_refresh)
        session.sig_selection_changed.connect(self.schedule_refresh)
        self._on_session_model_changed()

    def _build(self) -> None:
        self.folder_label, self.skipped_label, self.step_label = QLabel(), QLabel(), QLabel()
        for label in (self.folder_label, self.skipped_label):  # wrapped: "No training snapshots found for
            label.setWordWrap(True)  # ..." was one 1,000 px line, cut in an 812 px dock (the dock's scroll
            label.setMinimumWidth(40)  # area gives the panel the least height of its lines: panel_scroll)
        self.skipped_label.setStyleSheet("QLabel { color:#9a4a00; }")
        self.step_label.setStyleSheet("QLabel { font-weight:bold; }")
        self.open_button = QPushButton("Open folder…")
        self.open_button.clicked.connect(self.choose_folder)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setPageStep(1)
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.valueChanged.connect(self.show_stop)
        self.prev_button, self.next_button = QPushButton("◀"), QPushButton("▶")
        self.prev_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() - 1))
        self.next_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() + 1))
        self.play_button = QPushButton("Play")
        self.play_button.setCheckable(True)
        self.play_button.toggled.connect(self._on_play_toggled)
        self.final_button = QPushButton("Final model")
        self.final_button.setToolTip("show the model you opened again (End on the slider)")
        self.final_button.clicked.connect(lambda: self.session.show_snapshot(None))
        self._load_timer = QTimer(self)
        self._load_timer.setSingleShot(True)
        self._load_timer.setInterval(LOAD_DELAY_MS)
        self._load_timer.timeout.connect(lambda: self.is_shown() and self._ensure_source(now=True))
        self._player = QTimer(self)
        self._player.setInterval(PLAY_MS)
        self._player.timeout.connect(self._on_player_tick)
        self.curves_view = CurvesView()
        self.curves_view.sig_x_clicked.connect(self._on_curve_clicked)
        self.head_curves = HeadTypeCurvesView()  # every head's type over training, on the probe (not the text)
        self.head_curves.sig_x_clicked.connect(self._on_curve_clicked)
        self._head_curves_for = self._head_curves_asked = None  # the snapshot view drawn; (view, weights) asked
        self.difference = DifferenceView(self.session)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.curves_view, "Curves over training")
        self.tabs.addTab(self.head_curves, "Head types over training")
        self.tabs.addTab(self.difference, "Difference of two snapshots")
        top, bar = QHBoxLayout(), QHBoxLayout()
        top.addWidget(self.folder_label, 1)
        top.addWidget(self.open_button)
        for w in (self.prev_button, self.slider, self.next_button, self.play_button, self.final_button):
            bar.addWidget(w, 1 if w is self.slider else 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self.skipped_label)
        layout.addLayout(bar)
        layout.addWidget(self.step_label)
        layout.addWidget(self.tabs, 1)
        self.setFocusProxy(self.slider)

    @property
    def reading(self) -> bool:
        """True while the weights of the slider's position are read, before they are shown."""
        return self._reading is not None

    # ---- where the snapshots come from ------------------------------------------------------------
    def _on_session_model_changed(self) -> None:
        loaded = self.session.loaded_checkpoint
        if self._adopting:
            self._known_loaded = loaded
        elif loaded is not self._known_loaded:  # another model was opened: look for its snapshots
            self._known_loaded, self._need_source = loaded, True
            self.source.stop_following()
            self.schedule_refresh()
        self._sync_slider()

    def _ensure_source(self, now: bool = False) -> None:
        """Load the loaded model's snapshots if not done yet: at once when ``now`` (or in sync mode),
        else once the panel has stayed on screen for :data:`LOAD_DELAY_MS` (a dock shows each tab
        for a moment while the window is first laid out: no loading for that)."""
        if not self._need_source:
            return
        if not (now or self.source.sync):
            if not self._load_timer.isActive():
                self._load_timer.start()
            return
        self._need_source = False
        self._load_timer.stop()
        self.source.for_model(self.session.loaded_checkpoint)

    def choose_folder(self) -> None:
        """File ▸ Open Snapshot Folder: any folder of one run's checkpoints."""
        start = str(self.source.view.folder.parent) if self.source.view is not None else ""
        folder = dialogs.open_folder(self, "Open Snapshot Folder", start)
        if folder:
            self.open_folder(folder)

    def open_folder(self, folder: str | os.PathLike) -> None:
        """Scrub a folder's snapshots: the loaded model's run, or another run (its last snapshot is then shown)."""
        self._need_source, self._adopt_on_load = False, True
        self.source.open_folder(folder, self.session.loaded_checkpoint)

    def follow_folder(self, folder: str | os.PathLike) -> None:
        """Follow the snapshots of a run that is writing them (the Train dialog's run)."""
        self._need_source = False
        self.source.follow(folder)

    def _on_source_changed(self) -> None:
        view = self.source.view
        final = view.reference if view is not None and view.reference is self.session.loaded_checkpoint else None
        steps = final.training.get("steps") if final is not None else None
        if not isinstance(steps, int) and final is not None and view.revisions:  # a Hub model: its revision's step
            steps = next((x.step for x in view.snapshots if x.path == final.path), None)
        final_step = (steps if isinstance(steps, int) else view.steps[-1]) if final is not None and view.snapshots else None
        self.stops = slider_stops(view.steps if view is not None else [], final_step,
                                  view.identical if view is not None else (),
                                  [s.label for s in view.snapshots] if view is not None and view.revisions else ())
        with QSignalBlocker(self.slider):
            self.slider.setRange(0, max(len(self.stops) - 1, 0))
        for w in (self.slider, self.prev_button, self.next_button, self.play_button):
            w.setEnabled(len(self.stops) > 1)
        self._describe_source()
        self.curves, self._curves_have = None, None
        self.curves_view.clear_curves()
        self.head_curves.clear_curves()
        self._curves_drawn = self._head_curves_for = self._head_curves_asked = None
        self.difference.set_snapshots(view)
        if view is not None and view.snapshots and self._adopt_on_load:
            self._adopt_on_load = False
            if final is None:
                self.show_stop(len(self.stops) - 1)
        if view is not None and self._wanted_step is not None:
            self.show_step(self._wanted_step)
        self._sync_slider()
        self.schedule_refresh()

    def _describe_source(self) -> None:
        view, source = self.source.view, self.source
        if view is None or not view.snapshots:
            self.folder_label.setText(source.message or "No snapshots.")
        else:
            live = " (a run still writing: new snapshots appear as they are saved)" if source.following else ""
            short = Path(*view.folder.parts[-2:])  # the whole path in the tooltip
            n = len(view.snapshots)
            steps = f"step {view.steps[0]:,}" if n == 1 else f"steps {view.steps[0]:,} to {view.steps[-1]:,}"
            what = f"{n:,} snapshot{'s' * (n != 1)}"
            if view.revisions:  # a Hub repository's revisions: named by the repository
                short = view.folder.name.removeprefix("models--").replace("--", "/")
                what = f"{n:,} revision{'s' * (n != 1)} in the local Hub cache"
            same = sum(1 for others in view.identical if others)
            dup = (f"; {same} of them with the very same weights as another (the series serves one checkpoint "
                   "under several steps)") if same else ""
            spread = (f"; the curves run over {CURVE_SNAPSHOTS} of them, spread evenly" if n > CURVE_SNAPSHOTS else "")
            self.folder_label.setText(f"{short}: {what}, {steps}{dup}{spread}{live}")
        self.folder_label.setToolTip(str(view.folder) if view is not None else "")
        skipped = view.skipped if view is not None else ()
        lines = [f"{os.path.relpath(s.path, view.folder)}: {s.reason}" for s in skipped]
        self.skipped_label.setText(f"{len(lines)} file(s) skipped: " + "; ".join(lines[:4])
                                   + (f"; and {len(lines) - 4} more" if len(lines) > 4 else ""))
        self.skipped_label.setToolTip("\n".join(lines))
        self.skipped_label.setVisible(bool(lines))

    # ---- the slider ------------------------------------------------------------------------------------
    def show_stop(self, index: int) -> None:
        """Show the weights of slider position ``index`` in every panel (a snapshot, or the loaded model)."""
        if not 0 <= index < len(self.stops):
            return
        s, view, stop = self.session, self.source.view, self.stops[index]
        if stop.index < 0:
            self._reading = None
            s.show_snapshot(None)
            return
        snap = view.snapshots[stop.index]
        loaded = s.loaded_checkpoint  # (compared by file: a snapshot's weights are read on first use)
        if snap.is_file_of(loaded):
            self._reading = None
            s.show_snapshot(None, snap.step)
            return
        # The weights are read off the GUI thread (the newest position asked for wins); the panel
        # says so meanwhile, and the slider stays where it was put.
        self._reading = reading = (view, index)
        self.step_label.setText(f"Reading the weights of step {snap.step:,}…")
        self.source.read_weights(snap, lambda ck, exc: self._on_weights_read(reading, snap, ck, exc))

    def _on_weights_read(self, reading, snap, checkpoint, exc) -> None:
        """A snapshot's weights were read (:meth:`SnapshotSource.read_weights`): show them in every
        panel, unless another position was asked for meanwhile."""
        if reading is not self._reading:
            return  # a newer position's weights are being read
        view, s = reading[0], self.session
        if exc is not None:
            self._reading = None
            self.step_label.setText(f"Could not read step {snap.step:,}: {exc}")
            return
        loaded = s.loaded_checkpoint
        if view.reference is loaded or any(x.is_file_of(loaded) for x in view.snapshots):
            self._reading = None
            s.show_snapshot(checkpoint, snap.step)
            self._sync_slider()
        elif self.source.sync:
            self._adopt(reading, checkpoint)
        else:  # in a turn of its own: a folder's arrival and the new model's first draw were one 89-97 ms turn
            Pacer.of(s).call_later(self, lambda: self._adopt(reading, checkpoint))

    def _adopt(self, reading, checkpoint) -> None:
        """Another run's snapshot (a folder, a run still training) becomes the model, unless another
        position was asked for meanwhile."""
        if reading is not self._reading:
            return
        self._reading = None
        self._adopting = True
        try:
            self.session.set_checkpoint(checkpoint)
        except ModelDoesNotRun as exc:  # the model shown before stays
            self.step_label.setText(f"Could not show {checkpoint.name}: {exc}")
        finally:
            self._adopting = False
        self._sync_slider()

    def show_step(self, step: int) -> None:
        """Show the snapshot at ``step`` or the last one before it (once loaded, when still loading)."""
        self._wanted_step = step
        self._ensure_source(now=True)
        view = self.source.view
        if view is None or not view.snapshots:
            return
        self._wanted_step = None
        before = [i for i, stop in enumerate(self.stops) if stop.index >= 0 and stop.step <= step]
        index = before[-1] if before else 0
        if self.slider.value() == index:
            self.show_stop(index)
        self.slider.setValue(index)

    def shown_stop(self) -> int | None:
        """The slider position of the weights the session shows, or None (not of this run)."""
        s, view = self.session, self.source.view
        if self.stops and self.stops[-1].index < 0 and s.loaded_checkpoint is s.checkpoint and s.snapshot_step is None:
            return len(self.stops) - 1  # the model you opened (the last stop)
        if view is None or s.checkpoint is None:
            return None
        # A snapshot is shown with its step (an adopted one's file says it): its stop is found by step.
        shown = s.snapshot_step if s.snapshot_step is not None else s.checkpoint.training.get("steps")
        if not isinstance(shown, int):
            return None
        at = bisect.bisect_left(self.stops, shown, key=lambda stop: stop.step)
        for i in range(at, min(at + 2, len(self.stops))):  # (the snapshot, and the final stop of the same step)
            stop = self.stops[i]
            if stop.index >= 0 and view.snapshots[stop.index].is_file_of(s.checkpoint):
                return i
        return None

    def _sync_slider(self) -> None:
        if self._reading is not None:
            return  # the slider shows the position whose weights are being read, and the label says so
        index = self.shown_stop()
        if index is not None:
            with QSignalBlocker(self.slider):
                self.slider.setValue(index)
        stop = self.stops[index] if index is not None else None
        self.step_label.setText(stop.label if stop is not None else
                                "Not shown: move the slider to show this run's snapshots." if self.stops else "")
        self.curves_view.set_step(stop.step if stop is not None else None)
        self.head_curves.set_step(stop.step if stop is not None else None)
        self.final_button.setEnabled(self.session.snapshot_step is not None and bool(self.stops)
                                     and self.stops[-1].index < 0)

    def _on_curve_clicked(self, x: float) -> None:
        if self.stops:
            self.slider.setValue(nearest_index(x, [stop.step for stop in self.stops]))

    def _on_play_toggled(self, on: bool) -> None:
        self.play_button.setText("Pause" if on else "Play")
        if on and self.slider.value() == self.slider.maximum():
            self.slider.setValue(0)
        (self._player.start if on else self._player.stop)()

    def _on_player_tick(self) -> None:
        if self.slider.value() >= self.slider.maximum():
            self.play_button.setChecked(False)
        else:
            self.slider.setValue(self.slider.value() + 1)

    # ---- curves ----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Look for the snapshots (first time shown), ask for the curves of the current text, draw."""
        self._ensure_source()
        self._sync_slider()
        self._request_curves()
        self._request_head_curves()
        self.difference.update_difference()

    def _request_curves(self) -> None:
        s, view = self.session, self.source.view
        if view is None or not view.snapshots or s.trace is None:
            return
        ids, pos = tuple(int(t) for t in s.trace.token_ids), s.selected_position()
        key = (id(view), ids, pos, s.positional_encoding, s.causal)
        if key == self._curves_have:
            self._draw_curves()
            return
        if self._curves_asked == (key, s.checkpoint):
            return  # in flight (a result computed while other weights were shown is dropped: asked again)
        self._curves_asked = (key, s.checkpoint)
        snapshots = curve_snapshots(view.snapshots)
        inputs = (key, snapshots, ids, pos, view.val_curve, s.positional_encoding, s.causal)
        # A whole trace per snapshot (14 for the default model) never fits a keystroke's frame, and weights
        # not read yet are read by the job: always on the worker thread (it ran on the GUI thread while the
        # estimate said it fitted: 55-69 ms a key).
        s.submit(self, _curves_job, inputs, self._on_curves, passes=len(snapshots) + 1, name="curves", inline_ms=0.0)

    def _request_head_curves(self) -> None:
        """Every head's scores on the probe over the snapshots: once per snapshot set (they do not
        depend on the text; a result that arrives after the slider changed the weights is dropped
        by the session, and asked again)."""
        view, s = self.source.view, self.session
        if view is None or not view.snapshots or self._head_curves_for is view:
            return
        if self._head_curves_asked == (view, s.checkpoint):
            return  # in flight
        self._head_curves_asked = (view, s.checkpoint)
        why = not_applicable("head-types", s.config)  # the snapshots are the shown model's run: its architecture
        if why:
            self.head_curves.clear_curves()
            self.head_curves.lesson.setText(why)
            self._head_curves_for = view
            return
        snapshots = curve_snapshots(view.snapshots)  # a long run: as many as the curves, spread evenly
        s.submit(self, head_types_job, (snapshots, view.tokenizer), self._on_head_curves, passes=len(snapshots),
                 name="head types")

    def _on_head_curves(self, result: JobResult) -> None:
        self._head_curves_asked = None
        view = self.source.view
        if not result.error and view is not None and tuple(result.inputs[0]) == tuple(curve_snapshots(view.snapshots)):
            self._head_curves_for = view
            self.head_curves.set_curves(result.value)

    def _on_curves(self, result: JobResult) -> None:
        self._curves_asked = None
        if result.error:
            return  # in the status bar
        self.curves, self._curves_have = result.value, result.inputs[0]
        self._draw_curves()

    def _draw_curves(self) -> None:
        c, s = self.curves, self.session
        drawn = (id(c), s.layer, s.head, s.tokenizer)
        if drawn == self._curves_drawn:
            return  # a slider step: only the line at the step shown moves
        self._curves_drawn = drawn
        if c is None or c.position < 0:
            self.curves_view.clear_curves()
            return
        name = functools.partial(token_name, s.tokenizer)
        layer = min(s.layer, c.attn_entropy.shape[1] - 1)
        head = min(s.head, c.attn_entropy.shape[2] - 1)
        token = token_label(s.tokens[c.position]) if c.position < len(s.tokens) else "?"
        target = token_label(name(c.target_id)) if c.target_id >= 0 else "?"
        note = f"p({target!r}) after {c.position} {token!r} ({KINDS.get(c.target_kind, c.target_kind)})"
        later = None if s.compute_mode == "sync" else functools.partial(Pacer.of(s).call_later, self.curves_view)
        self.curves_view.set_curves(c, layer, head, name, note, later)
