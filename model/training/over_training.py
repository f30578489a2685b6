"""What a text looks like to a model over its training: curves across the snapshots of one run.

For token ids t_0 .. t_{T-1} (the last context_length of them, as :meth:`GPT.trace` runs them)
and each snapshot s, in step order:

- ``loss_on_text[s]`` = -(1 / (T-1)) sum_{i=0}^{T-2} ln p_s(t_{i+1} | t_0..t_i): nats per token,
  the mean over the text's next-token predictions (NaN when T < 2).
- ``target_prob[s]`` = p_s(target | t_0..t_pos) at the selected position ``pos`` (default the
  last). The target, unless given, is the actual next token t_{pos+1} where the text has one,
  else the top-1 prediction of the last snapshot (the most trained model) at ``pos``.
- ``top1[s]``: the most probable next token at ``pos`` (lowest id on ties); ``top1_changed``
  marks the snapshots where it differs from the snapshot before.
- per layer and head, from the attention weights a_ij (query i, key j), averaged over the query
  rows i = 1 .. T-1 (row 0 can only see itself under the causal mask, so it tells nothing about
  the head; NaN when T < 2):
  ``attn_entropy`` = mean_i -sum_j a_ij ln a_ij, in nats (0 = one key, ln(i+1) = uniform);
  ``attn_first`` = mean_i a_i0 (mass on the first token); ``attn_prev`` = mean_i a_i,i-1 (on
  the previous token); ``attn_self`` = mean_i a_ii (on the token itself). All in [0, 1].

Each snapshot runs through ``GPT.trace`` (the path every panel draws from). The statistics are
then computed for all snapshots at once on the stacked logits and attention weights, without a
softmax over the whole (S, T, vocab_size) block: ln p(v) = logit_v - logsumexp(logits). Running
the forwards as one ``torch.func.vmap`` over stacked weights was measured no faster for the
default model (14 snapshots, T = 20: 18 ms looped, 20 to 33 ms vmapped, shared 2-core machine).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from model.training.lazy_snapshots import Snapshot


@dataclass(frozen=True)
class TrainingCurves:
    """Curves over the snapshots of one run for one text. S snapshots, L layers, H heads.

    Attributes
    ----------
    steps : (S,) int64              training step of each snapshot, increasing.
    token_ids : (T,) int64          the ids run (the last context_length of those given).
    dropped : int                   leading ids left out (text longer than the context).
    position : int                  the selected query position, 0 .. T-1 (-1 when T = 0).
    target_id : int                 the token whose probability ``target_prob`` follows (-1: none).
    target_kind : str               ``"next token"``, ``"final top-1"``, ``"given"`` or ``"none"``.
    loss_on_text : (S,) float64     nats per token (see the module docstring).
    target_prob : (S,) float64      in [0, 1].
    top1 : (S,) int64               top-1 next token at ``position`` (-1 when T = 0).
    top1_prob : (S,) float64        its probability.
    attn_entropy : (S, L, H)        nats, mean over query rows 1 .. T-1 (L = H = 0 for the model before
                                    attention, which has no heads).
    attn_first, attn_prev, attn_self : (S, L, H)   attention mass in [0, 1], same rows.
    val_curve : (K, 2) float64      the run's stored validation curve: step, nats per token.
    """

    steps: np.ndarray
    token_ids: np.ndarray
    dropped: int
    position: int
    target_id: int
    target_kind: str
    loss_on_text: np.ndarray
    target_prob: np.ndarray
    top1: np.ndarray
    top1_prob: np.ndarray
    attn_entropy: np.ndarray
    attn_first: np.ndarray
    attn_prev: np.ndarray
    attn_self: np.ndarray
    val_curve: np.ndarray

    @property
    def top1_changed(self) -> np.ndarray:
        """(S,) bool: True where the top-1 at ``position`` differs from the snapshot before."""
        changed = np.zeros(self.steps.shape, dtype=bool)
        changed[1:] = self.top1[1:] != self.top1[:-1]
        return changed


@dataclass(frozen=True)
class SnapshotDifference:
    """A later snapshot minus an earlier one, on the same token ids.

    Attributes
    ----------
    earlier_step, later_step : int
    token_ids : (T,) int64
    attn_weights : (n_layers, n_heads, T, T)   later - earlier, in [-1, 1] (0 where masked).
    probs : (T, vocab_size)                    later - earlier next-token probabilities, in [-1, 1].
    """

    earlier_step: int
    later_step: int
    token_ids: np.ndarray
    attn_weights: np.ndarray
    probs: np.ndarray


def attention_stats(attn_weights: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
    """Entropy and mass on the first, previous and same token, averaged over query rows 1 .. T-1.

    Parameters
    ----------
    attn_weights : (..., T, T)
        Rows (queries) sum to 1; any leading axes (snapshots, layers, heads).

    Returns
    -------
    dict
        ``entropy`` (nats), ``first``, ``prev``, ``self``: each (...), float64; NaN when T < 2.
        Definitions in the module docstring.
    """
    a = (attn_weights if torch.is_tensor(attn_weights) else torch.from_numpy(np.asarray(attn_weights))).double()
    T = a.shape[-1]
    lead = a.shape[:-2]
    if T < 2:
        nan = np.full(lead, np.nan)
        return {"entropy": nan, "first": nan.copy(), "prev": nan.copy(), "self": nan.copy()}
    rows = a[..., 1:, :]  # (..., T-1, T): queries 1 .. T-1
    i = torch.arange(1, T)
    entropy = -torch.special.xlogy(rows, rows).sum(-1)  # (..., T-1); 0 ln 0 = 0
    return {
        "entropy": entropy.mean(-1).numpy(),
        "first": rows[..., 0].mean(-1).numpy(),
        "prev": rows[..., i - 1, i - 1].mean(-1).numpy(),  # rows[r] is query r + 1; key r is its previous
        "self": rows[..., i - 1, i].mean(-1).numpy(),
    }


def _empty(steps: np.ndarray, shape: tuple[int, int], val_curve: np.ndarray) -> TrainingCurves:
    S = steps.shape[0]
    nan = np.full(S, np.nan)
    heads = np.full((S, *shape), np.nan)
    return TrainingCurves(steps, np.zeros(0, np.int64), 0, -1, -1, "none", nan, nan.copy(),
                          np.full(S, -1, np.int64), nan.copy(), heads, heads.copy(), heads.copy(),
                          heads.copy(), val_curve)


def curves_over_training(
    snapshots: Sequence[Snapshot],
    token_ids: Sequence[int] | np.ndarray,
    *,
    position: int | None = None,
    target_id: int | None = None,
    val_curve: Sequence[tuple[int, float]] = (),
    positional_encoding: bool = True,
    causal: bool = True,
) -> TrainingCurves:
    """The curves of one text across the snapshots of one run (definitions: module docstring).

    Parameters
    ----------
    snapshots : sequence of Snapshot
        In step order, one config (a :class:`model.training.snapshots.SnapshotSet` is one).
    token_ids : sequence of int, any length
        Only the last context_length are run, as :meth:`GPT.trace` does.
    position : int, optional
        Query position in the ids run, 0 .. T-1 (negative counts from the end); default T-1.
    target_id : int, optional
        The token whose probability to follow; default: the next token, else the final top-1.
    val_curve : sequence of (step, loss)
        The run's stored validation curve, passed through (``SnapshotSet.val_curve``).
    positional_encoding, causal : bool
        As for :meth:`GPT.trace`.

    Returns
    -------
    TrainingCurves

    Raises
    ------
    ValueError
        When there are no snapshots, an id is outside the vocabulary, or ``position`` or
        ``target_id`` is out of range.
    """
    if not snapshots:
        raise ValueError("no snapshots to compute curves over")
    steps = np.array([s.step for s in snapshots], dtype=np.int64)
    curve = np.asarray(list(val_curve), dtype=np.float64).reshape(-1, 2)
    run = functools.partial(_traced, token_ids=token_ids, positional_encoding=positional_encoding, causal=causal)
    first = run(snapshots[0])
    config, T = snapshots[0].model.config, first.n_tokens
    heads = (len(first.blocks), first.blocks[0].n_heads) if first.blocks else (0, 0)  # (0, 0): no attention
    if T == 0:
        return _empty(steps, heads, curve)
    pos = T - 1 if position is None else position + T if position < 0 else position
    if not 0 <= pos < T:
        raise ValueError(f"position {position} is outside the {T} tokens run")
    ids = torch.from_numpy(first.token_ids.copy())
    last = first if len(snapshots) == 1 else None
    if target_id is not None:
        if not 0 <= target_id < config.vocab_size:
            raise ValueError(f"target token id {target_id} is outside the vocabulary (0..{config.vocab_size - 1})")
        target, kind = int(target_id), "given"
    elif pos < T - 1:
        target, kind = int(ids[pos + 1]), "next token"
    else:
        last = last or run(snapshots[-1])
        target, kind = int(np.argmax(last.logits[pos])), "final top-1"  # the lowest id on a tie, as torch
    # One trace at a time, each reduced to its numbers at once: 3,000 snapshots' traces kept together
    # held every intermediate of each (hundreds of MB).
    rows = [_numbers(first, ids, pos, target)]
    for k in range(1, len(snapshots)):
        trace = last if (k == len(snapshots) - 1 and last is not None) else run(snapshots[k])
        rows.append(_numbers(trace, ids, pos, target))
    loss, target_prob, top1, top1_prob = (np.array([r[i] for r in rows]) for i in range(4))
    stats = {name: np.stack([r[4][name] for r in rows]) for name in ("entropy", "first", "prev", "self")}
    return TrainingCurves(
        steps=steps, token_ids=first.token_ids, dropped=first.dropped, position=pos, target_id=target,
        target_kind=kind, loss_on_text=loss.astype(np.float64) if T > 1 else np.full(len(rows), np.nan),
        target_prob=target_prob.astype(np.float64), top1=top1.astype(np.int64), top1_prob=top1_prob.astype(np.float64),
        attn_entropy=stats["entropy"], attn_first=stats["first"], attn_prev=stats["prev"],
        attn_self=stats["self"], val_curve=curve,
    )


def _traced(snapshot: Snapshot, token_ids, positional_encoding: bool, causal: bool):
    return snapshot.model.trace(token_ids, positional_encoding=positional_encoding, causal=causal)


def _numbers(trace, ids: torch.Tensor, pos: int, target: int) -> tuple:
    """One snapshot's numbers from its trace: loss on the text, p(target), top-1 and its p at ``pos``,
    and the attention statistics (L, H) (definitions: the module docstring)."""
    logits = torch.tensor(trace.logits)  # (T, vocab_size), a copy: the trace's arrays are read-only
    lse = torch.logsumexp(logits, -1)  # (T,): ln p(v) = logit_v - lse, no (T, V) softmax
    next_logit = logits[:-1].gather(-1, ids[1:].unsqueeze(-1)).squeeze(-1)
    loss = float((lse[:-1] - next_logit).double().mean()) if logits.shape[0] > 1 else float("nan")
    row = logits[pos]
    top1 = int(row.argmax())
    T = logits.shape[0]
    attn = (torch.from_numpy(np.stack([b.attn_weights for b in trace.blocks])) if trace.blocks  # (L, H, T, T)
            else torch.zeros(0, 0, T, T))  # the model before attention: no heads
    return (loss, float((row[target] - lse[pos]).double().exp()), top1, float((row[top1] - lse[pos]).double().exp()),
            attention_stats(attn))


def snapshot_difference(earlier: Snapshot, later: Snapshot, token_ids: Sequence[int] | np.ndarray, *,
                        positional_encoding: bool = True, causal: bool = True) -> SnapshotDifference:
    """Attention weights and next-token probabilities of ``later`` minus those of ``earlier``.

    Parameters
    ----------
    earlier, later : Snapshot
        Of one run (same config); "earlier" and "later" are only names: the difference is
        always ``later - earlier``.
    token_ids : sequence of int
        Run as :meth:`GPT.trace` runs them (the last context_length).

    Returns
    -------
    SnapshotDifference

    Raises
    ------
    ValueError
        When an id is outside the vocabulary or the two models differ in shape.
    """
    if earlier.model.config != later.model.config:
        raise ValueError("the two snapshots have different shapes")
    a, b = (s.model.trace(token_ids, positional_encoding=positional_encoding, causal=causal)
            for s in (earlier, later))
    T = a.n_tokens
    attn = (np.stack([lb.attn_weights - la.attn_weights for la, lb in zip(a.blocks, b.blocks)]) if a.blocks
            else np.zeros((0, 0, T, T), np.float32))  # the model before attention has no heads
    return SnapshotDifference(earlier.step, later.step, a.token_ids, attn, b.probs - a.probs)
