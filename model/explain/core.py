"""``explain``: why the model predicts what it does at one position, in one call.

The Why panel calls :func:`explain` once per keystroke with the trace the session already has;
only leave-one-out runs the model again (one batched forward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.explain.dla import DirectLogitAttribution, direct_logit_attribution
from model.explain.lens import LensStage, logit_lens
from model.explain.loo import leave_one_out as _leave_one_out
from model.explain.scores import ScoreTerms, first_token_attention, first_token_mean, score_terms, score_terms_note
from model.records import Trace


@dataclass(frozen=True)
class Explanation:
    """Why the model predicts ``target_id`` after ``position``.

    Attributes
    ----------
    position : int
        The query position i (0-based, in the trace's tokens).
    target_id : int
        The token explained (the model's top-1 unless chosen).
    logit : float
        Its logit at i (nats before softmax); ``prob`` its probability in [0, 1].
    prob : float
    n_sources : int
        S: the tokens query i can see, 0..i with the causal mask (0..T-1 without it).
    causal : bool
        Whether the trace explained had the causal mask.
    attention : (n_layers, n_heads, S) float64
        a_ij, the weight of query i on source j per layer and head.
    dla : DirectLogitAttribution
        Direct logit attribution (``dla.sources`` (S,), ``dla.per_head``, ``dla.components``).
    leave_one_out : (S,) float64 or None
        Logit minus the logit with key j hidden everywhere; NaN at j = i; None when not asked.
    logit_lens : tuple of LensStage
        1 + 2 · n_layers stages; the last is the model's own output.
    score_terms : ScoreTerms or None
        Layer 0's scores for head ``head`` as five maps, or None (``score_terms_note`` says why).
    score_terms_note : str
        "" when ``score_terms`` is given, else one sentence saying why it does not apply.
    first_token_attention : (n_layers, n_heads) float64
        Weight of query i on key 0 (the "attention sink").
    first_token_mean : float
        Mean weight on key 0 over all layers, heads and queries 1..T-1 (NaN for T < 2).
    """

    position: int
    target_id: int
    logit: float
    prob: float
    n_sources: int
    causal: bool
    attention: np.ndarray
    dla: DirectLogitAttribution
    leave_one_out: np.ndarray | None
    logit_lens: tuple[LensStage, ...]
    score_terms: ScoreTerms | None
    score_terms_note: str
    first_token_attention: np.ndarray
    first_token_mean: float

    def disagreements(self, gap: float = 0.25) -> list[int]:
        """Sources whose share of attention and share of effect differ by ``gap`` or more.

        Over the sources j ≠ i: attention share = the weight on j averaged over layers and heads,
        divided by its sum over j; effect share = |leave_one_out_j| divided by its sum. A token
        with 40 % of the attention and 5 % of the effect (or the reverse) is listed at gap 0.25.
        Empty without leave-one-out or with fewer than two sources.
        """
        if self.leave_one_out is None:
            return []
        others = [j for j in range(self.n_sources) if j != self.position]
        if len(others) < 2:
            return []
        att = self.attention.mean(axis=(0, 1))[others]
        eff = np.abs(self.leave_one_out[others])
        if att.sum() <= 0 or eff.sum() <= 0:
            return []
        gaps = np.abs(att / att.sum() - eff / eff.sum())
        return [j for j, g in zip(others, gaps) if g >= gap]


def explain(model, tr: Trace, position: int | None = None, target: int | None = None, *, head: int = 0,
            top_k: int = 5, leave_one_out: bool = True) -> Explanation:
    """Explain trace ``tr``'s prediction at ``position``: lens, attribution, leave-one-out, score terms.

    Parameters
    ----------
    model : GPT
        The model that made ``tr`` (the same weights: they are read, and leave-one-out re-runs it).
    tr : Trace
        A trace of at least one token, as the session keeps it; its interventions (ablated
        heads, τ, scale, key mask) are honoured.
    position : int, optional
        The query position, 0 <= position < T; negative counts from the end; default the last.
    target : int, optional
        The token id to explain; default the top-1 at ``position``.
    head : int
        The layer-0 head whose scores are split into terms.
    top_k : int
        Tokens per logit-lens stage.
    leave_one_out : bool
        False skips the one extra (batched) forward.

    Returns
    -------
    Explanation

    Raises
    ------
    ValueError
        On an empty trace, or a position, target or head out of range.
    """
    T, cfg = tr.n_tokens, model.config
    if T == 0:
        raise ValueError("nothing to explain: the text has no tokens")
    position = T - 1 if position is None else int(position)
    if not -T <= position < T:
        raise ValueError(f"position {position} is out of range (0..{T - 1})")
    position %= T
    if target is None:
        target = int(np.argmax(tr.logits[position]))
    if not 0 <= int(target) < cfg.vocab_size:
        raise ValueError(f"target id {target} is outside the vocabulary (0..{cfg.vocab_size - 1})")
    target = int(target)
    if not 0 <= head < cfg.n_heads:
        raise ValueError(f"head {head} is out of range (0..{cfg.n_heads - 1})")
    S = position + 1 if tr.causal else T
    note = score_terms_note(model, tr)
    return Explanation(
        position=position, target_id=target, logit=float(tr.logits[position, target]),
        prob=float(torch.softmax(torch.tensor(tr.logits[position], dtype=torch.float64), -1)[target]), n_sources=S, causal=tr.causal,
        attention=np.stack([layer.attn_weights[:, position, :S] for layer in tr.blocks]).astype(np.float64),
        dla=direct_logit_attribution(model, tr, position, target, S),
        leave_one_out=_leave_one_out(model, tr, position, target, S) if leave_one_out else None,
        logit_lens=logit_lens(model, tr, position, target, top_k),
        score_terms=None if note else score_terms(model, tr, head), score_terms_note=note,
        first_token_attention=first_token_attention(tr, position), first_token_mean=first_token_mean(tr),
    )
