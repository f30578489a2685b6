"""The trace schema (model/tracing/schema.py) is the one list of recorded tensors: the trace's names,
its records' attributes, the row store's buffers and what the model records all agree with it; a
config decides which rows exist."""

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from model.tracing.rowstore import RowStore
from model.tracing.schema import EMBEDDING, FINAL, FULL, LAYER, array_shape, schema_for

BASE = dict(vocab_size=40, context_length=12, d_model=16, n_heads=4, n_layers=2, d_mlp=32)
FAMILIES = {
    "learned": {},
    "rope": dict(positional="rope", norm="rmsnorm", norm_bias=False, mlp="swiglu"),
    "gqa": dict(positional="rope", n_kv_heads=2, qkv_bias=True, rope_pairs="interleaved"),
    "none": dict(positional="none", attn_windows=(3, 0)),
    "gemma": dict(positional="rope", norm="rmsnorm", norm_bias=False, norm_unit_offset=True, qk_norm="head",
                  norm_placement="sandwich", mlp="geglu", embed_scale=4.0, attn_softcap=5.0, final_softcap=3.0,
                  d_head=8, rope_thetas=(100.0, 10000.0), attn_windows=(3, 0)),
    "neox": dict(positional="rope", block_layout="parallel", rotary_dims=2, tied_unembed=False),
    "phi": dict(positional="rope", block_layout="parallel_one_norm", rotary_dims=2, tied_unembed=False,
                unembed_bias=True),
    "olmo": dict(positional="rope", norm="rmsnorm", norm_bias=False, norm_placement="post", qk_norm="full",
                 n_kv_heads=2, nope_layers=(1,)),
}
IDS = [3, 1, 4, 1, 5, 9, 2]


def model_of(family: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**BASE, **FAMILIES[family])).eval()


def schema_names(sch, n_layers: int) -> list[str]:
    layer = [f"blocks.{i}.{row.name}" for i in range(n_layers) for row in sch.layer]
    return [row.name for row in sch.embedding] + layer + [row.name for row in sch.final]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("made", ["whole", "reused", "sliced"])
def test_the_schema_is_the_names_the_attributes_the_store_and_the_record(family, made):
    model = model_of(family)
    cfg = model.config
    sch = schema_for(cfg)
    tr = {"whole": lambda: model.trace(IDS),
          "reused": lambda: model.trace(IDS, reuse=model.trace(IDS[:4], reuse=model.trace([]))),
          "sliced": lambda: model.trace(IDS, reuse=model.trace(IDS + [7], reuse=model.trace([])))}[made]()
    assert tr.reused_rows == {"whole": 0, "reused": 4, "sliced": len(IDS)}[made]
    T = len(IDS)
    # 1. the trace's names, in model order, and what each name holds: its row's shape
    assert tr.names() == schema_names(sch, cfg.n_layers)
    assert [name for name, _ in tr.named()] == tr.names() and list(tr.as_dict()) == tr.names()
    rows = {**{r.name: r for r in sch.model}, **{f"blocks.{i}.{r.name}": r for i in range(cfg.n_layers)
                                                 for r in sch.layer}}
    for name, a in tr.named():
        row = rows[name]
        assert a.shape == array_shape(row.kind, row.per_row(cfg), T), name
        assert not a.flags.writeable and tr.nbytes(name) == a.nbytes, name
    # 2. the records' attributes: every row of the tables is an attribute, the config's are arrays,
    # the others their alias's array or None
    for owner, table, have in [(lt, LAYER, sch.layer) for lt in tr.blocks] + [(tr, EMBEDDING + FINAL, sch.model)]:
        assert owner is tr or owner.recorded == sch.layer
        for row in table:
            a = getattr(owner, row.attr)
            if row in have:
                assert isinstance(a, np.ndarray), row.attr
            else:
                assert a is next((getattr(owner, x) for x in row.aliases if getattr(owner, x) is not None), None), row.attr
    # 3. the row store: a buffer for every row but the computed ones, of the row's shape
    store = RowStore(cfg, 16)
    want = {row.attr: row for row in sch.model if not row.lazy}
    want.update({f"{i}.{row.attr}": row for i in range(cfg.n_layers) for row in sch.layer if not row.lazy})
    assert store.rows == want
    for key, row in want.items():
        assert store.bufs[key].shape == array_shape(row.kind, row.per_row(cfg), 16), key


@pytest.mark.parametrize("family", FAMILIES)
def test_the_model_records_every_row_of_its_schema_and_nothing_else(family):
    model = model_of(family)
    rec: dict = {}
    with torch.no_grad():
        model._run(torch.tensor([IDS]), True, True, rec)
    sch = schema_for(model.config)
    everything = {row.attr for row in FULL.model} | {"blocks"}
    assert set(rec) <= everything and {r.attr for r in sch.model if not r.lazy} <= set(rec)
    for layer in rec["blocks"]:
        assert set(layer) <= {row.attr for row in LAYER}, "a recorded tensor without a schema row"
        assert {row.attr for row in sch.layer} <= set(layer)


def test_q_and_k_before_rope_exist_only_for_rope_models():
    plain, rope = model_of("learned"), model_of("rope")
    tr = plain.trace(IDS)
    assert not any("pre_rope" in name for name in tr.names())
    assert all(lt.q_pre_rope is lt.q and lt.k_pre_rope is lt.k for lt in tr.blocks)  # the attribute stays
    with pytest.raises(KeyError, match="no tensor named"):
        tr["blocks.0.attn.q_pre_rope"]
    assert not any("pre_rope" in key for key in RowStore(plain.config, 16).bufs)
    tr = rope.trace(IDS)
    assert "blocks.1.attn.q_pre_rope" in tr.names() and "blocks.1.attn.k_pre_rope" in tr.names()
    lt = tr.blocks[1]
    assert tr["blocks.1.attn.k_pre_rope"] is lt.k_pre_rope and not np.allclose(lt.q_pre_rope[:, 1:], lt.q[:, 1:])
    np.testing.assert_array_equal(lt.q_pre_rope[:, 0], lt.q[:, 0])  # position 0 turns by no angle


@pytest.mark.parametrize("how", ["whole", "reused", "sliced"])
def test_with_the_rotation_off_q_before_rope_is_q_itself(how):
    model = model_of("gqa")
    prev = model.trace(IDS[:3] if how == "reused" else IDS + [8], positional_encoding=False,
                       reuse=model.trace([]))
    tr = model.trace(IDS, positional_encoding=False, reuse=None if how == "whole" else prev)
    assert tr.reused_rows == {"whole": 0, "reused": 3, "sliced": len(IDS)}[how]
    assert "blocks.0.attn.q_pre_rope" in tr.names()  # the config has it: the same array
    for lt in tr.blocks:
        assert lt.q_pre_rope is lt.q and lt.k_pre_rope is lt.k
    full = model.trace(IDS, positional_encoding=False)
    np.testing.assert_allclose(tr.blocks[1].q_pre_rope, full.blocks[1].q, atol=1e-6)


def test_a_row_a_config_lacks_is_none_or_its_alias():
    from model.tracing.records import LayerTrace

    lt = model_of("learned").trace(IDS).blocks[0]
    arrays = {row.attr: getattr(lt, row.attr) for row in lt.recorded if row.attr != "resid_mid"}
    without = tuple(row for row in lt.recorded if row.attr != "resid_mid")  # as a parallel block would
    cut = LayerTrace(arrays, lt.attn_scale, without)
    assert cut.resid_mid is None and cut.q_pre_rope is cut.q and cut.ln2 is lt.ln2
    with pytest.raises(KeyError, match="'resid_post'"):
        LayerTrace({k: v for k, v in arrays.items() if k != "resid_post"}, 1.0, without)
    with pytest.raises(AttributeError, match="immutable"):
        cut.q = lt.q


def test_the_tables_have_distinct_names_and_every_row_a_shape():
    rows = EMBEDDING + LAYER + FINAL
    assert len({r.attr for r in rows}) == len({r.name for r in rows}) == len(rows)
    shapes = {r.attr: r.shape_doc for r in LAYER}
    assert (shapes["ln1"], shapes["q"], shapes["k"]) == ("(T, d_model)", "(n_heads, T, d_head)", "(n_kv_heads, T, d_head)")
    cfg = GPTConfig(**BASE)
    assert [r.attr for r in schema_for(cfg).layer if r.exists] == ["ln1", "resid_mid", "ln2"]  # the pre-norm block's
    rope = {r.attr for r in schema_for(GPTConfig(**BASE, positional="rope")).layer}
    assert rope - {r.attr for r in schema_for(cfg).layer} == {"q_pre_rope", "k_pre_rope"}
    gemma = {r.attr for r in schema_for(model_of("gemma").config).layer}
    assert gemma - rope == {"q_pre_norm", "k_pre_norm", "ln_attn_out", "ln_mlp_out"}
    assert {r.attr for r in schema_for(model_of("gemma").config).embedding} == {"tok", "tok_scaled", "pos", "x"}


@pytest.mark.parametrize("family, absent", [
    ("neox", {"resid_mid"}), ("phi", {"resid_mid", "ln2"}), ("olmo", {"ln1", "ln2"}), ("learned", {"resid_pre"})])
def test_a_variant_changes_which_rows_exist(family, absent):
    """As TransformerLens has no hook_resid_mid with parallel_attn_mlp: a parallel block has no
    resid_mid, Phi's one norm no ln2 (the MLP reads ln1), OLMo-2's post-norms no ln1 or ln2 (attention
    reads the block's input, the MLP resid_mid)."""
    model = model_of(family)
    tr = model.trace(IDS)
    names = tr.names()
    for attr in absent:
        assert not any(n.endswith("." + attr) for n in names), attr
    lt = tr.blocks[0]
    if family == "phi":
        assert lt.ln2 is lt.ln1 and lt.resid_mid is None
    if family == "neox":
        np.testing.assert_allclose(lt.resid_post, tr.x + lt.attn_out + lt.mlp_out, atol=1e-6)
    if family == "olmo":
        assert lt.ln1 is lt.resid_pre and lt.ln2 is lt.resid_mid
        np.testing.assert_array_equal(lt.resid_pre, tr.x)
        np.testing.assert_allclose(lt.resid_mid, tr.x + lt.ln_attn_out, atol=1e-6)
