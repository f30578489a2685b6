"""The book's worked example (Raschka, *Build a Large Language Model (From Scratch)*, chapter 3),
checked number for number against the chapter's notebook, and its ``python -m explorer.book`` command.

NOTEBOOK holds every tensor the notebook prints, copied as data from its stored outputs
(rasbt/LLMs-from-scratch, ``ch03/01_main-chapter-code/ch03.ipynb`` at commit 28c65cd, printed there
with torch 2.4.0); each is compared with ours at the printed precision: the same four-decimal text.
Here torch is 2.13 (CPU): every value matches, the dropout masks of section 3.5.2 included.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from explorer import book as book_cli
from explorer.core.lessons import book_views
from explorer.core.lessons.book import DROPOUT_P, TOKENS, chapter3
from explorer.core.lessons.variants import KEYS

INF = float("inf")


def _twice(rows):
    """The notebook prints the batch of two copies of the input: both rows of output alike."""
    return [rows, rows]


NOTEBOOK = {
    # 3.3.1: the inputs are written in the chapter's code, not printed
    "inputs": [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
               [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]],
    # 3.3.1
    "attn_scores_2": [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    "attn_weights_2_tmp": [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656],
    "attn_weights_2_naive": [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    "attn_weights_2": [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    "context_vec_2": [0.4419, 0.6515, 0.5683],
    # 3.3.2
    "attn_scores": [
        [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]],
    "attn_weights": [
        [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]],
    "all_context_vecs": [
        [0.4421, 0.5931, 0.5790],
        [0.4419, 0.6515, 0.5683],
        [0.4431, 0.6496, 0.5671],
        [0.4304, 0.6298, 0.5510],
        [0.4671, 0.5910, 0.5266],
        [0.4177, 0.6503, 0.5645]],
    # 3.4.1
    "query_2": [0.4306, 1.4551],
    "attn_score_22": 1.8524,
    "trainable_attn_scores_2": [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],
    "trainable_attn_weights_2": [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820],
    "trainable_context_vec_2": [0.3061, 0.8210],
    # 3.4.2
    "sa_v1": [
        [0.2996, 0.8053],
        [0.3061, 0.8210],
        [0.3058, 0.8203],
        [0.2948, 0.7939],
        [0.2927, 0.7891],
        [0.2990, 0.8040]],
    "sa_v2": [
        [-0.0739, 0.0713],
        [-0.0748, 0.0703],
        [-0.0749, 0.0702],
        [-0.0760, 0.0685],
        [-0.0763, 0.0679],
        [-0.0754, 0.0693]],
    # 3.5.1
    "sa_v2_attn_weights": [
        [0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],
        [0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477],
        [0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480],
        [0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564],
        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],
    "mask_simple": [
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]],
    "masked_simple": [
        [0.1921, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.2041, 0.1659, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.2036, 0.1659, 0.1662, 0.0000, 0.0000, 0.0000],
        [0.1869, 0.1667, 0.1668, 0.1571, 0.0000, 0.0000],
        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],
    "masked_simple_norm": [
        [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],
    "masked": [
        [0.2899, -INF, -INF, -INF, -INF, -INF],
        [0.4656, 0.1723, -INF, -INF, -INF, -INF],
        [0.4594, 0.1703, 0.1731, -INF, -INF, -INF],
        [0.2642, 0.1024, 0.1036, 0.0186, -INF, -INF],
        [0.2183, 0.0874, 0.0882, 0.0177, 0.0786, -INF],
        [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]],
    "causal_attn_weights": [
        [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],
    # 3.5.2
    "dropout_example": [
        [2.0, 2.0, 0.0, 2.0, 2.0, 0.0],
        [0.0, 0.0, 0.0, 2.0, 0.0, 2.0],
        [2.0, 2.0, 2.0, 2.0, 0.0, 2.0],
        [0.0, 2.0, 2.0, 0.0, 0.0, 2.0],
        [0.0, 2.0, 0.0, 2.0, 0.0, 2.0],
        [0.0, 2.0, 2.0, 2.0, 2.0, 0.0]],
    "dropout_attn_weights": [
        [2.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.7599, 0.6194, 0.6206, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.4921, 0.4925, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.3966, 0.0000, 0.3775, 0.0000, 0.0000],
        [0.0000, 0.3327, 0.3331, 0.3084, 0.3331, 0.0000]],
    # 3.5.3
    "causal_context_vecs": _twice([
        [-0.4519, 0.2216],
        [-0.5874, 0.0058],
        [-0.6300, -0.0632],
        [-0.5675, -0.0843],
        [-0.5526, -0.0981],
        [-0.5299, -0.1081]]),
    # 3.6.1
    "mha_wrapper": _twice([
        [-0.4519, 0.2216, 0.4772, 0.1063],
        [-0.5874, 0.0058, 0.5891, 0.3257],
        [-0.6300, -0.0632, 0.6202, 0.3860],
        [-0.5675, -0.0843, 0.5478, 0.3589],
        [-0.5526, -0.0981, 0.5321, 0.3428],
        [-0.5299, -0.1081, 0.5077, 0.3493]]),
    # 3.6.2
    "mha": _twice([
        [0.3190, 0.4858],
        [0.2943, 0.3897],
        [0.2856, 0.3593],
        [0.2693, 0.3873],
        [0.2639, 0.3928],
        [0.2575, 0.4028]]),
}
#: Printed only as a shape.
NOTEBOOK_SHAPES = {"batch": (2, 6, 3), "keys": (6, 2), "values": (6, 2)}


def four_decimals(values) -> list[str]:
    """The text torch prints for each value at its default precision (``-inf`` as is)."""
    return [f"{float(v):.4f}" for v in np.ravel(values)]


@pytest.mark.parametrize("key", NOTEBOOK)
def test_every_printed_tensor_is_as_printed(key):
    ours = chapter3()[key]
    expected = np.asarray(NOTEBOOK[key], dtype=np.float64)
    assert ours.shape == expected.shape
    assert four_decimals(ours) == four_decimals(expected)


def test_every_tensor_the_chapter_prints_is_checked():
    ex = chapter3()
    assert {k for k, t in ex.tensors.items() if t.printed} == set(NOTEBOOK)
    for key, shape in NOTEBOOK_SHAPES.items():
        assert ex[key].shape == shape
    issue_names = {"attn_scores_2", "attn_weights_2", "context_vec_2", "attn_scores", "attn_weights",
                   "all_context_vecs", "W_query", "W_key", "W_value", "sa_v1", "sa_v2", "masked_simple_norm",
                   "dropout_example", "causal_context_vecs", "mha_wrapper", "mha"}
    assert issue_names <= set(ex.tensors)


def test_the_chapters_own_claims_hold():
    ex = chapter3()
    assert np.array_equal(ex["sa_v1"][1], ex["trainable_context_vec_2"])  # 3.4.2: same seed, same weights
    np.testing.assert_allclose(ex["masked_simple_norm"], ex["causal_attn_weights"], atol=1e-7)  # the −∞ trick
    assert np.array_equal(ex["mha_wrapper"][..., :2], ex["causal_context_vecs"])  # head 0 is 3.5.3's
    kept = ex["dropout_example"] != 0
    assert set(np.unique(ex["dropout_example"])) == {0.0, 2.0}  # survivors scaled by 1 / (1 - 0.5)
    assert np.array_equal(ex["dropout_attn_weights"], np.where(kept, 2 * ex["causal_attn_weights"], 0))


def test_tensors_are_float32_read_only_and_the_global_rng_is_untouched():
    chapter3.cache_clear()
    torch.manual_seed(5)
    state = torch.get_rng_state()
    ex = chapter3()
    assert torch.equal(torch.get_rng_state(), state)
    assert all(t.value.dtype == np.float32 and not t.value.flags.writeable for t in ex.tensors.values())


def test_another_query_is_a_row_of_the_all_queries_matrices():
    ex = chapter3(query=4)
    assert "attn_scores_5" in ex.tensors and "attn_scores_2" not in ex.tensors
    np.testing.assert_allclose(ex["attn_scores_5"], ex["attn_scores"][4], atol=1e-6)
    np.testing.assert_allclose(ex["trainable_context_vec_5"], ex["sa_v1"][4], atol=1e-6)
    assert ex["attn_score_55"] == pytest.approx(float(ex["trainable_attn_scores"][4, 4]), abs=1e-6)
    with pytest.raises(ValueError, match="outside the 6 tokens"):
        chapter3(query=6)


def test_dropout_switch_drops_and_doubles_the_classes_weights():
    plain, dropped = chapter3(dropout=False), chapter3(dropout=True)
    for key in ("causal_attn_weights_batch", "mha_wrapper_attn_weights", "mha_attn_weights"):
        w, w0 = dropped[key], plain[key]
        assert np.all((w == 0) | np.isclose(w, w0 / (1 - DROPOUT_P), rtol=1e-6)), key
        assert 0 < np.count_nonzero(w) < np.count_nonzero(w0), key
    assert not np.allclose(dropped["causal_context_vecs"], plain["causal_context_vecs"])
    for key in NOTEBOOK:  # the printed example of 3.5.2 and everything before 3.5.3 do not change
        if plain.tensors[key].section < "3.5.3":
            assert np.array_equal(dropped[key], plain[key]), key


# --- the four variants as the panel shows them -------------------------------------------------

def test_book_variants_show_the_chapters_numbers_for_the_selected_query():
    out = book_views.book_variants()
    assert tuple(v.key for v in out) == KEYS
    simple = out[0]
    assert "attn_scores_2 = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" in simple.line
    assert "context_vec_2 = [0.4419, 0.6515, 0.5683]" in simple.line and "3.3.1" in simple.line
    card = next(c for c in simple.cards if c.key == "attn_scores")
    assert card.query_row == 1 and card.row_labels[1] == "journey x⁽²⁾" and card.col_labels == TOKENS
    assert card.tooltip(1, 2) == f"attn_scores[1, 2] = {float(chapter3()['attn_scores'][1, 2])!r}  (3.3.2)"
    vector = next(c for c in simple.cards if c.key == "attn_scores_2")
    assert vector.value.shape == (1, 6) and vector.cell_name(0, 3) == "attn_scores_2[3]"
    for v, section in zip(out, ("3.3", "3.4", "3.5", "3.6")):
        assert f"ch. {section}" in v.title and v.cards


def test_book_variants_dropout_cards_only_with_the_switch():
    causal = book_views.book_variants(1, False)[2]
    assert "dropout_attn_weights" not in {c.key for c in causal.cards}
    causal = book_views.book_variants(1, True)[2]
    card = next(c for c in causal.cards if c.key == "dropout_attn_weights")
    assert four_decimals(card.value[2]) == four_decimals(NOTEBOOK["dropout_attn_weights"][2])
    batch = next(c for c in causal.cards if c.key == "causal_context_vecs")
    assert batch.part == (0,) and batch.cell_name(5, 1) == "context_vecs[0, 5, 1]"
    assert "batch[1] differs" in causal.line
    first = book_views.book_variants(0, False)
    assert "Query x⁽¹⁾ “Your”" in first[0].line and first[0].cards[1].key == "attn_scores_1"


# --- python -m explorer.book -------------------------------------------------------------------

def test_cli_json_has_every_named_tensor_as_nested_lists(capsys):
    assert book_cli.main(["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == list(TOKENS) and out["query"] == 1 and out["dropout"] is False
    tensors = out["tensors"]
    assert set(tensors) == set(chapter3().tensors) and set(out["printed"]) == set(NOTEBOOK)
    assert four_decimals(tensors["mha"]) == four_decimals(NOTEBOOK["mha"])
    assert tensors["masked"][0][1] is None and tensors["masked"][5][5] == pytest.approx(0.0078, abs=5e-5)
    assert out["sections"]["mha_wrapper"] == "3.6.1"


def test_cli_text_and_options(capsys):
    assert book_cli.main(["--query", "1", "--dropout"]) == 0
    text = capsys.readouterr().out
    assert "== 3.3.1 A simple self-attention mechanism" in text and "attn_scores_1 = " in text
    assert "CausalAttention(d_in, d_out, 6, 0.5)" in text
    with pytest.raises(SystemExit) as exit_:
        book_cli.main(["--query", "7"])
    assert exit_.value.code == 2
