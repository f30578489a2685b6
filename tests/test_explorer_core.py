"""Qt-free explorer logic: views, next-token maths, exports, layering (no display needed)."""

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest

from explorer.core import views
from explorer.core.export import CSV_HEADER, write_attention_csv, write_trace_npz
from explorer.core.nexttoken import apply_temperature, entropy_bits, top_k

ROOT = Path(__file__).resolve().parents[1]


def test_symmetric_levels_never_zero_width():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert views.symmetric_levels(np.array([-3.0, 2.0])) == (-3.0, 3.0)
        assert views.symmetric_levels(np.zeros((4, 4))) == (-1e-6, 1e-6)
        assert views.symmetric_levels(np.zeros((0, 5))) == (-1.0, 1.0)
        assert views.symmetric_levels(np.array([-np.inf, np.nan, 0.5])) == (-0.5, 0.5)
        assert views.symmetric_levels(np.full((3, 3), 7.0), np.array([-9.0])) == (-9.0, 9.0)


def test_masked_as_nan_marks_minus_inf():
    s = np.array([[1.0, -np.inf], [0.5, 0.25]], dtype=np.float32)
    out = views.masked_as_nan(s)
    assert np.isnan(out[0, 1]) and out[0, 0] == 1.0 and out[1, 1] == 0.25
    assert s[0, 1] == -np.inf  # the input is not changed


def test_token_chips_and_crop_note(tiny_tokenizer):
    text = "the cat zebra sat 🙂"
    enc = tiny_tokenizer.encode(text)
    chips = views.token_chips(text, enc, context_length=3, unk_id=tiny_tokenizer.unk_id)
    assert [c.token for c in chips] == ["the", "cat", "<unk>", "sat", "<unk>"]
    assert [c.position for c in chips] == [None, None, 0, 1, 2]
    assert chips[2].is_unk and chips[2].original == "zebra" and chips[4].original == "🙂"
    assert chips[0].dropped and not chips[3].dropped
    assert views.crop_note(42, 32) == "showing the last 32 of 42 tokens"
    assert views.crop_note(32, 32) == ""


def test_token_label_shows_whitespace_and_cuts_long_tokens():
    assert views.token_label(" a\n") == "␣a↵"
    assert views.token_label("") == "∅"
    assert views.token_label("x" * 30, 12) == "x" * 11 + "…"
    assert views.axis_labels(["the", "cat"]) == ["0 the", "1 cat"]


def test_trace_views_are_the_trace_arrays(tiny_checkpoint, tiny_tokenizer):
    ids = tiny_tokenizer.encode("the cat sat on the mat").ids
    tr = tiny_checkpoint.model.trace(ids)
    emb = views.embedding_views(tr)
    assert emb["e"] is tr.tok and emb["p"] is tr.pos and emb["x"] is tr.x
    qkv = views.qkv_views(tr, 1, 1)
    np.testing.assert_array_equal(qkv["k"], tr.blocks[1].k[1])
    att = views.attention_views(tr, 0, 1)
    np.testing.assert_array_equal(att["weights"], tr.blocks[0].attn_weights[1])
    upper = np.triu_indices(len(ids), 1)
    assert np.isnan(att["scores"][upper]).all()
    lower = np.tril_indices(len(ids))
    np.testing.assert_array_equal(att["scores"][lower], tr.blocks[0].attn_scores[1][lower])


def test_embedding_levels_fixed_from_tables():
    tok = np.array([[0.5, -2.0]])
    pos = np.array([[1.0, 0.25]])
    lv = views.embedding_levels(tok, pos)
    assert lv == {"e": (-2.0, 2.0), "p": (-1.0, 1.0), "x": (-3.0, 3.0)}
    assert views.embedding_levels(tok, None)["x"] == (-2.0, 2.0)


def test_temperature_softmax_greedy_and_errors():
    logits = np.array([1.0, 3.0, 2.0, 3.0])
    p1 = apply_temperature(logits, 1.0)
    e = np.exp(logits - logits.max())
    np.testing.assert_allclose(p1, e / e.sum())
    np.testing.assert_array_equal(apply_temperature(logits, 0), [0, 1, 0, 0])  # first argmax
    hot = apply_temperature(logits, 100.0)
    assert hot.max() - hot.min() < 0.01
    with pytest.raises(ValueError, match=r"0 \(greedy\) or more"):
        apply_temperature(logits, -0.1)
    big = apply_temperature(np.array([1000.0, 0.0]), 0.01)  # no overflow
    assert np.isfinite(big).all() and big[0] == 1.0


def test_top_k_clamps_and_orders():
    logits = np.log(np.array([0.1, 0.6, 0.3]))
    t = top_k(logits, 2)
    assert t.ids.tolist() == [1, 2]
    np.testing.assert_allclose(t.probs, [0.6, 0.3])
    assert top_k(logits, 99).ids.tolist() == [1, 2, 0]
    assert top_k(logits, 0).ids.tolist() == [1]
    np.testing.assert_allclose(t.entropy, -(0.1 * np.log2(0.1) + 0.6 * np.log2(0.6) + 0.3 * np.log2(0.3)))
    assert top_k(logits, 3, temperature=0).entropy == 0.0


def test_entropy_bits():
    assert entropy_bits(np.full(8, 1 / 8)) == pytest.approx(3.0)
    assert f"{entropy_bits(np.array([1.0, 0.0])):.3f}" == "0.000"  # not "-0.000"
    assert entropy_bits(np.array([])) == 0.0


def test_exports_load_back(tmp_path, tiny_checkpoint, tiny_tokenizer):
    enc = tiny_tokenizer.encode("the dog sat")
    tr = tiny_checkpoint.model.trace(enc.ids)
    npz = tmp_path / "t.npz"
    write_trace_npz(npz, tr, enc.tokens)
    with np.load(npz) as f:
        assert set(tr.names()) <= set(f.files)
        np.testing.assert_array_equal(f["blocks.1.attn.attn_weights"], tr["blocks.1.attn.attn_weights"])
        assert f["tokens"].tolist() == ["the", "dog", "sat"]
    out = tmp_path / "w.csv"
    write_attention_csv(out, tr, enc.tokens)
    rows = list(csv.reader(out.open(encoding="utf-8")))
    assert tuple(rows[0]) == CSV_HEADER
    assert len(rows) == 1 + 2 * 2 * 3 * 3  # layers * heads * T * T
    row = next(r for r in rows[1:] if r[:3] == ["1", "0", "2"] and r[4] == "1")
    assert row[3] == "sat" and row[5] == "dog"
    assert float(row[6]) == pytest.approx(float(tr.blocks[1].attn_weights[0, 2, 1]), rel=1e-6)


def test_max_pooled_keeps_small_maps_and_takes_block_maxima():
    from explorer.core.head_maps import max_pooled

    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(max_pooled(w, 4), w)
    np.testing.assert_array_equal(max_pooled(w, 2), [[5, 7], [13, 15]])
    assert max_pooled(np.zeros((1024, 1024)), 48).shape == (43, 43)  # blocks of 24 x 24 cells


def test_head_mosaic_tiles_layers_down_and_heads_across(tiny_checkpoint):
    from explorer.core.head_maps import head_mosaic

    tr = tiny_checkpoint.model.trace([3, 4, 5])
    m = head_mosaic(tr, cell=48, gap=2)
    assert m.shape == (2 * 5 - 2, 2 * 5 - 2)
    np.testing.assert_array_equal(m[5:8, 0:3], tr.blocks[1].attn_weights[0])
    np.testing.assert_array_equal(m[0:3, 5:8], tr.blocks[0].attn_weights[1])
    assert np.isnan(m[3:5]).all() and np.isnan(m[:, 3:5]).all()


def test_thinned_ticks_always_label_the_first_and_last_rows():
    from explorer.qt.plots.heatmap import thinned_ticks

    def shown(n, step):
        return [int(pos) for pos, _ in thinned_ticks([str(i) for i in range(n)], step)[0]]

    assert shown(5, 1) == [0, 1, 2, 3, 4]
    assert shown(10, 3) == [0, 3, 6, 9]
    assert shown(11, 3) == [0, 3, 6, 10]  # 9 would crowd the newest token
    assert shown(2, 3) == [0, 1] and shown(1, 4) == [0] and shown(0, 2) == []
    assert thinned_ticks(None, 2) is None


def test_top_k_at_temperature_zero_keeps_the_model_ranking():
    from explorer.core.nexttoken import top_k

    logits = np.array([0.5, 3.0, -1.0, 2.0, 2.5, 0.0])
    greedy = top_k(logits, 4, 0.0)
    assert greedy.ids.tolist() == [1, 4, 3, 0]  # by logit, not by id among the zero probabilities
    assert greedy.probs.tolist() == [1.0, 0.0, 0.0, 0.0] and greedy.entropy == 0.0
    assert top_k(logits, 4, 1.0).ids.tolist() == [1, 4, 3, 0]
    assert top_k(np.array([1.0, 1.0, 1.0]), 2, 1.0).ids.tolist() == [0, 1]  # ties by id
    assert top_k(logits, 99, 1.0).ids.tolist() == [1, 4, 3, 0, 5, 2]  # clamped to the vocabulary


def test_model_facts_numbers_for_people():
    from explorer.core.model_facts import fmt_curve, fmt_number, fmt_seconds, fmt_value

    assert fmt_number(5196.533897749445) == "5,197" and fmt_number(4.257756424316197) == "4.258"
    assert fmt_number(962009) == "962,009" and fmt_number(0.0006) == "0.0006" and fmt_number(1.0) == "1"
    assert fmt_seconds(1119.1815885639999) == "18.7 min" and fmt_seconds(42.0) == "42 s"
    assert fmt_seconds(3 * 3600) == "3.0 h"
    assert fmt_value("val_loss", 3.045073038665455) == "3.045 nats/token (perplexity 21.0)"
    assert fmt_value("tokens_per_s", 5196.533897749445) == "5,197 tokens/s"
    assert fmt_value("val_unk_share", 0.011106938123703003) == "1.11 %"
    assert fmt_value("corpus", [{"path": "a/train.txt", "sha256": "30c6f2fac206d82e76b8"}]) == \
        "a/train.txt (sha256 30c6f2fac206…)"
    curve = [[s, 8.0 - s / 1000] for s in range(0, 2001, 100)]  # 21 points, thinned to 8 (ends kept)
    text = fmt_curve(curve)
    assert text.startswith("0: 8.000 · ") and text.endswith("2,000: 6.000  (nats/token)") and text.count("·") == 7


def test_model_facts_resumed_run_has_totals_and_phases():
    from explorer.core.model_facts import describe_training

    first = {"steps": 1200, "steps_this_run": 1200, "epochs": 2.554653854589718, "val_loss": 3.1288857717341374,
             "train_s": 900.24, "lr": 0.002, "train_tokens": 962009}
    second = {"steps": 2000, "steps_this_run": 800, "epochs": 1.7031025697264786, "val_loss": 3.045073038665455,
              "train_s": 376.28, "lr": 0.0006, "train_tokens": 962009, "resumed_training": first,
              "val_curve": [[400, 3.5421], [2000, 3.04507]]}
    sections = describe_training(second)
    titles = [t for t, _ in sections]
    assert titles == ["Training (2 phases)", "Phase 2 (latest), steps 1,201–2,000", "Phase 1, steps 1–1,200"]
    summary, latest, earlier = (dict(rows) for _, rows in sections)
    assert summary["steps"] == "2,000 in 2 phases"
    assert summary["epochs"] == "4.258 in 2 phases (2.555 + 1.703) of the training corpus"
    assert summary["val loss curve"] == "400: 3.542 · 2,000: 3.045  (nats/token)"
    assert "resumed_training" not in summary and "lr" not in summary
    assert latest["steps (this phase)"] == "800" and latest["epochs (this phase)"] == "1.703"
    assert latest["training time"] == "6.3 min" and latest["lr"] == "0.0006"
    assert earlier["training time"] == "15.0 min" and earlier["val loss at its end"].startswith("3.129 nats/token")
    # a single run: one section, no duplicated step count
    single = describe_training(first)
    assert [t for t, _ in single] == ["Training"]
    assert dict(single[0][1])["epochs"] == "2.555 of the training corpus"
    assert [k for k, _ in single[0][1]].count("steps") == 1
    assert describe_training({}) == []
    # phases over different corpora: epochs are not summed, each phase keeps its own
    other = dict(second, resumed_training=dict(first, train_tokens=5))
    assert "epochs" not in dict(describe_training(other)[0][1])
