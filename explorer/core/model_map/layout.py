"""The Model map's drawing plan: the loaded model as boxes and arrows, read from its trace schema.

Every box is one row of the trace schema (:mod:`model.tracing.schema`) that the model records: the
boxes are the rows a config has, in model order, so a family that records more (q and k after a
norm, a second norm per block, capped scores) gets more boxes without a drawing of its own. How
the boxes are wired is :data:`INPUTS`, which rows each row is computed from (one entry per schema
row, not per family). A family that lacks a row gets its wiring through it: a name ``"a|b"``
reads the first of ``a`` and ``b`` that exists; any other absent input is replaced by what that
input would have read (a parallel block has no ``resid_mid``: its ``resid_post`` then reads the
block's input, the attention's output and the MLP's). A row the table does not know is read as a
step inserted into the chain: it reads the nearest earlier row of its kind and shape (else the
row before it), and the later rows that read that row read it instead.

Positions follow the wiring: each box's column is one more than the furthest of its inputs in
the same lane (a box without inputs sits just before the first box that reads it), and boxes in a
column are ordered as the rows they stand for (an earlier form such as ``q_pre_rope`` beside its
alias). Lanes are the input, each block (the expanded one as two lanes, attention and the rest;
the others one short row each) and the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.tracing.schema import EMBEDDING, FINAL, LAYER, MASK, SQUARE, Row, TraceSchema

IN, OUT = "<in>", "<out>"  # a block's input (the previous block's output, or x) and the last block's output

#: What each row is computed from, by attribute (IN: the block's input; OUT: the last block's output).
INPUTS: dict[str, tuple[str, ...]] = {
    "tok": (), "tok_scaled": ("tok",), "pos": (), "x": ("tok_scaled|tok", "pos"),
    "resid_pre": (IN,), "ln1": (IN,),
    "q_pre_norm": ("ln1",), "k_pre_norm": ("ln1",),
    "q_pre_rope": ("q_pre_norm|ln1",), "k_pre_rope": ("k_pre_norm|ln1",),
    "q": ("q_pre_rope|q_pre_norm|ln1",), "k": ("k_pre_rope|k_pre_norm|ln1",), "v": ("ln1",),
    "attn_mask": (),
    "attn_scores": ("q", "k", "attn_mask"),
    "attn_weights": ("attn_scores",),
    "head_out": ("attn_weights", "v"),
    "attn_out": ("head_out",),
    "ln_attn_out": ("attn_out",),
    "resid_mid": (IN, "ln_attn_out|attn_out"),
    "ln2": ("resid_mid|" + IN,),
    "mlp_out": ("ln2",),
    "ln_mlp_out": ("mlp_out",),
    "resid_post": ("resid_mid", "ln_mlp_out|mlp_out"),
    "ln_final": (OUT,),
    "logits": ("ln_final",),
    "probs": ("logits",),
}

#: For a row a config lacks, the rows that stand for it (the schema's ``alias``: the model records the
#: very tensor of the first it has, as ``ln1`` is the block's input without a norm before attention).
STANDS_FOR: dict[str, tuple[str, ...]] = {
    r.attr: (r.alias,) if isinstance(r.alias, str) else tuple(r.alias)
    for r in (*EMBEDDING, *LAYER, *FINAL) if r.alias
}

#: Short labels drawn under the boxes (the dotted name's last part otherwise).
LABELS = {
    "tok": "e token emb.", "pos": "p position", "x": "x = e + p", "ln1": "norm h", "q": "q", "k": "k", "v": "v",
    "q_pre_rope": "q before RoPE", "k_pre_rope": "k before RoPE", "q_pre_norm": "q before norm",
    "k_pre_norm": "k before norm", "tok_scaled": "e × scale", "resid_pre": "block input",
    "ln_attn_out": "norm(attn)", "ln_mlp_out": "norm(MLP)", "attn_mask": "mask", "attn_scores": "scores",
    "attn_weights": "weights", "head_out": "out = Σ a v", "attn_out": "W_O", "resid_mid": "x + attn",
    "ln2": "norm", "mlp_out": "MLP", "resid_post": "block out", "ln_final": "final norm", "logits": "logits",
    "probs": "probs",
    # the model before attention's rows (model/tracing/window_schema.py, when it is there)
    "slot_in": "W_in[s] e, per slot", "pre_act": "x W_in + b_in", "hidden": "GELU", "window_out": "W_out",
}

#: The panel that shows a row in full (by attribute); rows not here have none.
PANEL_OF = {
    "tok": "embeddings", "pos": "embeddings", "x": "embeddings",
    "q": "qkv", "k": "qkv", "v": "qkv", "q_pre_rope": "qkv", "k_pre_rope": "qkv", "q_pre_norm": "formula",
    "k_pre_norm": "formula", "tok_scaled": "embeddings",
    "attn_mask": "attention", "attn_scores": "attention", "attn_weights": "attention",
    "head_out": "formula", "attn_out": "why", "resid_mid": "why", "mlp_out": "why", "resid_post": "why",
    "logits": "next-token", "probs": "next-token",
}


@dataclass(frozen=True)
class Box:
    """One box of the map: one recorded tensor.

    Attributes
    ----------
    key : str           the tensor's dotted name in the trace (``blocks.0.attn.q``).
    row : Row           its schema row (kind, shape in config names, what it holds).
    layer : int or None its block, None for the input and output.
    column, slot : int  its place in its lane: left to right, top to bottom.
    label : str         the short label drawn under it.
    """

    key: str
    row: Row
    layer: int | None
    column: int
    slot: int
    label: str

    @property
    def panel(self) -> str | None:
        """The registered panel that shows this tensor in full, or None."""
        return PANEL_OF.get(self.row.attr)


@dataclass(frozen=True)
class Lane:
    """A row of the map: a title, the block it belongs to (None: input or output), whether it is a
    collapsed block (one short row; a click expands it) and its boxes."""

    title: str
    layer: int | None
    collapsed: bool
    boxes: tuple[Box, ...]

    @property
    def columns(self) -> int:
        """How many columns the lane's boxes take."""
        return 1 + max((b.column for b in self.boxes), default=-1)

    @property
    def slots(self) -> int:
        """How many boxes its tallest column stacks."""
        return 1 + max((b.slot for b in self.boxes), default=-1)


@dataclass(frozen=True)
class MapLayout:
    """The whole map: lanes top to bottom and arrows (source key, destination key)."""

    lanes: tuple[Lane, ...]
    arrows: tuple[tuple[str, str], ...]

    def box(self, key: str) -> Box | None:
        """The box of a dotted name, or None when the map does not draw it."""
        return next((b for lane in self.lanes for b in lane.boxes if b.key == key), None)

    @property
    def keys(self) -> list[str]:
        """Every box's dotted name, lane by lane."""
        return [b.key for lane in self.lanes for b in lane.boxes]


def wiring(rows: tuple[Row, ...], start: str = IN) -> dict[str, tuple[str, ...]]:
    """{attribute: the attributes (or IN / OUT) it reads} for ``rows``, the rows of one table a config
    has, in model order: :data:`INPUTS` with absent rows wired through and unknown rows inserted
    into the chain (see the module's docstring). ``start`` is what the table's first rows read (IN
    for a block, OUT for the rows after the blocks)."""
    have = {r.attr for r in rows} | {IN, OUT}
    out = {r.attr: _resolved(INPUTS[r.attr], have) for r in rows if r.attr in INPUTS}
    for i, row in enumerate(rows):
        if row.attr in INPUTS:
            continue
        before = rows[:i]
        same = [r for r in before if r.kind == row.kind and r.dims == row.dims]
        src = (same or before)[-1].attr if before else start
        out[row.attr] = (src,)
        for later in rows[i + 1:]:  # the chain now goes through it
            if later.attr in INPUTS:
                out[later.attr] = tuple(row.attr if a == src else a for a in out[later.attr])
    return {r.attr: tuple(dict.fromkeys(out[r.attr])) for r in rows}


def _resolved(names: tuple[str, ...], have: set[str], depth: int = 0) -> tuple[str, ...]:
    """``names`` with ``a|b`` as the first present and absent rows replaced by their own inputs."""
    out: list[str] = []
    for name in names:
        choices = name.split("|")
        found = next((c for c in choices if c in have), None)
        if found is None:  # a row the config lacks: what stands for it, else what it would read
            found = next((a for c in choices for a in STANDS_FOR.get(c, ()) if a in have), None)
        if found is not None:
            out.append(found)
        elif depth < 8:
            out += _resolved(INPUTS.get(choices[-1], ()), have, depth + 1)
    return tuple(out)


def _place(rows: tuple[Row, ...], wires: dict[str, tuple[str, ...]]) -> dict[str, tuple[int, int]]:
    """{attribute: (column, slot)} for one lane's rows: a row's column is the longest chain of its
    inputs in the lane; an input-less row sits just before its first reader, a mask (a side input:
    which keys a query may see) below it; slots follow model order, an aliased row taking its
    alias's place in that order."""
    attrs = [r.attr for r in rows]
    kinds = {r.attr: r.kind for r in rows}
    col: dict[str, int] = {}

    def column(a: str, seen: frozenset = frozenset()) -> int:
        if a not in col:
            ins = [i for i in wires[a] if i in kinds and i not in seen and kinds[i] != MASK]
            col[a] = 1 + max((column(i, seen | {a}) for i in ins), default=-1)
        return col[a]

    for a in attrs:
        column(a)
    for a in attrs:
        readers = [col[b] for b in attrs if a in wires[b]]
        if not wires[a] and readers:
            col[a] = min(readers) if kinds[a] == MASK else max(0, min(readers) - 1)
    order = {r.attr: (attrs.index(r.alias) if r.alias in attrs else k, kinds[r.attr] == MASK, k)
             for k, r in enumerate(rows)}
    place: dict[str, tuple[int, int]] = {}
    for c in sorted(set(col.values())):
        members = sorted((a for a in attrs if col[a] == c), key=lambda a: (order[a][1], order[a][0], order[a][2]))
        place.update({a: (c, s) for s, a in enumerate(members)})
    return place


def label(row: Row, config) -> str:
    """The short label under a row's box (the dotted name's last part for a row :data:`LABELS` lacks)."""
    if row.attr == "x" and getattr(config, "positional", "learned") != "learned":
        return "x = e"
    if row.attr == "mlp_out":
        return "MLP (SwiGLU)" if getattr(config, "mlp", "") == "swiglu" else "MLP (GELU)"
    if row.attr in ("ln1", "ln2", "ln_final"):
        norm = "RMSNorm" if getattr(config, "norm", "") == "rmsnorm" else "LayerNorm"
        return f"{norm} h" if row.attr == "ln1" else ("final " if row.attr == "ln_final" else "") + norm
    return LABELS.get(row.attr, row.name.rsplit(".", 1)[-1])


def _lane(title: str, rows: tuple[Row, ...], prefix: str, layer: int | None, config, wires=None) -> Lane:
    """A lane of ``rows``, placed by ``wires`` (None: a collapsed block, one box per column)."""
    place = _place(rows, wires) if wires is not None else {r.attr: (k, 0) for k, r in enumerate(rows)}
    boxes = tuple(Box(prefix + r.name, r, layer, *place[r.attr], label(r, config)) for r in rows)
    return Lane(title, layer, wires is None, boxes)


def _split_block(rows: tuple[Row, ...]) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    """A block's rows as (attention: up to its last ``attn.`` row, the rest)."""
    last = max((i for i, r in enumerate(rows) if r.name.startswith("attn.")), default=-1)
    return rows[:last + 1], rows[last + 1:]


def _collapsed_rows(rows: tuple[Row, ...]) -> tuple[Row, ...]:
    """A collapsed block's boxes: its attention maps after the softmax and its output."""
    maps = [r for r in rows if r.kind == SQUARE and not r.lazy][-1:]
    return tuple(maps) + tuple(rows[-1:])


def map_layout(schema: TraceSchema, config, expanded: int) -> MapLayout:
    """The map of a model whose trace has ``schema``, with block ``expanded`` drawn in full (the
    others as one row each).

    Parameters
    ----------
    schema : TraceSchema     the rows the model records (``Trace.schema``).
    config : GPTConfig       its ``n_layers``; its ``positional`` scheme (the ``pos_emb`` box,
                             zeros without a table, is left out unless it is ``"learned"``) and
                             ``norm`` name labels.
    expanded : int           the block drawn in full (the session's layer), clamped.
    """
    n_layers = int(getattr(config, "n_layers", 0))  # a model without blocks (before attention) has none
    learned = getattr(config, "positional", "learned") == "learned"
    embedding = tuple(r for r in schema.embedding if r.attr != "pos" or learned)
    expanded = max(0, min(int(expanded), n_layers - 1))
    lanes = [_lane("input: tokens to vectors", embedding, "", None, config, wiring(embedding))]
    arrows: list[tuple[str, str]] = _arrows(embedding, "", wiring(embedding), {})
    block_wires = wiring(schema.layer)
    prev_out = embedding[-1].name if embedding else None
    for n in range(n_layers):
        prefix = f"blocks.{n}."
        ends = {IN: prev_out}
        if n != expanded:
            rows = _collapsed_rows(schema.layer)
            lane = _lane(f"block {n} ▸ (click to expand)", rows, prefix, n, config)
            lanes.append(lane)
            if prev_out and lane.boxes:
                arrows.append((prev_out, lane.boxes[-1].key))
        else:
            attn, rest = _split_block(schema.layer)
            for title, rows in ((f"block {n} ▾ attention", attn), (f"block {n} ▾ MLP and residual", rest)):
                if rows:
                    lane = _lane(title, rows, prefix, n, config, block_wires)
                    lanes.append(lane)
            arrows += _arrows(schema.layer, prefix, block_wires, ends)
        prev_out = prefix + schema.layer[-1].name if schema.layer else prev_out
    final_wires = wiring(schema.final, OUT)
    lanes.append(_lane("output: next-token probabilities", schema.final, "", None, config, final_wires))
    arrows += _arrows(schema.final, "", final_wires, {OUT: prev_out})
    return MapLayout(tuple(lanes), tuple(dict.fromkeys(arrows)))


def _arrows(rows: tuple[Row, ...], prefix: str, wires, ends) -> list[tuple[str, str]]:
    """(source key, destination key) of every wire of ``rows`` (named under ``prefix``); IN and OUT
    are the keys in ``ends``."""
    names = {r.attr: prefix + r.name for r in rows}
    out = []
    for r in rows:
        for src in wires.get(r.attr, ()):
            key = ends.get(src) if src in (IN, OUT) else names.get(src)
            if key is not None:
                out.append((key, prefix + r.name))
    return out
