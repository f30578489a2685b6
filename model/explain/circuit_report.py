"""Activation patching and head scores as JSON or readable lines (``python -m model.trace --patch / --head-scores``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from model.explain.heads import HEAD_TYPES, HeadTypeScores
from model.explain.patching import IDENTITY_TOL, PatchingResult

#: What ``patching.metric`` says.
METRIC = ("logit difference logit(target) - logit(foil) at the last position, normalised: "
          "0 = the corrupted run, 1 = the clean run")


def _rounded(a: np.ndarray) -> list:
    """A nested list, NaN as None (JSON null)."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a), a, None).tolist()


def patching_json(r: PatchingResult, name: Callable[[int], str]) -> dict:
    """The ``patching`` object of ``python -m model.trace --patch CORRUPTED --json``.

    ``clean`` and ``corrupted`` are the metric's raw values (nats); the maps are normalised
    (``resid_pre``, ``attn_out``, ``mlp_out``: n_layers x T; ``head_out``: n_layers x n_heads).
    """
    return {
        "metric": METRIC, "target": name(r.target_id), "target_id": r.target_id,
        "foil": name(r.foil_id), "foil_id": r.foil_id, "foil_note": r.foil_note,
        "clean": r.clean, "corrupted": r.corrupted,
        "clean_tokens": [name(int(t)) for t in r.clean_ids],
        "corrupted_tokens": [name(int(t)) for t in r.corrupted_ids],
        **{site: _rounded(m) for site, m in r.maps.items()},
        "identity_error": r.identity_error, "identity_ok": r.identity_ok, "identity_tolerance": IDENTITY_TOL,
    }


def _row_label(clean: str, corrupted: str) -> str:
    return clean if clean == corrupted else f"{clean}/{corrupted}"


def format_patching(r: PatchingResult, name: Callable[[int], str]) -> str:
    """A readable summary: the metric, the identity check and each map (rows: layers)."""
    lines = [f"patching: logit({name(r.target_id)!r}) - logit({name(r.foil_id)!r}) at the last position: "
             f"clean {r.clean:.4f}, corrupted {r.corrupted:.4f} nats" + (f" ({r.foil_note})" if r.foil_note else "")]
    if not r.identity_ok:
        lines.append(f"identity check FAILED: a cell is {r.identity_error:.2e} away from 1 (clean into clean) or 0 "
                     "(corrupted into corrupted); the maps below mean nothing")
    else:
        lines.append(f"identity check passed (every cell within {IDENTITY_TOL:g} of 1 and 0)")
    labels = [_row_label(name(int(a)), name(int(b))) for a, b in zip(r.clean_ids, r.corrupted_ids)]
    lines.append("normalised (0 = corrupted, 1 = clean); columns: positions, clean/corrupted token where they differ")
    lines.append("  positions: " + " ".join(f"[{i}]{t}" for i, t in enumerate(labels)))
    for site in ("resid_pre", "attn_out", "mlp_out"):
        for layer, row in enumerate(r.maps[site]):
            lines.append(f"  {site:<9} L{layer}: " + " ".join(f"{v:6.3f}" for v in row))
    for layer, row in enumerate(r.head_out):
        lines.append(f"  head_out  L{layer}: " + " ".join(f"H{h} {v:6.3f}" for h, v in enumerate(row)))
    return "\n".join(lines)


def head_scores_json(hs: HeadTypeScores, name: Callable[[int], str]) -> dict:
    """The ``head_scores`` object of ``python -m model.trace --head-scores --json``."""
    return {
        "probe_ids": [int(t) for t in hs.token_ids], "probe_tokens": [name(int(t)) for t in hs.token_ids],
        "repeat": hs.repeat, "n_bos": hs.n_bos,
        **{kind: _rounded(hs.by_type[kind]) for kind in HEAD_TYPES},
        "first_half_loss": hs.first_half_loss, "second_half_loss": hs.second_half_loss,
    }


def format_head_scores(hs: HeadTypeScores) -> str:
    """One line per head with its three scores, the best of each type, and the probe's half losses."""
    lines = [f"head scores on the probe: {hs.repeat} random tokens repeated"
             + (f" after {hs.n_bos} BOS" if hs.n_bos else "") + " (mean attention on the pattern's keys; "
             "key 0 never counts)", f"  {'head':<7} {'previous':>9} {'duplicate':>9} {'induction':>9}"]
    L, H = hs.induction.shape
    for layer in range(L):
        for h in range(H):
            lines.append(f"  L{layer}H{h:<4} " + " ".join(f"{hs.by_type[k][layer, h]:9.3f}" for k in HEAD_TYPES))
    for kind in HEAD_TYPES:
        m = hs.by_type[kind]
        if np.isfinite(m).any():
            layer, h = np.unravel_index(np.nanargmax(m), m.shape)
            lines.append(f"  best {kind.replace('_', '-')}: L{layer}H{h} {m[layer, h]:.3f}")
    lines.append(f"probe loss: first copy {hs.first_half_loss:.3f}, second copy {hs.second_half_loss:.3f} nats/token "
                 f"(in-context gain {hs.in_context_gain:.3f})")
    return "\n".join(lines)
