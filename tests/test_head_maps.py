"""Attention maps for drawing brought up to date from the first changed row (explorer.core.head_maps):
after any edit they equal the maps made from scratch."""

import numpy as np
import pytest
import torch

from explorer.core.head_maps import HeadScores, max_pooled, mosaic_image, pool_block, pool_heads
from explorer.core.trace_chain import TraceChain
from explorer.core.views import masked_as_nan
from model import GPT, GPTConfig

CELL = 8  # thumbnails of 8 pixels: blocks of cells from T = 9 on


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    return GPT(GPTConfig(vocab_size=30, context_length=96, d_model=12, n_heads=3, n_layers=2, d_mlp=32)).eval()


def edits(seed: int, steps: int = 40):
    """Id sequences as typing makes them: mostly appends, some last-token edits, deletions at the
    end and an edit early in the text."""
    rng = np.random.default_rng(seed)
    ids = list(rng.integers(0, 30, 5))
    for _ in range(steps):
        kind = rng.choice(["append", "append", "append", "last", "delete", "early"])
        if kind == "append":
            ids += list(rng.integers(0, 30, rng.integers(1, 6)))
        elif kind == "last" and ids:
            ids[-1] = int(rng.integers(0, 30))
        elif kind == "delete" and len(ids) > 2:
            ids = ids[:-int(rng.integers(1, 3))]
        elif kind == "early" and len(ids) > 3:
            ids[int(rng.integers(0, len(ids) // 2))] = int(rng.integers(0, 30))
        yield ids[:96]


def test_pool_block_keeps_blocks_while_typing():
    assert [pool_block(t, 48) for t in (1, 48, 49, 96, 97, 512, 1024)] == [1, 1, 2, 2, 3, 12, 24]
    assert max_pooled(np.arange(16, dtype=np.float32).reshape(4, 4), 2).tolist() == [[5, 7], [13, 15]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_thumbnails_pooled_again_only_where_rows_changed_equal_those_pooled_whole(model, seed):
    chain = TraceChain()
    mosaic, serial = None, None
    for ids in edits(seed):
        trace, now = chain.trace(model, model, ids)
        unchanged = chain.rows_unchanged(serial, now) if serial is not None else 0
        mosaic, serial = pool_heads(trace, CELL, mosaic, unchanged), now
        whole = pool_heads(model.trace(ids), CELL)
        assert mosaic.block == whole.block and mosaic.side == whole.side
        np.testing.assert_allclose(mosaic_image(mosaic), mosaic_image(whole), rtol=0, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_head_scores_computed_only_for_new_rows_equal_the_whole_head(model, seed):
    chain = TraceChain()
    scores, serial = HeadScores(), None
    rng = np.random.default_rng(seed)
    for ids in edits(seed):
        trace, now = chain.trace(model, model, ids)
        layer, head = (1, 2) if rng.random() < 0.8 else (int(rng.integers(0, 2)), int(rng.integers(0, 3)))
        unchanged = chain.rows_unchanged(serial, now) if serial is not None else 0
        got, levels = scores.update(trace.blocks[layer], layer, head, unchanged)
        serial = now
        want = model.trace(ids).blocks[layer].attn_scores[head]
        np.testing.assert_allclose(masked_as_nan(got), masked_as_nan(want), rtol=0, atol=1e-5)
        m = np.abs(want[np.isfinite(want)]).max()
        assert levels == pytest.approx((-m, m), abs=1e-5)


def test_head_scores_of_a_row_with_no_finite_score_give_the_neutral_levels():
    from model.tracing.records import LayerTrace
    from model.tracing.schema import HEADS, LAYER, MASK, ROWS, SQUARE

    T = 3
    nan = np.full((1, T, 2), np.nan, np.float32)  # q, k all NaN: every score NaN
    by_kind = {ROWS: np.zeros((T, 2), np.float32), HEADS: nan, MASK: np.tril(np.ones((T, T), bool)),
               SQUARE: np.zeros((1, T, T), np.float32)}
    lt = LayerTrace({row.attr: by_kind[row.kind] for row in LAYER if not row.lazy})
    scores, levels = HeadScores().update(lt, 0, 0)
    assert np.isnan(scores[np.tril(np.ones((T, T), bool))]).all() and levels == (-1.0, 1.0)


def test_the_export_size_of_a_trace_computes_no_scores(model):
    from explorer.core.export import trace_npz_bytes

    chain = TraceChain()
    trace, _ = chain.trace(model, model, [1, 2, 3])
    trace, _ = chain.trace(model, model, [1, 2, 3, 4, 5])  # made with reuse: scores on demand
    size = trace_npz_bytes(trace)
    assert not any(lt.attn_scores_ready for lt in trace.blocks) and "probs" not in trace.__dict__
    assert size == sum(a.nbytes for _, a in trace.named())
