"""Shared fixtures: a seeded tiny model with a tiny word tokenizer, and offscreen Qt.

QT_QPA_PLATFORM is set here, before anything imports Qt, so widget tests run without a display.
The suite reads nothing beside the repository (a user's clone has nothing there): an audit hook
refuses, and records, any file opened from a folder next to the clone (such as a data folder on the
developers' machines); ``tests/test_repository_boundary.py`` checks the hook and the test paths.
"""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# No test reaches the network: huggingface_hub works in offline mode from a cache of its own that
# the tests lay out (tests/hub_cache.py), never the user's. The library reads these settings when it
# is first imported, so they are set here, before any test module is.
_HF_HOME = tempfile.mkdtemp(prefix="te-tests-hf-home-")
atexit.register(shutil.rmtree, _HF_HOME, True)
os.environ.update(HF_HOME=_HF_HOME, HF_HUB_CACHE=os.path.join(_HF_HOME, "hub"), HF_HUB_OFFLINE="1",
                  HF_HUB_DISABLE_TELEMETRY="1")

REPO = Path(__file__).resolve().parents[1]
#: Files the suite tried to open beside the repository (each also failed with PermissionError).
OUTSIDE_READS: list[str] = []


def outside_repository(path: str) -> bool:
    """True for a path in the folder that holds the clone but not in the clone itself, excluding
    hidden folders there (caches, a home's dot-files), Python's own prefixes and the temp folder."""
    p = os.path.abspath(path)
    parent = os.path.dirname(str(REPO))
    if not p.startswith(parent + os.sep) or p == str(REPO) or p.startswith(str(REPO) + os.sep):
        return False
    for a in {sys.prefix, sys.base_prefix, sys.exec_prefix, tempfile.gettempdir()}:
        if parent.startswith(a + os.sep):
            continue  # a clone in /tmp/ci.X/: /tmp/ci.X/shared is beside it, not a temp file
        if p == a or p.startswith(a + os.sep):
            return False
    return not p[len(parent) + 1:].startswith(".")


def _refuse_reads_beside_the_repository(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], (str, os.PathLike)) and outside_repository(os.fspath(args[0])):
        OUTSIDE_READS.append(os.fspath(args[0]))
        raise PermissionError(f"the test suite may not read outside the repository: {os.fspath(args[0])}")


sys.addaudithook(_refuse_reads_beside_the_repository)


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when anything tried to read beside the repository, even where it was caught.

    In a pytest-xdist worker the reads (and the screen check's lines) go to the controlling process
    (``workeroutput``), which fails the run and prints them: see :func:`pytest_testnodedown`."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["outside_reads"] = sorted(set(OUTSIDE_READS))
        workeroutput["screen_report"] = list(SCREEN_REPORT)
        return
    if OUTSIDE_READS:
        print(f"\nread outside the repository: {sorted(set(OUTSIDE_READS))}", file=sys.stderr)
        session.exitstatus = 1

import pytest  # noqa: E402
import torch  # noqa: E402  (torch before any QApplication exists)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker ended: take its reads beside the repository and its screen-check lines."""
    output = getattr(node, "workeroutput", {})
    OUTSIDE_READS.extend(output.get("outside_reads", ()))
    SCREEN_REPORT.extend(output.get("screen_report", ()))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): one worker per core, at most four. Each worker holds its own
    torch and Qt (about 2-4 GB at the suite's peak), and the tests' models are dispatch-bound on one
    thread each (``torch.set_num_threads(1)`` below), so a worker per core keeps both cores busy."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))

from model import Checkpoint, GPT, GPTConfig  # noqa: E402
from model.tokens.tokenizer import train_word_tokenizer  # noqa: E402

# One thread: the tiny models are dispatch-bound, and the machine's two cores are shared.
torch.set_num_threads(1)

#: How long a test waits for an event before it gives up (seconds). Tests wait on events, never on
#: the clock: this only ends a test whose event never comes, and it is long enough for a machine
#: whose cores are busy with something else (a second full run beside this one).
SAFETY_NET_S = 600


def _patient(wait):
    """A pytest-qt wait whose timeout is at least :data:`SAFETY_NET_S` (an explicit shorter one
    asked for "a few seconds" on an idle machine; the event, not the clock, ends the wait)."""
    def patient(self, *args, timeout: int = 5000, **kwargs):
        return wait(self, *args, timeout=max(int(timeout), SAFETY_NET_S * 1000), **kwargs)
    patient.__doc__ = wait.__doc__
    return patient


def _make_qtbot_patient() -> None:
    from pytestqt.qtbot import QtBot

    for name in ("waitUntil", "waitSignal", "waitSignals", "waitCallback", "waitExposed", "waitActive"):
        if hasattr(QtBot, name):
            setattr(QtBot, name, _patient(getattr(QtBot, name)))


_make_qtbot_patient()

TINY_SENTENCES = (
    "the cat sat on the mat .",
    "the dog sat on the log .",
    "a cat and a dog played in the sun .",
    "lily saw the big red ball and she was happy .",
)
TINY_SEED = 1234


@pytest.fixture
def dialogs(monkeypatch):
    """Every dialog recorded instead of shown (explorer_helpers.DialogRecorder)."""
    from explorer_helpers import DialogRecorder

    return DialogRecorder().install(monkeypatch)


@pytest.fixture(scope="session")
def hub_cache() -> Path:
    """The tests' Hugging Face Hub cache (HF_HUB_CACHE), with the fixture repositories of
    :data:`hub_cache.REPOS` laid out in it as huggingface_hub lays out its own."""
    from hub_cache import add_fixture_repos

    return add_fixture_repos(Path(os.environ["HF_HUB_CACHE"]))


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A word-level tokenizer trained on :data:`TINY_SENTENCES` (<unk> = 0, <|endoftext|> = 1)."""
    return train_word_tokenizer(TINY_SENTENCES, vocab_size=64)


def make_tiny_checkpoint(tokenizer, seed: int = TINY_SEED, **overrides) -> Checkpoint:
    """A seeded GPT with context 8, d_model 16, 2 heads, 2 layers, d_mlp 32 and the tokenizer's vocab.

    ``overrides`` change config fields (e.g. ``n_layers=1, n_heads=1``).
    """
    fields = dict(vocab_size=tokenizer.vocab_size, context_length=8, d_model=16, n_heads=2, n_layers=2, d_mlp=32)
    fields.update(overrides)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**fields)).eval()
    return Checkpoint(model=model, tokenizer=tokenizer, path=None, training={"note": "tiny test model"})


@pytest.fixture
def tiny_checkpoint(tiny_tokenizer) -> Checkpoint:
    """A fresh seeded tiny model (same weights every time): see :func:`make_tiny_checkpoint`."""
    return make_tiny_checkpoint(tiny_tokenizer)


class PositionCounter:
    """Counts the positions the model runs (a forward hook on the token embedding)."""

    def __init__(self, model) -> None:
        self.n = 0
        self.handle = model.tok_emb.register_forward_hook(self._hook)

    def _hook(self, module, args, out) -> None:
        self.n += int(args[0].shape[1])

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


#: Lines the screen check (tests/test_screens.py) leaves for the end of the run: the matrix walked,
#: the findings per kind and the time it took.
SCREEN_REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print what the screen check walked and found (nothing when it did not run)."""
    if SCREEN_REPORT:
        terminalreporter.section("screen check")
        for line in SCREEN_REPORT:
            terminalreporter.write_line(line)
