"""The model before attention (model/core/window.py): its arithmetic, its trace, its file, its training."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from safetensors import safe_open

from model import Checkpoint
from model.checkpoint import CheckpointError, load_any, save_checkpoint
from model.core.architectures import WINDOW_MLP, architecture_of, has_attention, model_class
from model.core.interventions import Interventions
from model.core.window import WindowConfig, WindowMLP
from model.tracing.window_schema import WINDOW


def make_window(vocab_size: int = 64, seed: int = 7, **fields) -> WindowMLP:
    """A seeded tiny window model (window 8, d_model 16, d_mlp 12)."""
    torch.manual_seed(seed)
    config = WindowConfig(**{"vocab_size": vocab_size, "context_length": 8, "d_model": 16, "d_mlp": 12, **fields})
    return WindowMLP(config).eval()


def test_the_default_shape_is_near_the_default_transformer():
    config = WindowConfig()
    model = WindowMLP(config)
    assert (config.context_length, config.vocab_size) == (32, 4096)
    assert model.n_params() == 727_472  # the default transformer: 726,528
    shapes = WindowMLP.state_dict_shapes(config)
    assert set(shapes) == set(model.state_dict())
    assert all(tuple(model.state_dict()[k].shape) == v for k, v in shapes.items())
    assert sum(math.prod(v) for v in shapes.values()) == model.n_params()
    assert shapes["fc_in.weight"] == (48, 32 * 128)  # one 128-wide slice per window slot


def test_each_slot_is_its_own_block_of_w_in():
    model = make_window()
    ids = [5, 9, 5, 3, 11]
    tr = model.trace(ids)
    n, T = model.config.context_length, len(ids)
    e = model.tok_emb.weight.detach().numpy()
    for i in range(T):
        for s in range(n):
            pos = i - (n - 1) + s  # slot s of row i holds this position
            want = e[ids[pos]] @ model.slot_weights(s) if pos >= 0 else np.zeros(model.config.d_mlp)
            np.testing.assert_allclose(tr.slot_in[i, s], want, atol=1e-6)
    # The same token, two slots: two different blocks, two different contributions.
    assert not np.allclose(tr.slot_in[2, n - 1], tr.slot_in[4, n - 3])
    np.testing.assert_allclose(tr.slot_in.sum(1) + model.fc_in.bias.detach().numpy(), tr.pre_act, atol=1e-5)


def test_trace_equals_forward_and_is_causal():
    model = make_window()
    ids = torch.tensor([1, 4, 2, 8, 5, 7])
    tr = model.trace(ids)
    logits = model(ids).detach().numpy()
    np.testing.assert_allclose(tr.logits, logits, atol=1e-5)
    np.testing.assert_allclose(tr.hidden, torch.nn.functional.gelu(torch.from_numpy(tr.pre_act.copy())).numpy(),
                               atol=1e-6)
    changed = ids.clone()
    changed[3] = 9
    after = model(changed).detach().numpy()
    np.testing.assert_array_equal(after[:3], logits[:3])  # earlier predictions never see a later token
    assert not np.allclose(after[3:], logits[3:])
    np.testing.assert_allclose(model(ids, positions=[2, 5]).detach().numpy(), logits[[2, 5]])


def test_the_trace_has_its_own_schema_and_no_blocks():
    model = make_window()
    tr = model.trace(list(range(12)))  # longer than the window: cropped like the transformer's
    assert tr.blocks == () and tr.dropped == 4 and tr.n_tokens == 8
    assert tr.names() == [row.name for row in WINDOW]
    assert tr["fc_in.slots"].shape == (8, 8, 12) and tr["act"].shape == (8, 12) and tr["logits"].shape == (8, 64)
    assert tr.pos is None and tr.x is None
    assert tr.nonfinite is None and not tr.positional_encoding and tr.causal
    np.testing.assert_allclose(tr.probs.sum(-1), 1.0, atol=1e-5)
    assert model.trace([]).n_tokens == 0


def test_what_it_does_not_have_is_refused_with_a_reason():
    model = make_window()
    with pytest.raises(ValueError, match="no attention"):
        model.trace([1, 2], interventions=Interventions(temperature=2.0))
    with pytest.raises(ValueError, match="no absolute positions"):
        model.trace([1, 2], start_position=3)
    with pytest.raises(ValueError, match="no attention heads"):
        Interventions(ablate=[(0, 0)]).check(model.config)
    Interventions().check(model.config)  # nothing to change: fine
    assert model.trace([1, 2], interventions=Interventions(), reuse=model.trace([1])).reused_rows == 0
    with pytest.raises(ValueError, match="outside the window"):
        model.slot_weights(8)
    with pytest.raises(ValueError, match="d_mlp"):
        WindowConfig(d_mlp=0)


def test_architectures_know_both_models(tiny_checkpoint):
    assert architecture_of(WindowConfig()) == WINDOW_MLP and model_class(WindowConfig()) is WindowMLP
    assert architecture_of(tiny_checkpoint.config) == "transformer" and has_attention(tiny_checkpoint.config)
    assert not has_attention(WindowConfig())


def test_our_file_holds_its_architecture_and_opens_as_it(tmp_path, tiny_tokenizer):
    model = make_window(vocab_size=tiny_tokenizer.vocab_size)
    path = tmp_path / "window.safetensors"
    save_checkpoint(path, model, tiny_tokenizer, training={"steps": 3})
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    assert meta["architecture"] == WINDOW_MLP and json.loads(meta["config"])["d_mlp"] == 12
    ck = load_any(path)
    assert isinstance(ck.model, WindowMLP) and ck.config == model.config and ck.training["steps"] == 3
    ids = tiny_tokenizer.encode("the cat sat on the mat").ids
    np.testing.assert_array_equal(ck.model.trace(ids).logits, model.trace(ids).logits)


def test_a_file_of_an_unknown_architecture_is_refused(tmp_path, tiny_tokenizer):
    from safetensors.torch import load_file, save_file

    good = tmp_path / "window.safetensors"
    save_checkpoint(good, make_window(vocab_size=tiny_tokenizer.vocab_size), tiny_tokenizer)
    with safe_open(str(good), framework="pt") as f:
        meta = dict(f.metadata())
    for arch, message in (("recurrent", "not one this app builds"), ("transformer", "missing tensor")):
        bad = tmp_path / f"{arch}.safetensors"
        save_file(load_file(str(good)), str(bad), metadata={**meta, "architecture": arch})
        with pytest.raises(CheckpointError, match=message):
            load_any(bad)


def test_training_with_arch_window_mlp(tmp_path):
    from test_train import _story, _train

    train, val = tmp_path / "train.txt", tmp_path / "val.txt"
    train.write_text("\n".join(_story(i) for i in range(12)) + "\n", encoding="utf-8")
    val.write_text("".join(_story(i).title() + "\n<|endoftext|>\n" for i in range(12, 16)), encoding="utf-8")
    out = tmp_path / "w.safetensors"
    assert _train((train, val), out, "--arch", "window-mlp", "--d-mlp", "12", "--steps", "20") == 0
    ck = load_any(out)
    assert isinstance(ck.model, WindowMLP) and ck.config.d_mlp == 12 and ck.config.context_length == 8
    assert ck.training["val_loss"] < math.log(ck.config.vocab_size)  # it learned something
    assert "--arch window-mlp" in ck.training["command"]
    assert _train((train, val), tmp_path / "x.safetensors", "--arch", "window-mlp", "--n-heads", "2") == 2  # no heads
    resumed = tmp_path / "r.safetensors"
    assert _train((train, val), resumed, "--arch", "window-mlp", "--d-mlp", "12", "--resume", str(out),
                  "--steps", "2") == 0
    assert load_any(resumed).training["steps"] == 22
    assert _train((train, val), tmp_path / "y.safetensors", "--resume", str(out), "--steps", "2") == 2


def test_a_checkpoint_of_it_is_an_ordinary_checkpoint(tiny_tokenizer):
    model = make_window(vocab_size=tiny_tokenizer.vocab_size)
    ck = Checkpoint(model=model, tokenizer=tiny_tokenizer)
    assert ck.config is model.config and ck.name == "unsaved model"


def test_curves_over_training_of_a_model_without_attention(tmp_path, tiny_tokenizer):
    from model.training.over_training import curves_over_training, snapshot_difference
    from model.training.snapshots import Snapshot

    snaps = [Snapshot.of(step, Checkpoint(model=make_window(tiny_tokenizer.vocab_size, seed=step), tokenizer=tiny_tokenizer),
                         tmp_path / f"{step}.safetensors") for step in (0, 10)]
    ids = tiny_tokenizer.encode("the cat sat on the mat").ids
    curves = curves_over_training(snaps, ids)
    assert curves.attn_entropy.shape == (2, 0, 0) and np.isfinite(curves.loss_on_text).all()
    want = snaps[1].model.trace(ids).probs[-1]
    assert curves.top1[1] == int(np.argmax(want))
    diff = snapshot_difference(*snaps, ids)
    assert diff.attn_weights.shape == (0, 0, len(ids), len(ids))
    np.testing.assert_allclose(diff.probs, snaps[1].model.trace(ids).probs - snaps[0].model.trace(ids).probs)


def test_python_m_model_trace_opens_it(tmp_path, tiny_tokenizer, capsys):
    from model.generate import Sampling, generate
    from model.trace import main

    model = make_window(vocab_size=tiny_tokenizer.vocab_size)
    path = tmp_path / "window.safetensors"
    save_checkpoint(path, model, tiny_tokenizer)
    text = "the cat sat on the mat"
    ids = tiny_tokenizer.encode(text).ids
    tr = model.trace(ids)
    assert main([str(path), text, "--json", "--generate", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["tensors"]) == tr.names() and out["token_ids"] == list(ids)
    np.testing.assert_allclose(out["tensors"]["fc_in.slots"], tr.slot_in, rtol=1e-6)
    assert out["generated"]["ids"] == [s.token_id for s in generate(model, ids, 3, Sampling())]
    assert main([str(path), text]) == 0
    printed = capsys.readouterr().out
    sizes = np.linalg.norm(tr.slot_in[-1].astype(np.float64), axis=-1)  # the last position's window
    assert f"mat:{sizes[-1]:.3f}" in printed and "no attention" in printed and "top 5 next tokens" in printed
    assert main([str(path), text, "--explain"]) == 2
    assert "no attention heads" in capsys.readouterr().err
