"""Activation patching: where in the model does a changed word change the answer?

Two texts of the same length: *clean* and *corrupted* (one word changed). The metric is the logit
difference between a target token and a foil token at the last position,

    m(run) = logit_target - logit_foil                         (nats),

by default the clean run's top-1 against the corrupted run's top-1. One activation of the clean
run at a time is copied into the corrupted run (:class:`model.core.interventions.Patch`: the
residual stream before each block at each position, each head's output at every position, each
block's attention and MLP output at each position), and the metric is read again, normalised so
that 0 is the corrupted run and 1 the clean one:

    patched = (m(corrupted with the clean activation) - m(corrupted)) / (m(clean) - m(corrupted)).

This is "causal tracing" of Meng et al. 2022 ("Locating and editing factual associations in GPT")
with a clean corruption and the normalised logit difference recommended by Heimersheim & Nanda 2024
("How to use and interpret activation patching"). Each cell is one forward of the model's own
path with one patch; the forwards run in batches, one patch per batch row.

The identity check runs the same cells twice more: clean patched into clean must give 1 in every
cell and corrupted into corrupted 0 (within :data:`IDENTITY_TOL`), and every batch's unpatched runs
must agree. A patch that misses its place, or a forward whose rows depend on each other, fails
it, and then the numbers mean nothing. The activation copied comes from the clean row of the same
batch (``Patch.source_row``), not from a separate trace: a forward of another batch size rounds
differently in the last bits, which the normalisation can magnify beyond the tolerance when the two
runs' metrics are close.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import torch

from model.core.architectures import require_attention
from model.core.interventions import Interventions, Patch
from model.explain.loo import copies_per_batch, stop_if

#: The sites of the layers x positions maps, in the order of :attr:`PatchingResult.maps`.
POSITION_SITES = ("resid_pre", "attn_out", "mlp_out")
#: The most an identity cell may differ from 1 (clean into clean) or 0 (corrupted into corrupted).
IDENTITY_TOL = 1e-6


class LengthMismatch(ValueError):
    """The two texts tokenize to different lengths: there is no position-by-position patching."""


@dataclass(frozen=True)
class PatchingResult:
    """What patching the clean run into the corrupted one does to the metric. L layers, H heads, T tokens.

    Attributes
    ----------
    clean_ids, corrupted_ids : (T,) int64
    target_id, foil_id : int
        The metric is logit[target_id] - logit[foil_id] at position T - 1.
    foil_note : str
        How the foil was chosen ("" when given or the corrupted run's top-1).
    clean, corrupted : float
        The metric of the two runs unpatched, in nats.
    resid_pre, attn_out, mlp_out : (L, T) float64
        The normalised metric with that layer's activation at that position patched.
    head_out : (L, H) float64
        The normalised metric with that head's output patched at every position.
    identity_error : float
        The largest distance of a clean-into-clean cell from 1 or a corrupted-into-corrupted cell from 0.
    """

    clean_ids: np.ndarray
    corrupted_ids: np.ndarray
    target_id: int
    foil_id: int
    foil_note: str
    clean: float
    corrupted: float
    resid_pre: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    mlp_out: np.ndarray
    identity_error: float

    @property
    def identity_ok(self) -> bool:
        """True when the identity check passed (every cell within :data:`IDENTITY_TOL`)."""
        return bool(self.identity_error <= IDENTITY_TOL)

    @property
    def maps(self) -> dict[str, np.ndarray]:
        """Every map by its site's name: ``resid_pre``, ``attn_out``, ``mlp_out``, ``head_out``."""
        return {"resid_pre": self.resid_pre, "attn_out": self.attn_out, "mlp_out": self.mlp_out,
                "head_out": self.head_out}


def patch_cells(config, T: int) -> list[tuple[str, int, int]]:
    """The cells of a patching sweep in result order: (site, layer, position or head), the
    position sites layer by layer and position by position, then every head of every layer."""
    cells = [(site, layer, i) for site in POSITION_SITES for layer in range(config.n_layers) for i in range(T)]
    return cells + [("head_out", layer, h) for layer in range(config.n_layers) for h in range(config.n_heads)]


def metric(logits: torch.Tensor, target: int, foil: int) -> torch.Tensor:
    """logit[target] - logit[foil] of logits (..., vocab_size), in float64 nats."""
    return logits[..., target].double() - logits[..., foil].double()


#: The rows every batch of a sweep starts with: the clean run and the corrupted run, unpatched.
CLEAN_ROW, CORRUPTED_ROW = 0, 1


def _patch(cell: tuple[str, int, int], row: int, source_row: int) -> Patch:
    site, layer, at = cell
    if site == "head_out":
        return Patch(site, layer, head=at, row=row, source_row=source_row)
    return Patch(site, layer, position=at, row=row, source_row=source_row)


def _sweep(model, clean: np.ndarray, corrupted: np.ndarray, jobs: list[tuple[bool, int, tuple]],
           base: Interventions, target: int, foil: int, options: dict,
           should_stop) -> tuple[np.ndarray, np.ndarray]:
    """The metric of each job and of the two runs unpatched.

    A job (into_clean, source_row, cell) runs the clean (or corrupted) ids with the cell's
    activation copied from the batch's clean or corrupted row. Every batch has the same number of
    rows (the last one filled up with unpatched clean rows), rows 0 and 1 the two texts
    unpatched: the rows of equal batches are computed alike, so clean patched from clean equals
    the clean row bit for bit. ``options``: ``positional_encoding`` and ``causal`` for the forward.

    Returns
    -------
    metrics : (len(jobs),) float64
    baselines : (n_batches, 2) float64
        The clean and the corrupted metric of each batch (equal in every batch).
    """
    device = next(model.parameters()).device
    T = clean.shape[0]
    per_batch = min(max(3, copies_per_batch(model.config, T, T)), len(jobs) + 2) - 2  # jobs per batch
    out, baselines = np.empty(len(jobs)), []
    for start in range(0, len(jobs), per_batch):
        stop_if(should_stop)
        chunk = jobs[start:start + per_batch]
        rows = [clean, corrupted] + [clean if into_clean else corrupted for into_clean, _, _ in chunk]
        rows += [clean] * (per_batch - len(chunk))  # the same shape as every other batch
        patches = tuple(_patch(cell, row + 2, source) for row, (_, source, cell) in enumerate(chunk))
        ids = torch.from_numpy(np.stack(rows)).to(device)  # (2 + per_batch, T)
        with torch.no_grad():
            logits = model(ids, interventions=replace(base, patches=patches), positions=[T - 1],
                           **options)  # (2 + per_batch, 1, vocab_size)
        m = metric(logits[:, 0], target, foil).cpu().numpy()
        out[start:start + len(chunk)] = m[2:2 + len(chunk)]
        baselines.append(m[:2])
    return out, np.array(baselines)


def _choose(clean_logits: np.ndarray, corrupted_logits: np.ndarray, target: int | None,
            foil: int | None) -> tuple[int, int, str]:
    """(target, foil, note): the defaults are the clean top-1 and the corrupted top-1; when those
    are one token, the foil is the corrupted run's most likely other token (the note says so)."""
    target = int(np.argmax(clean_logits)) if target is None else int(target)
    if foil is not None:
        return target, int(foil), ""
    order = np.argsort(-corrupted_logits, kind="stable")
    if int(order[0]) != target:
        return target, int(order[0]), ""
    return target, int(order[1]), "the corrupted text's top-1 is the target too: the foil is its second"


def activation_patching(model, clean_ids: Sequence[int], corrupted_ids: Sequence[int], target: int | None = None,
                        foil: int | None = None, *, base: Interventions | None = None,
                        positional_encoding: bool = True, causal: bool = True,
                        should_stop: Callable[[], bool] | None = None) -> PatchingResult:
    """Patch each activation of the clean run into the corrupted run, one at a time (see the module docstring).

    Parameters
    ----------
    model : GPT
    clean_ids, corrupted_ids : sequence of int, the same length T, 1 <= T <= context_length
    target, foil : int, optional
        The metric's two tokens; default the clean top-1 and the corrupted top-1 at position T - 1.
    base : Interventions, optional
        Changes every run keeps (heads switched off); its own patches are replaced.
    positional_encoding, causal : bool
        As for :meth:`GPT.trace`.
    should_stop : callable, optional
        Asked between batches; True raises :class:`model.explain.loo.Interrupted`.

    Returns
    -------
    PatchingResult

    Raises
    ------
    LengthMismatch
        When the texts have different lengths (or none).
    ValueError
        When a text is longer than the context, an id or token is out of range, the two runs give
        the same metric (nothing to normalise: choose another target or foil), or the model has
        no attention (the model before attention).
    """
    require_attention(model.config, "activation patching")
    clean, corrupted = (np.asarray(list(ids), dtype=np.int64) for ids in (clean_ids, corrupted_ids))
    if clean.shape != corrupted.shape or clean.size == 0:
        raise LengthMismatch(f"the clean text has {clean.size} tokens and the corrupted one {corrupted.size}: "
                             "patching compares them position by position, so they need the same number of tokens")
    base = replace(base or Interventions(), patches=())
    traces = [model.trace(ids.tolist(), positional_encoding=positional_encoding, causal=causal, interventions=base)
              for ids in (clean, corrupted)]
    if traces[0].dropped:
        raise ValueError(f"the texts have {clean.size} tokens, more than the context of {model.config.context_length}")
    V = model.config.vocab_size
    target, foil, note = _choose(traces[0].logits[-1], traces[1].logits[-1], target, foil)
    if not (0 <= target < V and 0 <= foil < V):
        raise ValueError(f"the target and the foil must be ids 0..{V - 1}, got {target} and {foil}")
    if target == foil:
        raise ValueError("the target and the foil are the same token: their logit difference is always 0")
    cells = patch_cells(model.config, clean.size)
    jobs = [(into_clean, source, cell) for into_clean, source in ((False, CLEAN_ROW), (True, CLEAN_ROW),
                                                                  (False, CORRUPTED_ROW)) for cell in cells]
    options = {"positional_encoding": positional_encoding, "causal": causal}
    raw, baselines = _sweep(model, clean, corrupted, jobs, base, target, foil, options, should_stop)
    m_clean, m_corrupted = (float(v) for v in baselines[0])
    if m_clean == m_corrupted:
        raise ValueError(f"the clean and the corrupted run give the same logit difference ({m_clean:.4g} nats): "
                         "nothing to normalise; choose another target or foil")
    norm = (raw.reshape(3, len(cells)) - m_corrupted) / (m_clean - m_corrupted)  # patched, clean<-clean, corr<-corr
    drift = np.abs(baselines - baselines[0]).max() / abs(m_clean - m_corrupted)  # batches that disagree
    identity = max(float(np.abs(norm[1] - 1).max()), float(np.abs(norm[2]).max()), float(drift))
    L, T, H = model.config.n_layers, clean.size, model.config.n_heads
    maps = norm[0, :len(POSITION_SITES) * L * T].reshape(len(POSITION_SITES), L, T)
    return PatchingResult(clean, corrupted, target, foil, note, m_clean, m_corrupted, resid_pre=maps[0],
                          head_out=norm[0, len(POSITION_SITES) * L * T:].reshape(L, H), attn_out=maps[1],
                          mlp_out=maps[2], identity_error=identity)
