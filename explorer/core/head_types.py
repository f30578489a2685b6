"""Head types for the views: the jobs that score every head, the words of a head's type, and the
Training panel's paragraph on the step at which an induction head forms (all computed, no Qt)."""

from __future__ import annotations

import math
import numpy as np

from model.explain.heads import HEAD_TYPES, HeadTypeScores, head_scores, text_head_scores
from model.training.heads_over_training import HeadTypeCurves, head_types_over_training, induction_formation

#: How each type is named in the views.
TYPE_NAMES = {"previous_token": "previous-token", "duplicate_token": "duplicate-token", "induction": "induction"}
#: A head is called a head of a type when its score of that type is its highest and at least this.
TYPE_SCORE = 0.3


def probe_job(checkpoint, _inputs=None) -> HeadTypeScores:
    """Session job: the probe's scores and attention with the model as the session shows it (heads
    switched off stay off)."""
    return head_scores(checkpoint.model, checkpoint.tokenizer)


def text_job(_checkpoint, trace) -> HeadTypeScores:
    """Session job: the scores of a trace's own attention on its own tokens (no forward pass)."""
    return text_head_scores(trace)


def curves_job(_checkpoint, inputs) -> HeadTypeCurves:
    """Session job: the scores over a run's snapshots; ``inputs`` = (snapshots, tokenizer)."""
    snapshots, tokenizer = inputs
    return head_types_over_training(snapshots, tokenizer)


def head_type(scores: dict[str, np.ndarray], layer: int, head: int) -> str | None:
    """The head's type by :data:`TYPE_SCORE` (its highest score, if high enough), or None."""
    values = {k: float(scores[k][layer, head]) for k in HEAD_TYPES if np.isfinite(scores[k][layer, head])}
    if not values:
        return None
    kind = max(values, key=values.get)
    return kind if values[kind] >= TYPE_SCORE else None


def head_tooltip(scores: dict[str, np.ndarray], layer: int, head: int, where: str) -> str:
    """One line for a grid cell: the head, its type and its three scores, e.g.
    ``"L1H2 on the probe: an induction head (induction 0.83, previous-token 0.05, duplicate-token 0.02)"``."""
    kind = head_type(scores, layer, head)
    named = f"{'an' if kind == 'induction' else 'a'} {TYPE_NAMES[kind]} head" if kind else "no clear type"
    parts = ", ".join(f"{TYPE_NAMES[k]} " + ("n/a" if math.isnan(v := float(scores[k][layer, head])) else f"{v:.3f}")
                      for k in HEAD_TYPES)
    return f"L{layer}H{head} {where}: {named} ({parts})"


def formation_paragraph(c: HeadTypeCurves) -> str:
    """The lesson at the step where the best induction head forms, written from the curves.

    Names the head, the two snapshots between which its induction score rose most, its scores and
    the probe's in-context gain (first-copy minus second-copy loss) on both sides, the
    previous-token score of the run's best previous-token head in an earlier layer, or says that
    no head reached :data:`model.training.heads_over_training.FORMED_SCORE`.
    """
    f = induction_formation(c)
    if f is None:
        best = np.nanmax(c.induction[-1]) if np.isfinite(c.induction[-1]).any() else float("nan")
        return (f"No induction head forms in these snapshots: the highest induction score at the last one is "
                f"{best:.2f} (a head is called one from 0.3 up), and the probe's second copy is predicted "
                f"{c.first_half_loss[-1] - c.second_half_loss[-1]:.2f} nats better than its first.")
    text = (f"<b>An induction head forms between step {f.before_step:,} and step {f.after_step:,}.</b> "
            f"Head L{f.layer}H{f.head}'s induction score (its attention on the token right after an earlier copy of "
            f"the current token) jumps from {f.induction[0]:.2f} to {f.induction[1]:.2f}, and at the same step the "
            f"loss on the probe's second copy falls below the first copy's: the gain goes from {f.gain[0]:.2f} to "
            f"{f.gain[1]:.2f} nats (Olsson et al. 2022 call this the phase change). Before it, the head puts "
            f"{f.previous[0]:.2f} of its attention on the previous token and {f.induction[0]:.2f} on the token after "
            f"the earlier copy; after it, {f.previous[1]:.2f} and {f.induction[1]:.2f}.")
    earlier = c.previous_token[:, :f.layer]  # (S, f.layer, H): the heads that can feed it
    if earlier.size and np.isfinite(earlier[-1]).any():
        layer, head = np.unravel_index(np.nanargmax(earlier[-1]), earlier.shape[1:])
        prev = earlier[:, layer, head]
        text += (f" It finds that token because a head of an earlier layer marks each token with the one before "
                 f"it: L{layer}H{head}, whose previous-token score goes from {prev[f.before]:.2f} to "
                 f"{prev[f.after]:.2f} between the same two snapshots ({prev[-1]:.2f} at the end).")
    return text + (f" Move the slider to step {f.before_step:,} and then {f.after_step:,}, and look at "
                   f"L{f.layer}H{f.head} in the attention panel on a text that repeats itself.")
