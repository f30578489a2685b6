"""Opening a model from the Hugging Face Hub in the app: the repository asked, the fetch off the GUI thread.

File ▸ Open from Hugging Face Hub… asks for a repository id (:func:`ask_repo`); the command line,
Open Recent and Reload give ``hf:REPO_ID[@REVISION]``. :func:`fetch_in_background` runs
:func:`model.formats.hub.fetch` (``huggingface_hub.snapshot_download``: seconds from the cache,
minutes for a first download) on a worker thread while a window-modal progress dialog
(:func:`explorer.qt.dialogs.progress`) shows the library's own progress, relayed from its tqdm
bars, and offers Cancel. Cancel returns at once and the current model stays; the download stops
at its next progress step (what was fetched stays in the cache, and the next fetch resumes it).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QEventLoop, QSettings, QTimer
from PySide6.QtWidgets import QWidget

from explorer.core.hub_progress import Bar, summarise
from explorer.qt import dialogs
from model.formats import hub
from model.formats.hub import HUB_PREFIX, FetchCancelled, HubRef

TITLE = "Open from Hugging Face Hub"
ASK_LABEL = (f"Repository id on the Hugging Face Hub (owner/name, optionally @revision), e.g. {hub.EXAMPLE}.\n"
             "Only its config, tokenizer and weights are fetched, into the Hub's own cache "
             "(HF_HUB_OFFLINE=1: the cache only).")
LAST_REPO_KEY = "hub/last_repo"
STEPS = 1000  # resolution of the progress bar
POLL_MS = 50


def ask_repo(parent: QWidget | None, settings: QSettings) -> str | None:
    """Ask for a repository id (the last one asked is proposed); ``hf:REPO_ID`` or None when cancelled.

    The answer is not checked here: :func:`model.formats.hub.parse_hub_spec` refuses a bad one
    before anything is fetched (``hf:`` or ``https://huggingface.co/`` in front are accepted).
    """
    last = settings.value(LAST_REPO_KEY, hub.EXAMPLE)
    text = dialogs.ask_text(parent, TITLE, ASK_LABEL, last if isinstance(last, str) else hub.EXAMPLE)
    if text is None or not text.strip():
        return None
    text = text.strip()
    settings.setValue(LAST_REPO_KEY, text)
    return text if text.startswith(HUB_PREFIX) else HUB_PREFIX + text


class _Fetch:
    """One fetch on a worker thread: the library's progress bars, the result or error, a cancel flag."""

    def __init__(self, ref: HubRef) -> None:
        self.ref = ref
        self.cancel = threading.Event()
        self.bars: dict[str, Bar] = {}
        self.folder: Path | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"hub fetch {ref.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.folder = hub.fetch(self.ref, on_progress=self._on_progress)
        except BaseException as exc:  # handed to the GUI thread
            self.error = exc

    def _on_progress(self, what: str, done: float, total: float | None, unit: str) -> None:
        """Called by the library's threads: remember the bar (last moved last); stop the download once
        cancelled."""
        if self.cancel.is_set():
            raise FetchCancelled(self.ref.name)
        self.bars.pop(what, None)
        self.bars[what] = (done, total, unit)


def fetch_in_background(parent: QWidget | None, ref: HubRef) -> Path | None:
    """Fetch a Hub model on a worker thread, with a progress dialog and Cancel; the GUI keeps running.

    Returns
    -------
    Path or None
        The snapshot folder (see :func:`model.formats.hub.fetch`); None when the user cancelled
        (returned at once: the worker stops at the library's next progress step).

    Raises
    ------
    model.formats.hub.HubError
        When the fetch failed (one message naming the repository).
    """
    job = _Fetch(ref)
    heading = f"Fetching {ref.name} from the Hugging Face Hub (config, tokenizer, weights)…"
    box = dialogs.progress(parent, TITLE, f"{heading}\nasking the Hub…", 0)  # busy until a bar moves
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(POLL_MS)
    cancelled = False

    def poll() -> None:
        nonlocal cancelled
        text, fraction = summarise(dict(job.bars))
        box.set_text(f"{heading}\n{text}")
        if fraction is not None:
            box.set_maximum(STEPS)
            box.set_value(round(STEPS * fraction))
        if box.cancelled():
            cancelled = True
            job.cancel.set()
            loop.quit()
        elif not job.thread.is_alive():
            loop.quit()

    timer.timeout.connect(poll)
    job.thread.start()
    timer.start()
    if job.thread.is_alive():
        loop.exec()
    timer.stop()
    box.close()
    if cancelled:
        return None
    job.thread.join()
    if job.error is not None:
        raise job.error
    return job.folder
