"""F5 keeps the selection; controls whose meaning depends on the model follow a model change."""

import pytest

from conftest import make_tiny_checkpoint
from explorer_helpers import make_window
from model import save_checkpoint


def _save(path, tokenizer, **overrides):
    ckpt = make_tiny_checkpoint(tokenizer, **overrides)
    save_checkpoint(path, ckpt.model, ckpt.tokenizer)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reload_keeps_layer_head_and_position(qtbot, tmp_path, tiny_tokenizer, tiny_checkpoint, dialogs, mode):
    path = _save(tmp_path / "m.safetensors", tiny_tokenizer, n_layers=2, n_heads=2)
    window = make_window(qtbot, tmp_path, tiny_checkpoint, compute_mode=mode)
    assert window.files.open_checkpoint(path)
    s = window.session
    s.set_text("the cat sat on the mat")
    qtbot.waitUntil(lambda: s.trace is not None and s.trace.n_tokens == 6 and not s.busy)
    s.set_layer(1), s.set_head(1), s.set_position(2)
    window.files.reload()
    qtbot.waitUntil(lambda: s.trace is not None and not s.busy)
    assert (s.layer, s.head, s.position) == (1, 1, 2)
    att = window.panels["attention"]
    qtbot.waitUntil(lambda: (att.layer_box.value(), att.head_box.value()) == (1, 1))  # paced when async


@pytest.mark.slow
def test_reload_clamps_what_the_new_file_no_longer_has(qtbot, tmp_path, tiny_tokenizer, tiny_checkpoint, dialogs):
    path = _save(tmp_path / "m.safetensors", tiny_tokenizer, n_layers=2, n_heads=2)
    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(path)
    s = window.session
    s.set_text("the cat sat on the mat")
    s.set_layer(1), s.set_head(1), s.set_position(5)
    _save(path, tiny_tokenizer, n_layers=1, n_heads=2, context_length=4)  # the file changed on disk
    window.files.reload()
    assert (s.layer, s.head) == (0, 1)  # layer 1 is gone
    assert s.trace.n_tokens == 4
    # Row 5 is gone, but the pinned token ("mat", the last) is still in the window: the pin stays on it.
    assert s.position == 3 and s.tokens[3] == "mat"


@pytest.mark.slow
def test_all_heads_is_off_and_grey_for_a_one_head_model_and_comes_back(qtbot, tmp_path, tiny_tokenizer, dialogs):
    four = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=4)
    one = make_tiny_checkpoint(tiny_tokenizer, n_layers=1, n_heads=1)
    window = make_window(qtbot, tmp_path, four)
    window.session.set_text("the cat sat")
    att = window.panels["attention"]
    att.all_heads.setChecked(True)
    assert att.grid.isVisible()
    window.set_checkpoint(one)
    assert not att.all_heads.isChecked() and not att.all_heads.isEnabled() and not att.grid.isVisible()
    window.set_checkpoint(four)
    assert att.all_heads.isChecked() and att.all_heads.isEnabled() and att.grid.isVisible()


@pytest.mark.slow
def test_the_pe_box_is_off_and_grey_for_a_model_without_positional_encoding(qtbot, tmp_path, tiny_tokenizer, dialogs):
    with_pe = make_tiny_checkpoint(tiny_tokenizer)
    no_pe = make_tiny_checkpoint(tiny_tokenizer, positional="none")
    window = make_window(qtbot, tmp_path, with_pe)
    box = window.panels["tokens"].pe_box
    assert box.isChecked() and box.isEnabled()
    window.set_checkpoint(no_pe)
    assert not box.isChecked() and not box.isEnabled() and window.session.positional_encoding
    window.set_checkpoint(with_pe)
    assert box.isChecked() and box.isEnabled()


def test_startup_time_is_in_the_help(capsys):
    from explorer.app import parse_args

    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--help"], ["tokens"])
    assert exit_info.value.code == 0 and "--startup-time" in capsys.readouterr().out
