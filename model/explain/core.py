"""``explain``: why the model predicts what it does at one position, in one call.

The Why panel calls :func:`explain` once per keystroke with the trace the session already has;
only leave-one-out runs the model again (batched forwards, one masked copy per source hidden: at
long contexts only for the sources that :func:`leave_one_out_sources` picks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from model.explain.dla import DirectLogitAttribution, direct_logit_attribution
from model.explain.lens import LensStage, logit_lens
from model.explain.loo import leave_one_out as _leave_one_out
from model.explain.scores import (
    ScoreTerms, first_token_attention, first_token_mean, heads_on, score_terms, score_terms_note,
)
from model.tracing.records import Trace


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
        Logit minus the logit with key j hidden everywhere; NaN at j = i and at every source
        not computed (``max_leave_one_out``); None when not asked.
    leave_one_out_computed : (S,) bool or None
        True for each source whose leave-one-out was computed (every j != i unless capped);
        None when not asked.
    logit_lens : tuple of LensStage
        1 + 2 · n_layers stages; the last is the model's own output.
    score_terms : ScoreTerms or None
        Layer 0's scores for head ``head`` as five maps, or None (``score_terms_note`` says why).
    score_terms_note : str
        "" when ``score_terms`` is given, else one sentence saying why it does not apply.
    first_token_attention : (n_layers, n_heads) float64
        Weight of query i on key 0 (the "attention sink").
    first_token_mean : float
        Mean weight on key 0 over the layers and heads that are on and queries 1..T-1 (NaN for
        T < 2 or every head off).
    heads_on : (n_layers, n_heads) bool or None
        False for each head the trace's interventions switch off (None: every head on).
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
    leave_one_out_computed: np.ndarray | None
    logit_lens: tuple[LensStage, ...]
    score_terms: ScoreTerms | None
    score_terms_note: str
    first_token_attention: np.ndarray
    first_token_mean: float
    heads_on: np.ndarray | None = None

    def mean_attention(self) -> np.ndarray:
        """(S,) the weight of query i on each source averaged over the layers and heads that are on
        (a head switched off has weights but adds nothing); zeros when every head is off."""
        on = self.heads_on if self.heads_on is not None else np.ones(self.attention.shape[:2], dtype=bool)
        return self.attention[on].mean(axis=0) if on.any() else np.zeros(self.attention.shape[2])

    @property
    def n_leave_one_out(self) -> int:
        """How many sources' leave-one-out was computed (0 when not asked)."""
        return 0 if self.leave_one_out_computed is None else int(self.leave_one_out_computed.sum())

    @property
    def leave_one_out_capped(self) -> bool:
        """True when leave-one-out was computed for some sources j != i but not all."""
        return 0 < self.n_leave_one_out < self.n_sources - 1

    def disagreements(self, gap: float = 0.25) -> list[int]:
        """Sources whose share of attention and share of effect differ by ``gap`` or more.

        Over the sources j ≠ i whose leave-one-out was computed: attention share = the weight on
        j averaged over the layers and heads that are on (:meth:`mean_attention`), divided by its sum over those j; effect share =
        |leave_one_out_j| divided by its sum. A token with 40 % of the attention and 5 % of the
        effect (or the reverse) is listed at gap 0.25. Empty without leave-one-out or with fewer
        than two such sources.
        """
        if self.leave_one_out is None:
            return []
        others = [j for j in range(self.n_sources) if j != self.position and self.leave_one_out_computed[j]]
        if len(others) < 2:
            return []
        att = self.mean_attention()[others]
        eff = np.abs(self.leave_one_out[others])
        if att.sum() <= 0 or eff.sum() <= 0:
            return []
        gaps = np.abs(att / att.sum() - eff / eff.sum())
        return [j for j, g in zip(others, gaps) if g >= gap]


def leave_one_out_sources(attention: np.ndarray, direct: np.ndarray, position: int, limit: int | None) -> np.ndarray:
    """The sources whose leave-one-out :func:`explain` computes: all, or at most ``limit`` of them.

    Parameters
    ----------
    attention : (S,) float
        The weight of query i on each source (the Why panel's: mean over layers and heads).
    direct : (S,) float
        Each source's direct logit attribution (nats of logit).
    position : int
        The query i (never hidden: a query always sees itself).
    limit : int or None
        None: every source j != i. N: at most N sources: the first token (j = 0, where an
        "attention sink" parks weight), then in turn the next of the sources with the most
        attention and the next with the largest |direct| (about N/2 each, fewer when the two
        rankings share sources).

    Returns
    -------
    ndarray of int, sorted

    Raises
    ------
    ValueError
        When ``limit`` is below 1.
    """
    S = attention.shape[0]
    others = np.array([j for j in range(S) if j != position], dtype=np.int64)
    if limit is None or limit >= others.size:
        return others
    if limit < 1:
        raise ValueError(f"max_leave_one_out must be at least 1 (None: every source), got {limit}")
    by_attention = others[np.argsort(-attention[others], kind="stable")]
    by_direct = others[np.argsort(-np.abs(direct[others]), kind="stable")]
    chosen = dict.fromkeys([0] if position != 0 else [])
    for pair in zip(by_attention, by_direct):
        for j in pair:
            if len(chosen) < limit:
                chosen.setdefault(int(j))
        if len(chosen) >= limit:
            break
    return np.array(sorted(chosen), dtype=np.int64)


def explain(model, tr: Trace, position: int | None = None, target: int | None = None, *, head: int = 0,
            top_k: int = 5, leave_one_out: bool = True, max_leave_one_out: int | None = None,
            should_stop: Callable[[], bool] | None = None) -> Explanation:
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
        False skips the extra (batched) forwards.
    max_leave_one_out : int, optional
        None: leave-one-out for every source. N: for at most N sources
        (:func:`leave_one_out_sources`: the first token and those with the most attention or
        direct effect), NaN for the others. Each source hidden costs up to one forward of the
        i + 1 tokens: at T = 1,024 all of them are a thousand forwards.
    should_stop : callable () -> bool, optional
        Asked between the steps of leave-one-out; True stops with
        :class:`~model.explain.loo.Interrupted` (a GUI's worker thread: newer work waits).

    Returns
    -------
    Explanation

    Raises
    ------
    ValueError
        On an empty trace, a trace without attention blocks (the model before attention: nothing here
        applies to it), or a position, target, head or max_leave_one_out out of range.
    Interrupted
        When ``should_stop()`` returned True.
    """
    T, cfg = tr.n_tokens, model.config
    if not tr.blocks:
        raise ValueError("nothing to explain this way: the model has no attention heads or residual stream")
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
    if max_leave_one_out is not None and max_leave_one_out < 1:
        raise ValueError(f"max_leave_one_out must be at least 1 (None: every source), got {max_leave_one_out}")
    S = position + 1 if tr.causal else T
    note = score_terms_note(model, tr)
    attention = np.stack([layer.attn_weights[:, position, :S] for layer in tr.blocks]).astype(np.float64)
    dla = direct_logit_attribution(model, tr, position, target, S)
    on = heads_on(tr)
    loo = computed = None
    if leave_one_out:
        mean = attention[on].mean(axis=0) if on.any() else np.zeros(S)
        sources = leave_one_out_sources(mean, dla.sources, position, max_leave_one_out)
        loo = _leave_one_out(model, tr, position, target, S, sources, should_stop)
        computed = np.zeros(S, dtype=bool)
        computed[sources] = True
    return Explanation(
        position=position, target_id=target, logit=float(tr.logits[position, target]),
        prob=float(torch.softmax(torch.tensor(tr.logits[position], dtype=torch.float64), -1)[target]), n_sources=S,
        causal=tr.causal, attention=attention, dla=dla, leave_one_out=loo, leave_one_out_computed=computed,
        logit_lens=logit_lens(model, tr, position, target, top_k),
        score_terms=None if note else score_terms(model, tr, head), score_terms_note=note,
        first_token_attention=first_token_attention(tr, position), first_token_mean=first_token_mean(tr),
        heads_on=on,
    )
