"""The Training panel: snapshots found and ordered, a slider step shows that snapshot in every
panel (the same trace as opening its file, the selection kept), the curves and the difference it
draws, another run's folder, and a run's snapshots streaming in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from conftest import make_tiny_checkpoint
from explorer.core.training_views import difference_columns, difference_sentence, step_x
from explorer.core.views import token_label
from model.tokens.names import token_name
from explorer_helpers import make_window
from model import load_checkpoint, save_checkpoint
from model.training.over_training import curves_over_training
from model.training.snapshots import load_snapshots

STEPS = {"c.safetensors": 0, "step-2.safetensors": 2, "b.safetensors": 10, "iter-30/ckpt.safetensors": 30}
TEXT = "the cat sat on the mat . the dog"


def _save(path: Path, ck, training: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, ck.model, ck.tokenizer, training=training)
    return path


@pytest.fixture
def run(tmp_path, tiny_tokenizer):
    """A final model (step 40) whose facts name its snapshot folder: four snapshots in a jumbled
    layout and one of another shape."""
    curve = [[0, 4.2], [10, 3.9], [40, 3.1]]
    for i, (name, step) in enumerate(STEPS.items()):
        _save(tmp_path / "run-snapshots" / name, make_tiny_checkpoint(tiny_tokenizer, seed=100 + i),
              {"steps": step, "val_curve": curve[: 1 + (step >= 10)]})
    _save(tmp_path / "run-snapshots" / "wide.safetensors", make_tiny_checkpoint(tiny_tokenizer, d_model=32), {"steps": 5})
    return _save(tmp_path / "run.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=7),
                 {"steps": 40, "snapshot_dir": "run-snapshots", "val_curve": curve})


@pytest.fixture
def window(qtbot, tmp_path, run, dialogs):
    w = make_window(qtbot, tmp_path, load_checkpoint(run))
    w.session.set_text(TEXT)
    w.docks["training"].raise_()
    qtbot.waitUntil(w.panels["training"].is_shown, timeout=3000)
    return w


@pytest.mark.slow
def test_snapshots_are_found_ordered_and_misfits_listed(window, run):
    panel = window.panels["training"]
    assert panel.source.view.steps == [0, 2, 10, 30]
    assert [(s.step, s.index) for s in panel.stops] == [(0, 0), (2, 1), (10, 2), (30, 3), (40, -1)]
    assert panel.slider.maximum() == 4 and panel.slider.value() == 4  # the loaded model is shown
    assert "4 snapshots, steps 0 to 30" in panel.folder_label.text()
    assert "wide.safetensors: d_model 32 where the model has 16" in panel.skipped_label.text()
    assert panel.step_label.text() == "the model you opened (step 40)"


@pytest.mark.slow
def test_a_slider_step_shows_that_snapshot_s_trace_with_the_selection_kept(window, run, qtbot):
    s, panel = window.session, window.panels["training"]
    s.set_layer(1)
    s.set_head(1)
    s.set_position(3)
    final_logits = s.trace.logits.copy()
    panel.slider.setValue(2)
    assert s.snapshot_step == 10 and s.loaded_checkpoint.path == run
    assert (s.layer, s.head, s.position) == (1, 1, 3)
    opened = load_checkpoint(run.parent / "run-snapshots" / "b.safetensors")
    expected = opened.model.trace(s.encoding.ids)
    np.testing.assert_array_equal(s.trace.logits, expected.logits)
    for got, want in zip(s.trace.blocks, expected.blocks):
        np.testing.assert_array_equal(got.attn_weights, want.attn_weights)
    window.docks["attention"].raise_()  # tabbed with the Training panel: drawn when it comes forward
    qtbot.waitUntil(window.panels["attention"].is_shown, timeout=3000)
    np.testing.assert_array_equal(window.panels["attention"].weights.data, expected.blocks[1].attn_weights[1])
    window.docks["training"].raise_()
    qtbot.waitUntil(panel.is_shown, timeout=3000)
    assert "at training step 10" in window.windowTitle() and "Final model" in window.windowTitle()
    assert "snapshot of step 10" in window.status.text()
    assert panel.step_label.text() == "snapshot 3 of 4: step 10"
    panel.slider.setFocus()
    qtbot.keyClick(panel.slider, Qt.Key.Key_Right)
    assert s.snapshot_step == 30
    qtbot.keyClick(panel.slider, Qt.Key.Key_End)
    assert s.snapshot_step is None and s.checkpoint is s.loaded_checkpoint
    np.testing.assert_array_equal(s.trace.logits, final_logits)
    assert "training step" not in window.windowTitle()
    panel.prev_button.click()
    assert s.snapshot_step == 30 and panel.final_button.isEnabled()
    panel.final_button.click()
    assert s.snapshot_step is None and panel.slider.value() == 4


def test_the_curves_drawn_are_the_snapshots_values_and_a_click_picks_a_snapshot(window, run, qtbot):
    s, panel = window.session, window.panels["training"]
    view = panel.curves_view
    snaps = load_snapshots(run.parent / "run-snapshots", reference=s.checkpoint)
    want = curves_over_training(snaps, s.encoding.ids, val_curve=snaps.val_curve)
    x, loss = view.text_curve.getData()
    np.testing.assert_allclose(x, step_x([0, 2, 10, 30]))
    np.testing.assert_allclose(loss, want.loss_on_text)
    # the loss of one snapshot, from its own trace: the mean -ln p of each next token
    trace = snaps[1].model.trace(s.encoding.ids)
    ids = trace.token_ids
    np.testing.assert_allclose(loss[1], -np.mean(np.log(trace.probs[np.arange(len(ids) - 1), ids[1:]])), rtol=1e-5)
    np.testing.assert_allclose(view.target_curve.getData()[1], want.target_prob)
    np.testing.assert_allclose(view.mass_curves["prev"].getData()[1], want.attn_prev[:, 0, 0])
    np.testing.assert_allclose(view.val_curve.getData()[1], [4.2, 3.9, 3.1])
    assert view.changes.data.size == int(want.top1_changed.sum())
    s.set_layer(1)
    s.set_head(1)
    np.testing.assert_allclose(view.entropy_curve.getData()[1], want.attn_entropy[:, 1, 1])
    assert view.lines[0].value() == pytest.approx(step_x(40))
    vb = view.loss.getViewBox()
    scene = vb.mapViewToScene(QPointF(float(step_x(2)), 1.0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(scene))
    assert s.snapshot_step == 2 and view.lines[0].value() == pytest.approx(step_x(2))
    s.set_position(2)  # the curves follow the selected position
    moved = curves_over_training(snaps, s.encoding.ids, position=2)
    np.testing.assert_allclose(view.target_curve.getData()[1], moved.target_prob)


def test_outside_sync_mode_the_curves_attention_half_is_drawn_in_a_later_turn(qtbot, run):
    """The loss and probability plots are drawn at once, the attention plots by the work handed to
    ``later`` (the panel's pacer); that work draws nothing once newer curves or none are shown."""
    from explorer.qt.panels.training.curves import CurvesView

    snaps = load_snapshots(run.parent / "run-snapshots", reference=load_checkpoint(run))
    ids = [1, 2, 3, 4]
    want = curves_over_training(snaps, ids)
    view = CurvesView()
    qtbot.addWidget(view)
    queued = []
    view.set_curves(want, 0, 1, str, "p(target)", queued.append)
    np.testing.assert_allclose(view.text_curve.getData()[1], want.loss_on_text)
    assert view.entropy_curve.getData()[1] is None and len(queued) == 1  # the attention half: not yet
    queued.pop()()
    np.testing.assert_allclose(view.entropy_curve.getData()[1], want.attn_entropy[:, 0, 1])
    np.testing.assert_allclose(view.mass_curves["prev"].getData()[1], want.attn_prev[:, 0, 1])
    view.set_curves(want, 1, 0, str, "p(target)", queued.append)
    view.clear_curves()  # (the snapshots changed before the half ran)
    queued.pop()()
    assert view.entropy_curve.getData()[1] is None


def test_the_difference_is_the_later_minus_the_earlier_snapshot(window, run):
    s, panel = window.session, window.panels["training"]
    panel.tabs.setCurrentWidget(panel.difference)
    diff = panel.difference
    assert diff.earlier.currentText() == "step 0" and diff.later.currentText() == "step 30"
    diff.earlier.setCurrentIndex(1)
    folder = run.parent / "run-snapshots"
    early, late = (load_checkpoint(folder / n).model.trace(s.encoding.ids)
                   for n in ("step-2.safetensors", "iter-30/ckpt.safetensors"))
    weights = late.blocks[0].attn_weights[0] - early.blocks[0].attn_weights[0]
    shown = diff.attn.data
    np.testing.assert_allclose(shown[~np.isnan(shown)], weights[early.blocks[0].attn_mask], atol=1e-6)
    assert np.isnan(shown[0, 1]) and diff.attn.levels == pytest.approx((-np.abs(weights).max(), np.abs(weights).max()))
    T = s.trace.n_tokens  # the whole map in view (square cells had cut its first and last columns)
    assert diff.attn.zoom.view() == pytest.approx((0, T, 0, T)) and not diff.attn.zoom.zoomed()
    probs = late.probs - early.probs
    np.testing.assert_allclose(diff.probs.data, probs[:, difference_columns(probs, 12)], atol=1e-6)
    best = int(np.argmax(probs[-1]))  # over the whole vocabulary, not only the columns shown
    name = token_label(token_name(s.tokenizer, best), 10)
    assert f"{name!r} gained most ({probs[-1, best]:+.3f})" in diff.note.text()
    assert difference_sentence(diff.diff.probs, lambda c: token_label(token_name(s.tokenizer, c), 10)) in diff.note.text()
    assert diff.probs.titles["col"].startswith("vocabulary token") and diff.probs.titles["row"].startswith("position")
    assert diff.attn.bar.colorMap().name == "CET-D1A"  # diverging


def test_another_run_s_folder_opens_its_last_snapshot(window, tmp_path, tiny_tokenizer, dialogs):
    other = tmp_path / "other"
    for step in (0, 3, 9):
        _save(other / f"s{step}.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=step, d_model=8), {"steps": step})
    dialogs.files.append(str(other))
    window._on_open_snapshots_triggered()
    s, panel = window.session, window.panels["training"]
    assert panel.source.view.steps == [0, 3, 9] and panel.source.view.reference is None
    assert s.config.d_model == 8 and s.checkpoint.path.name == "s9.safetensors"
    assert [st.index for st in panel.stops] == [0, 1, 2]  # no "model you opened" stop: it is another run's
    panel.slider.setValue(0)
    assert s.snapshot_step == 0 and s.loaded_checkpoint.path.name == "s9.safetensors"


@pytest.mark.slow
def test_a_run_s_snapshots_stream_in(window, tmp_path, tiny_tokenizer):
    panel, folder = window.panels["training"], tmp_path / "live-snapshots"
    panel.follow_folder(folder)
    assert panel.source.following and "Waiting for the run's first snapshot" in panel.folder_label.text()
    _save(folder / "step-000000.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=1), {"steps": 0})
    panel.source._look_again()  # what its timer does every second
    assert panel.source.view.steps == [0] and panel.stops[-1].index == 0
    _save(folder / "step-000005.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=2), {"steps": 5})
    panel.source._look_again()
    assert panel.source.view.steps == [0, 5] and panel.slider.maximum() == 1
    assert "a run still writing" in panel.folder_label.text()


def test_show_snapshot_takes_only_the_loaded_model_s_shape_and_vocabulary(qtbot, tiny_tokenizer):
    from explorer.qt.session import Session

    s = Session(compute_mode="sync")
    with pytest.raises(ValueError, match="no model is loaded"):
        s.show_snapshot(None)
    s.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))
    s.set_text(TEXT)
    with pytest.raises(ValueError, match="another shape or vocabulary"):
        s.show_snapshot(make_tiny_checkpoint(tiny_tokenizer, d_model=32), 5)
    with pytest.raises(ValueError, match="with its training step"):
        s.show_snapshot(make_tiny_checkpoint(tiny_tokenizer, seed=5))
    changed = []
    s.sig_model_changed.connect(lambda: changed.append(s.trace))
    snap = make_tiny_checkpoint(tiny_tokenizer, seed=5)
    s.show_snapshot(snap, 5)
    assert s.checkpoint is snap and s.snapshot_step == 5 and changed[0] is s.trace  # in place already
    np.testing.assert_array_equal(s.trace.logits, snap.model.trace(s.encoding.ids).logits)
    s.show_snapshot(snap, 5)
    assert len(changed) == 1  # the same again: nothing
    s.show_snapshot(None)
    assert s.checkpoint is s.loaded_checkpoint and s.snapshot_step is None


@pytest.mark.slow
def test_play_steps_through_to_the_model_you_opened(window, qtbot):
    s, panel = window.session, window.panels["training"]
    panel._player.setInterval(5)
    panel.slider.setValue(1)
    seen = []
    s.sig_model_changed.connect(lambda: seen.append(s.snapshot_step))
    panel.play_button.click()
    assert panel.play_button.text() == "Pause"
    qtbot.waitUntil(lambda: not panel.play_button.isChecked(), timeout=5000)
    assert seen == [10, 30, None] and panel.slider.value() == 4 and panel.play_button.text() == "Play"
    panel.play_button.click()  # from the end: starts again at the first snapshot
    assert s.snapshot_step == 0
    panel.play_button.click()


@pytest.mark.slow
def test_the_command_line_shows_a_step(monkeypatch, tmp_path, run, qapp, tiny_tokenizer, capsys):
    import explorer.app as app_module

    seen = []

    def checked_render(widget, size, out, app):
        widget.resize(*size)
        widget.show()
        for _ in range(3):
            app.processEvents()
        s = widget.session
        seen.append((s.snapshot_step, s.trace.n_tokens, widget.panels["training"].is_shown()))

    monkeypatch.setattr(app_module, "_render", checked_render)
    args = [str(run), "--text", "the cat sat", "--screenshot", str(tmp_path / "x.png"), "--step", "12"]
    assert app_module.main(args) == 0
    assert seen == [(10, 3, True)]  # the last snapshot at or before step 12
    lone = _save(tmp_path / "lone.safetensors", make_tiny_checkpoint(tiny_tokenizer), {"steps": 3})
    assert app_module.main([str(lone), "--screenshot", str(tmp_path / "y.png"), "--step", "1"]) == 0
    assert "--step 1: No training snapshots found for lone" in capsys.readouterr().err


@pytest.mark.slow
def test_a_folder_of_one_snapshot_and_a_damaged_file(window, tmp_path, tiny_tokenizer, dialogs, qtbot):
    """It said "1 snapshots, steps 5 to 5", and the step axis of a run under 9 steps (and any plot
    whose values stay under 1) read "(x0.001)": pyqtgraph's SI prefix on a unitless axis."""
    folder = tmp_path / "one"
    _save(folder / "s5.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=5), {"steps": 5})
    (folder / "cut.safetensors").write_bytes(b"\x00" * 100)
    dialogs.files.append(str(folder))
    window._on_open_snapshots_triggered()
    panel = window.panels["training"]
    qtbot.waitUntil(lambda: panel.source.view is not None and bool(panel.source.view.snapshots), timeout=5000)
    assert panel.folder_label.text().endswith("one: 1 snapshot, step 5")
    assert panel.skipped_label.text().startswith("1 file(s) skipped: cut.safetensors: ")
    qtbot.waitUntil(lambda: panel.curves is not None, timeout=5000)
    view = panel.curves_view
    for plot in view.plots:
        for name in ("left", "bottom"):
            assert "(x" not in plot.getAxis(name).labelString(), (name, plot.getAxis(name).labelString())


@pytest.mark.slow
def test_the_difference_of_snapshots_whose_logits_are_not_numbers(qtbot, tmp_path, tiny_tokenizer, dialogs):
    """It said "'<unk>' gained most (+nan)" over 12 columns ranked by NaN."""
    from test_nonfinite import huge_qk

    folder = tmp_path / "huge"
    for step in (0, 9):
        _save(folder / f"s{step}.safetensors", huge_qk(make_tiny_checkpoint(tiny_tokenizer, seed=step)), {"steps": step})
    w = make_window(qtbot, tmp_path, make_tiny_checkpoint(tiny_tokenizer))
    w.session.set_text(TEXT)
    w.docks["training"].raise_()
    panel = w.panels["training"]
    qtbot.waitUntil(panel.is_shown, timeout=3000)
    dialogs.files.append(str(folder))
    w._on_open_snapshots_triggered()
    diff = panel.difference
    panel.tabs.setCurrentWidget(diff)
    qtbot.waitUntil(lambda: diff.diff is not None, timeout=5000)
    assert np.isnan(diff.diff.probs[-1]).all()
    assert diff.note.text().endswith("After the last token, the probabilities of one of the two steps are not "
                                     "numbers (NaN or inf).") and "nan" not in diff.note.text()


def test_the_curves_of_a_long_run_are_computed_over_an_even_spread_of_its_snapshots(window, run, monkeypatch, qtbot):
    """3,000 snapshots were traced on every text change (on the GUI thread while the model was fast)."""
    from explorer.core.training_views import curve_snapshots
    import explorer.qt.panels.training.panel as training_panel

    assert curve_snapshots(list(range(10)), 4) == (0, 3, 6, 9)  # first and last kept
    assert curve_snapshots(list(range(3)), 4) == (0, 1, 2)
    monkeypatch.setattr(training_panel, "CURVE_SNAPSHOTS", 3)
    monkeypatch.setattr(training_panel, "curve_snapshots", lambda snaps: curve_snapshots(snaps, 3))
    panel = window.panels["training"]
    panel.open_folder(run.parent / "run-snapshots")
    qtbot.waitUntil(lambda: panel.curves is not None and len(panel.curves.steps) == 3, timeout=10000)
    assert panel.curves.steps.tolist() == [0, 10, 30] and "the curves run over 3 of them" in panel.folder_label.text()


def test_a_snapshot_s_weights_are_read_off_the_gui_thread_the_newest_position_wins(qtbot, tmp_path, run, dialogs,
                                                                                   tiny_tokenizer):
    """Outside sync mode a snapshot whose weights are not in memory is read on the source's thread:
    the panel says so, the slider stays where it was put, and only the newest position is shown,
    with the trace of its file."""
    w = make_window(qtbot, tmp_path, load_checkpoint(run), compute_mode="async")
    s, panel = w.session, w.panels["training"]
    qtbot.waitUntil(lambda: s.trace is not None, timeout=10000)
    s.set_text(TEXT)
    w.docks["training"].raise_()
    qtbot.waitUntil(lambda: panel.source.view is not None and not panel.source.loading and not s.busy, timeout=20000)
    view = panel.source.view
    for snap in view.snapshots:
        snap.release()  # (the curves' job read them)
    panel.slider.setValue(0)
    assert panel.step_label.text() == "Reading the weights of step 0…" and s.snapshot_step is None and panel.reading
    panel.slider.setValue(2)  # asked for before step 0's weights arrive: step 10 is the one shown
    assert panel.step_label.text() == "Reading the weights of step 10…" and panel.slider.value() == 2
    qtbot.waitUntil(lambda: s.snapshot_step == 10 and s.trace is not None, timeout=20000)
    assert panel.slider.value() == 2 and panel.step_label.text() == "snapshot 3 of 4: step 10" and not panel.reading
    expected = load_checkpoint(run.parent / "run-snapshots" / "b.safetensors").model.trace(s.encoding.ids)
    np.testing.assert_array_equal(s.trace.logits, expected.logits)
    other = tmp_path / "other"  # another run's folder: its last snapshot becomes the model once read
    for step in (0, 3, 9):
        _save(other / f"s{step}.safetensors", make_tiny_checkpoint(tiny_tokenizer, seed=step, d_model=8), {"steps": step})
    panel.open_folder(other)
    qtbot.waitUntil(lambda: s.checkpoint is not None and s.checkpoint.path.name == "s9.safetensors", timeout=20000)
    assert s.config.d_model == 8 and panel.stops[-1].index == 2
    qtbot.waitUntil(lambda: panel.step_label.text() == "snapshot 3 of 3: step 9", timeout=20000)
    w.close()
