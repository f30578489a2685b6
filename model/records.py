"""The trace: an immutable record of everything the model computed for one input."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Iterator, Mapping

import numpy as np
import torch


def _frozen(t, batched: bool = True) -> np.ndarray:
    """A read-only numpy copy of a torch tensor: float32 (bool stays bool), batch axis removed."""
    t = t.detach()
    if t.dtype != torch.bool and (t.device.type != "cpu" or not (t.dtype.is_floating_point and t.element_size() == 4)):
        t = t.to("cpu").float()  # skipped for CPU float32 (each call costs dispatch time)
    a = np.ascontiguousarray(t.cpu().numpy()[0] if batched else t.cpu().numpy())
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class LayerTrace:
    """One block's intermediates. Shapes in config names; T is the number of tokens run.

    Attributes
    ----------
    ln1 : (T, d_model)        LN1 output, the attention's input h.
    q : (n_heads, T, d_head)  queries as they enter the scores (rotated, for a RoPE model).
    k, v : (n_kv_heads, T, d_head)  keys (rotated for RoPE) and values; query head h reads
                              key/value head :meth:`kv_head` (h) (n_kv_heads < n_heads: grouped-query).
    q_pre_rope : (n_heads, T, d_head)     h W_Q before the rotation (the same array as q without RoPE).
    k_pre_rope : (n_kv_heads, T, d_head)  h W_K before the rotation (the same array as k without RoPE).
    attn_mask : (T, T) bool   True where query i may attend to key j (causal mask, window).
    attn_scores : (n_heads, T, T)   attn_scale * q_i.k_j, -inf where attn_mask is False: exactly
                              what the softmax received.
    attn_weights : (n_heads, T, T)  softmax of attn_scores over keys; rows sum to 1, in [0, 1].
    head_out : (n_heads, T, d_head) each head's out_i = sum_j a_ij v_j.
    attn_out : (T, d_model)   heads concatenated, times W_O (plus its bias).
    resid_mid : (T, d_model)  x + attn_out.
    ln2 : (T, d_model)        LN2 output, the MLP's input.
    mlp_out : (T, d_model)
    resid_post : (T, d_model) the block's output, resid_mid + mlp_out.
    attn_scale : float        what q_i.k_j was multiplied by: 1/sqrt(d_head), or 1 (GPT-Neo).
    """

    ln1: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_pre_rope: np.ndarray
    k_pre_rope: np.ndarray
    attn_mask: np.ndarray
    attn_scores: np.ndarray
    attn_weights: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    resid_mid: np.ndarray
    ln2: np.ndarray
    mlp_out: np.ndarray
    resid_post: np.ndarray
    attn_scale: float = 1.0

    @property
    def n_heads(self) -> int:
        """Query heads."""
        return int(self.q.shape[0])

    def kv_head(self, head: int) -> int:
        """The key/value head (a row of k and v) that query head ``head`` reads."""
        return int(head) // (self.q.shape[0] // self.k.shape[0])


# Dotted name (TransformerLens style) of each LayerTrace field, relative to ``blocks.N``.
_LAYER_NAMES = {
    "ln1": "ln1",
    "q": "attn.q",
    "k": "attn.k",
    "v": "attn.v",
    "q_pre_rope": "attn.q_pre_rope",
    "k_pre_rope": "attn.k_pre_rope",
    "attn_mask": "attn.attn_mask",
    "attn_scores": "attn.attn_scores",
    "attn_weights": "attn.attn_weights",
    "head_out": "attn.head_out",
    "attn_out": "attn.out",
    "resid_mid": "resid_mid",
    "ln2": "ln2",
    "mlp_out": "mlp.out",
    "resid_post": "resid_post",
}


def _layer_trace(layer: dict, scale: float) -> LayerTrace:
    """One LayerTrace from a block's record dict; q/k before rotation share q/k's array without RoPE."""
    arrays: dict = {}
    for name in _LAYER_NAMES:
        same = {"q_pre_rope": "q", "k_pre_rope": "k"}.get(name)
        if same is not None and layer[name] is layer[same]:
            arrays[name] = arrays[same]
        elif name == "attn_mask":
            arrays[name] = _frozen(layer[name], batched=False)
        else:
            arrays[name] = _frozen(layer[name])
    return LayerTrace(**arrays, attn_scale=float(scale))


@dataclass(frozen=True)
class NonFinite:
    """Where a trace's values stop being finite numbers: the first tensor in model order that
    holds NaN or an infinity (``-inf`` in ``attn_scores`` marks a masked cell and is not counted).

    Attributes
    ----------
    name : str            dotted name of that tensor, e.g. ``blocks.0.attn.attn_scores``.
    layer : int | None    its block, or None for the embeddings, ``ln_final`` and ``logits``.
    tensor : str          its name within the block (``attn_scores``) or the dotted name.
    count : int           how many of its values are NaN or infinite.
    size : int            how many values it has.
    nan : bool            whether some of them are NaN (else all are infinities).
    """

    name: str
    layer: int | None
    tensor: str
    count: int
    size: int
    nan: bool

    def __str__(self) -> str:
        where = f"layer {self.layer}, {self.tensor}" if self.layer is not None else self.tensor
        kind = "NaN or infinite" if self.nan else "infinite"
        return (f"values that are not numbers start in {where} ({self.name}: {self.count:,} of "
                f"{self.size:,} are {kind})")


def _bad_mask(name: str, a: np.ndarray) -> np.ndarray | None:
    """Where ``a`` is NaN or infinite (in attn_scores: NaN or +inf), or None when nowhere.

    Reductions first (no temporary array): max is NaN when any value is NaN and +inf when any is.
    """
    if a.size == 0:
        return None
    if name.endswith("attn_scores"):  # -inf = masked (the causal mask, or any other)
        return None if a.max() < np.inf else (np.isnan(a) | np.isposinf(a))
    if np.isfinite(a.min()) and np.isfinite(a.max()):
        return None
    return ~np.isfinite(a)


@dataclass(frozen=True)
class Trace:
    """Everything the model computed for one sequence: batch axis removed, float32 numpy, CPU.

    Attributes
    ----------
    token_ids : (T,) int64        the ids that were run (after cropping to the context).
    dropped : int                 how many leading ids were cropped away (0 if none).
    positional_encoding : bool    whether x_i = e_i + p_i (True) or x_i = e_i (False) was used.
    causal : bool                 whether the causal mask was applied.
    tok : (T, d_model)            token-embedding rows e_i.
    pos : (T, d_model)            positional rows p_i (zeros when not used).
    x : (T, d_model)              the first block's input, e_i + p_i.
    blocks : tuple of LayerTrace  one per layer.
    ln_final : (T, d_model)       final LayerNorm output.
    logits : (T, vocab_size)      next-token scores at every position (nats before softmax).
    probs : (T, vocab_size)       softmax(logits), rows sum to 1 (computed on first use: the app
                                  draws from logits, and softmax over the vocabulary would be
                                  a tenth of a trace's time).
    interventions : Interventions or None   the what-if changes this trace ran with
                                  (:mod:`model.interventions`; None: the plain model).

    Every array is also reachable by a dotted name: ``trace["blocks.0.attn.attn_weights"]``;
    :meth:`names` lists them.
    """

    token_ids: np.ndarray
    dropped: int
    positional_encoding: bool
    causal: bool
    tok: np.ndarray
    pos: np.ndarray
    x: np.ndarray
    blocks: tuple[LayerTrace, ...]
    ln_final: np.ndarray
    logits: np.ndarray
    interventions: object = None

    @functools.cached_property
    def probs(self) -> np.ndarray:
        """(T, vocab_size) softmax of the logits over the vocabulary, float32, read-only."""
        return _frozen(torch.softmax(torch.from_numpy(self.logits.copy()), dim=-1), batched=False)

    @functools.cached_property
    def nonfinite(self) -> NonFinite | None:
        """The first tensor, in model order, with values that are not finite numbers; None when
        every value is one (the usual case).

        A model with huge but finite weights can overflow: q_i.k_j beyond float32's 3.4e38 is
        inf, and the softmax of a row with inf is NaN, which then spreads to every later tensor.
        ``probs`` is not checked (it is finite exactly when the logits are). Costs one pass over
        every tensor (about 0.1 s for a GPT-2-small-sized trace of 1,024 tokens).
        """
        for name, a in self._named_computed():
            bad = _bad_mask(name, a)
            if bad is not None:
                parts = name.split(".")
                layer = int(parts[1]) if parts[0] == "blocks" else None
                tensor = parts[-1] if layer is not None else name
                if tensor == "out" and layer is not None:
                    tensor = f"{parts[2]}_out"  # attn.out -> attn_out, mlp.out -> mlp_out
                return NonFinite(name, layer, tensor, int(np.count_nonzero(bad)), int(a.size),
                                 bool(np.isnan(a).any()))
        return None

    @classmethod
    def from_records(
        cls, token_ids, dropped, positional_encoding, causal, rec, logits, scales=None, interventions=None
    ) -> "Trace":
        """Build a trace from the dict of torch tensors that ``GPT._run`` fills (``scales``: each
        layer's attn_scale)."""
        ids = np.asarray(token_ids, dtype=np.int64).copy()
        ids.setflags(write=False)
        scales = scales or [1.0] * len(rec["blocks"])
        layers = tuple(_layer_trace(layer, scale) for layer, scale in zip(rec["blocks"], scales))
        pos = rec["pos"]
        return cls(
            token_ids=ids,
            dropped=int(dropped),
            positional_encoding=bool(positional_encoding),
            causal=bool(causal),
            tok=_frozen(rec["tok"]),
            pos=_frozen(pos.unsqueeze(0)),
            x=_frozen(rec["x"]),
            blocks=layers,
            ln_final=_frozen(rec["ln_final"]),
            logits=_frozen(logits),
            interventions=interventions,
        )

    @property
    def n_tokens(self) -> int:
        """T, the number of tokens run."""
        return int(self.token_ids.shape[0])

    def named(self) -> Iterator[tuple[str, np.ndarray]]:
        """Yield (dotted name, array) for every tensor, in model order."""
        yield from self._named_computed()
        yield "probs", self.probs

    def _named_computed(self) -> Iterator[tuple[str, np.ndarray]]:
        """:meth:`named` without ``probs`` (which is computed from the logits on first use)."""
        yield "embed.tok", self.tok
        yield "embed.pos", self.pos
        yield "embed.x", self.x
        for i, layer in enumerate(self.blocks):
            for f in fields(LayerTrace):
                if f.name not in _LAYER_NAMES:
                    continue
                yield f"blocks.{i}.{_LAYER_NAMES[f.name]}", getattr(layer, f.name)
        yield "ln_final", self.ln_final
        yield "logits", self.logits

    def names(self) -> list[str]:
        """Every dotted name, in model order."""
        return [name for name, _ in self.named()]

    def as_dict(self) -> Mapping[str, np.ndarray]:
        """{dotted name: array} for every tensor (a new dict of the same read-only arrays)."""
        return dict(self.named())

    def __getitem__(self, name: str) -> np.ndarray:
        """The array with this dotted name.

        Raises
        ------
        KeyError
            For an unknown name, listing a few valid ones.
        """
        for key, value in self.named():
            if key == name:
                return value
        raise KeyError(f"no tensor named {name!r}; try one of {self.names()[:6]} ...")
