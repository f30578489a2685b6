"""Named facts a tour step can show that are not tensors of the trace: computed by plain functions
from the model that made it, when the step is shown (never numbers written in the tour file).

Each fact is ``fn(env, *args)`` with ``env`` an :class:`~explorer.core.tours.expressions.Env`; a
tour calls it like a function: ``{params("blocks.0.attn"):,}``. A lesson's own facts (the model
before attention's, say) are added to :data:`FACTS` by name.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from model.explain.core import Explanation, explain

_EXPLAINED: dict[tuple[int, int], Explanation] = {}  # the last explanation, per (trace, position)


def params(env, prefix: str = "") -> int:
    """Parameters of the model whose name starts with ``prefix`` (the module path: ``"blocks.0.attn"``,
    ``"pos_emb"``, ``"tok_emb"``; ``""``: all of them), tied weights counted once.

    Raises
    ------
    ValueError
        When no parameter has that prefix.
    """
    named = list(env.checkpoint.model.named_parameters())
    chosen = [p for name, p in named if not prefix or name == prefix or name.startswith(prefix + ".")]
    if not chosen:
        raise ValueError(f"the model has no parameters under {prefix!r}")
    return int(sum(p.numel() for p in chosen))


def val_loss(env) -> float:
    """The validation loss stored with the checkpoint (nats per token).

    Raises
    ------
    ValueError
        When the file records none.
    """
    value = (env.checkpoint.training or {}).get("val_loss")
    if not isinstance(value, (int, float)):
        raise ValueError("this checkpoint records no validation loss")
    return float(value)


def _explained(env) -> Explanation:
    """The Why panel's explanation of the top-1 at ``pos`` (computed once per trace and position)."""
    position = env.symbol("pos")
    key = (id(env.trace), position)
    if key not in _EXPLAINED:
        _EXPLAINED.clear()  # one trace at a time: a step shows one
        _EXPLAINED[key] = explain(env.checkpoint.model, env.trace, position)
    return _EXPLAINED[key]


def leave_one_out(env) -> np.ndarray:
    """(S,) the top-1's logit minus its logit with each earlier token j hidden from every query
    (:mod:`model.explain.loo`); NaN at the token itself."""
    return _explained(env).leave_one_out


def direct(env) -> np.ndarray:
    """(S,) each token's direct contribution to the top-1's logit through attention (direct logit
    attribution, :mod:`model.explain.dla`)."""
    return _explained(env).dla.sources


def logit_part(env, name: str) -> float:
    """A part of the top-1's logit that is not a token's (``"blocks.0.mlp"``, ``"tok_emb"``, ...).

    Raises
    ------
    ValueError
        For a part this model does not have.
    """
    parts = _explained(env).dla.components
    if name not in parts:
        raise ValueError(f"the logit has no part {name!r}; it has {', '.join(parts)}")
    return float(parts[name])


def target_logit(env) -> float:
    """The top-1's logit at ``pos`` (nats before softmax)."""
    return float(_explained(env).logit)


#: Every fact by the name a tour calls it with.
FACTS: dict[str, Callable] = {"params": params, "val_loss": val_loss, "leave_one_out": leave_one_out,
                              "direct": direct, "logit_part": logit_part, "target_logit": target_logit}
