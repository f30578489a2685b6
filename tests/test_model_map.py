"""The Model map: its layout follows the trace schema (every recorded tensor a box, wired by what it
is computed from), each box draws the trace's own numbers, and the panel hovers, clicks and follows."""

from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from conftest import make_tiny_checkpoint
from explorer.core.model_map.boxes import BOOL, MAX_TOKENS, SIGNED, UNIT, box_image, describe_box, token_window
from explorer.core.model_map.layout import IN, PANEL_OF, map_layout, wiring
from explorer.qt.panels import panel_names
from model.tracing.schema import HEADS, Q_HEADS, ROWS, Row, TraceSchema, schema_for

IDS = [2, 5, 7, 3, 9, 4]


def _trace(ckpt, ids=IDS):
    return ckpt.model.trace(ids)


def _attrs(lane):
    return [b.row.attr for b in lane.boxes]


def test_the_map_of_a_two_layer_model_has_a_box_per_recorded_tensor(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer)
    trace = _trace(ckpt)
    layout = map_layout(trace.schema, ckpt.config, expanded=1)
    titles = [lane.title for lane in layout.lanes]
    assert titles[0].startswith("input") and titles[-1].startswith("output")
    assert [lane.collapsed for lane in layout.lanes] == [False, True, False, False, False]
    # the expanded block: every one of its recorded rows is a box, under its dotted name
    block1 = [k for k in layout.keys if k.startswith("blocks.1.")]
    assert block1 == [n for n in trace.names() if n.startswith("blocks.1.")]
    assert layout.keys[:3] == ["tok_emb", "pos_emb", "x"] and layout.keys[-3:] == ["ln_f", "logits", "probs"]
    # a collapsed block: its attention weights and its output
    assert _attrs(layout.lanes[1]) == ["attn_weights", "resid_post"]
    arrows = set(layout.arrows)
    for edge in [("x", "blocks.0.resid_post"), ("blocks.0.resid_post", "blocks.1.ln1"),
                 ("blocks.1.attn.q", "blocks.1.attn.attn_scores"), ("blocks.1.attn.k", "blocks.1.attn.attn_scores"),
                 ("blocks.1.attn.v", "blocks.1.attn.head_out"), ("blocks.0.resid_post", "blocks.1.resid_mid"),
                 ("blocks.1.resid_post", "ln_f"), ("logits", "probs")]:
        assert edge in arrows, edge
    assert ("blocks.1.attn.v", "blocks.1.attn.attn_scores") not in arrows


def test_columns_follow_the_wiring_and_q_k_v_stack(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer)
    layout = map_layout(_trace(ckpt).schema, ckpt.config, expanded=0)
    attention = layout.lanes[1]
    place = {b.row.attr: (b.column, b.slot) for b in attention.boxes}
    assert place["ln1"] == (0, 0)
    assert [place[a] for a in ("q", "k", "v")] == [(1, 0), (1, 1), (1, 2)]
    assert place["attn_scores"] == (2, 0) and place["attn_mask"] == (2, 1)  # the mask under the scores it masks
    assert place["attn_weights"][0] == 3 and place["head_out"][0] == 4 and place["attn_out"][0] == 5


def test_a_rope_model_draws_the_rotation_and_no_positional_table(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer, positional="rope", n_kv_heads=1, norm="rmsnorm", norm_bias=False,
                                mlp="swiglu")
    layout = map_layout(_trace(ckpt).schema, ckpt.config, expanded=0)
    assert "pos_emb" not in layout.keys
    assert layout.box("x").label == "x = e" and layout.box("blocks.0.ln1").label == "RMSNorm h"
    place = {b.row.attr: (b.column, b.slot) for b in layout.lanes[1].boxes}
    assert place["q_pre_rope"] == (1, 0) and place["q"] == (2, 0)  # RoPE turns q after the projection
    assert place["k_pre_rope"] == (1, 1) and place["k"] == (2, 1)
    assert ("blocks.0.attn.q_pre_rope", "blocks.0.attn.q") in layout.arrows


def _layer_rows(**config) -> tuple:
    from model import GPTConfig

    return schema_for(GPTConfig(vocab_size=16, context_length=8, d_model=16, n_heads=2, d_mlp=32, **config)).layer


def test_unknown_and_absent_rows_are_wired_through_the_chain():
    """A family's extra row is a step inserted in the chain; a missing row is wired through, or read
    as the row the model records in its place (the schema's alias)."""
    q_normed = Row("q_normed", "attn.q_normed", HEADS, Q_HEADS, "q after a per-head norm")
    layer = list(_layer_rows())
    layer.insert([r.attr for r in layer].index("q") + 1, q_normed)
    wires = wiring(tuple(layer))
    assert wires["q_normed"] == ("q",)
    assert wires["attn_scores"][0] == "q_normed"  # the scores now read the normed q
    wires = wiring(_layer_rows(block_layout="parallel"))  # GPT-NeoX: no x + attn, two norms of the input
    assert wires["ln2"] == (IN,)
    assert set(wires["resid_post"]) == {IN, "attn_out", "mlp_out"}
    wires = wiring(_layer_rows(block_layout="parallel_one_norm"))  # Phi: the MLP reads the attention's norm
    assert wires["mlp_out"] == ("ln1",) and set(wires["resid_post"]) == {IN, "attn_out", "mlp_out"}
    wires = wiring(_layer_rows(norm="rmsnorm", norm_bias=False, norm_placement="post", qk_norm="full"))  # OLMo-2
    assert wires["q_pre_norm"] == ("resid_pre",) and wires["q"] == ("q_pre_norm",)
    assert wires["resid_mid"] == (IN, "ln_attn_out") and wires["mlp_out"] == ("resid_mid",)
    assert wires["resid_post"] == ("resid_mid", "ln_mlp_out")


def test_a_schema_row_the_map_does_not_know_becomes_a_box(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer, n_layers=1)
    schema = schema_for(ckpt.config)
    extra = Row("scores_capped", "attn.scores_capped", "square", ("n_heads",), "capped scores")
    layer = list(schema.layer)
    layer.insert([r.attr for r in layer].index("attn_scores") + 1, extra)
    layout = map_layout(TraceSchema(schema.embedding, tuple(layer), schema.final), ckpt.config, 0)
    box = layout.box("blocks.0.attn.scores_capped")
    assert box is not None and box.label == "scores_capped"
    assert ("blocks.0.attn.attn_scores", "blocks.0.attn.scores_capped") in layout.arrows
    assert ("blocks.0.attn.scores_capped", "blocks.0.attn.attn_weights") in layout.arrows


def test_every_box_opens_a_registered_panel():
    assert set(PANEL_OF.values()) <= set(panel_names())
    assert "map" in panel_names()


def test_box_images_are_the_traces_numbers_one_column_per_token(tiny_tokenizer):
    ckpt = make_tiny_checkpoint(tiny_tokenizer, n_kv_heads=1)
    trace = _trace(ckpt)
    layout = map_layout(trace.schema, ckpt.config, 0)
    x = box_image(trace, layout.box("x"), 0, None)
    np.testing.assert_array_equal(x.data, trace.x.T)  # (d_model, T)
    assert x.scale == SIGNED and x.levels == (-np.abs(trace.x).max(), np.abs(trace.x).max())
    q = box_image(trace, layout.box("blocks.0.attn.q"), 1, None)
    np.testing.assert_array_equal(q.data, trace.blocks[0].q[1].T)
    k = box_image(trace, layout.box("blocks.0.attn.k"), 1, None)  # grouped: head 1 reads kv head 0
    assert k.head == 0
    np.testing.assert_array_equal(k.data, trace.blocks[0].k[0].T)
    w = box_image(trace, layout.box("blocks.0.attn.attn_weights"), 1, None)
    np.testing.assert_array_equal(w.data, trace.blocks[0].attn_weights[1])
    assert w.scale == UNIT and w.levels == (0.0, 1.0)
    s = box_image(trace, layout.box("blocks.0.attn.attn_scores"), 0, None)
    assert np.isnan(s.data[0, 1]) and np.isfinite(s.data[1, 0])  # masked cells
    assert box_image(trace, layout.box("blocks.0.attn.attn_mask"), 0, None).scale == BOOL
    p = box_image(trace, layout.box("probs"), 0, 2, names=lambda ids: [f"t{i}" for i in ids])
    top = np.argsort(-trace.probs[2])[:p.data.shape[0]]
    np.testing.assert_array_equal(p.data, trace.probs[:, top].T)
    assert p.row_names == tuple(f"t{i}" for i in top) and (np.diff(p.data[:, 2]) <= 0).all()
    text = describe_box(layout.box("blocks.0.attn.q"), ckpt.config, trace.n_tokens, q)
    assert "(n_heads, T, d_head) = (2, 6, 8)" in text and "head 1" in text


def test_beyond_32_tokens_the_window_ends_at_the_selected_token():
    assert token_window(10, None) == (0, 10)
    assert token_window(50, None) == (50 - MAX_TOKENS, 50)
    assert token_window(50, 40) == (41 - MAX_TOKENS, 41)
    assert token_window(50, 3) == (0, MAX_TOKENS)


# ---- the panel ------------------------------------------------------------------------------------------
@pytest.fixture
def map_panel(qtbot, tiny_tokenizer):
    from explorer.qt.panels.model_map.panel import ModelMapPanel
    from explorer.qt.session import Session

    session = Session(compute_mode="sync")
    session.set_checkpoint(make_tiny_checkpoint(tiny_tokenizer))
    session.set_text("the cat sat on the mat")
    panel = ModelMapPanel(session)
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_the_panel_draws_every_box_and_follows_the_text(map_panel):
    s = map_panel.session
    canvas = map_panel.canvas
    assert set(canvas.images) == set(map_panel.map.keys)
    np.testing.assert_array_equal(canvas.images["x"].data, s.trace.x.T)
    s.set_text("the dog sat")
    np.testing.assert_array_equal(canvas.images["x"].data, s.trace.x.T)
    assert canvas.images["x"].data.shape[1] == s.trace.n_tokens == 3


def test_clicking_a_box_selects_its_layer_and_asks_for_its_panel(map_panel, qtbot):
    s, canvas = map_panel.session, map_panel.canvas
    placed = canvas.geometry_()
    with qtbot.waitSignal(s.sig_panel_requested) as blocker:
        qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=placed.boxes["blocks.0.attn.q"].center().toPoint())
    assert blocker.args == ["qkv"] and s.layer == 0
    collapsed = next(lane for lane in map_panel.map.lanes if lane.collapsed)
    point = placed.boxes[collapsed.boxes[0].key].center().toPoint()
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=point)
    assert s.layer == 1 and not any(lane.collapsed and lane.layer == 1 for lane in map_panel.map.lanes)
    assert map_panel.map.box("blocks.1.attn.attn_scores") is not None


def test_hovering_a_box_says_what_it_holds(map_panel):
    canvas = map_panel.canvas
    rect = canvas.geometry_().boxes["blocks.0.attn.attn_weights"]
    canvas.sig_hovered.emit("blocks.0.attn.attn_weights", QPointF(rect.left() + 1, rect.bottom() - 1))
    text = map_panel.readout.text()
    assert "blocks.0.attn.attn_weights" in text and "(n_heads, T, T)" in text
    row, col = canvas.cell_at("blocks.0.attn.attn_weights", QPointF(rect.left() + 1, rect.bottom() - 1))
    value = map_panel.session.trace.blocks[0].attn_weights[0, row, col]
    assert f"{value:.4g}" in text


def test_a_model_with_a_grouped_rope_architecture_draws(qtbot, tiny_tokenizer):
    from explorer.qt.panels.model_map.panel import ModelMapPanel
    from explorer.qt.session import Session

    session = Session(compute_mode="sync")
    ckpt = make_tiny_checkpoint(tiny_tokenizer, positional="rope", n_kv_heads=1)
    session.set_checkpoint(replace(ckpt))
    session.set_text("the cat")
    panel = ModelMapPanel(session)
    qtbot.addWidget(panel)
    assert "blocks.0.attn.q_pre_rope" in panel.canvas.images and "pos_emb" not in panel.canvas.images


@pytest.mark.parametrize("fixture", ["hf-gpt2", "hf-gpt-neo", "hf-llama", "llama2c-v0"])
def test_every_architecture_fixture_maps_and_draws(fixture):
    from pathlib import Path

    from model.checkpoint import load_any

    folder = Path(__file__).parent / "fixtures" / "arch" / fixture
    ckpt = load_any(folder / "model.bin" if fixture.startswith("llama2c") else folder)
    ids = list(range(1, 11))
    trace = ckpt.model.trace(ids)
    layout = map_layout(trace.schema, ckpt.config, expanded=ckpt.config.n_layers - 1)
    assert set(layout.keys) <= set(trace.names())
    assert [k for k in layout.keys if k.startswith(f"blocks.{ckpt.config.n_layers - 1}.")] == \
        [n for n in trace.names() if n.startswith(f"blocks.{ckpt.config.n_layers - 1}.")]
    for key in layout.keys:
        image = box_image(trace, layout.box(key), ckpt.config.n_heads - 1, None)
        assert image.data.ndim == 2 and image.data.shape[-1] == len(ids), key


def test_a_model_without_blocks_is_drawn_as_its_chain():
    """A model whose trace has no blocks and rows the map does not know (the model before attention:
    a window's slots, a hidden layer) is drawn from its schema as one chain, its 2-D rows by slot."""
    from types import SimpleNamespace

    from model.tracing.schema import EMBEDDING, FINAL

    rows = (Row("slot_in", "fc_in.slots", ROWS, ("context_length", "d_mlp"), "each slot's part"),
            Row("pre_act", "fc_in", ROWS, ("d_mlp",), "the first layer"),
            Row("hidden", "act", ROWS, ("d_mlp",), "GELU of it"),
            Row("window_out", "fc_out", ROWS, ("d_model",), "the second layer"))
    schema = TraceSchema(EMBEDDING[:1], (), rows + FINAL)
    config = SimpleNamespace(vocab_size=12, context_length=4, d_model=8, d_mlp=6)
    layout = map_layout(schema, config, expanded=0)
    assert [lane.title.split(":")[0] for lane in layout.lanes] == ["input", "output"]
    chain = ["tok_emb", "fc_in.slots", "fc_in", "act", "fc_out", "ln_f", "logits", "probs"]
    assert layout.keys == chain and set(layout.arrows) == set(zip(chain, chain[1:]))
    rng = np.random.default_rng(0)
    arrays = {"tok_emb": rng.normal(size=(3, 8)), "fc_in.slots": rng.normal(size=(3, 4, 6))}
    trace = type("T", (), {"n_tokens": 3, "__getitem__": lambda self, k: arrays[k]})()
    slots = box_image(trace, layout.box("fc_in.slots"), 0, 1)
    np.testing.assert_allclose(slots.data, arrays["fc_in.slots"][1].T)  # (d_mlp, context_length) of token 1
    assert "one column per context_length" in describe_box(layout.box("fc_in.slots"), config, 3, slots)
