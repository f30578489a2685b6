"""Numbers that are not numbers: found where they start, said by the CLI (exit 3) and the app,
never drawn as values; and trace() refuses inputs that are not one sequence."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import make_tiny_checkpoint
from model import NonFinite, save_checkpoint
from model.trace import EXIT_NONFINITE, main
from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]
HUGE = 1e24  # q, k ~ 1e23, so q_i . k_j ~ 1e46 > float32 max 3.4e38: the scores overflow to inf


def huge_qk(checkpoint, layer: int = 0):
    """The checkpoint with W_Q and W_K of one block scaled to huge (finite) values."""
    attn = checkpoint.model.blocks[layer].attn
    with torch.no_grad():
        attn.W_Q.weight.mul_(HUGE)
        attn.W_K.weight.mul_(HUGE)
    assert all(torch.isfinite(p).all() for p in checkpoint.model.parameters())
    return checkpoint


@pytest.fixture
def huge_file(tmp_path, tiny_tokenizer):
    ckpt = huge_qk(make_tiny_checkpoint(tiny_tokenizer))
    path = tmp_path / "huge-qk.safetensors"
    save_checkpoint(path, ckpt.model, ckpt.tokenizer)
    return path


def test_a_finite_trace_has_no_nonfinite(tiny_checkpoint):
    tr = tiny_checkpoint.model.trace([2, 3, 4])
    assert np.isneginf(tr.blocks[0].attn_scores).any()  # masked cells are -inf, and that is fine
    assert tr.nonfinite is None
    assert tiny_checkpoint.model.trace([]).nonfinite is None


@pytest.mark.parametrize("layer", [0, 1])
def test_nonfinite_values_are_found_where_they_start(tiny_tokenizer, layer):
    ckpt = huge_qk(make_tiny_checkpoint(tiny_tokenizer), layer)
    tr = ckpt.model.trace(ckpt.tokenizer.encode("the cat sat on the mat").ids)
    bad = tr.nonfinite
    assert isinstance(bad, NonFinite)
    assert (bad.name, bad.layer, bad.tensor) == (f"blocks.{layer}.attn.attn_scores", layer, "attn_scores")
    scores = tr.blocks[layer].attn_scores
    assert bad.count == int(np.count_nonzero(np.isposinf(scores) | np.isnan(scores))) > 0
    assert bad.size == scores.size
    assert np.isnan(tr.blocks[layer].attn_weights).any() and np.isnan(tr.logits).any()  # it spreads
    assert f"layer {layer}, attn_scores" in str(bad)


def test_the_cli_says_where_and_exits_3_with_the_json_written(huge_file, capsys):
    assert main([str(huge_file), "the cat sat", "--json"]) == EXIT_NONFINITE == 3
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and "layer 0, attn_scores" in err and "blocks.0.attn.attn_scores" in err

    def no_constants(name):
        raise AssertionError(f"{name} is not JSON")

    out = json.loads(captured.out, parse_constant=no_constants)  # standard JSON: no NaN literal
    assert out["tokens"] == ["the", "cat", "sat"]
    assert out["top_k"] and all(p is None for _, p in out["top_k"])
    assert out["tensors"]["blocks.0.attn.attn_weights"][0][0][0] is None
    assert main([str(huge_file), "the cat sat"]) == 3  # the text output too
    captured = capsys.readouterr()
    assert "nan" in captured.out and "attn_scores" in captured.err


def test_the_exit_codes_are_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "3 the trace holds values" in capsys.readouterr().out


@pytest.mark.slow
def test_a_reader_that_stops_early_gives_no_traceback(huge_file, tmp_path):
    """`python -m model.trace … --json | head` ended in a BrokenPipeError traceback."""
    r = subprocess.run(f'"{sys.executable}" -m model.trace "{huge_file}" "the cat sat" --json | head -c 20',
                       shell=True, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert len(r.stdout) == 20
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
    assert "attn_scores" in r.stderr  # what was said before the pipe closed


def test_trace_takes_one_sequence(tiny_checkpoint):
    model = tiny_checkpoint.model
    one = model.trace([2, 3, 4])
    for same in (np.array([[2, 3, 4]]), torch.tensor([[2, 3, 4]]), (2, 3, 4), np.array([2, 3, 4], dtype=np.int32)):
        np.testing.assert_array_equal(model.trace(same).logits, one.logits)
    assert model.trace([]).n_tokens == 0 and model.trace(np.zeros((1, 0), dtype=np.int64)).n_tokens == 0


@pytest.mark.parametrize("ids, message", [
    ([[2, 3, 4], [5, 6, 7]], "a batch of 2 sequences"),
    (torch.tensor([[2, 3], [4, 5]]), "a batch of 2 sequences"),
    (np.zeros((1, 2, 3), dtype=np.int64), "shape (1, 2, 3)"),
    (5, "shape ()"),
    ([[2, 3], [4]], "different lengths"),
    ([2.5, 3.0], "must be integers"),
    ([True, False], "must be integers"),
    (["a", "b"], "must be integers"),
])
def test_trace_refuses_what_is_not_one_sequence(tiny_checkpoint, ids, message):
    with pytest.raises(ValueError) as info:
        tiny_checkpoint.model.trace(ids)
    assert message in str(info.value)


def test_a_batch_longer_than_the_context_is_refused_not_cropped(tiny_checkpoint):
    rows = [[2, 3]] * 20  # more rows than context_length (8): cropping rows would hide the batch
    with pytest.raises(ValueError, match="a batch of 20 sequences"):
        tiny_checkpoint.model.trace(rows)


def test_top_k_refuses_logits_that_are_not_numbers():
    from explorer.core.nexttoken import top_k

    with pytest.raises(ValueError, match="1 of 3 logits are not numbers"):
        top_k(np.array([0.5, np.nan, 1.0]), 2)
    with pytest.raises(ValueError, match="not numbers"):
        top_k(np.array([0.5, np.inf, 1.0]), 2, temperature=0.0)


@pytest.mark.slow
def test_the_app_says_where_and_draws_no_nan_as_a_value(qtbot, tmp_path, tiny_tokenizer, dialogs):
    from explorer.qt.plots.heatmap import MASKED_COLOUR
    from explorer_helpers import make_window, pixel_at_cell

    window = make_window(qtbot, tmp_path, huge_qk(make_tiny_checkpoint(tiny_tokenizer)))
    s = window.session
    s.set_text("the cat sat on the mat")
    assert "layer 0, attn_scores" in window.status.text()  # the status bar says where they start
    nxt = window.panels["next-token"]
    assert nxt.top is None and len(nxt.bars.opts["width"]) == 0  # no NaN-width bars
    assert "not numbers" in nxt.info.text() and "entropy" not in nxt.info.text()
    att = window.panels["attention"]
    weights, scores = att.weights, att.scores
    T = s.trace.n_tokens
    assert weights.faults is not None and weights.faults.sum() == np.isnan(s.trace.blocks[0].attn_weights[0]).sum()
    assert weights.note.isVisibleTo(att) and "not numbers" in weights.note.text()
    row, col = map(int, np.argwhere(weights.faults)[0])
    assert "not a number" in weights.describe_cell(row, col)
    assert pixel_at_cell(weights, row, col).name() == MASKED_COLOUR  # blank, not a colour of the map
    masked = np.isneginf(s.trace.blocks[0].attn_scores[0])
    assert scores.faults is None or not (scores.faults & masked).any()  # a masked cell is not a fault
    assert "masked" in scores.describe_cell(0, T - 1)
    emb = window.panels["embeddings"]
    assert all(hm.faults is None and not hm.note.isVisibleTo(emb) for hm in emb.heatmaps.values())
    formula = window.panels["formula"]
    formula.refresh()
    assert "not numbers" in formula.agreement.text() and formula.k_map.faults is None  # q, k finite; weights not
    assert formula.out_map.faults is not None  # the model's head_out row
    att.all_heads.setChecked(True)
    assert att.grid_note.isVisibleTo(att) and "L0 H0" in att.grid_note.text()
    window.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))  # a sound model: every warning goes
    assert "⚠" not in window.status.text() and nxt.top is not None and "entropy" in nxt.info.text()
    assert weights.faults is None and not weights.note.isVisibleTo(att) and not att.grid_note.isVisibleTo(att)
