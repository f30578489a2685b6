"""The ``transformer-explorer`` command (also ``python -m explorer``).

    transformer-explorer [PATH] [--text TEXT] [--n-heads N] [--vocab FILE] [--book]
                         [--step N] [--screenshot OUT.png [--panel NAME] [--size WxH]] [--dark]

Opens the main window on PATH (a checkpoint file or folder, or ``hf:REPO_ID[@REVISION]`` for a model
on the Hugging Face Hub), or on the default checkpoint in assets/. With ``--screenshot`` it renders
the window (or one panel) off-screen to a PNG of exactly that size and exits.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402, F401  (torch must be imported before the QApplication exists)

DEFAULT_SIZE = (1400, 900)


MMAP_THRESHOLD = 1 << 20  # bytes: blocks this big or bigger get their own mapping


def pin_malloc_threshold(nbytes: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold (mallopt(3), ``M_MMAP_THRESHOLD``), so that the memory of freed
    large blocks goes back to the system; True when it was set (Linux with glibc only).

    By default glibc raises the threshold to the size of each large block freed (up to 32 MB);
    blocks below it then come from the heap, where a small long-lived allocation above a freed
    one keeps its pages. With the default model, resident memory stepped up by 8 to 12 MB at a
    random moment during 1,500 edits while no Python object grew (the ``memory_growth`` benchmark
    scaled such a step from 300 edits to 1,000); with a fixed 1 MiB threshold it stays within 1 MB.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    m_mmap_threshold = -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, int(nbytes)))


def freeze_startup_objects() -> None:
    """Put every object made so far (modules, torch, Qt, the window, the model) out of the cyclic
    garbage collector's sight (``gc.freeze``): they live as long as the app.

    Python collects its oldest generation now and then, visiting every object it tracks: in the app
    with a model open that is about 230,000 objects, 100 to 250 ms during which the window does not
    respond (a stall in the middle of typing or of drawing a pasted text). After the freeze a full
    collection visits only what was made since: about a millisecond.
    """
    gc.collect()
    gc.freeze()


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
    p.add_argument("path", nargs="?", help="a checkpoint file or folder, or hf:REPO_ID[@REVISION] for a model on the "
                   "Hugging Face Hub (default: assets/tinystories-1L1H.safetensors)")
    p.add_argument("--text", default="", help="text to put in the editor")
    p.add_argument("--n-heads", type=int, help="heads per block, for a file that cannot tell (else asked)")
    p.add_argument("--vocab", metavar="FILE", help="the vocabulary (meta.pkl, vocabulary JSON, tokenizer.json, "
                   "llama2.c tokenizer.bin, GPT-2 folder), where it is not beside the file (else asked)")
    p.add_argument("--book", action="store_true", help="open the attention variants on the book's worked "
                   "example (Raschka, ch. 3: 'Your journey starts with one step')")
    p.add_argument("--step", type=int, metavar="N", help="show the model's training snapshot at step N (or the "
                   "last one before it) in every panel: the Training panel's slider")
    p.add_argument("--screenshot", metavar="OUT.png", help="render off-screen to this PNG and exit")
    p.add_argument("--panel", help=f"with --screenshot: only this panel ({', '.join(panel_names)})")
    p.add_argument("--size", type=_size, default=DEFAULT_SIZE, help="with --screenshot: WIDTHxHEIGHT (1400x900)")
    p.add_argument("--dark", action="store_true", help="a dark theme (Qt's Fusion style with a dark palette), "
                   "in the window and in --screenshot pictures")
    p.add_argument("--generate", type=int, metavar="N", help="with --screenshot: generate N tokens after --text "
                   "(greedy) before the picture is taken")
    p.add_argument("--fork", type=int, metavar="K", help="with --generate: then fork at the K-th generated token "
                   "(its most likely alternative instead) and generate N more; the picture shows that branch")
    p.add_argument("--startup-time", action="store_true",
                   help="print when the window was shown and when the model was drawn, then exit")
    args = p.parse_args(argv)
    if args.panel is not None and args.panel not in panel_names:
        p.error(f"unknown panel {args.panel!r}; choose from {', '.join(panel_names)}")
    if args.panel is not None and not args.screenshot:
        p.error("--panel needs --screenshot")
    if args.generate is not None and (not args.screenshot or args.generate < 1):
        p.error("--generate N takes a number of tokens (1 or more) and goes with --screenshot")
    if args.fork is not None and (args.generate is None or not 1 <= args.fork <= args.generate):
        p.error("--fork K goes with --generate N, 1 <= K <= N")
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
    from explorer.qt.panels import PANELS, panel_names

    args = parse_args(argv, panel_names())
    # The default model is dispatch-bound: one thread is as fast as two and leaves a core for
    # painting (with two threads on a busy 2-core machine a trace took 60 ms instead of 1.4 ms).
    torch.set_num_threads(1)
    pin_malloc_threshold()
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif sys.platform.startswith("linux") and not _has_display():
        print("transformer-explorer: error: no display (DISPLAY/WAYLAND_DISPLAY unset); "
              "run it in a desktop session, under xvfb-run, or use --screenshot", file=sys.stderr)
        return 2
    from PySide6.QtCore import QSettings
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from explorer.qt.main_window import ICON, MainWindow
    from explorer.qt.session import Session

    _quiet_harmless_qt_warnings()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Transformer Explorer")
    if args.dark:
        from explorer.qt.theme import use_dark_theme

        use_dark_theme(app)
    app.setWindowIcon(QIcon(str(ICON)))
    failures: list[str] = []
    settings = None
    if args.screenshot:  # a fresh layout, not the user's, and no modal dialogs
        _headless_dialogs(failures)
        settings = QSettings(str(Path(tempfile.mkdtemp()) / "screenshot.ini"), QSettings.Format.IniFormat)
    # A screenshot traces on this thread: a slow model's worker-thread result (and the panels that
    # follow it one per event-loop turn) would otherwise arrive after the picture was taken.
    session = Session(compute_mode="sync") if args.screenshot else None
    window = MainWindow(session=session, settings=settings)
    if args.screenshot:
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
        try:
            _render(widget, args.size, args.screenshot, app)
        except OSError as exc:  # an unwritable place: one line, not a traceback
            print(f"transformer-explorer: error: {exc}", file=sys.stderr)
            return 1
        finally:
            _dispose(app, *{widget, window})
        return 0
    # Show the window first, then load: the first checkpoint load can take a second or more.
    window.statusBar().showMessage("loading the model…")
    window.show()
    app.processEvents()
    shown = time.perf_counter() - _T0
    _load(window, args)
    if args.book:
        _show_book(window)
    if args.step is not None:
        window.docks["training"].raise_()
        _show_step(window.panels["training"], args.step)
    window.statusBar().clearMessage()
    freeze_startup_objects()
    if args.startup_time:
        app.processEvents()
        print(f"window shown after {shown:.2f} s, model loaded and drawn after "
              f"{time.perf_counter() - _T0:.2f} s (from importing explorer.app)")
        window.close()
        window.session.shutdown()
        _dispose(app, window)
        return 0
    code = app.exec()
    window.session.shutdown()  # the window is gone; a trace still running ends before the process
    return code


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


def _load(window, args) -> bool:
    """Open PATH (or the default checkpoint) and put ``--text`` in the editor.

    Returns False when PATH failed in a --screenshot run (the message is already printed).
    """
    from model.checkpoint import OpenOptions

    answers = OpenOptions(n_heads=args.n_heads, vocab_path=Path(args.vocab) if args.vocab else None)
    # PATH is text: read once (hf:REPO_ID is a Hub model, anything else a file or folder) by open_checkpoint.
    if args.path is None or not window.files.open_checkpoint(args.path, answers):
        if args.path is not None and args.screenshot:
            return False
        window.files.open_default()
    window.session.set_text(args.text)
    return True

if __name__ == "__main__":
    sys.exit(main())
