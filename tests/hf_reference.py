"""What agreeing with a fixture's reference outputs means (reference.npz, transformers' own forward pass)."""

from __future__ import annotations

import numpy as np


def assert_agrees(ckpt, ref) -> object:
    """The fixture's text tokenizes to exactly ``token_ids``, and the logits (1e-4), every layer's attention
    weights (1e-5) and transformers' hidden states (1e-4: block 0's input, each block's output, the last after
    the final norm) are the reference's. Returns the trace."""
    ids = ckpt.tokenizer.encode(str(ref["text"])).ids
    assert list(ids) == ref["token_ids"].tolist()  # the text tokenizes exactly (a BOS included)
    trace = ckpt.model.trace(ids)
    np.testing.assert_allclose(trace.logits, ref["logits"], rtol=0, atol=1e-4)
    attn = np.stack([block.attn_weights for block in trace.blocks])  # (n_layers, n_heads, T, T)
    np.testing.assert_allclose(attn, ref["attn_weights"], rtol=0, atol=1e-5)
    ours = [trace.x] + [block.resid_post for block in trace.blocks[:-1]] + [trace.ln_final]
    np.testing.assert_allclose(np.stack(ours), ref["hidden_states"], rtol=0, atol=1e-4)
    return trace
