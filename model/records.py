"""The trace: an immutable record of everything the model computed for one input."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Iterator, Mapping

import numpy as np


def _frozen(t) -> np.ndarray:
    """A read-only float32 numpy copy of a (1, ...) torch tensor, batch axis removed."""
    t = t.detach()
    if t.device.type != "cpu" or not (t.dtype.is_floating_point and t.element_size() == 4):
        t = t.to("cpu").float()  # skipped for CPU float32 (each call costs dispatch time)
    a = np.ascontiguousarray(t.numpy()[0])
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class LayerTrace:
    """One block's intermediates. Shapes in config names; T is the number of tokens run.

    Attributes
    ----------
    ln1 : (T, d_model)        LN1 output, the attention's input h.
    q, k, v : (n_heads, T, d_head)
    attn_scores : (n_heads, T, T)   q_i.k_j / sqrt(d_head), -inf where masked (before softmax).
    attn_weights : (n_heads, T, T)  softmax of attn_scores over keys; rows sum to 1, in [0, 1].
    head_out : (n_heads, T, d_head) each head's out_i = sum_j a_ij v_j.
    attn_out : (T, d_model)   heads concatenated, times W_O (plus its bias).
    resid_mid : (T, d_model)  x + attn_out.
    ln2 : (T, d_model)        LN2 output, the MLP's input.
    mlp_out : (T, d_model)
    resid_post : (T, d_model) the block's output, resid_mid + mlp_out.
    """

    ln1: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    attn_scores: np.ndarray
    attn_weights: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    resid_mid: np.ndarray
    ln2: np.ndarray
    mlp_out: np.ndarray
    resid_post: np.ndarray


# Dotted name (TransformerLens style) of each LayerTrace field, relative to ``blocks.N``.
_LAYER_NAMES = {
    "ln1": "ln1",
    "q": "attn.q",
    "k": "attn.k",
    "v": "attn.v",
    "attn_scores": "attn.attn_scores",
    "attn_weights": "attn.attn_weights",
    "head_out": "attn.head_out",
    "attn_out": "attn.out",
    "resid_mid": "resid_mid",
    "ln2": "ln2",
    "mlp_out": "mlp.out",
    "resid_post": "resid_post",
}


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

    @functools.cached_property
    def probs(self) -> np.ndarray:
        """(T, vocab_size) softmax of the logits over the vocabulary, float32, read-only."""
        import torch

        return _frozen(torch.softmax(torch.from_numpy(self.logits.copy()), dim=-1).unsqueeze(0))

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
    def from_records(cls, token_ids, dropped, positional_encoding, causal, rec, logits) -> "Trace":
        """Build a trace from the dict of torch tensors that ``GPT._run`` fills."""
        import torch

        ids = np.asarray(token_ids, dtype=np.int64).copy()
        ids.setflags(write=False)
        layers = tuple(
            LayerTrace(**{name: _frozen(layer[name]) for name in _LAYER_NAMES}) for layer in rec["blocks"]
        )
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
