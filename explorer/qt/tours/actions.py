"""The tour's place in the main window: its dock (at the bottom, shown while a tour is open), and the
File menu's Open Tour…, the shipped tours, Next / Back and Export Worksheet."""

from __future__ import annotations

import tomllib
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu, QSizePolicy

from explorer.core.tours.files import shipped_file, shipped_tours
from explorer.qt import dialogs
from explorer.qt.tours.controller import TourController
from explorer.qt.tours.view import TourView
from explorer.qt.tours.worksheet import write_worksheet

TOUR_FILTER = "Tours (*.toml);;All files (*)"
HTML_FILTER = "HTML (*.html *.htm)"
MAX_SHARE = 0.35  # of the window's height, at most, for the tour's dock when it appears


def _tour_title(path: Path) -> str:
    """A shipped tour's title for the menu (its file name when it cannot be read)."""
    try:
        return str(tomllib.loads(path.read_text(encoding="utf-8")).get("title") or path.stem)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return path.stem


class TourActions:
    """Adds the tour's dock and menu entries to ``window`` (a MainWindow) and ``file_menu``.

    Attributes
    ----------
    controller : TourController   the tour that runs in the window.
    view : TourView               the dock's contents.
    dock : QDockWidget
    """

    def __init__(self, window, file_menu: QMenu) -> None:
        self.window = window
        self.controller = TourController(window)
        self.view = TourView(self.controller)
        # A few lines high, never more (its text scrolls): the window's extra height goes to the panels.
        self.view.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.dock = QDockWidget("Tour", window)
        self.dock.setObjectName("dock-tour")
        self.dock.setWidget(self.view)
        # Under the right column only: the text, chips and bars on the left keep their height.
        window.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.dock.visibilityChanged.connect(self._on_dock_visibility_changed)
        self.view.worksheet_button.clicked.connect(self.on_export_worksheet)
        self.controller.sig_tour_changed.connect(self._on_controller_tour_changed)
        self._add_menu(file_menu)

    def _add_menu(self, file_menu: QMenu) -> None:
        """File ▸ Open Tour… and File ▸ Tour ▸ (the shipped tours, Next, Back, Export Worksheet),
        appended where the window calls this."""
        self._action(file_menu, "Open &Tour…", self.on_open, QKeySequence("Ctrl+T"))
        menu = file_menu.addMenu("T&our")
        shipped = menu.addMenu("&Shipped Tours")
        for path in shipped_tours():
            shipped.addAction(_tour_title(path)).triggered.connect(lambda *_, p=path: self.open(p))
        shipped.setEnabled(bool(shipped_tours()))
        self.next_action = self._action(menu, "&Next Step", self.controller.next, QKeySequence("Alt+Right"))
        self.back_action = self._action(menu, "&Back", self.controller.back, QKeySequence("Alt+Left"))
        menu.addSeparator()
        self._action(menu, "Export &Worksheet (HTML)…", self.on_export_worksheet)
        self.menu = menu

    def _action(self, menu: QMenu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self.window)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(lambda *_: slot())
        menu.addAction(action)
        return action

    def open(self, path: str | Path, step: int = 0) -> bool:
        """Open a tour file at step ``step`` (0-based) and show its dock; False (after one dialog
        listing its problems) for a bad file, and whatever was open stays."""
        return self.controller.open(path, step)

    def on_open(self) -> None:
        """File ▸ Open Tour…: a .toml tour file (the shipped tours' folder first)."""
        path = dialogs.open_file(self.window, "Open Tour", str(shipped_file("tours")), TOUR_FILTER)
        if path:
            self.open(path)

    def on_export_worksheet(self) -> None:
        """Write the tour (or the current view) as one HTML file, asked for through the dialogs."""
        tour = self.controller.tour
        name = (Path(tour.path).stem if tour is not None else "worksheet") + ".html"
        path = dialogs.save_file(self.window, "Export Worksheet", str(Path.home() / name), HTML_FILTER)
        if not path:
            return
        path = path if path.lower().endswith((".html", ".htm")) else path + ".html"
        try:
            pages = write_worksheet(self.controller, path)
        except OSError as exc:
            dialogs.error(self.window, "Could not write the worksheet", f"{path}: {exc.strerror or exc}")
            return
        self.window.statusBar().showMessage(f"Wrote the worksheet ({pages} page{'s' * (pages != 1)}) to {path}.", 8000)

    def _on_dock_visibility_changed(self, visible: bool) -> None:
        """Give the dock its height when it appears (the dock area keeps the height it had before);
        without a tour (a layout saved while one was open) it is not shown."""
        if visible and self.controller.tour is None:
            QTimer.singleShot(0, self.dock.hide)
            return
        if visible and self.window.isVisible() and self.dock.height() < self.view.sizeHint().height():
            target = min(self.view.sizeHint().height(), int(self.window.height() * MAX_SHARE))
            self.dock.setMinimumHeight(target)  # forced once, then free to be dragged smaller
            QTimer.singleShot(0, lambda: self.dock.setMinimumHeight(0))

    def _on_controller_tour_changed(self) -> None:
        on = self.controller.tour is not None
        self.dock.setVisible(on)
        if on:
            self.dock.setWindowTitle(f"Tour: {self.controller.tour.title}")
            self.dock.raise_()
        self.next_action.setEnabled(on)
        self.back_action.setEnabled(on)
