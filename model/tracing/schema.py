"""The trace schema: every tensor a trace records, written once.

Each :class:`Row` below is one recorded tensor: the attribute of the record that holds it (and its
key in the record dict ``GPT._run`` fills), its dotted name, its kind (where its rows, the
positions, are), its per-row shape in config names and whether a config has it. The tables drive
the records' attributes (:class:`model.tracing.records.LayerTrace`, :class:`~model.tracing.records.Trace`),
the names (``trace[name]``, ``named()``, ``names()``, the .npz export), ``nonfinite``, the row
store's layout, writing records into it and making traces of it (:mod:`model.tracing.rowstore`),
and prefix reuse's slicing (:mod:`model.tracing.reuse`).

Dotted names are the model's module paths (``GPT.named_modules()``), as TransformerLens names its
hooks: a module's output is named by the module's path (``blocks.0.attn.W_O``), a value computed
inside a module by the module's path and the value's name (``blocks.0.attn.attn_weights``); a
block's rows are named relative to ``blocks.N``.

A new recorded tensor costs two lines: the model records it where it computes it
(``record.update(name=...)``) and a row here says what it is. A config decides what exists
(``exists``): a family without the tensor has no name, buffer or slice for it, as TransformerLens
has no ``hook_resid_mid`` with ``parallel_attn_mlp``. A row that is absent, or that the model
recorded as the very tensor of another (q before RoPE, with the rotation off), may name that other
(``alias``; or several, the first the config has: the MLP's input is ``resid_mid`` without a norm
before the MLP, ``ln1`` with one norm shared by attention and the MLP): the record's attribute is
then the same array.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping

#: Kinds, by where the positions (T rows) are: rows (T, d); per head (n, T, d_head); square maps
#: per head (n_heads, T, T); one mask (T, T).
ROWS, HEADS, SQUARE, MASK = "rows", "heads", "square", "mask"


@dataclass(frozen=True)
class Row:
    """One recorded tensor.

    Attributes
    ----------
    attr : str         the record's attribute (and the key in the model's record dict).
    name : str         the dotted name (a block's: relative to ``blocks.N``).
    kind : str         ROWS, HEADS, SQUARE or MASK.
    dims : tuple of str  the shape of one row in config names: ``("d_model",)`` for ROWS,
                       ``("n_heads", "d_head")`` for HEADS (n, d_head), ``("n_heads",)`` for SQUARE,
                       ``()`` for MASK.
    doc : str          what it holds.
    exists : callable or None   ``exists(config) -> bool``; None: every config has it.
    alias : str, tuple of str, or None   the row whose array this one is when the config has no
                       such tensor (of several, the first the config has), or when the model
                       recorded the very same tensor for both.
    lazy : bool        not recorded nor stored: the record computes it from other rows on first
                       use (a trace made in one piece keeps what the model computed).
    like : str or None   lazy rows: a stored row of the same shape and dtype in which any NaN or
                       +inf of this one would show (the softmax of it): ``nonfinite`` checks that
                       row instead of computing this one, and sizes are read from it.
    masked : bool      -inf marks the cells where ``attn_mask`` is False (not a bad value).
    """

    attr: str
    name: str
    kind: str
    dims: tuple[str, ...]
    doc: str
    exists: Callable[[object], bool] | None = None
    alias: str | tuple[str, ...] | None = None
    lazy: bool = False
    like: str | None = None
    masked: bool = False

    def present(self, config) -> bool:
        """Whether a model with ``config`` records this tensor."""
        return self.exists is None or bool(self.exists(config))

    def per_row(self, config) -> tuple[int, ...]:
        """The shape of one row (position) for ``config``: ``dims`` as numbers."""
        return tuple(int(getattr(config, d)) for d in self.dims)

    @property
    def shape_doc(self) -> str:
        """The whole tensor's shape in config names, e.g. ``(n_heads, T, d_head)``."""
        return "(" + ", ".join(array_shape(self.kind, self.dims, "T")) + ")"

    @property
    def aliases(self) -> tuple[str, ...]:
        """The rows ``alias`` names, in order (none without one)."""
        return () if self.alias is None else (self.alias,) if isinstance(self.alias, str) else tuple(self.alias)

    def same_as(self, get: Callable[[str], object]) -> str | None:
        """The alias whose very object ``get`` (a record's or a trace's lookup by attribute) gives
        this row too, or None."""
        mine = get(self.attr)
        return next((a for a in self.aliases if mine is not None and get(a) is mine), None)

    def stand_in(self, get: Callable[[str], object]):
        """What an owner lacking this row holds for it: the first alias's array that is not None
        (None when there is none)."""
        return next((a for a in map(get, self.aliases) if a is not None), None)


def _rotary(config) -> bool:
    """the model has RoPE"""
    return config.positional == "rope"


def _qk_normed(config) -> bool:
    """the model normalises q and k (QK-norm)"""
    return config.qk_norm != "none"


def _pre_norm(config) -> bool:
    """a norm comes before attention"""
    return config.norm_placement != "post"


def _no_pre_norm(config) -> bool:
    """no norm comes before attention (OLMo-2's norms are after the branches)"""
    return config.norm_placement == "post"


def _mlp_norm(config) -> bool:
    """a norm of its own comes before the MLP"""
    return config.norm_placement != "post" and config.block_layout != "parallel_one_norm"


def _post_norm(config) -> bool:
    """a norm comes after attention and after the MLP (Gemma, OLMo-2)"""
    return config.norm_placement in ("sandwich", "post")


def _sequential(config) -> bool:
    """the MLP comes after attention (not in parallel)"""
    return config.block_layout == "sequential"


def _scaled_embedding(config) -> bool:
    """the token embedding is scaled (Gemma)"""
    return config.embed_scale != 1


D = ("d_model",)
Q_HEADS, KV_HEADS = ("n_heads", "d_head"), ("n_kv_heads", "d_head")

#: Model-level rows before the blocks (the model's input), in model order.
EMBEDDING = (
    Row("tok", "tok_emb", ROWS, D, "token-embedding rows e_i, the token embedding's output"),
    Row("tok_scaled", "tok_scaled", ROWS, D, "e_i times embed_scale (Gemma: √d_model), what enters x",
        exists=_scaled_embedding, alias="tok"),
    Row("pos", "pos_emb", ROWS, D, "positional rows p_i, the positional table's output (zeros without one)"),
    Row("x", "x", ROWS, D, "the first block's input, e_i (times embed_scale) + p_i"),
)

#: One block's rows, in model order (names relative to ``blocks.N``).
LAYER = (
    Row("resid_pre", "resid_pre", ROWS, D, "the block's input, which attention reads as it is",
        exists=_no_pre_norm),
    Row("ln1", "ln1", ROWS, D, "LN1's output, the attention's input h (the block's input itself "
        "without a norm before attention)", exists=_pre_norm, alias="resid_pre"),
    Row("q_pre_norm", "attn.q_pre_norm", HEADS, Q_HEADS, "h W_Q (+ b_Q) before QK-norm", exists=_qk_normed),
    Row("k_pre_norm", "attn.k_pre_norm", HEADS, KV_HEADS, "h W_K (+ b_K) before QK-norm", exists=_qk_normed),
    Row("q", "attn.q", HEADS, Q_HEADS, "queries as they enter the scores (after QK-norm and RoPE's "
        "rotation, where the model has them)"),
    Row("k", "attn.k", HEADS, KV_HEADS, "keys as they enter the scores (after QK-norm and RoPE's rotation, "
        "where the model has them); query head h reads key/value head ``kv_head(h)`` (n_kv_heads < "
        "n_heads: grouped-query)"),
    Row("v", "attn.v", HEADS, KV_HEADS, "values"),
    Row("q_pre_rope", "attn.q_pre_rope", HEADS, Q_HEADS, "q before RoPE's rotation, after QK-norm (q "
        "itself with the rotation off, and in a layer without RoPE)", exists=_rotary, alias="q"),
    Row("k_pre_rope", "attn.k_pre_rope", HEADS, KV_HEADS, "k before RoPE's rotation, after QK-norm (k "
        "itself with the rotation off, and in a layer without RoPE)", exists=_rotary, alias="k"),
    Row("attn_mask", "attn.attn_mask", MASK, (), "bool, True where query i may attend to key j (causal "
        "mask, window)"),
    Row("attn_scores", "attn.attn_scores", SQUARE, ("n_heads",), "attn_scale * q_i.k_j (soft-capped where the "
        "model caps them), -inf where attn_mask is False: what the softmax received (nats)", lazy=True,
        like="attn_weights", masked=True),
    Row("attn_weights", "attn.attn_weights", SQUARE, ("n_heads",), "softmax of attn_scores over keys; rows "
        "sum to 1, in [0, 1]"),
    Row("head_out", "attn.head_out", HEADS, Q_HEADS, "each head's out_i = sum_j a_ij v_j"),
    Row("attn_out", "attn.W_O", ROWS, D, "W_O's output (heads concatenated, times W_O, plus its bias): the "
        "attention block's output"),
    Row("ln_attn_out", "ln_attn_out", ROWS, D, "the norm after attention: what the residual gets from it",
        exists=_post_norm),
    Row("resid_mid", "resid_mid", ROWS, D, "x + attention's contribution (attn_out, or its norm)",
        exists=_sequential),
    Row("ln2", "ln2", ROWS, D, "LN2's output, the MLP's input (resid_mid itself without a norm before the "
        "MLP; LN1's output when one norm feeds both)", exists=_mlp_norm, alias=("resid_mid", "ln1")),
    Row("mlp_out", "mlp.fc_out", ROWS, D, "the MLP's last linear layer's output"),
    Row("ln_mlp_out", "ln_mlp_out", ROWS, D, "the norm after the MLP: what the residual gets from it",
        exists=_post_norm),
    Row("resid_post", "resid_post", ROWS, D, "the block's output: resid_mid + the MLP's contribution "
        "(x + attention's + the MLP's in a parallel block)"),
)

#: Model-level rows after the blocks (the model's output), in model order.
FINAL = (
    Row("ln_final", "ln_f", ROWS, D, "the final norm's output"),
    Row("logits", "logits", ROWS, ("vocab_size",), "next-token scores at every position (nats before "
        "softmax; soft-capped where the model caps them)"),
    Row("probs", "probs", ROWS, ("vocab_size",), "softmax(logits), rows sum to 1", lazy=True, like="logits"),
)


@dataclass(frozen=True)
class TraceSchema:
    """The rows a model with one config records: the tables' rows it has, in model order."""

    embedding: tuple[Row, ...]
    layer: tuple[Row, ...]
    final: tuple[Row, ...]

    @property
    def model(self) -> tuple[Row, ...]:
        """The model-level rows (a :class:`~model.tracing.records.Trace`'s own): embedding and final."""
        return self.embedding + self.final

    @property
    def attributes(self) -> tuple[Row, ...]:
        """Every model-level attribute a Trace of this schema has: the transformer's
        (:data:`EMBEDDING`, :data:`FINAL`; a row this schema lacks is its alias or None), then this
        schema's own rows beyond them (another architecture's, :mod:`model.tracing.window_schema`)."""
        known = EMBEDDING + FINAL
        attrs = {row.attr for row in known}
        return known + tuple(row for row in self.model if row.attr not in attrs)

    def stored(self, n_layers: int) -> list[tuple[str, Row]]:
        """(store key, row) of every row a row store holds: model-level rows by attribute, a
        block's as ``"N.attr"``; lazy rows are computed, not stored."""
        out = [(row.attr, row) for row in self.model if not row.lazy]
        for i in range(n_layers):
            out += [(f"{i}.{row.attr}", row) for row in self.layer if not row.lazy]
        return out


@functools.lru_cache(maxsize=64)
def schema_for(config) -> TraceSchema:
    """The :class:`TraceSchema` of ``config`` (a GPTConfig): every row whose ``exists`` says yes.
    A config of another architecture names its own schema as its ``trace_schema`` attribute (the
    model before attention's, :class:`model.core.window.WindowConfig`)."""
    own = getattr(config, "trace_schema", None)
    if isinstance(own, TraceSchema):
        return own

    def have(table):
        return tuple(row for row in table if row.present(config))
    return TraceSchema(have(EMBEDDING), have(LAYER), have(FINAL))


#: Every row: the schema of a config that has them all.
FULL = TraceSchema(EMBEDDING, LAYER, FINAL)


def array_shape(kind: str, per_row: tuple, rows, cols=None) -> tuple:
    """The shape of a tensor of ``kind`` with ``rows`` positions (and ``cols`` keys for the maps;
    default ``rows``) whose rows are ``per_row``."""
    cols = rows if cols is None else cols
    if kind == ROWS:
        return (rows, *per_row)  # (T, d)
    if kind == HEADS:
        return (per_row[0], rows, per_row[1])  # (n, T, d_head)
    if kind == SQUARE:
        return (per_row[0], rows, cols)  # (n_heads, T, T)
    return (rows, cols)  # (T, T)


def part(kind: str, a, start: int, stop: int | None = None, cols: int | None = None):
    """Rows (positions) start..stop of ``a`` in its kind's layout, and columns (keys) :cols of
    the square ones (a view)."""
    if kind == ROWS:
        return a[start:stop]
    if kind == HEADS:
        return a[:, start:stop]
    if kind == SQUARE:
        return a[:, start:stop, :cols]
    return a[start:stop, :cols]


def first_rows(owner, rows: tuple[Row, ...], T: int) -> dict:
    """{attr: the first T rows (and keys) of ``owner``'s array} for ``rows``, views; a row that is
    its alias's array stays so, and a lazy row is included when ``owner`` has computed it."""
    out: dict = {}
    get = functools.partial(getattr, owner)
    for row in rows:
        if row.lazy and row.attr not in vars(owner):
            continue
        same = row.same_as(get)
        out[row.attr] = out[same] if same is not None else part(row.kind, get(row.attr), 0, T, T)
    return out


def fill(owner, table: tuple[Row, ...], present: tuple[Row, ...], arrays: Mapping) -> None:
    """Set ``owner``'s attribute of every row of ``table``: the array in ``arrays`` for a row in
    ``present`` (lazy rows may be missing: the class computes them on first use), the alias's
    array (or None) for a row the config does not have.

    Raises
    ------
    KeyError
        When a row in ``present`` that is not lazy has no array.
    """
    have = {row.attr for row in present}
    for row in table:
        if row.attr in have:
            a = arrays.get(row.attr)
            if a is None:
                if row.lazy:
                    continue
                raise KeyError(f"{type(owner).__name__} needs {row.attr!r} ({row.name}), which was not recorded")
        else:
            a = row.stand_in(functools.partial(getattr, owner))
        object.__setattr__(owner, row.attr, a)


def attributes_doc(table: tuple[Row, ...]) -> str:
    """A numpydoc Attributes block for ``table``'s rows (each with its shape and dotted name)."""
    lines = []
    for row in table:
        when = f" Only where {row.exists.__doc__}" if row.exists else ""
        if when and row.alias:
            when += "; otherwise the same array as " + " or ".join(f"``{a}``" for a in row.aliases)
        lines += [f"{row.attr} : {row.shape_doc}", f"    ``{row.name}``: {row.doc}.{when + '.' if when else ''}"]
    return "\n".join("    " + line for line in lines)


def check_tables(*tables: tuple[Row, ...]) -> None:
    """Aliases name an earlier row of the same table, ``like`` a stored one; attributes and
    names are unique (a mistake in the tables fails at import)."""
    for table in tables:
        seen: set = set()
        for row in table:
            stored = {r.attr for r in table if not r.lazy}
            if any(a not in seen for a in row.aliases) or (row.like is not None and row.like not in stored):
                raise ValueError(f"schema row {row.attr!r}: its alias or like must be an earlier or stored row")
            seen.add(row.attr)
    rows = [row for table in tables for row in table]
    if len({r.attr for r in rows}) != len(rows) or len({r.name for r in rows}) != len(rows):
        raise ValueError("schema rows must have distinct attributes and dotted names")


check_tables(EMBEDDING + FINAL, LAYER)
