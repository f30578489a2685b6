"""Prefix reuse (GPT.trace(..., reuse=)): equal to a full trace, computes only the changed rows,
shares its buffers without ever changing what an older trace shows."""

import threading

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TINY_SENTENCES, PositionCounter
from model import GPT, GPTConfig
from model.formats.vocab import SHIPPED_GPT2_DIR, char_tokenizer, gpt2_tokenizer
from model.tokens.tokenizer import train_word_tokenizer

ALPHABET = "abcdeilnostry .,"
BASE = dict(context_length=10, d_model=16, n_heads=4, n_layers=2, d_mlp=32)
FAMILIES = {
    "learned": {},
    "rope-halves": dict(positional="rope", rope_pairs="halves", norm="rmsnorm", norm_bias=False, mlp="swiglu"),
    "rope-interleaved": dict(positional="rope", rope_pairs="interleaved", tied_unembed=False),
    "gqa": dict(positional="rope", n_kv_heads=2, qkv_bias=True),
    "windows": dict(attn_windows=(3, 0), scale_scores=False),
    "none": dict(positional="none"),
}
#: The 2025-26 families' features (GPT-NeoX, Phi, Qwen3, Gemma 2 and 3, OLMo-2, SmolLM3), each on a tiny model.
NEW_FAMILIES = {
    "neox": dict(positional="rope", block_layout="parallel", rotary_dims=2, tied_unembed=False),
    "phi": dict(positional="rope", block_layout="parallel_one_norm", rotary_dims=2, tied_unembed=False,
                unembed_bias=True, gelu="tanh"),
    "qwen3": dict(positional="rope", norm="rmsnorm", norm_bias=False, mlp="swiglu", qk_norm="head", d_head=8,
                  n_kv_heads=2, qkv_bias=True, o_bias=False),
    "gemma2": dict(positional="rope", norm="rmsnorm", norm_bias=False, norm_unit_offset=True, mlp="geglu",
                   gelu="tanh", norm_placement="sandwich", embed_scale=4.0, score_scale=0.3, attn_softcap=2.0,
                   final_softcap=3.0, attn_windows=(3, 0)),
    "gemma3": dict(positional="rope", norm="rmsnorm", norm_bias=False, norm_unit_offset=True, mlp="geglu",
                   norm_placement="sandwich", embed_scale=4.0, qk_norm="head", rope_thetas=(100.0, 10000.0),
                   attn_windows=(3, 0), final_softcap=3.0),
    "olmo2": dict(positional="rope", norm="rmsnorm", norm_bias=False, norm_placement="post", qk_norm="full",
                  n_kv_heads=2),
    "smollm3": dict(positional="rope", norm="rmsnorm", norm_bias=False, mlp="swiglu", nope_layers=(1,)),
}
FAMILIES.update(NEW_FAMILIES)


TOKENIZERS = {
    "word": train_word_tokenizer(TINY_SENTENCES, vocab_size=64),
    "char": char_tokenizer(sorted(set(ALPHABET))),
    "gpt2": gpt2_tokenizer(SHIPPED_GPT2_DIR),  # GPT-2's byte-level BPE, shipped in assets/
}
_MODELS: dict = {}


def tiny_model(family: str, vocab_size: int, **overrides) -> GPT:
    key = (family, vocab_size, tuple(sorted(overrides.items())))
    if key not in _MODELS:
        torch.manual_seed(7)
        _MODELS[key] = GPT(GPTConfig(vocab_size=vocab_size, **{**BASE, **FAMILIES[family], **overrides})).eval()
    return _MODELS[key]


def assert_same_trace(got, want):
    """Every tensor of ``got`` equals ``want``'s: logits 1e-5, attention weights 1e-6."""
    assert got.token_ids.tolist() == want.token_ids.tolist() and got.dropped == want.dropped
    assert (got.positional_encoding, got.causal) == (want.positional_encoding, want.causal)
    np.testing.assert_allclose(got.logits, want.logits, rtol=0, atol=1e-5)
    for a, b in zip(got.blocks, want.blocks):
        np.testing.assert_allclose(a.attn_weights, b.attn_weights, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(np.isneginf(a.attn_scores), np.isneginf(b.attn_scores))
    for (name, x), (other, y) in zip(got.named(), want.named()):
        assert name == other and x.shape == y.shape and x.dtype == y.dtype, name
        finite = np.isfinite(y)
        np.testing.assert_array_equal(finite, np.isfinite(x), err_msg=name)
        np.testing.assert_allclose(x[finite], y[finite], rtol=1e-5, atol=1e-5, err_msg=name)


def apply_edit(text: str, edit) -> str:
    kind, n, s = edit
    if kind == "type":
        return text + s
    if kind == "replace_end":
        return text[:max(0, len(text) - n)] + s
    if kind == "delete_end":
        return text[:max(0, len(text) - n)]
    at = min(n, len(text))  # an edit earlier in the text
    return text[:at] + s + text[at + 1:]


EDITS = st.tuples(st.sampled_from(["type", "type", "replace_end", "delete_end", "edit_at"]),
                  st.integers(0, 12), st.text(ALPHABET, min_size=0, max_size=6))
OPTIONS = st.tuples(st.booleans(), st.booleans())  # (positional_encoding, causal)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(FAMILIES)), tok_name=st.sampled_from(sorted(TOKENIZERS)),
       steps=st.lists(st.tuples(EDITS, st.one_of(st.just(None), OPTIONS)), min_size=1, max_size=14))
def test_reuse_equals_a_full_trace_over_random_edits(family, tok_name, steps):
    check_random_edits(family, tok_name, steps)


def check_random_edits(family, tok_name, steps):
    """Trace after each edit with the trace before as ``reuse``: equal to a full trace, reusing the common rows."""
    tok = TOKENIZERS[tok_name]
    model = tiny_model(family, tok.vocab_size)
    text, pe, causal = "", True, True
    prev = model.trace([], reuse=model.trace([]))
    for edit, options in steps:
        text = apply_edit(text, edit)
        if options is not None:
            pe, causal = options
        ids = list(tok.encode(text).ids)
        got = model.trace(ids, positional_encoding=pe, causal=causal, reuse=prev)
        assert_same_trace(got, model.trace(ids, positional_encoding=pe, causal=causal))
        fits = prev.causal == causal and prev.positional_encoding == got.positional_encoding
        common = _common(prev.token_ids, got.token_ids) if fits else 0
        same_ids = common == got.n_tokens == prev.n_tokens  # the same trace, with the mask or without
        assert got.reused_rows == (common if causal or same_ids else 0)
        prev = got


@pytest.mark.parametrize("family", sorted(NEW_FAMILIES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(EDITS, st.one_of(st.just(None), OPTIONS)), min_size=1, max_size=10))
def test_reuse_is_exact_for_each_new_family(family, steps):
    """Prefix reuse stays a full trace for every feature of the new families (QK-norm, partial rotary,
    parallel blocks, post-norms, soft caps, per-layer RoPE bases, NoPE layers)."""
    check_random_edits(family, "char", steps)


def _common(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_append_computes_only_the_new_rows(family):
    model = tiny_model(family, 40, context_length=32)
    counter = PositionCounter(model)
    try:
        tr = model.trace([3, 1, 4, 1, 5], reuse=model.trace([]))
        assert counter.take() == 5 and tr.reused_rows == 0
        tr = model.trace([3, 1, 4, 1, 5, 9, 2], reuse=tr)  # typing at the end
        assert counter.take() == 2 and tr.reused_rows == 5
        tr = model.trace([3, 1, 4, 1, 5, 9, 7], reuse=tr)  # the last word edited
        assert counter.take() == 1 and tr.reused_rows == 6
        tr = model.trace([3, 1, 4, 1], reuse=tr)  # deleting at the end: nothing to run
        assert counter.take() == 0 and tr.reused_rows == 4
        tr = model.trace([3, 8, 4, 1], reuse=tr)  # an edit earlier: from the first change on
        assert counter.take() == 3 and tr.reused_rows == 1
        tr = model.trace([3, 8, 4, 1], causal=False, reuse=tr)  # bidirectional: every row
        assert counter.take() == 4 and tr.reused_rows == 0
    finally:
        counter.handle.remove()


def test_a_sliding_window_recomputes_everything():
    model = tiny_model("rope-halves", 40)  # context 10
    counter = PositionCounter(model)
    try:
        ids = list(range(1, 11))
        tr = model.trace(ids, reuse=model.trace([]))
        counter.take()
        tr = model.trace(ids + [11], reuse=tr)  # 11 ids: every position moves by one
        assert tr.dropped == 1 and tr.reused_rows == 0 and counter.take() == 10
        assert_same_trace(tr, model.trace(ids + [11]))
    finally:
        counter.handle.remove()


def test_changed_weights_or_another_model_are_not_reused():
    model = tiny_model("learned", 40, n_layers=1)
    first = model.trace([1, 2, 3], reuse=model.trace([]))
    with torch.no_grad():
        model.blocks[0].mlp.fc_in.weight.mul_(1.5)  # in place: the version counter moves
    try:
        tr = model.trace([1, 2, 3, 4], reuse=first)
        assert tr.reused_rows == 0
        assert_same_trace(tr, model.trace([1, 2, 3, 4]))
    finally:
        with torch.no_grad():
            model.blocks[0].mlp.fc_in.weight.div_(1.5)
    other = tiny_model("learned", 40, n_layers=1, d_mlp=16)
    tr = other.trace([1, 2, 3, 4], reuse=first)
    assert tr.reused_rows == 0
    assert_same_trace(tr, other.trace([1, 2, 3, 4]))
    with pytest.raises(TypeError, match="reuse must be a Trace"):
        model.trace([1], reuse=[1, 2])  # type: ignore[arg-type]


def test_older_traces_and_their_arrays_never_change():
    model = tiny_model("gqa", 40, context_length=24)
    rng = np.random.default_rng(3)
    ids = [int(i) for i in rng.integers(40, size=6)]
    prev = model.trace(ids, reuse=model.trace([]))
    kept = []
    for step in range(150):
        r = rng.random()
        if r < 0.4:
            ids = ids + [int(rng.integers(40))]
        elif r < 0.8 and ids:
            ids = ids[:-1] + [int(rng.integers(40))]
        else:
            ids = ids[:max(0, len(ids) - int(rng.integers(1, 4)))]
        tr = model.trace(ids, reuse=prev)
        if step % 9 == 0:  # a reader that keeps the whole trace
            kept.append((tr, {name: a.copy() for name, a in tr.named()}))
        if step % 7 == 0:  # a reader that keeps one array (a view of the shared buffer)
            a = tr.blocks[1].attn_weights[1] if tr.n_tokens else tr.logits
            kept.append((a, a.copy()))
        prev = tr
    for obj, snapshot in kept:
        if isinstance(obj, np.ndarray):
            np.testing.assert_array_equal(obj, snapshot)
        else:
            for name, a in obj.named():
                np.testing.assert_array_equal(a, snapshot[name], err_msg=name)
    with pytest.raises(ValueError):
        prev.blocks[0].attn_weights[0, 0, 0] = 2.0


def test_typing_alternates_between_two_buffers():
    model = tiny_model("learned", 40, context_length=64)
    ids = [1, 2, 3]
    tr = model.trace(ids, reuse=model.trace([]))
    stores = set()
    for i in range(40):  # each keystroke edits the last token, or starts a new one
        ids = ids + [5] if i % 4 == 0 else ids[:-1] + [i % 40]
        tr = model.trace(ids, reuse=tr)
        stores.add(id(tr._reuse.store))
    assert len(stores) <= 2
    assert len(tr._reuse.lineage.stores) <= 3


def test_scores_computed_on_demand_are_the_model_scores():
    model = tiny_model("windows", 40, context_length=16)
    ids = [4, 9, 1, 7, 7, 3, 2, 8]
    full = model.trace(ids)
    tr = model.trace(ids, reuse=model.trace(ids[:5], reuse=model.trace([])))
    assert tr.reused_rows == 5
    for got, want in zip(tr.blocks, full.blocks):
        assert not got.attn_scores_ready and want.attn_scores_ready
        for h in range(got.n_heads):
            np.testing.assert_allclose(got.head_attn_scores(h), want.attn_scores[h], atol=1e-6)
        np.testing.assert_allclose(got.attn_scores, want.attn_scores, atol=1e-6)
        assert got.head_attn_scores(2) is not None and not got.attn_scores.flags.writeable
        upper = np.triu(np.ones((8, 8), dtype=bool), k=1)
        assert np.isneginf(got.attn_scores[:, upper]).all() and (got.attn_weights[:, upper] == 0).all()


def test_threads_tracing_from_one_trace_get_their_own_rows():
    model = tiny_model("rope-interleaved", 40, context_length=32)
    base = model.trace(list(range(1, 9)), reuse=model.trace([]))
    results: dict = {}

    def work(k: int) -> None:
        out = []
        for j in range(15):
            ids = list(range(1, 9)) + [k, (j * 7 + k) % 40]
            out.append((ids, model.trace(ids, reuse=base)))
        results[k] = out

    threads = [threading.Thread(target=work, args=(k,)) for k in (11, 12, 13)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in results.values():
        for ids, tr in out:
            assert_same_trace(tr, model.trace(ids))


def test_interventions_are_never_reused_across():
    from model.core.interventions import Interventions

    model = tiny_model("learned", 40, context_length=16)
    ablate = Interventions(ablate=((0, 1),))
    plain = model.trace([1, 2, 3], reuse=model.trace([]))
    tr = model.trace([1, 2, 3, 4], interventions=ablate, reuse=plain)
    assert tr.reused_rows == 0 and tr.interventions is ablate
    np.testing.assert_allclose(tr.logits, model.trace([1, 2, 3, 4], interventions=ablate).logits, atol=1e-6)
    back = model.trace([1, 2, 3, 4, 5], reuse=tr)  # without the ablation again: computed whole
    assert back.reused_rows == 0 and back.interventions is None
    assert_same_trace(back, model.trace([1, 2, 3, 4, 5]))


@pytest.mark.parametrize("layer", [0, 1])
def test_nonfinite_is_found_without_computing_finite_scores(layer):
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=40, **{**BASE, "context_length": 16})).eval()
    ids = [3, 1, 4, 1, 5, 9, 2]
    tr = model.trace(ids, reuse=model.trace(ids[:4], reuse=model.trace([])))
    assert tr.nonfinite is None and not any(lt.attn_scores_ready for lt in tr.blocks)
    assert tr["logits"] is tr.logits and not tr.blocks[0].attn_scores_ready  # found by name, nothing computed
    with torch.no_grad():  # q . k beyond float32: the scores overflow (the version counter moves)
        model.blocks[layer].attn.W_Q.weight.mul_(1e24)
        model.blocks[layer].attn.W_K.weight.mul_(1e24)
    full = model.trace(ids)
    tr = model.trace(ids, reuse=model.trace(ids[:4], reuse=model.trace([])))
    assert tr.reused_rows == 4
    # Overflowed dot products are inf or NaN depending on the order of the sums: count both > 0.
    assert tr.nonfinite.name == full.nonfinite.name == f"blocks.{layer}.attn.attn_scores"
    assert tr.nonfinite.count > 0 and full.nonfinite.count > 0


def test_nonfinite_checks_only_the_new_rows_after_a_clean_trace():
    model = tiny_model("gqa", 40, context_length=16)
    tr = model.trace([5, 6, 7, 8], reuse=model.trace([]))
    assert tr.nonfinite is None
    nxt = model.trace([5, 6, 7, 8, 9], reuse=tr)
    assert nxt._finite_rows == 4 and nxt.nonfinite is None
    cut = model.trace([5, 6], reuse=nxt)  # deleting at the end: every row known finite
    assert cut._finite_rows == 2 and cut.nonfinite is None
    unknown = model.trace([5, 6, 7], reuse=model.trace([5, 6], reuse=model.trace([])))
    assert unknown._finite_rows == 0  # its source's nonfinite was never computed


def test_nonfinite_in_the_new_rows_is_found():
    torch.manual_seed(2)  # untied: the unembedding stays finite
    model = GPT(GPTConfig(vocab_size=40, **{**BASE, "context_length": 16, "tied_unembed": False})).eval()
    with torch.no_grad():
        model.tok_emb.weight[7] = float("inf")  # token 7 is broken; the others are fine
    tr = model.trace([1, 2, 3], reuse=model.trace([]))
    assert tr.nonfinite is None
    bad = model.trace([1, 2, 3, 7], reuse=tr)
    assert bad._finite_rows == 3 and bad.nonfinite is not None
    assert (bad.nonfinite.name, bad.nonfinite.count) == ("tok_emb", 16)
    assert bad.nonfinite == model.trace([1, 2, 3, 7]).nonfinite


def test_a_trace_stopped_between_blocks_leaves_the_rows_it_reused_intact():
    """A trace that gives way (model.core.stopping.check raises between two blocks) has no result,
    and the next trace reusing the same earlier trace equals one computed whole."""
    from model.core.stopping import Interrupted, stop_when

    model = tiny_model("learned", 40, context_length=32)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    first = model.trace(ids[:5])
    calls = []
    with stop_when(lambda: calls.append(1) or len(calls) > 1), pytest.raises(Interrupted):  # before block 2
        model.trace(ids, reuse=first)
    assert len(calls) == 2
    again, whole = model.trace(ids, reuse=first), model.trace(ids)
    assert again.reused_rows == 5
    np.testing.assert_allclose(again.logits, whole.logits, atol=1e-5)
    np.testing.assert_allclose(again.blocks[1].attn_weights, whole.blocks[1].attn_weights, atol=1e-6)
    np.testing.assert_array_equal(first.logits, model.trace(ids[:5]).logits)  # the earlier one unchanged
