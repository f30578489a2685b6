"""The main window: assembles the docks of every registered panel, the menus and the status bar.

This module imports nothing that needs torch at its top: ``MainWindow(starting=True)`` is the window
with its docks (empty), layout and status bar, shown while torch is imported; :meth:`MainWindow.finish`
then imports the session and the File menu's actions (which need torch) and builds the panels in view.
A panel tabbed out of sight (most of them) is built when its dock is first shown, or when code looks it
up in :attr:`MainWindow.panels` (a :class:`~explorer.qt.panels.PanelMap`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QWidget

import transformer_explorer_assets as shipped
from explorer.qt.widgets.status_line import StatusLine
from explorer.qt.widgets.panel_scroll import panel_scroll
from explorer.qt.panels import PANELS, PanelMap
from explorer.qt.settings import WINDOW_GEOMETRY, WINDOW_STATE

if TYPE_CHECKING:
    from explorer.qt.session import Session
    from model import Checkpoint

APP_NAME = "Transformer Explorer"
LEFT_SHARE = 0.28  # of the window's width: the text, generation and next-token column
ICON = shipped.path("icons", "transformer-explorer.svg")
SNAPSHOT_NOTE = "Training panel: Final model or End goes back"
STARTING_MENUS = ("&File", "&View", "&Help")  # shown, disabled, while torch is imported


def default_settings() -> QSettings:
    """The app's QSettings (per user)."""
    return QSettings("TransformerExplorer", "transformer-explorer")


class MainWindow(QMainWindow):
    """Docks for every panel in :data:`explorer.qt.panels.PANELS`, the File, View and Help menus, a status
    bar; what the File menu does is :attr:`files` (:class:`~explorer.qt.files.actions.FileActions`).
    :attr:`panels` builds each panel when its dock is first shown or it is first looked up.

    Parameters
    ----------
    session : Session, optional
        Created when not given; with ``starting=True`` it is :meth:`finish`'s to take (refused here).
    settings : QSettings, optional
        Where layout, recent files and panel settings are remembered (tests pass a temporary file).
    starting : bool
        True builds only the frame: the docks (empty), the saved layout and the status bar, with
        nothing imported that needs torch, to be shown at once; :meth:`finish` builds the rest.
        False (the default) builds everything now.
    """

    def __init__(self, session: Session | None = None, settings: QSettings | None = None,
                 parent: QWidget | None = None, *, starting: bool = False) -> None:
        if starting and session is not None:
            raise ValueError("a starting window takes its session in finish()")
        super().__init__(parent)
        self.session: Session | None = None  # until finish()
        self.files = None  # the File menu's FileActions, from finish()
        self.settings = settings or default_settings()
        self.model_note = ""  # why the model shown is not a file (the seeded random model), for the title
        self.panels = PanelMap()  # by name; each built when first shown or looked up (empty until finish)
        self._in_view: set[str] = set()  # the docks in view (shown, their tab in front), by name
        self.docks: dict[str, QDockWidget] = {}
        self._current_panel = "attention"
        self._panel_pending: str | None = None  # show_panel before the window was shown
        self.setWindowTitle(APP_NAME)
        if ICON.exists():
            self.setWindowIcon(QIcon(str(ICON)))
        self.setDockNestingEnabled(True)
        self._build_docks()
        self.status = StatusLine()  # the status line: what the model did, or what the start is doing
        self.statusBar().addPermanentWidget(self.status, 1)
        for title in STARTING_MENUS:  # disabled until finish(): the menu bar has its height from the start
            self.menuBar().addMenu(title).setEnabled(False)
        self._restore_layout()
        if not starting:
            self.finish(session)

    def finish(self, session: Session | None = None) -> None:
        """Build what needs torch: the session (created when not given), the panels whose docks are in
        view (the others when first shown or looked up), the menus and the status bar's links."""
        from explorer.qt.files.actions import FileActions
        from explorer.qt.session import Session
        from explorer.qt.widgets.interventions_status import InterventionsStatus

        self.session = session or Session(parent=self)
        self.files = FileActions(self)
        self._build_panels()
        self.menuBar().clear()
        self._build_menus()
        self.interventions_status = InterventionsStatus(self.session)  # heads switched off, and "Restore all"
        self.statusBar().addPermanentWidget(self.interventions_status)
        self.session.sig_timing_changed.connect(self._update_status)
        self.session.sig_model_changed.connect(self._update_title)
        self.session.sig_job_failed.connect(lambda message: self.statusBar().showMessage(message, 10000))
        self.session.sig_open_requested.connect(lambda path: self.files.open_checkpoint(Path(path)))
        self.session.sig_panel_requested.connect(self.show_panel)
        QApplication.instance().focusChanged.connect(self._on_app_focus_changed)
        self.setAcceptDrops(True)

    # ---- construction --------------------------------------------------------------------------
    def _build_docks(self) -> None:
        """One dock per registered panel, empty until its panel is built, in the default layout."""
        for name, title, _factory in PANELS:
            dock = QDockWidget(title, self)
            dock.setObjectName(f"dock-{name}")
            dock.visibilityChanged.connect(lambda visible, n=name: self._on_dock_visibility_changed(n, visible))
            self.docks[name] = dock
        self.default_layout()

    def _build_panels(self) -> None:
        """The panels whose docks are in view now (imported now: they need torch); the others are
        built when their docks are first shown (:meth:`_on_dock_visibility_changed`) or looked up."""
        self.panels.open(self.session, self._on_panel_built)
        for name in [n for n in self.docks if n in self._in_view]:
            self.panels[name]  # looking it up builds it

    def _on_panel_built(self, name: str, panel: QWidget) -> None:
        """A panel just built (it draws the session's current trace itself, at once or when it is
        first shown, as a panel of ``--screenshot --panel`` does): into its dock, its settings read."""
        self.docks[name].setWidget(panel_scroll(panel))
        if hasattr(panel, "restore_settings"):
            panel.restore_settings(self.settings)

    def default_layout(self) -> None:
        """The text over next token (model tabbed) on the left; on the right, the full height for one
        view at a time: attention in front, the embeddings, Q/K/V, the lessons and any further
        panels tabbed with it (a lesson needs the room: 1,400 × 900 shows it without scrolling)."""
        d = self.docks
        for dock in d.values():
            dock.setFloating(False)
            self.removeDockWidget(dock)
        left_top, right_top = d.get("tokens"), d.get("attention")
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, left_top)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, right_top)
        above = left_top
        for name in ("generate", "next-token"):  # the generation controls stay in view, above the bars
            if name in d:
                self.splitDockWidget(above, d[name], Qt.Orientation.Vertical)
                above = d[name]
        if "model" in d:
            self.tabifyDockWidget(above, d["model"])
        left = {"tokens", "generate", "next-token", "model"}
        for name in [n for n in d if n not in left and n != "attention"]:
            self.tabifyDockWidget(right_top, d[name])
        for dock in d.values():
            dock.show()
        for name in ("next-token", "attention"):
            if name in d:
                d[name].raise_()
        self._sizes_pending = True
        if self.isVisible():
            self._apply_default_sizes()

    def _apply_default_sizes(self) -> None:
        """Dock proportions of the default layout (only effective once the window has a size)."""
        self._sizes_pending = False
        d = self.docks
        w, h = self.width(), self.height()
        self.resizeDocks([d["tokens"], d["attention"]], [int(w * LEFT_SHARE), int(w * (1 - LEFT_SHARE))],
                         Qt.Orientation.Horizontal)
        column = [d[n] for n in ("tokens", "generate", "next-token") if n in d]
        shares = {"tokens": 0.3, "generate": 0.24, "next-token": 0.46}
        self.resizeDocks(column, [int(h * shares[n]) for n in ("tokens", "generate", "next-token") if n in d],
                         Qt.Orientation.Vertical)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().showEvent(event)
        if self._sizes_pending:  # after the first layout pass, when the docks have real sizes
            QTimer.singleShot(0, self._apply_default_sizes)
        if self._panel_pending is not None:
            QTimer.singleShot(0, lambda name=self._panel_pending: self.show_panel(name))
            self._panel_pending = None

    def _build_menus(self) -> None:
        from explorer.qt.about import add_help_menu
        from explorer.qt.files.export import ExportMenu
        from explorer.qt.tours.actions import TourActions
        from explorer.qt.train.dialog import open_train_dialog

        files, file_menu = self.files, self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open Checkpoint…", files.on_open, QKeySequence.StandardKey.Open)
        self._action(file_menu, "Open &Folder…", files.on_open_folder, QKeySequence("Ctrl+Shift+O"))
        self._action(file_menu, "Open from Hugging Face &Hub…", files.on_open_hub)
        self.tours = TourActions(self, file_menu)  # Open Tour…, the Tour menu, and the tour's dock
        shipped_menu = file_menu.addMenu("Open &Shipped Model")
        shipped_menu.aboutToShow.connect(lambda: files.fill_shipped_menu(shipped_menu))
        self.recent_menu = file_menu.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(lambda: files.fill_recent_menu(self.recent_menu))
        self._action(file_menu, "&Reload", files.reload, QKeySequence(Qt.Key.Key_F5))
        self._action(file_menu, "Save &As…", files.on_save_as, QKeySequence("Ctrl+Shift+S"))
        file_menu.addSeparator()
        self._action(file_menu, "Open S&napshot Folder…", self._on_open_snapshots_triggered)
        self._action(file_menu, "&Train New Model…", lambda: open_train_dialog(self))
        self.export_menu = ExportMenu(self, file_menu.addMenu("&Export"))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        if "generate" in self.panels:
            generate_menu = self.menuBar().addMenu("&Generate")
            self._action(generate_menu, "&Generate / Stop", lambda: self.panels["generate"].toggle(),
                         QKeySequence("Ctrl+G"))
        view_menu = self.menuBar().addMenu("&View")
        for dock in self.docks.values():
            view_menu.addAction(dock.toggleViewAction())
        view_menu.addSeparator()
        release = self._action(view_menu, "Release the &Pinned Token", lambda: self.session.set_position(None),
                               QKeySequence(Qt.Key.Key_Escape))
        release.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self._action(view_menu, "Reset &Layout", self.default_layout)
        add_help_menu(self)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(lambda *_: slot())
        menu.addAction(action)
        return action

    def set_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Make a loaded checkpoint current (every panel follows through the session).

        Raises
        ------
        explorer.qt.session.ModelDoesNotRun
            When its model does not run (the current one stays; :meth:`FileActions.make_current
            <explorer.qt.files.actions.FileActions.make_current>` says so in a dialog).
        """
        self.session.set_checkpoint(checkpoint)
        self._update_title()
        self._update_status()

    def show_panel(self, name: str) -> None:
        """Bring the dock of the registered panel ``name`` forward (shown if it was closed); before the
        window is first shown, once it is (a tab raised earlier does not hold, and blocks a later raise)."""
        if name not in self.docks:
            return
        self.set_current_panel(name)
        if not self.isVisible():
            self._panel_pending = name
            return
        self.docks[name].show()
        self.docks[name].raise_()

    def _on_open_snapshots_triggered(self) -> None:
        """File ▸ Open Snapshot Folder: the Training panel scrubs any folder of one run's checkpoints."""
        self.docks["training"].show()
        self.docks["training"].raise_()
        self.panels["training"].choose_folder()

    # ---- drag and drop ---------------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if self.files is not None and any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        """A dropped file or folder is opened (the first, when several are dropped)."""
        files = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if files:
            event.acceptProposedAction()
            self.files.on_drop(files)

    # ---- status, title, current panel ------------------------------------------------------------
    def _update_title(self) -> None:
        ckpt = self.session.checkpoint
        name = ckpt.name if ckpt is not None else "no model"
        step = self.session.snapshot_step
        if step is not None:  # a training snapshot of it (the Training panel)
            name = f"{self.session.loaded_checkpoint.name} at training step {step:,} ({SNAPSHOT_NOTE})"
        self.setWindowTitle(f"{APP_NAME} — {name}" + (f" ({self.model_note})" if self.model_note else ""))

    def _update_status(self) -> None:
        s = self.session
        if s.checkpoint is None:
            self.status.setText("no model loaded")
            self.status.set_warning(False)
            return
        n = s.trace.n_tokens if s.trace is not None else 0
        shown = s.checkpoint.name if s.snapshot_step is None else f"snapshot of step {s.snapshot_step:,} ({SNAPSHOT_NOTE})"
        parts = [shown if not self.model_note else "random model",
                 f"{n}/{s.config.context_length} tokens",
                 f"model {s.last_model_ms:.1f} ms, drawing {s.last_draw_ms:.1f} ms"]
        bad = s.trace.nonfinite if s.trace is not None else None
        if bad is not None:  # first after the model, so that it is never cut off
            parts.insert(1, f"⚠ {bad}")
        if s.error:
            parts.append(f"error: {s.error}")
        elif self.model_note:
            parts.append(self.model_note)
        self.status.setText("  ·  ".join(parts))
        self.status.set_warning(bad is not None or bool(s.error))

    def current_panel(self) -> str:
        """Name of the panel the user last worked in (for Export ▸ Panel)."""
        return self._current_panel

    def set_current_panel(self, name: str) -> None:
        """Choose the panel that Export ▸ Panel writes."""
        if name in self.panels:
            self._current_panel = name

    def _on_dock_visibility_changed(self, name: str, visible: bool) -> None:
        (self._in_view.add if visible else self._in_view.discard)(name)
        if not visible or name not in self.panels:  # hidden, or still the starting frame's empty dock
            return
        panel = self.panels[name]  # built now if this is the first time its dock is shown
        if hasattr(panel, "catch_up"):  # a tab was brought to the front
            panel.catch_up()
        if self.docks[name].isActiveWindow():
            self._current_panel = name

    def _on_app_focus_changed(self, _old, new) -> None:
        for name, panel in self.panels.built().items():
            if new is not None and (new is panel or panel.isAncestorOf(new)):
                self._current_panel = name
                return

    # ---- settings -----------------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        """The saved geometry and dock layout (each panel's own settings: :meth:`finish`)."""
        geometry = WINDOW_GEOMETRY.read(self.settings)  # None for anything else
        state = WINDOW_STATE.read(self.settings)
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(1400, 900)
        if state is not None and self.restoreState(state):
            self._sizes_pending = False  # the user's own proportions

    def save_settings(self) -> None:
        """Remember the window's geometry, dock layout and each panel's settings."""
        WINDOW_GEOMETRY.write(self.settings, self.saveGeometry())
        WINDOW_STATE.write(self.settings, self.saveState())
        for panel in self.panels.built().values():  # one never built has its saved settings unchanged
            if hasattr(panel, "save_settings"):
                panel.save_settings(self.settings)
        self.settings.sync()

    def closeEvent(self, event) -> None:  # noqa: N802
        """Save the settings and close at once: a running trace (seconds for a GPT-2-sized model)
        finishes in the background; the app waits for it only after the window is gone."""
        self.save_settings()
        if self.session is not None:
            self.session.shutdown(wait=False)
        super().closeEvent(event)
