"""A Hub model's training revisions as the Training panel's snapshots: EleutherAI's Pythia suite keeps
its checkpoints as revisions step0 ... step143000 of one repository; those in the local Hub cache are
the snapshots of hf:EleutherAI/pythia-14m, each snapshot's weights are hashed, and snapshots that serve
the same weights as another are marked (EleutherAI/pythia#195, #205, #206). The cache is laid out by
tests/hub_cache.py, offline, with a tiny GPT-NeoX model of the fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save

from explorer.core.training_views import slider_stops
from hub_cache import add_repo, fixture_files
from model.checkpoint import HubRef, cached_revisions, load_any
from model.formats.hub import revision_step
from model.training.snapshots import hub_revisions_for, snapshots_for, weights_digest

NEOX = Path(__file__).parent / "fixtures" / "arch3" / "hf-gpt-neox"
REPO = "fixtures/pythia-tiny"
FETCHED = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}


def _weights(scale: float, note: str) -> bytes:
    """The fixture's weights times ``scale``, saved with a note in the file's metadata (so that two files
    of the same weights differ byte for byte, as two uploads do)."""
    tensors = {k: v * scale for k, v in load_file(NEOX / "model.safetensors").items()}
    return save(tensors, metadata={"note": note})  # one key: safetensors writes several in no fixed order


@pytest.fixture(scope="module")
def pythia_cache(tmp_path_factory):
    """A Hub cache of its own (the session's is the other tests'): revisions step0 (other weights), step1000
    and step2000 (the same weights, different files), main = step2000's commit, a tag v1 (no step) and
    step3000, whose files were never fetched."""
    from huggingface_hub import constants

    cache = tmp_path_factory.mktemp("pythia-hub")
    base = fixture_files(NEOX)
    for revision, scale, note in (("step0", 0.5, "a"), ("step1000", 1.0, "b"), ("step2000", 1.0, "c"),
                                  ("main", 1.0, "c"), ("v1", 1.0, "b")):
        add_repo(cache, REPO, {**base, "model.safetensors": _weights(scale, note)}, FETCHED, revision=revision)
    add_repo(cache, REPO, {**base, "model.safetensors": _weights(2.0, "d")}, set(), revision="step3000")
    with pytest.MonkeyPatch.context() as mp:  # the library reads its cache folder from here when called
        mp.setattr(constants, "HF_HUB_CACHE", str(cache))
        yield cache


def test_revision_names_say_their_step():
    assert [revision_step(n) for n in ("step0", "step143000", "stage1-step1000-tokens4B", "main", "v1", None,
                                       "stepping", "step-20")] == [0, 143000, 1000, None, None, None, None, 20]


def test_the_cached_revisions_are_those_whose_files_are_there(pythia_cache):
    names = {r.name: r for r in cached_revisions(REPO)}
    assert set(names) == {"main", "step0", "step1000", "step2000", "v1"}  # step3000's files were never fetched
    assert names["main"].commit == names["step2000"].commit and names["main"].step is None
    assert names["step1000"].folder != names["step2000"].folder and names["step2000"].step == 2000
    assert cached_revisions("fixtures/nothing-here") == []


def test_a_hub_model_s_snapshots_are_its_step_revisions_with_identical_ones_marked(pythia_cache):
    ckpt = load_any(f"hf:{REPO}")
    assert [r.name for r in hub_revisions_for(ckpt)] == ["step0", "step1000", "step2000"]
    snaps = snapshots_for(ckpt)
    assert snaps.steps == [0, 1000, 2000] and [s.label for s in snaps] == ["step0", "step1000", "step2000"]
    assert snaps.identical() == [[], [2], [1]]  # step 1000 and 2000 serve the same weights, in other files
    assert snaps[1].digest == snaps[2].digest == weights_digest(ckpt.model) != snaps[0].digest
    assert (snaps[1].path / "model.safetensors").read_bytes() != (snaps[2].path / "model.safetensors").read_bytes()
    stops = slider_stops(snaps.steps, 2000, snaps.identical(), [s.label for s in snaps])
    assert stops[2].label == "snapshot 3 of 3: step 2,000 (revision step2000) · the very same weights as step 1,000"
    assert stops[0].label == "snapshot 1 of 3: step 0 (revision step0)"
    assert load_any(f"hf:{REPO}@step1000").training["steps"] == 1000  # a step revision says its step
    assert "steps" not in ckpt.training


def test_a_digest_is_the_weights_not_the_file(pythia_cache):
    a, b = load_any(f"hf:{REPO}@step1000").model, load_any(f"hf:{REPO}@step2000").model
    assert weights_digest(a) == weights_digest(b)
    with torch.no_grad():
        b.blocks[0].attn.W_Q.weight[0, 0] += 1e-6
    assert weights_digest(a) != weights_digest(b)


def test_a_model_not_from_the_hub_has_no_revisions(tiny_checkpoint):
    assert not isinstance(tiny_checkpoint.origin, HubRef) and hub_revisions_for(tiny_checkpoint) == []


def test_the_training_panel_scrubs_the_revisions(qtbot, tmp_path, tiny_checkpoint, dialogs, pythia_cache):
    from explorer_helpers import make_window

    window = make_window(qtbot, tmp_path, tiny_checkpoint)
    assert window.files.open_checkpoint(HubRef(REPO))
    window.session.set_text("once upon a time")
    window.docks["training"].raise_()
    panel = window.panels["training"]
    qtbot.waitUntil(panel.is_shown, timeout=3000)
    qtbot.waitUntil(lambda: panel.source.view is not None and bool(panel.source.view.snapshots), timeout=10000)
    text = " ".join(panel.folder_label.text().split())
    assert text.startswith("fixtures/pythia-tiny: 3 revisions in the local Hub cache, steps 0 to 2,000")
    assert "2 of them with the very same weights as another" in text
    assert [s.step for s in panel.stops] == [0, 1000, 2000, 2000]
    assert panel.stops[-1].label == "the model you opened (step 2,000)"  # main is step2000's commit
    panel.slider.setValue(1)
    assert window.session.snapshot_step == 1000
    assert "the very same weights as step 2,000" in panel.step_label.text()
    panel.slider.setValue(0)
    assert window.session.snapshot_step == 0 and "same weights" not in panel.step_label.text()
    assert not dialogs.errors


def test_the_trace_command_follows_a_text_over_the_revisions(pythia_cache, capsys):
    import json

    from model.trace import main as trace_main

    assert trace_main([f"hf:{REPO}", "once upon a time", "--over-training", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["step"] for row in rows] == [0, 1000, 2000]
    assert rows[1]["loss_on_text"] == rows[2]["loss_on_text"] != rows[0]["loss_on_text"]  # the same weights
