"""Activation patching: the Patch intervention at each site, the sweep's identity check and normalisation,
the texts of different lengths, and the command line's `--patch`."""

import json
from pathlib import Path

import numpy as np
import pytest

from model.core.architectures import has_attention
import torch

from explain_models import FAMILIES, IDS, family_model
from model.checkpoint import load_checkpoint
from model.core.interventions import Interventions, Patch
from model.explain.patching import LengthMismatch, activation_patching, patch_cells
from model.trace import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "assets").glob("*.safetensors"))
CORRUPTED = [3, 1, 4, 7, 5, 9, 2]  # IDS with position 3 changed


@pytest.mark.parametrize("family", ["gpt2", "neo", "learned-rmsnorm-gqa", "llama", "nope"])
def test_patching_resid_pre_of_layer_0_equals_replacing_that_tokens_embedding(family):
    """x_p = e(t_p) + p_p (e(t_p) with RoPE or without position): the clean x at position 3 in the
    corrupted run is the clean token there."""
    model = family_model(family)
    clean = model.trace(IDS)
    value = torch.from_numpy(np.array(clean.x))  # (T, d_model)
    patched = model(torch.tensor(CORRUPTED), interventions=Interventions(
        patches=[Patch("resid_pre", 0, position=3, value=value)]))
    replaced = model(torch.tensor(CORRUPTED[:3] + [IDS[3]] + CORRUPTED[4:]))
    torch.testing.assert_close(patched, replaced, atol=1e-5, rtol=0)
    assert (patched - model(torch.tensor(CORRUPTED))).abs().max() > 1e-3  # the patch changed something


def test_patching_every_position_of_a_site_gives_the_source_run():
    """A whole-sequence patch of resid_pre L0 (or of every head and both outputs of the last block) is the clean run."""
    model = family_model("gpt2")
    clean = model.trace(IDS)
    x = torch.from_numpy(np.array(clean.x))
    out = model(torch.tensor(CORRUPTED), interventions=Interventions(patches=[Patch("resid_pre", 0, value=x)]))
    torch.testing.assert_close(out, torch.from_numpy(np.array(clean.logits)), atol=1e-5, rtol=0)
    # Block 1's input patched and its outputs taken from the clean run: the residual after it is the clean one.
    last = [Patch("resid_pre", 1, value=torch.from_numpy(np.array(clean.blocks[0].resid_post)))]
    out = model(torch.tensor(CORRUPTED), interventions=Interventions(patches=last))
    torch.testing.assert_close(out, torch.from_numpy(np.array(clean.logits)), atol=1e-5, rtol=0)


def test_head_attn_and_mlp_patches_write_their_place_only():
    model = family_model("gpt2")
    clean, corrupted = model.trace(IDS), model.trace(CORRUPTED)
    head_value = torch.from_numpy(np.array(clean.blocks[1].head_out))  # (n_heads, T, d_head)
    tr = model.trace(CORRUPTED, interventions=Interventions(patches=[Patch("head_out", 1, head=0, value=head_value)]))
    np.testing.assert_array_equal(tr.blocks[1].head_out[0], clean.blocks[1].head_out[0])
    np.testing.assert_array_equal(tr.blocks[1].head_out[1], corrupted.blocks[1].head_out[1])
    mlp = torch.from_numpy(np.array(clean.blocks[0].mlp_out))
    tr = model.trace(CORRUPTED, interventions=Interventions(patches=[Patch("mlp_out", 0, position=5, value=mlp)]))
    np.testing.assert_array_equal(tr.blocks[0].mlp_out[5], clean.blocks[0].mlp_out[5])
    np.testing.assert_array_equal(tr.blocks[0].mlp_out[4], corrupted.blocks[0].mlp_out[4])
    np.testing.assert_allclose(tr.blocks[0].resid_post[5], tr.blocks[0].resid_mid[5] + clean.blocks[0].mlp_out[5],
                               atol=1e-6)


def test_a_source_row_patch_copies_from_another_row_of_the_batch():
    model = family_model("gpt2")
    ids = torch.tensor([IDS, CORRUPTED, CORRUPTED])
    iv = Interventions(patches=[Patch("attn_out", 1, position=6, row=2, source_row=0)])
    out = model(ids, interventions=iv)
    plain = model(ids)
    torch.testing.assert_close(out[:2], plain[:2], atol=0, rtol=0)  # rows 0 and 1 untouched
    value = torch.from_numpy(np.array(model.trace(IDS).blocks[1].attn_out))
    alone = model(torch.tensor(CORRUPTED), interventions=Interventions(
        patches=[Patch("attn_out", 1, position=6, value=value)]))
    torch.testing.assert_close(out[2], alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kwargs", [
    dict(site="q", layer=0, source_row=0),  # no such site
    dict(site="head_out", layer=0, source_row=0),  # a head patch without its head
    dict(site="resid_pre", layer=0, head=1, source_row=0),  # a head where there are none
    dict(site="resid_pre", layer=-1, source_row=0),
    dict(site="resid_pre", layer=0, position=True, source_row=0),
    dict(site="resid_pre", layer=0),  # neither a source row nor a value
    dict(site="resid_pre", layer=0, source_row=0, value=torch.zeros(7, 16)),  # both
    dict(site="resid_pre", layer=0, value=[0.0] * 16),  # a value that is not a tensor
])
def test_bad_patches_are_refused(kwargs):
    with pytest.raises(ValueError):
        Patch(**kwargs)


def test_patches_outside_the_model_or_of_another_shape_are_refused():
    model = family_model("gpt2")
    for patch in (Patch("resid_pre", 2, source_row=0), Patch("head_out", 0, head=2, source_row=0),
                  Patch("mlp_out", 0, value=torch.zeros(6, 16)), Patch("mlp_out", 0, position=7, value=torch.zeros(7, 16))):
        with pytest.raises(ValueError):
            model.trace(IDS, interventions=Interventions(patches=[patch]))
    described = Interventions(patches=[Patch("head_out", 1, head=0, source_row=0)]).describe()
    assert described == "patched: head_out L1H0" and not Interventions(patches=[patch]).changes_nothing


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_identity_check_passes_and_the_maps_have_their_ends(family):
    model = family_model(family)
    r = activation_patching(model, IDS, CORRUPTED)
    assert r.identity_ok and r.identity_error <= 1e-6
    L, H, T = model.config.n_layers, model.config.n_heads, len(IDS)
    assert r.resid_pre.shape == r.attn_out.shape == r.mlp_out.shape == (L, T) and r.head_out.shape == (L, H)
    # Before layer 0 only the changed token differs: patching it restores the clean run, the others change nothing.
    np.testing.assert_allclose(r.resid_pre[0, 3], 1.0, atol=1e-4)
    np.testing.assert_allclose(np.delete(r.resid_pre[0], 3), 0.0, atol=1e-6)
    # Positions before the change see the same tokens in both runs: nothing to patch there.
    for site in ("resid_pre", "attn_out", "mlp_out"):
        np.testing.assert_allclose(r.maps[site][:, :3], 0.0, atol=1e-6)


def test_normalisation_and_defaults_match_the_runs():
    model = family_model("gpt2")
    clean, corrupted = model.trace(IDS), model.trace(CORRUPTED)
    r = activation_patching(model, IDS, CORRUPTED)
    assert r.target_id == int(np.argmax(clean.logits[-1]))
    expected_foil = int(np.argmax(corrupted.logits[-1]))
    assert r.foil_id == expected_foil or (expected_foil == r.target_id and r.foil_note)
    np.testing.assert_allclose(r.clean, clean.logits[-1][r.target_id] - clean.logits[-1][r.foil_id], atol=1e-5)
    np.testing.assert_allclose(r.corrupted, corrupted.logits[-1][r.target_id] - corrupted.logits[-1][r.foil_id],
                               atol=1e-5)
    # One cell by hand: head 1 of layer 0 patched at every position, through the value form.
    value = torch.from_numpy(np.array(clean.blocks[0].head_out))
    logits = model(torch.tensor(CORRUPTED), interventions=Interventions(patches=[Patch("head_out", 0, head=1, value=value)]))
    m = float((logits[-1, r.target_id] - logits[-1, r.foil_id]).detach())
    np.testing.assert_allclose(r.head_out[0, 1], (m - r.corrupted) / (r.clean - r.corrupted), atol=1e-4)


def test_switched_off_heads_stay_off_in_every_run():
    model = family_model("gpt2")
    off = Interventions(ablate=[(1, 0)])
    r = activation_patching(model, IDS, CORRUPTED, base=off)
    logits = model.trace(IDS, interventions=off).logits[-1]
    np.testing.assert_allclose(r.clean, logits[r.target_id] - logits[r.foil_id], atol=1e-5)
    assert r.identity_ok


def test_different_lengths_same_metric_and_a_foil_equal_to_the_target_are_refused():
    model = family_model("gpt2")
    with pytest.raises(LengthMismatch, match="7 tokens and the corrupted one 6"):
        activation_patching(model, IDS, CORRUPTED[:-1])
    with pytest.raises(ValueError, match="same logit difference"):
        activation_patching(model, IDS, IDS)
    with pytest.raises(ValueError, match="same token"):
        activation_patching(model, IDS, CORRUPTED, target=3, foil=3)
    assert len(patch_cells(model.config, 7)) == 3 * 2 * 7 + 2 * 2


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_identity_check_on_every_shipped_model(path):
    ck = load_checkpoint(path)
    tok = ck.tokenizer
    if not has_attention(ck.config):  # the model before attention: nothing to patch, said in one line
        with pytest.raises(ValueError, match="the model before attention"):
            activation_patching(ck.model, [1, 2], [1, 3])
        return
    clean = tok.encode("the boy gave the ball to the girl").ids
    corrupted = tok.encode("the boy gave the ball to the dog").ids
    r = activation_patching(ck.model, clean, corrupted)
    assert r.identity_ok, r.identity_error
    np.testing.assert_allclose(r.resid_pre[0, -1], 1.0, atol=1e-4)  # the one token that differs


def test_the_command_line_prints_patching(capsys):
    path = ROOT / "assets" / "tinystories-4L4H.safetensors"
    code = main([str(path), "the boy gave the ball to the girl", "--patch", "the boy gave the ball to the dog",
                 "--target", "and", "--foil", ".", "--json"])
    assert code == 0
    p = json.loads(capsys.readouterr().out)["patching"]
    assert {"metric", "clean", "corrupted", "resid_pre", "head_out", "attn_out", "mlp_out"} <= set(p)
    assert p["target"] == "and" and p["foil"] == "." and p["identity_ok"]
    assert np.array(p["resid_pre"]).shape == (4, 8) and np.array(p["head_out"]).shape == (4, 4)
    ck = load_checkpoint(path)
    logits = ck.model.trace(ck.tokenizer.encode("the boy gave the ball to the girl").ids).logits[-1]
    t, f = ck.tokenizer.token_to_id("and"), ck.tokenizer.token_to_id(".")
    np.testing.assert_allclose(p["clean"], logits[t] - logits[f], atol=1e-5)


def test_the_command_line_says_why_it_cannot_patch(capsys):
    path = str(ROOT / "assets" / "tinystories-1L1H.safetensors")
    assert main([path, "the boy gave the ball", "--patch", "the boy gave a red ball"]) == 2
    assert "same number of tokens" in capsys.readouterr().err
    assert main([path, "the boy", "--foil", "a"]) == 2
    assert "--foil goes with --patch" in capsys.readouterr().err
    assert main([path, "the boy", "--patch", "the girl", "--foil", "zebraish"]) == 2
    assert "--foil 'zebraish' is not one token" in capsys.readouterr().err
