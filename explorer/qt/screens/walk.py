"""Walk the real main window: every panel and each of its tabs, for one model, theme and window size.

The window is built once per (model, theme, size) and the panels and tabs are brought forward in
turn within it. A device pixel ratio other than the process's (``QT_SCALE_FACTOR``, read when the
QApplication is made) needs a process of its own: :func:`walk_elsewhere` runs one through
``python -m explorer.gallery``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QAbstractEventDispatcher, QEventLoop, QSettings
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QTabWidget

from explorer.qt.screens.checks import check_dock, check_tab_titles
from explorer.qt.screens.findings import Finding, Screen, ScreenResult
from explorer.qt.screens.sentences import SENTENCE_CHECKS

TEXT = "Once upon a time there was a little girl named Lily. She liked to play in the park with her"
THEMES = ("light", "dark")
SETTLE_S = 30.0  # the longest a screen waits for its panels' work (a model's trace, the Why panel's job)


def scale_now() -> int:
    """The device pixel ratio this process draws at (QT_SCALE_FACTOR, rounded)."""
    return max(1, round(float(os.environ.get("QT_SCALE_FACTOR", "1") or 1)))


def parse_size(text: str) -> tuple[tuple[int, int], int]:
    """"1400x900" -> ((1400, 900), 1); "960x540@2" -> ((960, 540), 2)."""
    size, _, scale = text.lower().partition("@")
    w, h = (int(p) for p in size.split("x"))
    return (w, h), int(scale or 1)


def model_label(model: str) -> str:
    """"builtin:tinystories-1L1H" -> "tinystories-1L1H"; a path -> its last part."""
    return model.split(":", 1)[1] if model.startswith("builtin:") else Path(model).name


def settle(window, limit_s: float = SETTLE_S) -> None:
    """Run the event loop until the session's workers are idle and three turns found nothing to do."""
    from explorer.qt.scheduling.jobs import Worker

    dispatcher, end = QAbstractEventDispatcher.instance(), time.monotonic() + limit_s
    quiet = 0
    while quiet < 3 and time.monotonic() < end:
        did = dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents)
        busy = any(w.busy or w.queued for w in window.session.findChildren(Worker))
        if busy:
            time.sleep(0.005)
        quiet = 0 if did or busy else quiet + 1
        if quiet and quiet < 3:
            time.sleep(0.01)  # a timer a few milliseconds away (the scheduler's frame)


@contextmanager
def theme(name: str):
    """The application in the light theme (its own style and palette) or the dark one (``--dark``)."""
    from explorer.qt.theme import use_dark_theme

    app = QApplication.instance()
    style, pal = app.style().name(), QPalette(app.palette())
    if name == "dark":
        use_dark_theme(app)
    try:
        yield
    finally:
        app.setStyle(style)
        app.setPalette(pal)


@contextmanager
def quiet_dialogs(failures: list[str]):
    """No dialog may wait on a window while walking: each is answered (cancelled) and recorded."""
    from explorer.qt import dialogs

    names = ("error", "info", "ask_int", "ask_choice", "open_file", "open_folder", "confirm", "ask_text", "save_file")
    saved = {n: getattr(dialogs, n) for n in names if hasattr(dialogs, n)}

    def refuse(_parent, title, *args, **_kwargs):
        failures.append(f"{title}: {args[0] if args else ''}")

    for n in saved:
        setattr(dialogs, n, refuse)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(dialogs, n, f)


def open_window(model: str, size: tuple[int, int], text: str = TEXT):
    """The real main window on ``model`` (builtin:NAME or a path), shown at ``size``, with ``text``.

    Raises
    ------
    RuntimeError
        When the model does not open (the dialogs' messages in it).
    """
    from explorer.qt.main_window import MainWindow
    from explorer.qt.session import Session

    settings = QSettings(str(Path(tempfile.mkdtemp(prefix="te-screens-")) / "screens.ini"), QSettings.Format.IniFormat)
    window = MainWindow(session=Session(compute_mode="sync"), settings=settings)
    failures: list[str] = []
    with quiet_dialogs(failures):
        if not window.files.open_checkpoint(model):
            close_window(window)
            raise RuntimeError(f"{model} did not open: {'; '.join(failures)}")
    window.resize(*size)
    window.session.set_text(text)
    window.show()
    settle(window)
    return window


def close_window(window) -> None:
    from PySide6.QtCore import QEvent

    window.session.shutdown()
    window.close()
    window.deleteLater()
    QApplication.instance().sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QApplication.instance().processEvents()


def _tab_widgets(panel) -> list[QTabWidget]:
    return [t for t in panel.findChildren(QTabWidget) if t.isVisible()]


def views(window) -> Iterator[tuple[str, str]]:
    """Bring each panel forward, then each tab of its (visible) tab widgets; yield (panel, tab) when shown."""
    for name in window.panels:
        window.show_panel(name)
        settle(window)
        tabs = _tab_widgets(window.panels[name])
        if not tabs:
            yield name, ""
            continue
        for tab_widget in tabs:
            first = tab_widget.currentIndex()
            for i in range(tab_widget.count()):
                tab_widget.setCurrentIndex(i)
                settle(window)
                yield name, tab_widget.tabText(i)
            tab_widget.setCurrentIndex(first)


def check_screen(window, panel: str) -> list[Finding]:
    """Every check on the dock of ``panel`` as it is shown now, and the panel's sentences."""
    findings = check_dock(window.docks[panel])
    for check in SENTENCE_CHECKS.get(panel, []):
        try:
            findings += check(window)
        except Exception as exc:  # a check that breaks is a finding, not the end of the walk
            findings.append(Finding("error", check.__name__, f"{type(exc).__name__}: {exc}"))
    return findings


def walk(model: str, theme_name: str, size: tuple[int, int], *, panels: list[str] | None = None,
         on_screen: Callable | None = None) -> list[ScreenResult]:
    """Walk every panel and tab of the window on ``model`` in ``theme_name`` at ``size`` (logical).

    ``on_screen(window, result)`` is called on each screen as it is shown (the gallery grabs its picture).
    The window's own dock tabs are checked too, as the screen ``(window)``.
    """
    results = []
    scale = scale_now()
    with theme(theme_name):
        window = open_window(model, size)
        try:
            label = model_label(model)
            top = ScreenResult(Screen(label, theme_name, size, scale, "(window)"), check_tab_titles(window))
            for name, tab in views(window):
                if panels is not None and name not in panels:
                    continue
                result = ScreenResult(Screen(label, theme_name, size, scale, name, tab), check_screen(window, name))
                if on_screen is not None:
                    on_screen(window, result)
                results.append(result)
            results.insert(0, top)
        finally:
            close_window(window)
    return results


def grab(window, path: Path) -> None:
    """The window's picture (at the device pixel ratio: a 960 × 540 window at 2 is 1,920 × 1,080 pixels)."""
    if not window.grab().save(str(path), "PNG"):
        raise OSError(f"could not write {path}")


def start_elsewhere(models: list[str], themes: list[str], size_name: str, out_dir: Path, *,
                    images: bool, panels: list[str] | None = None):
    """Start walking at a size whose device pixel ratio is not this process's, in a child process
    (``python -m explorer.gallery --results-only``) with ``QT_SCALE_FACTOR`` set, and return at once:
    the handle :func:`finish_elsewhere` takes (this process walks its own sizes meanwhile)."""
    _, scale = parse_size(size_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_file = out_dir / f"results-{size_name.replace('@', '_at')}.json"
    models = [str(Path(m).resolve()) if Path(m).exists() else m for m in models]  # the child runs elsewhere
    cmd = [sys.executable, "-m", "explorer.gallery", str(out_dir.resolve()), "--results-only",
           str(results_file.resolve()), "--sizes", size_name, "--themes", *themes, "--models", *models] + (["--no-images"] if not images else [])
    if panels:
        cmd += ["--panels", *panels]
    env = dict(os.environ, QT_SCALE_FACTOR=str(scale), QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    here = Path(__file__).resolve().parents[3]  # the folder that holds this explorer package
    log = results_file.with_suffix(".log").open("w+", encoding="utf-8")  # a file: a full pipe would stall it
    child = subprocess.Popen(cmd, env=env, cwd=here, stdout=subprocess.DEVNULL, stderr=log, text=True)
    return child, results_file, size_name, log


def finish_elsewhere(handle, timeout_s: float = 3600) -> list[ScreenResult]:
    """The results of a walk :func:`start_elsewhere` began, once its child process ends.

    Raises
    ------
    RuntimeError
        When the child failed or wrote no results.
    """
    child, results_file, size_name, log = handle
    child.wait(timeout=timeout_s)
    log.seek(0)
    err = log.read()
    log.close()
    if child.returncode != 0 or not results_file.exists():
        raise RuntimeError(f"the walk at {size_name} failed ({child.returncode}): {err[-2000:]}")
    return [ScreenResult.from_json(d) for d in json.loads(results_file.read_text())]


def walk_elsewhere(models: list[str], themes: list[str], size_name: str, out_dir: Path, *,
                   images: bool, panels: list[str] | None = None, timeout_s: float = 3600) -> list[ScreenResult]:
    """Walk at a size whose device pixel ratio is not this process's, in a child process; its results
    (:func:`start_elsewhere`, then :func:`finish_elsewhere`)."""
    return finish_elsewhere(start_elsewhere(models, themes, size_name, out_dir, images=images, panels=panels),
                            timeout_s)


def device_pixel_ratio() -> float:
    """The primary screen's device pixel ratio (2 under QT_SCALE_FACTOR=2 on the offscreen platform)."""
    return QGuiApplication.primaryScreen().devicePixelRatio()
