"""Leave-one-out: how much the target's logit drops when one earlier token is hidden.

For each source j, key j is masked for every query in every layer and head (a query still sees
itself, so row j is not left empty), and the target's logit at the position explained is
compared with the unmasked one. This is "attention knockout" of Geva et al. 2023, applied to all
layers at once.

The re-runs are batched forwards with one row per hidden key (row 0 of the first batch is the
unmasked model), in batches whose attention maps and activations stay within
:data:`BATCH_BYTES`. With the causal mask, hiding key j changes nothing at positions 0..j (they
cannot see a later key, and j still sees itself), so a batch runs only the positions after its
smallest j, against the trace's own keys and values of the positions before (a key/value cache,
as :mod:`model.tracing.reuse` keeps one).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import torch

from model.core.interventions import Interventions
from model.core.stopping import Interrupted, stop_if  # noqa: F401 (Interrupted: part of this module's API)
from model.tracing.records import Trace

#: The most that one batch of re-runs may hold at once (attention maps, masks, activations), in
#: bytes. One copy is always run, even when it alone holds more (GPT-2 small's 144 attention maps
#: at T = 1,024 are 50 MB a layer).
BATCH_BYTES = 64 * 2**20


def copy_bytes(config, rows: int, keys: int) -> int:
    """Bytes one masked copy holds at once in a forward of ``rows`` queries against ``keys`` keys.

    Per layer: the scores, their masked copy and the weights (n_heads, rows, keys) float32, its
    key mask (rows, keys) bool, the keys and values (n_heads, keys, d_head) twice, and about eight
    (rows, d_model) and two (rows, d_mlp) activations. Only one layer's are alive at a time.
    """
    c = config
    attention = 3 * 4 * c.n_heads * rows * keys + rows * keys
    cache = 2 * 2 * 4 * c.n_heads * keys * c.d_head
    activations = 4 * rows * (8 * c.d_model + 2 * c.d_mlp)
    return attention + cache + activations


def copies_per_batch(config, rows: int, keys: int) -> int:
    """How many masked copies of ``rows`` queries against ``keys`` keys one batch runs (at least 1)."""
    return max(1, BATCH_BYTES // copy_bytes(config, rows, keys))


#: The cost model below counts multiply-adds (MACs). An attention cell (one query against one key
#: in one head) costs about this many MACs more than its dot product: the mask, the softmax and
#: their passes over memory (10.7 ns a cell on the project's machine, which does about 30 GMAC/s
#: on one thread: a forward of GPT-2 small at T = 512 took 1.9 s, of a d_model = 8 model with
#: 2 × 2 heads at T = 1,024 45 ms).
CELL_MACS = 300
#: The fixed cost of one forward call in MACs: a few hundred small operations, and small matrix
#: products running far below the rate of large ones. Chosen so that the model gives what was
#: measured: one batch of 31 copies at T = 32 on the default model costs 1.6 of its traces.
CALL_MACS = 3e8


def forward_macs(config, rows: int, keys: int, copies: int = 1, logits_rows: int = 1) -> float:
    """About the work of one forward call of ``copies`` copies of ``rows`` queries against ``keys``
    keys, in multiply-adds (:data:`CELL_MACS` per attention cell, :data:`CALL_MACS` per call),
    with logits at ``logits_rows`` rows of each copy. A trace of T tokens is (T, T, 1, T)."""
    c = config
    linear = c.d_model * c.d_head * (2 * c.n_heads + 2 * c.n_kv_heads) + (3 if c.mlp == "swiglu" else 2) * c.d_model * c.d_mlp
    attention = c.n_heads * keys * (2 * c.d_head + CELL_MACS)
    per_copy = c.n_layers * rows * (linear + attention) + logits_rows * c.vocab_size * c.d_model
    return CALL_MACS + copies * per_copy


def leave_one_out_macs(config, n_hidden: int, n_sources: int) -> float:
    """The most that :func:`leave_one_out` of ``n_hidden`` sources out of S = ``n_sources`` can
    cost, in MACs (every copy running all S positions; with the causal mask a copy hiding j runs
    S - 1 - j of them, so hiding recent tokens costs less)."""
    if n_hidden <= 0:
        return 0.0
    per_batch = copies_per_batch(config, n_sources, n_sources)
    batches = -(-(n_hidden + 1) // per_batch)  # the unmasked copy too
    return (batches - 1) * CALL_MACS + forward_macs(config, n_sources, n_sources, n_hidden + 1)


class _Prefix:
    """One block's keys and values of positions 0..start-1 from the trace (1, n_kv_heads, start,
    d_head): :meth:`update` puts a batch's new positions after them (the interface of
    :class:`model.tracing.rowstore.KVSlot`, for a batch of any size)."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor) -> None:
        self.start = k.shape[2]
        self.k, self.v = k, v

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B = k.shape[0]  # 1 in layer 0 (one sequence), the batch's copies after it
        return (torch.cat([self.k.expand(B, -1, -1, -1), k], dim=2),  # (B, n_kv_heads, start + R, d_head)
                torch.cat([self.v.expand(B, -1, -1, -1), v], dim=2))


def _batches(hidden: list[int], causal: bool, position: int, T: int, config) -> list[list[int]]:
    """The hidden keys in batches: with the causal mask from the last key back (a batch runs the
    positions after its smallest key), each batch as large as :data:`BATCH_BYTES` allows; the
    first batch also holds the unmasked copy."""
    order = sorted(hidden, reverse=True)
    batches: list[list[int]] = []
    for j in order:
        if batches:
            batch = batches[-1]
            rows = position - min(j, *batch) if causal else T
            extra = 1 if len(batches) == 1 else 0  # the unmasked copy
            if len(batch) + 1 + extra <= copies_per_batch(config, rows, position + 1 if causal else T):
                batch.append(j)
                continue
        batches.append([j])
    return batches


def leave_one_out(model, tr: Trace, position: int, target: int, n_sources: int,
                  sources: Iterable[int] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> np.ndarray:
    """The target's logit minus its logit with key j hidden, for each source j.

    Parameters
    ----------
    model : GPT
        The model that made ``tr`` (its interventions are kept in every re-run).
    tr : Trace
    position : int
        The query position i, 0 <= i < T.
    target : int
        A token id.
    n_sources : int
        S: sources 0 .. S-1 (i + 1 with the causal mask, T without it).
    sources : iterable of int, optional
        The sources to hide, each in 0..S-1 (i itself is skipped); default all of them.
    should_stop : callable () -> bool, optional
        Asked before each batch; True stops the work with :class:`Interrupted` (a GUI's worker
        thread asks whether newer work waits: a batch of GPT-2 small at T = 1,024 is seconds).

    Returns
    -------
    ndarray (S,) float64
        logit - logit_without_j in nats of logit (positive: token j helped the target); NaN at
        i (a query always sees itself, so its own key cannot be hidden from it) and at every
        source not asked for.

    Raises
    ------
    ValueError
        When a source is outside 0..S-1.
    Interrupted
        When ``should_stop()`` returned True before a batch.

    Notes
    -----
    Batched as the module says: the result does not depend on the batches (float32 rounding
    aside, 1e-5). Memory stays within about :data:`BATCH_BYTES` beyond the model, the trace and
    a copy of the trace's keys and values before the batch's positions; time is about one forward
    of positions j+1..i per source j with the causal mask (the last block's MLP and the
    unembedding run on row i only), of all T positions without it.
    """
    hidden = list(range(n_sources)) if sources is None else sorted({int(j) for j in sources})
    if hidden and not (0 <= hidden[0] and hidden[-1] < n_sources):
        raise ValueError(f"leave-one-out sources must be in 0..{n_sources - 1}, got {hidden[0]}..{hidden[-1]}")
    hidden = [j for j in hidden if j != position]
    out = np.full(n_sources, np.nan)
    if not hidden:
        return out
    causal, T = tr.causal, position + 1 if tr.causal else tr.n_tokens
    base = tr.interventions or Interventions()
    ids = torch.tensor(tr.token_ids[:T], dtype=torch.long, device=model.tok_emb.weight.device)  # (T,)
    base_logit = None
    for batch in _batches(hidden, causal, position, T, model.config):
        stop_if(should_stop)
        p = min(batch) + 1 if causal else 0  # positions 0..p-1 are the trace's in every copy
        if 8 * p < T:
            p = 0  # a cache would save less than an eighth of the positions: run them all (as at T = 32)
        logits = _run_batch(model, tr, ids, base, batch, p, position, unmasked=base_logit is None)
        logits = logits[:, 0, target].double().cpu().numpy()  # (B,)
        if base_logit is None:
            base_logit, logits = logits[0], logits[1:]
        out[batch] = base_logit - logits
    return out


def _run_batch(model, tr: Trace, ids: torch.Tensor, base: Interventions, batch: list[int], p: int,
               position: int, unmasked: bool) -> torch.Tensor:
    """Logits at ``position`` (B, 1, vocab_size) of copies hiding each key of ``batch`` (and
    first an unmasked copy when ``unmasked``), running positions p.. after the trace's first p."""
    T = ids.shape[0]
    device = ids.device
    rows = torch.arange(p, T, device=device)  # the positions run
    keys = torch.tensor(batch, dtype=torch.long, device=device)  # (B,)
    masks = torch.ones(len(batch), T - p, T, dtype=torch.bool, device=device)  # (B, T - p, T), True = may attend
    masks[torch.arange(len(batch), device=device), :, keys] = (rows[None, :] == keys[:, None])  # only query j sees j
    if unmasked:
        masks = torch.cat([torch.ones(1, T - p, T, dtype=torch.bool, device=device), masks])  # row 0: nothing hidden
    if base.key_mask is not None:
        masks = masks & base.key_mask.to(device)[..., p:T, :T]
    dtype = model.tok_emb.weight.dtype
    caches = [_Prefix(torch.tensor(layer.k[:, :p], dtype=dtype, device=device).unsqueeze(0),  # (1, n_kv_heads, p, d_head)
                      torch.tensor(layer.v[:, :p], dtype=dtype, device=device).unsqueeze(0))
              for layer in tr.blocks] if p else None
    with torch.no_grad():
        return model._run(ids[p:].unsqueeze(0), tr.positional_encoding, tr.causal, None,  # (1, T - p): one embedding
                          base.with_key_mask(masks), positions=[position - p], caches=caches)  # (B, 1, vocab_size)
