"""Exports: the size said first, written on a worker with progress and Cancel, LF line endings,
nothing left behind by a cancel or an error, and errors that name the file the user chose."""

import csv
import time

import numpy as np
import pytest

from explorer.core.export import (CSV_HEADER, ExportCancelled, attention_csv_bytes, attention_csv_rows,
                                  write_attention_csv, write_trace_npz)
from explorer.qt.files import export as exporting
from explorer.qt.scheduling.background import STEPS
from explorer_helpers import make_window

ODD_TOKENS = ["a,b", 'say "hi"', "x"]  # a comma and quotes: quoted CSV fields


@pytest.fixture
def trace(tiny_checkpoint):
    return tiny_checkpoint.model.trace([2, 3, 4])


def test_csv_has_lf_line_endings_and_quoted_tokens(tmp_path, trace):
    out = tmp_path / "w.csv"
    write_attention_csv(out, trace, ODD_TOKENS)
    data = out.read_bytes()
    assert b"\r" not in data and data.count(b"\n") == 1 + attention_csv_rows(trace) == 1 + 2 * 2 * 9
    rows = list(csv.reader(out.open(encoding="utf-8", newline="")))
    assert tuple(rows[0]) == CSV_HEADER
    row = next(r for r in rows[1:] if r[:3] == ["1", "1", "2"] and r[4] == "0")
    assert row[3] == "x" and row[5] == "a,b" and float(row[6]) == pytest.approx(float(trace.blocks[1].attn_weights[1, 2, 0]))
    assert {r[5] for r in rows[1:]} == set(ODD_TOKENS)


def test_the_size_is_known_before_writing(tmp_path, trace):
    out = tmp_path / "w.csv"
    write_attention_csv(out, trace, ODD_TOKENS)
    assert attention_csv_bytes(trace, ODD_TOKENS) == out.stat().st_size  # every weight sampled: exact


@pytest.mark.parametrize("writer, name", [(write_attention_csv, "w.csv"), (write_trace_npz, "t.npz")])
def test_a_cancelled_export_leaves_nothing(tmp_path, trace, writer, name):
    calls = []
    out = tmp_path / name
    with pytest.raises(ExportCancelled):
        writer(out, trace, ["a", "b", "c"], lambda done, total: calls.append((done, total)) or len(calls) < 3)
    assert len(calls) == 3 and calls[-1][0] < calls[-1][1]
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file
    out.write_text("earlier")
    with pytest.raises(ExportCancelled):
        writer(out, trace, ["a", "b", "c"], lambda done, total: False)
    assert out.read_text() == "earlier" and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("writer, name", [(write_attention_csv, "w.csv"), (write_trace_npz, "t.npz")])
def test_write_errors_name_the_chosen_file(tmp_path, trace, writer, name):
    out = tmp_path / "missing-folder" / name
    with pytest.raises(OSError) as info:
        writer(out, trace, ["a", "b", "c"])
    assert str(out) in str(info.value) and ".tmp" not in str(info.value)


def test_npz_reports_progress_and_loads_back(tmp_path, trace):
    seen = []
    out = tmp_path / "t.npz"
    write_trace_npz(out, trace, ["a", "b", "c"], lambda done, total: seen.append((done, total)) or True)
    assert seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == sorted(d for d, _ in seen)
    with np.load(out) as f:
        np.testing.assert_array_equal(f["blocks.1.attn.attn_weights"], trace.blocks[1].attn_weights)
        assert f["tokens"].tolist() == ["a", "b", "c"] and set(trace.names()) <= set(f.files)


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, dialogs):
    w = make_window(qtbot, tmp_path, tiny_checkpoint)
    w.session.set_text("the cat sat")
    return w


@pytest.mark.slow
def test_csv_export_says_its_size_and_writes_on_a_worker(window, tmp_path, dialogs, monkeypatch):
    titles = []
    monkeypatch.setattr(exporting.dialogs, "save_file", lambda _p, title, *a: titles.append(title) or str(tmp_path / "a"))
    window.export_menu._on_csv()
    out = tmp_path / "a.csv"
    assert out.is_file() and not dialogs.errors and not dialogs.confirms  # small: not asked
    assert "36 rows" in titles[0] and "MB" in titles[0]
    box = dialogs.progress[-1]
    assert box.closed and box.maximum == STEPS and "36 rows" in box.text
    assert "Wrote the attention weights" in window.statusBar().currentMessage()


@pytest.mark.slow
def test_a_large_export_asks_first(window, tmp_path, dialogs, monkeypatch):
    monkeypatch.setattr(exporting, "CONFIRM_BYTES", 100)
    dialogs.confirm_answer = False
    dialogs.files.append(str(tmp_path / "big.csv"))
    window.export_menu._on_csv()
    assert "36 rows" in dialogs.confirms[0][1] and not (tmp_path / "big.csv").exists()
    assert dialogs.files  # the file name was never asked


@pytest.mark.slow
def test_cancel_in_the_progress_dialog_leaves_no_file(window, tmp_path, dialogs, monkeypatch):
    real = exporting.write_attention_csv

    def slow(path, trace, tokens, progress):
        """Reports its first row again and again until the dialog's Cancel makes ``progress`` say stop:
        it waits on the event, not on the clock (the dialog's first poll can come after the window's
        paint, 0.6 s on a busy machine, when a writer that slept 50 ms a row had already finished)."""
        def step(done: int, total: int) -> bool:
            deadline = time.monotonic() + 60  # a safety net only: Cancel comes at the first poll
            while progress(done, total):
                if time.monotonic() > deadline:
                    return True
                time.sleep(0.01)
            return False

        real(path, trace, tokens, step)

    monkeypatch.setattr(exporting, "write_attention_csv", slow)
    dialogs.cancel_after = 1
    dialogs.files.append(str(tmp_path / "cancelled.csv"))
    window.export_menu._on_csv()
    assert not dialogs.errors and sorted(p.name for p in tmp_path.iterdir()) == ["settings.ini"]
    assert "cancelled" in window.statusBar().currentMessage()


@pytest.mark.slow
def test_an_export_error_names_the_chosen_file(window, tmp_path, dialogs):
    chosen = tmp_path / "no-such-folder" / "trace.npz"
    dialogs.files.append(str(chosen))
    window.export_menu._on_npz()
    (title, text), = dialogs.errors
    assert str(chosen) in text and ".tmp" not in text and "trace" in title
