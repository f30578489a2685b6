"""Leave-one-out: how much the target's logit drops when one earlier token is hidden.

For each source j, key j is masked for every query in every layer and head (a query still sees
itself, so row j is not left empty), and the target's logit at the position explained is
compared with the unmasked one. All the re-runs are one forward with a batch axis: row 0 is the
unmasked model, row b hides one key (:func:`model.interventions.leave_one_out_masks`). This is
"attention knockout" of Geva et al. 2023, applied to all layers at once.
"""

from __future__ import annotations

import numpy as np
import torch

from model.interventions import Interventions, leave_one_out_masks
from model.records import Trace


def leave_one_out(model, tr: Trace, position: int, target: int, n_sources: int) -> np.ndarray:
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

    Returns
    -------
    ndarray (S,) float64
        logit - logit_without_j in nats of logit (positive: token j helped the target). Entry
        i is NaN: a query always sees itself, so its own key cannot be hidden from it.

    Notes
    -----
    With the causal mask only tokens 0..i are run (later ones cannot reach position i), so
    one call runs a batch of i + 1 rows of i + 1 tokens; the rows share the embeddings and
    layer 0's q, k and v (the same input), and the last block's MLP runs on row i only.
    """
    T = position + 1 if tr.causal else tr.n_tokens
    keys = [j for j in range(n_sources) if j != position]
    out = np.full(n_sources, np.nan)
    if not keys:
        return out
    device = model.tok_emb.weight.device
    masks = leave_one_out_masks(T, keys, device)  # (S - 1, T, T)
    masks = torch.cat([torch.ones(1, T, T, dtype=torch.bool, device=device), masks])  # row 0: nothing hidden
    base = tr.interventions or Interventions()
    if base.key_mask is not None:
        masks = masks & base.key_mask.to(device)[..., :T, :T]
    ids = torch.tensor(tr.token_ids[:T], dtype=torch.long, device=device)
    ids = ids.unsqueeze(0)  # (1, T): the masks' batch axis broadcasts it (one embedding, one layer-0 q, k, v)
    with torch.no_grad():
        logits = model(ids, positional_encoding=tr.positional_encoding, causal=tr.causal,
                       interventions=base.with_key_mask(masks), positions=[position])  # (S, 1, vocab_size)
    target_logit = logits[:, 0, target].double().cpu().numpy()  # (S,)
    out[keys] = target_logit[0] - target_logit[1:]
    return out
