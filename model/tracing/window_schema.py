"""The trace schema of the model before attention (:mod:`model.core.window`), written once.

The fixed-window MLP language model records no blocks: its rows are model-level, in model order,
each a :class:`~model.tracing.schema.Row` of kind ROWS (one row per position i, the prediction of
the token after i). The token embedding, the final norm, the logits and the probabilities are the
transformer's own rows (the same attributes and dotted names); the rows between them are this
model's: what each window slot adds to the first layer, its sum, the hidden layer after GELU and the
second layer's output. A :class:`~model.tracing.records.Trace` of this model has these attributes and
``blocks == ()``.
"""

from __future__ import annotations

from model.tracing.schema import EMBEDDING, FINAL, ROWS, Row, TraceSchema, check_tables

_BY_ATTR = {row.attr: row for row in EMBEDDING + FINAL}

#: The window model's rows, in model order (names are its module paths).
WINDOW = (
    _BY_ATTR["tok"],
    Row("slot_in", "fc_in.slots", ROWS, ("context_length", "d_mlp"),
        "what each window slot adds to fc_in's output at position i: W_in[slot s] e of the token s - "
        "(context_length - 1) places from i (slot context_length - 1 is token i itself; zeros where the "
        "slot is before the text); their sum plus b_in is pre_act"),
    Row("pre_act", "fc_in", ROWS, ("d_mlp",), "the first layer's output, x_i W_in + b_in, x_i the "
        "concatenated window of the last context_length token embeddings"),
    Row("hidden", "act", ROWS, ("d_mlp",), "the hidden layer: GELU(pre_act)"),
    Row("window_out", "fc_out", ROWS, ("d_model",), "the second layer's output, hidden W_out + b_out"),
    _BY_ATTR["ln_final"],
    _BY_ATTR["logits"],
    _BY_ATTR["probs"],
)

#: The window model's schema: the embedding, no block rows, the rest after.
WINDOW_SCHEMA = TraceSchema(embedding=WINDOW[:1], layer=(), final=WINDOW[1:])

check_tables(WINDOW)
