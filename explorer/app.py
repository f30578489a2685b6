"""The ``transformer-explorer`` command (also ``python -m explorer``).

    transformer-explorer [PATH] [--text TEXT] [--n-heads N] [--vocab FILE] [--book]
                         [--step N] [--tour FILE [--tour-step N]]
                         [--screenshot OUT.png [--panel NAME] [--size WxH]] [--dark]
    transformer-explorer --version | --list-models | --install-desktop | --uninstall-desktop

Opens the main window on PATH (a checkpoint file or folder, ``hf:REPO_ID[@REVISION]`` for a model on
the Hugging Face Hub, or ``builtin:NAME`` for a model shipped with the app), or on the default
shipped model. With ``--screenshot`` it renders the window (or one panel) off-screen to a PNG of
exactly that size and exits.

The window is shown before torch is imported (its docks empty, the status line saying what is being
done), then torch is imported, the panels built and the model opened: importing torch was half of
the time to the first painted window when the window came after it.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from explorer.process import freeze_startup_objects, pin_malloc_threshold  # noqa: E402

DEFAULT_SIZE = (1400, 900)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size takes WIDTHxHEIGHT, e.g. 1400x900, not {text!r}") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise argparse.ArgumentTypeError(f"--size {text}: width and height must be 16 to 8192 pixels")
    return w, h


def parse_args(argv: list[str] | None, panel_names: list[str]) -> argparse.Namespace:
    """Parse the command line; a bad option prints one line and exits with code 2."""
    p = _Parser(prog="transformer-explorer", description="Look inside a small transformer while you type.")
    p.add_argument("path", nargs="?", help="a checkpoint file or folder, hf:REPO_ID[@REVISION] for a model on the "
                   "Hugging Face Hub, or builtin:NAME for a shipped model (see --list-models; default: "
                   "builtin:tinystories-1L1H)")
    p.add_argument("--text", default="", help="text to put in the editor")
    p.add_argument("--n-heads", type=int, help="heads per block, for a file that cannot tell (else asked)")
    p.add_argument("--vocab", metavar="FILE", help="the vocabulary (meta.pkl, vocabulary JSON, tokenizer.json, "
                   "llama2.c tokenizer.bin, GPT-2 folder), where it is not beside the file (else asked)")
    p.add_argument("--book", action="store_true", help="open the attention variants on the book's worked "
                   "example (Raschka, ch. 3: 'Your journey starts with one step')")
    p.add_argument("--step", type=int, metavar="N", help="show the model's training snapshot at step N (or the "
                   "last one before it) in every panel: the Training panel's slider")
    p.add_argument("--tour", metavar="FILE", help="open a guided tour (a .toml tour file, e.g. assets/tours/chapter.toml)")
    p.add_argument("--tour-step", type=int, metavar="N", help="with --tour: start at step N (1 is the first); with "
                   "--screenshot the picture shows that step")
    p.add_argument("--screenshot", metavar="OUT.png", help="render off-screen to this PNG and exit")
    p.add_argument("--panel", help=f"with --screenshot: only this panel ({', '.join(panel_names)})")
    p.add_argument("--size", type=_size, default=DEFAULT_SIZE, help="with --screenshot: WIDTHxHEIGHT (1400x900)")
    p.add_argument("--tab", help="with --screenshot: bring the tab whose title starts with this to the front "
                   "(e.g. --panel training --tab 'Head types')")
    p.add_argument("--dark", action="store_true", help="a dark theme (Qt's Fusion style with a dark palette), "
                   "in the window and in --screenshot pictures")
    p.add_argument("--generate", type=int, metavar="N", help="with --screenshot: generate N tokens after --text "
                   "(greedy) before the picture is taken")
    p.add_argument("--fork", type=int, metavar="K", help="with --generate: then fork at the K-th generated token "
                   "(its most likely alternative instead) and generate N more; the picture shows that branch")
    p.add_argument("--startup-time", action="store_true",
                   help="print when the window was shown, torch imported and the model drawn, then exit")
    p.add_argument("--version", action="store_true", help="print the version (and torch's, PySide6's, Python's)")
    p.add_argument("--list-models", action="store_true", help="print the shipped models (builtin:NAME), a line each")
    p.add_argument("--install-desktop", action="store_true", help="Linux: add the app to this user's applications "
                   "menu, with its icon and the checkpoint file types it opens (freedesktop.org; $XDG_DATA_HOME)")
    p.add_argument("--uninstall-desktop", action="store_true", help="remove what --install-desktop wrote")
    args = p.parse_args(argv)
    if args.panel is not None and args.panel not in panel_names:
        p.error(f"unknown panel {args.panel!r}; choose from {', '.join(panel_names)}")
    if (args.panel is not None or args.tab is not None) and not args.screenshot:
        p.error("--panel and --tab need --screenshot")
    if args.generate is not None and (not args.screenshot or args.generate < 1):
        p.error("--generate N takes a number of tokens (1 or more) and goes with --screenshot")
    if args.fork is not None and (args.generate is None or not 1 <= args.fork <= args.generate):
        p.error("--fork K goes with --generate N, 1 <= K <= N")
    if args.tour_step is not None and (args.tour is None or args.tour_step < 1):
        p.error("--tour-step N goes with --tour FILE, N >= 1")
    if args.tour is not None and args.panel is not None:
        p.error("--tour shows the window with the tour's step; it does not go with --panel")
    if args.book and args.panel not in (None, "variants"):
        p.error(f"--book shows the variants panel, not {args.panel!r}")
    return args


def _render(widget, size: tuple[int, int], out: str, app) -> None:
    from PySide6.QtGui import QPixmap

    widget.resize(*size)
    widget.show()
    for _ in range(5):
        app.processEvents()
    pixmap = QPixmap(*size)
    pixmap.fill(widget.palette().color(widget.backgroundRole()))  # the theme's window colour
    widget.render(pixmap)
    if not pixmap.save(out, "PNG"):
        raise OSError(f"could not write {out}")


def _headless_dialogs(failures: list[str]) -> None:
    """In --screenshot runs nothing may wait on a window: print messages to stderr instead."""
    from explorer.qt import dialogs

    def error(_parent, title, text):
        failures.append(text)
        print(f"transformer-explorer: {title}: {text}", file=sys.stderr)

    def unanswered(_parent, title, *_args, **_kwargs):  # a question: cancelled, and said so
        failures.append(title)
        print(f"transformer-explorer: {title}: cannot ask in a --screenshot run; "
              "give --n-heads or --vocab", file=sys.stderr)

    dialogs.error = error
    dialogs.info = lambda _parent, title, text: print(f"{title}: {text}", file=sys.stderr)
    dialogs.ask_int = dialogs.ask_choice = dialogs.open_file = dialogs.open_folder = dialogs.confirm = unanswered
    dialogs.ask_text = unanswered


def _has_display() -> bool:
    """Whether Qt can open a window here (otherwise it aborts the process)."""
    return bool(os.environ.get("QT_QPA_PLATFORM") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _dispose(app, *widgets) -> None:
    """Close and delete widgets while the QApplication still exists (else teardown can segfault)."""
    from PySide6.QtCore import QEvent

    for widget in widgets:
        widget.close()
        widget.deleteLater()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    app.processEvents()


HARMLESS_QT_WARNINGS = ("This plugin does not support propagateSizeHints()",)  # offscreen plugin


def _quiet_harmless_qt_warnings() -> None:
    """Print Qt's messages as usual, except the offscreen platform's harmless size-hint notice."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode, _context, message: str) -> None:
        if message not in HARMLESS_QT_WARNINGS:
            print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def main(argv: list[str] | None = None) -> int:
    """Run the app; returns the exit code (0 ok, 1 the checkpoint failed in a screenshot, 2 bad usage)."""
    from explorer.qt.panels import panel_names

    args = parse_args(argv, panel_names())
    if args.version or args.list_models or args.install_desktop or args.uninstall_desktop:
        return _inform(args)
    pin_malloc_threshold()
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif sys.platform.startswith("linux") and not _has_display():
        print("transformer-explorer: error: no display (DISPLAY/WAYLAND_DISPLAY unset); "
              "run it in a desktop session, under xvfb-run, or use --screenshot", file=sys.stderr)
        return 2
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from explorer.desktop import APP_ID
    from explorer.qt.main_window import ICON

    _quiet_harmless_qt_warnings()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Transformer Explorer")
    app.setDesktopFileName(APP_ID)  # ties the window to the desktop entry of --install-desktop (Wayland's app id)
    if args.dark:
        from explorer.qt.theme import use_dark_theme

        use_dark_theme(app)
    app.setWindowIcon(QIcon(str(ICON)))
    return _screenshot(app, args) if args.screenshot else _run(app, args)


def _inform(args) -> int:
    """--version, --list-models, --install-desktop, --uninstall-desktop: print, do, and exit (no window)."""
    if args.install_desktop or args.uninstall_desktop:
        from explorer.desktop import main as desktop

        return desktop(remove=args.uninstall_desktop)
    from explorer.core.about import models_listing, version_line

    if args.version:
        print(version_line())
        return 0
    from explorer.core.defaults import DEFAULT_MODEL

    lines = models_listing(DEFAULT_MODEL)
    if not lines:
        print("no shipped models were found (the package data is missing: reinstall the app)", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _import_torch() -> None:
    """Import torch, with one thread: the default model is dispatch-bound, one thread is as fast as two
    and leaves a core for painting (with two threads on a busy 2-core machine a trace took 60 ms
    instead of 1.4 ms)."""
    import torch

    torch.set_num_threads(1)


def _screenshot(app, args) -> int:
    """--screenshot: the window (or one panel) on the model, rendered off-screen to a PNG; the exit code."""
    from PySide6.QtCore import QSettings

    from explorer.qt.main_window import MainWindow
    from explorer.qt.panels import PANELS

    _import_torch()
    from explorer.qt.session import Session

    failures: list[str] = []
    _headless_dialogs(failures)  # no modal dialogs, and a fresh layout, not the user's
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "screenshot.ini"), QSettings.Format.IniFormat)
    # A screenshot traces on this thread: a slow model's worker-thread result (and the panels that
    # follow it one per event-loop turn) would otherwise arrive after the picture was taken.
    window = MainWindow(session=Session(compute_mode="sync"), settings=settings)
    if not _load(window, args):
        _dispose(app, window)
        return 1
    factory = {name: f for name, _, f in PANELS}.get(args.panel)
    widget = factory(window.session) if factory else window
    if args.book:
        _show_book(widget if args.panel == "variants" else window)
    if args.step is not None:
        if args.panel is None:  # its tab forward, once the window is shown (before, it does not hold)
            from PySide6.QtCore import QTimer

            QTimer.singleShot(0, window.docks["training"].raise_)
        _show_step(widget if args.panel == "training" else window.panels["training"], args.step)
    if args.generate:
        _generate(window, args.generate, args.fork, app)
    if args.tour is not None and not _open_tour(window, args):
        _dispose(app, window)
        return 1
    if args.tab is not None and not _show_tab(widget, args.tab):
        print(f"transformer-explorer: --tab {args.tab!r}: no tab of that title", file=sys.stderr)
    try:
        _render(widget, args.size, args.screenshot, app)
    except OSError as exc:  # an unwritable place: one line, not a traceback
        print(f"transformer-explorer: error: {exc}", file=sys.stderr)
        return 1
    finally:
        _dispose(app, *{widget, window})
    return 0


def _run(app, args) -> int:
    """The window: shown at once with its docks empty, then torch imported, the panels built and the
    model loaded, each step said in the status bar; then the event loop. The exit code."""
    from explorer.qt.main_window import MainWindow

    report = _StartupReport(args.startup_time)
    window = MainWindow(starting=True)
    _say(app, window, "Starting: importing PyTorch…")
    window.show()
    app.processEvents()
    report("window shown")
    _import_torch()
    report("torch imported")
    _say(app, window, "Starting: building the panels…")
    window.finish()
    report("panels built")
    _say(app, window, "Loading the model…")
    _load(window, args)
    report("model loaded")
    if args.book:
        _show_book(window)
    if args.step is not None:
        window.docks["training"].raise_()
        _show_step(window.panels["training"], args.step)
    if args.tour is not None:
        _open_tour(window, args)
    freeze_startup_objects()
    if args.startup_time:
        from PySide6.QtCore import QEventLoop

        from explorer.qt.scheduling.pacing import Pacer

        app.processEvents()
        pacer = Pacer.of(window.session)
        while pacer.pending or window.session.busy:  # a new model reaches the panels one per turn
            app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
        ckpt = window.session.checkpoint
        report("model loaded and drawn", (ckpt.name if ckpt else "no model")
               + (f" ({window.model_note})" if window.model_note else ""))
        window.close()
        window.session.shutdown()
        _dispose(app, window)
        return 0
    code = app.exec()
    window.session.shutdown()  # the window is gone; a trace still running ends before the process
    return code


def _say(app, window, message: str) -> None:
    """A start-up step on the status line, painted now (the next step blocks the event loop); the
    model's status replaces it once the model is loaded."""
    window.status.setText(message)
    app.processEvents()


class _StartupReport:
    """--startup-time: each step printed (and flushed) as it is reached, in seconds from importing
    explorer.app, so that a parent process can also time the lines as they arrive (the benchmark)."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, step: str, detail: str = "") -> None:
        if self.on:
            torch_note = "" if step != "window shown" or "torch" in sys.modules else " (torch not imported yet)"
            print(f"{step} after {time.perf_counter() - _T0:.2f} s{torch_note}" + (f": {detail}" if detail else ""),
                  flush=True)


def _show_tab(widget, title: str) -> bool:
    """Bring forward the first tab (of any QTabWidget in ``widget``) whose title starts with ``title``."""
    from PySide6.QtWidgets import QTabWidget

    for tabs in widget.findChildren(QTabWidget):
        for i in range(tabs.count()):
            if tabs.tabText(i).startswith(title):
                tabs.setCurrentIndex(i)
                return True
    return False


def _show_book(widget) -> None:
    """Switch the variants panel (``widget``, or the window's) to the book's example and bring it forward."""
    from explorer.qt.panels.lessons.variants.panel import VariantsPanel

    if isinstance(widget, VariantsPanel):
        widget.set_source("book")
        return
    widget.panels["variants"].set_source("book")
    widget.docks["variants"].raise_()


def _show_step(panel, step: int) -> None:
    """Show the training snapshot at ``step`` (or the last before it) through the Training panel;
    says so on stderr when the model has no snapshots."""
    panel.show_step(step)
    if panel.source.view is None and not panel.source.loading:
        print(f"transformer-explorer: --step {step}: {panel.source.message}", file=sys.stderr)


def _generate(window, n: int, fork: int | None, app) -> None:
    """Generate ``n`` tokens (greedy) after the text, as Ctrl+G does; with ``fork``, then take the
    most likely alternative of the fork-th generated token instead, generate ``n`` more after it
    and pin the token where the branches part (while it is in the context window)."""
    from explorer.qt.generation import Generator
    from model.generate import Sampling

    generator = Generator.of(window.session)

    def wait() -> None:
        while generator.running:
            app.processEvents()

    generator.start(n, Sampling())
    wait()
    if fork is None or generator.story is None or fork > len(generator.story.branch.steps):
        return
    was = generator.story.branch.steps[fork - 1]
    other = next((t for t in was.top_ids if t != was.token_id), None)
    if other is not None:
        generator.fork(fork - 1, other, n, Sampling())
        wait()
        s = window.session
        row = len(generator.story.prompt_ids) + fork - 1 - s.trace.dropped
        if row >= 0:  # a token that has left the context window has no row (row 0 was pinned instead)
            s.set_position(row)


def _open_tour(window, args) -> bool:
    """Open ``--tour`` at ``--tour-step``; False (after one dialog, or a line on stderr) for a bad
    file or a step it does not have."""
    return window.tours.open(args.tour, (args.tour_step or 1) - 1)


def _load(window, args) -> bool:
    """Open PATH (or the default checkpoint) and put ``--text`` in the editor.

    Returns False when PATH failed in a --screenshot run (the message is already printed).
    """
    from model.checkpoint import OpenOptions

    answers = OpenOptions(n_heads=args.n_heads, vocab_path=Path(args.vocab) if args.vocab else None)
    # PATH is text, read once by open_checkpoint: hf:REPO_ID a Hub model, builtin:NAME a shipped one, else a path.
    if args.path is None or not window.files.open_checkpoint(args.path, answers):
        if args.path is not None and args.screenshot:
            return False
        window.files.open_default()
        if window.model_note and (args.screenshot or args.startup_time):  # no window title to read it in
            print(f"transformer-explorer: note: {window.model_note}", file=sys.stderr)
    window.session.set_text(args.text)
    return True


if __name__ == "__main__":
    sys.exit(main())
