"""A ``python -m model.train`` run in a process of its own (QProcess), followed through its
``--log-file``; never on the GUI thread. Cancel sends SIGINT, the command's Ctrl+C: it saves the
model reached and exits with status 130."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, QProcess, QProcessEnvironment, QTimer, Signal

import model
from explorer.core.train_log import TrainLog

POLL_MS = 250  # how often the log file is read
STDERR_KEEP = 20_000  # characters of the run's stderr kept for messages
QUIT_WAIT_MS = 60_000  # the app quitting waits this long for a cancelled run to save
# The child restores Python's Ctrl+C (an app started in the background may ignore SIGINT, and
# exec keeps an ignored signal ignored), then runs the command: `python -m model.train ARGS`, with a
# Cancel while torch imports held back until it can stop cleanly (model.training.interrupts).
CHILD = ("import signal, sys\n"
         "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
         "try:\n"
         "    from model.train import main\n"
         "except KeyboardInterrupt:\n"
         "    from model.training.interrupts import EXIT_INTERRUPTED, STARTING_INTERRUPTED\n"
         "    print(STARTING_INTERRUPTED, file=sys.stderr)\n"
         "    sys.exit(EXIT_INTERRUPTED)\n"
         "sys.exit(main(sys.argv[1:]))\n")


def child_environment() -> QProcessEnvironment:
    """The app's environment, with this ``model`` package first on PYTHONPATH (the child runs the
    code the app runs) and OMP_NUM_THREADS, when unset, at half the cores (the app keeps the rest;
    one torch thread on a 2-core machine was twice as fast as two while other work ran)."""
    env = QProcessEnvironment.systemEnvironment()
    root = str(Path(model.__file__).resolve().parents[1])
    path = env.value("PYTHONPATH", "")
    env.insert("PYTHONPATH", root + (os.pathsep + path if path else ""))
    if not env.contains("OMP_NUM_THREADS"):
        env.insert("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    env.insert("PYTHONUNBUFFERED", "1")
    return env


class TrainRun(QObject):
    """One training process.

    Parameters
    ----------
    argv : list of str
        The command's arguments (``--log-file`` among them, see
        :func:`explorer.core.train_setup.command_args`).
    log_path : path-like
        The ``--log-file`` it writes.
    workdir : path-like
        The process's working folder.
    """

    sig_progress = Signal()
    """The log grew: :attr:`log` holds the new events."""
    sig_snapshot = Signal(str)
    """A snapshot file was written (its path)."""
    sig_finished = Signal(int)
    """The process ended, with this exit status (-1 when it crashed or could not start)."""

    def __init__(self, argv: list[str], log_path: str | os.PathLike, workdir: str | os.PathLike,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.log = TrainLog()
        self.stderr = ""
        self.exit_code: int | None = None
        self.cancelled = False
        self.stopped_early = False  # cancelled before training started: ended, nothing written
        self._offset = 0
        self.process = QProcess(self)
        self.process.setProgram(sys.executable)
        self.process.setArguments(["-c", CHILD, *self.argv])
        self.process.setWorkingDirectory(str(workdir))
        self.process.setProcessEnvironment(child_environment())
        self.process.readyReadStandardError.connect(self._on_stderr)
        self.process.readyReadStandardOutput.connect(lambda: self.process.readAllStandardOutput())
        self.process.finished.connect(self._on_finished)
        self.process.errorOccurred.connect(self._on_error)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.read_log)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._on_app_quitting)

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the process has ended."""
        return self.process.state() != QProcess.ProcessState.NotRunning

    def start(self) -> None:
        """Start the process (returns at once)."""
        self.exit_code, self.cancelled, self.stopped_early = None, False, False
        self.process.start()
        self._timer.start()

    def cancel(self) -> None:
        """Stop the run as Ctrl+C does: it saves the model reached (SIGINT; on Windows, which has no
        SIGINT for another process, the process is killed and nothing is saved). Before training has
        started (no ``start`` line in the log: Python starting, torch importing, the text read) there
        is nothing to save, and the process is ended at once (:attr:`stopped_early`)."""
        if not self.running:
            return
        self.cancelled = True
        self.read_log()
        if self.log.steps == 0:  # a SIGINT this early could come before Python handles it
            self.stopped_early = True
            self.process.kill()
            return
        pid = self.process.processId()
        if os.name == "posix" and pid > 0:
            os.kill(pid, signal.SIGINT)
        else:
            self.process.kill()

    def read_log(self) -> None:
        """Take what the log file grew by (events in :attr:`log`; emits sig_progress, sig_snapshot)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return  # not written yet
        if not data:
            return
        self._offset += len(data)
        events = self.log.feed(data.decode("utf-8", errors="replace"))
        if events:
            self.sig_progress.emit()
        for event in events:
            if event.get("event") == "snapshot":
                self.sig_snapshot.emit(str(event.get("path")))

    def error_line(self) -> str:
        """The run's own explanation: its last ``error: ...`` line (or the last line of stderr)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error: ")]
        return (errors[-1][len("error: "):] if errors else lines[-1]) if lines else ""

    def _on_stderr(self) -> None:
        text = bytes(self.process.readAllStandardError()).decode("utf-8", errors="replace")
        self.stderr = (self.stderr + text)[-STDERR_KEEP:]

    def _on_finished(self, code: int, status) -> None:
        self._timer.stop()
        self._on_stderr()
        self.read_log()
        crashed = status == QProcess.ExitStatus.CrashExit
        self.exit_code = -1 if crashed else int(code)
        self.sig_finished.emit(self.exit_code)

    def _on_error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._timer.stop()
            self.stderr += f"\ncould not start {sys.executable}: {self.process.errorString()}"
            self.exit_code = -1
            self.sig_finished.emit(-1)

    def _on_app_quitting(self) -> None:
        """The app is closing: a run still going is stopped and saved, not killed."""
        if self.running:
            self.cancel()
            self.process.waitForFinished(QUIT_WAIT_MS)
