"""The logit lens, stage by stage: the next-token distribution the residual stream already holds.

After the embeddings, after each block's attention and after each MLP, the residual at one
position is passed through the final norm and the unembedding, as if the model ended there
(nostalgebraist 2020, "interpreting GPT: the logit lens"). The last stage is the model's output.
A parallel block (GPT-NeoX, Phi) adds attention and the MLP at once: it has no residual between
them, so its one stage is after both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.tracing.records import Trace


@dataclass(frozen=True)
class LensStage:
    """One stage of the logit lens at the position explained.

    Attributes
    ----------
    stage : str
        The residual's dotted name in the trace: ``x``, ``blocks.L.resid_mid`` (after
        layer L's attention, in a sequential block), ``blocks.L.resid_post`` (after its MLP).
    top_k : tuple of (int, float)
        The k most likely next token ids with their probabilities in [0, 1], most likely first.
    kl_to_final : float
        KL(P_final ‖ P_stage) in nats, >= 0 (0 for the last stage, up to rounding).
    target_prob : float
        The target's probability at this stage, in [0, 1].
    """

    stage: str
    top_k: tuple[tuple[int, float], ...]
    kl_to_final: float
    target_prob: float


def stage_names(n_layers: int, sequential: bool = True) -> list[str]:
    """The 1 + 2 · n_layers stage names in model order (1 + n_layers for parallel blocks)."""
    names = ["x"]
    for li in range(n_layers):
        names += ([f"blocks.{li}.resid_mid"] if sequential else []) + [f"blocks.{li}.resid_post"]
    return names


def logit_lens(model, tr: Trace, position: int, target: int, top_k: int = 5) -> tuple[LensStage, ...]:
    """The logit lens at ``position`` of trace ``tr`` (made by ``model``).

    Parameters
    ----------
    model : GPT
    tr : Trace
    position : int
        0 <= position < T.
    target : int
        The token id whose probability each stage also reports.
    top_k : int
        How many next tokens per stage (clamped to vocab_size).

    Returns
    -------
    tuple of LensStage
        1 + 2 · n_layers stages (1 + n_layers for parallel blocks), in model order.
    """
    resid = [tr.x[position]]
    for layer in tr.blocks:
        resid += ([layer.resid_mid[position]] if layer.resid_mid is not None else []) + [layer.resid_post[position]]
    w = model.unembed_weight  # (vocab_size, d_model): for the device and dtype
    with torch.no_grad():
        r = torch.from_numpy(np.stack(resid)).to(w.device, w.dtype)  # (stages, d_model)
        log_p = torch.log_softmax(model.final_logits(r).double().cpu(), dim=-1)  # (stages, vocab_size)
        log_final = torch.log_softmax(torch.tensor(tr.logits[position], dtype=torch.float64), dim=-1)  # (vocab_size,)
        kl = (log_final.exp() * (log_final - log_p)).sum(-1).clamp_min(0.0)  # (stages,)
    k = max(0, min(int(top_k), w.shape[0]))
    probs = log_p.exp()  # (stages, vocab_size)
    top_p, top_i = probs.topk(k, dim=-1)  # (stages, k) each, most likely first
    stages = []
    sequential = not tr.blocks or tr.blocks[0].resid_mid is not None
    for s, name in enumerate(stage_names(len(tr.blocks), sequential)):
        top = tuple(zip(top_i[s].tolist(), top_p[s].tolist()))
        stages.append(LensStage(name, top, float(kl[s]), float(probs[s, target])))
    return tuple(stages)
