"""Opening a model from the Hugging Face Hub in the app: the repository asked, the fetch off the GUI thread.

File ▸ Open from Hugging Face Hub… asks for a repository id (:func:`ask_repo`); the command line,
Open Recent and Reload give a :class:`~model.formats.refs.HubRef` read from ``hf:REPO_ID[@REVISION]``.
:func:`fetch_in_background` runs :func:`model.formats.hub.fetch` (``huggingface_hub.snapshot_download``:
seconds from the cache, minutes for a first download) on a worker thread while a window-modal progress
dialog (:func:`explorer.qt.scheduling.background.run_with_progress`) shows the library's own progress,
relayed from its tqdm bars, and offers Cancel. Cancel returns at once and the current model stays; the
download stops at its next progress step (what was fetched stays in the cache, and the next fetch
resumes it).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QWidget

from explorer.core.hub_progress import Bar, summarise
from explorer.qt import dialogs
from explorer.qt.scheduling.background import run_with_progress
from explorer.qt.settings import HUB_LAST_REPO
from model.formats import hub
from model.formats.hub import FetchCancelled, HubError, HubRef, parse_hub_spec

TITLE = "Open from Hugging Face Hub"
ERROR_TITLE = "Could not open checkpoint"
ASK_LABEL = (f"Repository id on the Hugging Face Hub (owner/name, optionally @revision), e.g. {hub.EXAMPLE}.\n"
             "Only its config, tokenizer and weights are fetched, into the Hub's own cache "
             "(HF_HUB_OFFLINE=1: the cache only).")


def ask_repo(parent: QWidget | None, settings: QSettings) -> HubRef | None:
    """Ask for a repository id (the last one asked is proposed); None when cancelled, left empty, or
    not a repository id (said in an error dialog, before anything is fetched).

    ``hf:`` or ``https://huggingface.co/`` in front are accepted (:func:`model.formats.refs.parse_hub_spec`).
    """
    text = dialogs.ask_text(parent, TITLE, ASK_LABEL, HUB_LAST_REPO.read(settings))
    if text is None or not text.strip():
        return None
    if HUB_LAST_REPO.accepts(text.strip()):  # proposed next time (a pasted page is not)
        HUB_LAST_REPO.write(settings, text.strip())
    try:
        return parse_hub_spec(text)
    except HubError as exc:
        dialogs.error(parent, ERROR_TITLE, str(exc))
        return None


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
    bars: dict[str, Bar] = {}  # the library's progress bars, the last moved last
    heading = f"Fetching {ref.name} from the Hugging Face Hub (config, tokenizer, weights)…"

    def work(cancel: threading.Event) -> Path:
        def on_progress(what: str, done: float, total: float | None, unit: str) -> None:  # the library's threads
            if cancel.is_set():
                raise FetchCancelled(ref.name)  # stops the download
            bars.pop(what, None)
            bars[what] = (done, total, unit)

        return hub.fetch(ref, on_progress=on_progress)

    def status() -> tuple[str, float | None]:
        text, fraction = summarise(dict(bars))
        return f"{heading}\n{text}", fraction

    outcome = run_with_progress(parent, TITLE, f"{heading}\nasking the Hub…", work, status,
                                wait_when_cancelled=False, cancelled_by=(FetchCancelled,))
    return outcome.value
