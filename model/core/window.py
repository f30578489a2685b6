"""The model before attention: a fixed-window MLP language model, read top to bottom.

The neural language model of Bengio et al. 2003 ("A Neural Probabilistic Language Model", JMLR 3),
with the transformer's embedding, GELU, final norm and tied unembedding. For token ids t_0 .. t_{T-1}
and a window of n = context_length slots, the prediction after position i reads

    x_i = concat(e[t_{i-n+1}], ..., e[t_{i-1}], e[t_i])      (n · d_model; slot s holds token i - (n-1) + s,
                                                             zeros for slots before the text)
    pre_act_i = x_i W_in + b_in = sum_s e[t_{i-n+1+s}] W_in[s] + b_in   (W_in[s]: slot s's own d_model x d_mlp block)
    hidden_i = GELU(pre_act_i)
    logits_i = LN_f(hidden_i W_out + b_out) tok_embᵀ

Each slot has its own block W_in[s] of the first weight matrix: the same token gets different weights
depending on where in the window it stands, and that layer grows with n (n · d_model · d_mlp). There is no
attention, no positional table and nothing shared across positions but the embedding.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from model.core.components import LayerNorm
from model.core.inputs import checked_ids
from model.core.plain import short_repr
from model.tracing.records import Trace
from model.tracing.schema import TraceSchema
from model.tracing.window_schema import WINDOW_SCHEMA

#: The name of this architecture in our checkpoint files (``model.formats.native``) and in
#: ``python -m model.train --arch``.
ARCHITECTURE = "window-mlp"


@dataclass(frozen=True)
class WindowConfig:
    """Shape of the fixed-window MLP language model (the model before attention).

    The defaults are the course's: a window of 32 tokens, the 4,096-word vocabulary, d_model 128 and
    a hidden layer of 48, which puts its parameter count (727,472) next to the default
    transformer's (726,528).

    Parameters
    ----------
    vocab_size : int
        Rows of the token-embedding table (and of the tied unembedding).
    context_length : int
        n, the window: how many of the last tokens the prediction reads (slots of W_in).
    d_model : int
        Width of a token embedding (and of the second layer's output).
    d_mlp : int
        Width of the hidden layer.
    norm_eps : float
        Epsilon of the final LayerNorm.

    Raises
    ------
    ValueError
        On any value out of range, naming the field.
    """

    vocab_size: int = 4096
    context_length: int = 32
    d_model: int = 128
    d_mlp: int = 48
    norm_eps: float = 1e-5

    #: The architecture's name in files and on the command line.
    architecture: ClassVar[str] = ARCHITECTURE
    #: What a trace of this model records (read by :func:`model.tracing.schema.schema_for`).
    trace_schema: ClassVar[TraceSchema] = WINDOW_SCHEMA

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "d_mlp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {short_repr(value)}")
        if self.context_length * self.d_model * self.d_mlp > 1 << 31:
            raise ValueError(f"a window of {self.context_length:,} slots of {self.d_model} x {self.d_mlp} is more "
                             "weights than this app builds")
        eps = self.norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or not 0 < eps < 1:
            raise ValueError(f"norm_eps must be a small positive number, got {short_repr(eps)}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WindowConfig":
        """Build a config from :meth:`to_dict` output.

        Raises
        ------
        ValueError
            On unknown keys or invalid values.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown config keys for a {ARCHITECTURE} model: {', '.join(map(str, unknown))}")
        return cls(**data)


def state_dict_shapes(config: WindowConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every tensor of ``WindowMLP(config).state_dict()``, without building it:
    ``tok_emb.weight`` (vocab_size, d_model), ``fc_in`` (d_mlp, context_length · d_model) and its
    bias, ``fc_out`` (d_model, d_mlp) and its bias, ``ln_f``'s gain and shift (d_model,)."""
    v, n, d, h = config.vocab_size, config.context_length, config.d_model, config.d_mlp
    return {"tok_emb.weight": (v, d), "fc_in.weight": (h, n * d), "fc_in.bias": (h,),
            "fc_out.weight": (d, h), "fc_out.bias": (d,), "ln_f.weight": (d,), "ln_f.bias": (d,)}


class WindowMLP(nn.Module):
    """The fixed-window MLP language model, with a full trace of its insides.

    Its ``forward`` and ``trace`` take the transformer's arguments (so the explorer, generation and
    training run it as they run a GPT); ``positional_encoding`` and ``causal`` change nothing (it has
    no positional table to switch off and never sees a later token), and it has no attention to
    intervene on.

    Parameters
    ----------
    config : WindowConfig
    device : torch.device or str, optional

    Notes
    -----
    Weights are initialised as the transformer's (normal, std 0.02; biases 0; the norm at 1 and 0).
    """

    def __init__(self, config: WindowConfig, device=None) -> None:
        super().__init__()
        self.config = config
        n, d, h = config.context_length, config.d_model, config.d_mlp
        self.tok_emb = nn.Embedding(config.vocab_size, d, device=device)
        self.fc_in = nn.Linear(n * d, h, device=device)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(h, d, device=device)
        self.ln_f = LayerNorm(d, eps=config.norm_eps, device=device)
        for module in (self.tok_emb, self.fc_in, self.fc_out):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        for module in (self.fc_in, self.fc_out):
            nn.init.zeros_(module.bias)

    state_dict_shapes = staticmethod(state_dict_shapes)

    def n_params(self) -> int:
        """Number of parameters (the tied unembedding counted once, as the embedding)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def unembed_weight(self) -> torch.Tensor:
        """The unembedding (vocab_size, d_model): the token-embedding table (tied)."""
        return self.tok_emb.weight

    def slot_weights(self, slot: int) -> np.ndarray:
        """W_in[slot]: the (d_model, d_mlp) block of the first layer that window slot ``slot`` (0 the
        oldest, context_length - 1 the newest token) multiplies its token's embedding by, in the
        course's orientation (its share of pre_act is e W_in[slot]); a float32 numpy copy.

        Raises
        ------
        ValueError
            For a slot outside 0 .. context_length - 1.
        """
        n, d = self.config.context_length, self.config.d_model
        if not 0 <= int(slot) < n:
            raise ValueError(f"slot {slot} is outside the window 0..{n - 1}")
        block = self.fc_in.weight.detach()[:, int(slot) * d:(int(slot) + 1) * d]  # (d_mlp, d_model)
        return block.t().float().cpu().numpy().copy()  # (d_model, d_mlp)

    def windows(self, e: torch.Tensor) -> torch.Tensor:
        """The window of every position: (B, T, d_model) embeddings to (B, T, context_length, d_model),
        slot s of row i holding the embedding at position i - (context_length - 1) + s, zeros before 0."""
        n = self.config.context_length
        if e.shape[1] == 0:
            return e.new_zeros(e.shape[0], 0, n, e.shape[2])
        padded = F.pad(e, (0, 0, n - 1, 0))  # (B, n - 1 + T, d_model): zeros before the text
        return padded.unfold(1, n, 1).transpose(-1, -2)  # (B, T, n, d_model)

    def _run(self, ids: torch.Tensor, record: dict | None = None) -> torch.Tensor:
        """The one forward path behind :meth:`forward` and :meth:`trace`: ids (B, T) to logits
        (B, T, vocab_size); ``record`` gets the rows of :data:`model.tracing.window_schema.WINDOW`."""
        T = ids.shape[1]
        if T > self.config.context_length:
            raise ValueError(f"{T} tokens exceed the context length of {self.config.context_length}")
        tok = self.tok_emb(ids)  # (B, T, d_model)
        win = self.windows(tok)  # (B, T, n, d_model)
        pre_act = self.fc_in(win.flatten(2))  # (B, T, d_mlp)
        hidden = self.act(pre_act)
        out = self.fc_out(hidden)  # (B, T, d_model)
        h = self.ln_f(out)
        logits = F.linear(h, self.unembed_weight)  # (B, T, vocab_size)
        if record is not None:
            n, d = self.config.context_length, self.config.d_model
            blocks = self.fc_in.weight.view(-1, n, d)  # (d_mlp, n, d_model): slot s's block is [:, s]
            slot_in = torch.einsum("btsd,msd->btsm", win, blocks)  # (B, T, n, d_mlp)
            record.update(tok=tok, slot_in=slot_in, pre_act=pre_act, hidden=hidden, window_out=out, ln_final=h,
                          logits=logits, blocks=[])
        return logits

    def forward(
        self, token_ids: torch.Tensor, *, positional_encoding: bool = True, causal: bool = True, interventions=None,
        positions: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """The next-token logits after each position, as :meth:`model.core.transformer.GPT.forward` gives them.

        Parameters
        ----------
        token_ids : LongTensor (T,) or a batch (B, T), at most context_length tokens each
        positional_encoding, causal, interventions
            The transformer's options, taken so that generation and training call both models alike:
            the first two change nothing, and ``interventions`` must change nothing.
        positions : sequence of int, optional
            Keep only these P positions: (B, P, vocab_size).

        Returns
        -------
        Tensor (T, vocab_size), or (B, T or P, vocab_size) for a batch
            Nats before softmax.

        Raises
        ------
        ValueError
            For more than context_length tokens, or interventions that would change attention.
        """
        _no_attention(interventions)
        squeeze = token_ids.dim() == 1
        ids = token_ids.unsqueeze(0) if squeeze else token_ids
        logits = self._run(ids)
        if positions is not None:
            logits = logits[:, list(positions)]  # (B, P, vocab_size)
        return logits[0] if squeeze else logits

    @torch.no_grad()
    def trace(
        self, token_ids: Sequence[int] | np.ndarray | torch.Tensor, *, positional_encoding: bool = True,
        causal: bool = True, interventions=None, reuse: Trace | None = None, start_position: int = 0,
    ) -> Trace:
        """Everything the model computes for one text, kept (:class:`~model.tracing.records.Trace`).

        Parameters
        ----------
        token_ids : sequence of int, any length
            Cropped to the last context_length ids as the transformer crops them (``Trace.dropped``).
        positional_encoding, causal : bool
            Accepted for the transformer's callers; they change nothing (the trace records
            ``positional_encoding=False``: nothing is added to an embedding, and ``causal=True``).
        interventions : Interventions, optional
            Must change nothing (this model has no attention).
        reuse : Trace, optional
            Ignored: the whole window is computed every time (``Trace.reused_rows`` is 0).
        start_position : int
            Must be 0: a sliding window has no absolute positions to start from.

        Returns
        -------
        Trace
            With ``blocks == ()`` and the rows of :data:`model.tracing.window_schema.WINDOW`:
            ``tok`` (T, d_model), ``slot_in`` (T, context_length, d_mlp), ``pre_act`` and ``hidden``
            (T, d_mlp), ``window_out`` and ``ln_final`` (T, d_model), ``logits`` (T, vocab_size).

        Raises
        ------
        ValueError
            For input :func:`model.core.inputs.checked_ids` refuses, a ``start_position`` other than
            0, or ``interventions`` that change attention.
        """
        if start_position:
            raise ValueError("the model before attention has no absolute positions: start_position must be 0")
        _no_attention(interventions)
        ids, dropped = checked_ids(token_ids, self.config)
        rec: dict = {}
        self._run(torch.from_numpy(ids).to(self.tok_emb.weight.device).unsqueeze(0), rec)
        return Trace.from_records(self.config, ids, dropped, False, True, rec)


def _no_attention(interventions) -> None:
    """Refuse what-if changes to attention, which this model does not have."""
    if interventions is not None and not interventions.changes_nothing:
        raise ValueError(f"the model before attention has no attention to change ({interventions.describe()})")
