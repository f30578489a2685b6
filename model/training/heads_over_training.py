"""Head types over training: every head's scores on the probe at each snapshot, and the step at
which an induction head forms.

For each snapshot s (in step order) the probe of :mod:`model.explain.heads` (the same seeded
tokens for every snapshot of a run) runs through ``GPT.trace``, and every head gets its
previous-token, duplicate-token and induction score; the probe's loss on its first copy and on its
second measures in-context learning. In Olsson et al. 2022 ("In-context learning and induction
heads") a head's induction score rises sharply and the loss on the repeated half falls at the same
step: the phase change. :func:`induction_formation` finds that step in the snapshots: the head with
the highest final induction score, and the pair of snapshots between which its score rose most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from model.core.architectures import require_attention
from model.explain.heads import HEAD_TYPES, PROBE_REPEAT, PROBE_SEED, half_losses, probe_ids, scores_of
from model.training.snapshots import Snapshot

#: The final induction score below which no head is said to have formed.
FORMED_SCORE = 0.3


@dataclass(frozen=True)
class HeadTypeCurves:
    """Head scores over the snapshots of one run. S snapshots, L layers, H heads.

    Attributes
    ----------
    steps : (S,) int64
    probe_ids : (T,) int64              the probe every snapshot ran.
    n_bos, repeat : int                 its leading special tokens and the length R of each copy.
    previous_token, duplicate_token, induction : (S, L, H) float64 in [0, 1]
    first_half_loss, second_half_loss : (S,) float64   nats per token on the probe's two copies.
    """

    steps: np.ndarray
    probe_ids: np.ndarray
    n_bos: int
    repeat: int
    previous_token: np.ndarray
    duplicate_token: np.ndarray
    induction: np.ndarray
    first_half_loss: np.ndarray
    second_half_loss: np.ndarray

    @property
    def by_type(self) -> dict[str, np.ndarray]:
        """The (S, L, H) curves by :data:`model.explain.heads.HEAD_TYPES` name."""
        return {"previous_token": self.previous_token, "duplicate_token": self.duplicate_token,
                "induction": self.induction}

    def best_head(self, kind: str) -> tuple[int, int] | None:
        """(layer, head) with the highest ``kind`` score at the last snapshot (None when none is a number)."""
        last = self.by_type[kind][-1]
        if not np.isfinite(last).any():
            return None
        layer, head = np.unravel_index(np.nanargmax(last), last.shape)
        return int(layer), int(head)


@dataclass(frozen=True)
class Formation:
    """Where an induction head forms between two snapshots.

    Attributes
    ----------
    layer, head : int             the head with the highest final induction score.
    before, after : int           indices of the two snapshots between which its score rose most.
    before_step, after_step : int their training steps.
    induction : (float, float)    its induction score at ``before`` and ``after``.
    previous : (float, float)     its previous-token score there.
    gain : (float, float)         first-copy minus second-copy loss of the probe there (nats).
    """

    layer: int
    head: int
    before: int
    after: int
    before_step: int
    after_step: int
    induction: tuple[float, float]
    previous: tuple[float, float]
    gain: tuple[float, float]


def head_types_over_training(snapshots: Sequence[Snapshot], tokenizer=None, *, repeat: int = PROBE_REPEAT,
                             seed: int = PROBE_SEED) -> HeadTypeCurves:
    """Every head's scores on the probe at every snapshot (see the module docstring).

    Parameters
    ----------
    snapshots : sequence of Snapshot
        In step order, one config.
    tokenizer : Tokenizer, optional
        The run's (its BOS and special tokens shape the probe); default the first snapshot's.
    repeat, seed : int
        The probe's R and seed.

    Returns
    -------
    HeadTypeCurves

    Raises
    ------
    ValueError
        When there are no snapshots, the context cannot hold a probe, or the model has no attention
        heads (the model before attention).
    """
    if not snapshots:
        raise ValueError("no snapshots to score heads over")
    tokenizer = tokenizer if tokenizer is not None else snapshots[0].checkpoint.tokenizer
    config = snapshots[0].model.config
    require_attention(config, "head types over training")
    ids = probe_ids(config.vocab_size, tokenizer, repeat, seed, config.context_length)
    n_bos = len(getattr(tokenizer, "prefix_ids", ()) or ())
    R = (ids.size - n_bos) // 2
    rows = []  # one snapshot at a time, reduced to its numbers at once (a long run's traces held together: GBs)
    for s in snapshots:
        t = s.model.trace(ids.tolist())
        attn = np.stack([b.attn_weights for b in t.blocks])  # (L, H, T, T)
        rows.append((scores_of(attn, ids), half_losses(t.logits[None], ids, n_bos, R)))
    scores = {k: np.stack([r[0][k] for r in rows]) for k in HEAD_TYPES}  # (S, L, H) each
    first, second = (np.concatenate([np.atleast_1d(r[1][i]) for r in rows]) for i in (0, 1))  # (S,) each
    return HeadTypeCurves(np.array([s.step for s in snapshots], dtype=np.int64), ids, n_bos, R,
                          *(scores[k] for k in HEAD_TYPES), first, second)


def induction_formation(c: HeadTypeCurves, formed: float = FORMED_SCORE) -> Formation | None:
    """The step at which the run's best induction head forms, or None.

    None when there are fewer than two snapshots or no head's final induction score reaches
    ``formed``. Otherwise the head with the highest final induction score, and the consecutive
    snapshots between which that score rose most (the phase change).
    """
    best = c.best_head("induction")
    if best is None or c.steps.size < 2 or c.induction[-1][best] < formed:
        return None
    layer, head = best
    score = c.induction[:, layer, head]
    rise = np.diff(np.nan_to_num(score))
    after = int(np.argmax(rise)) + 1
    before = after - 1
    gain = c.first_half_loss - c.second_half_loss
    prev = c.previous_token[:, layer, head]
    return Formation(layer, head, before, after, int(c.steps[before]), int(c.steps[after]),
                     (float(score[before]), float(score[after])), (float(prev[before]), float(prev[after])),
                     (float(gain[before]), float(gain[after])))
