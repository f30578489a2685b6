"""The trace: an immutable record of everything the model computed for one input.

Every tensor of a trace also has a dotted name (``trace[name]``, ``trace.named()``, the .npz export,
``python -m model.trace --json``), made from the model's module paths (``GPT.named_modules()``)
as TransformerLens names its hooks: a module's output is named by the module's path, and a
value computed inside a module is the module's path and the value's name. N is the block.

=================================  =====================  ================================================
dotted name                         Trace attribute        what
=================================  =====================  ================================================
``tok_emb``                         ``tok``                e_i, the token embedding's output
``pos_emb``                         ``pos``                p_i, the positional table's output (zeros without one)
``x``                               ``x``                  e_i + p_i, the first block's input
``blocks.N.ln1``                    ``blocks[N].ln1``      LN1's output, the attention's input h
``blocks.N.attn.q``, ``.k``, ``.v``  ``.q``, ``.k``, ``.v``  per head, as they enter the scores
``blocks.N.attn.q_pre_rope``, ...   ``.q_pre_rope``, ...   h W_Q, h W_K before RoPE's rotation
``blocks.N.attn.attn_mask``         ``.attn_mask``         True where query i may attend to key j
``blocks.N.attn.attn_scores``       ``.attn_scores``       before softmax; ``attn_weights`` after
``blocks.N.attn.head_out``          ``.head_out``          each head's Σ_j a_ij v_j
``blocks.N.attn.W_O``               ``.attn_out``          W_O's output: the attention block's output
``blocks.N.resid_mid``              ``.resid_mid``         x + attention output
``blocks.N.ln2``                    ``.ln2``               LN2's output, the MLP's input
``blocks.N.mlp.fc_out``             ``.mlp_out``           the MLP's last linear layer's output
``blocks.N.resid_post``             ``.resid_post``        the block's output
``ln_f``                            ``ln_final``           the final norm's output
``logits``, ``probs``               ``logits``, ``probs``  next-token scores and their softmax
=================================  =====================  ================================================
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

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
    attn_scores : (n_heads, T, T)   attn_scale * q_i.k_j, -inf where attn_mask is False: what the
                              softmax received. A trace made without ``reuse`` keeps them as the
                              model computed them; one made with ``reuse`` keeps q and k only and
                              computes the scores on first use (the same product, equal up to
                              float rounding; 144 maps of 1,024 x 1,024, GPT-2 small's, are 600 MB
                              that no view needs all at once). :meth:`head_attn_scores` computes
                              one head's; :attr:`attn_scores_ready` says whether it costs nothing.
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
    attn_weights: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    resid_mid: np.ndarray
    ln2: np.ndarray
    mlp_out: np.ndarray
    resid_post: np.ndarray
    attn_scale: float = 1.0
    _attn_scores: np.ndarray | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def attn_scores(self) -> np.ndarray:
        """(n_heads, T, T) float32, read-only: the kept scores, or computed from q and k once."""
        if self._attn_scores is not None:
            return self._attn_scores
        return scores_from(self.q, self.k, self.attn_mask, self.attn_scale)

    @property
    def attn_scores_ready(self) -> bool:
        """True when :attr:`attn_scores` costs nothing: kept, or computed before."""
        return self._attn_scores is not None or "attn_scores" in self.__dict__

    def head_attn_scores(self, head: int) -> np.ndarray:
        """(T, T) attn_scores of query head ``head``; computes only that head's when the layer's
        scores were neither kept nor computed yet (a twelfth of the work with 12 heads)."""
        if self.attn_scores_ready:
            return self.attn_scores[head]
        kv = self.kv_head(head)
        return scores_from(self.q[head:head + 1], self.k[kv:kv + 1], self.attn_mask, self.attn_scale)[0]

    @property
    def n_heads(self) -> int:
        """Query heads."""
        return int(self.q.shape[0])

    def kv_head(self, head: int) -> int:
        """The key/value head (a row of k and v) that query head ``head`` reads."""
        return int(head) // (self.q.shape[0] // self.k.shape[0])


def scores_from(q: np.ndarray, k: np.ndarray, attn_mask: np.ndarray, scale: float) -> np.ndarray:
    """attn_scores from queries and keys, as the model computes them: (q_i.k_j) * scale, -inf
    where ``attn_mask`` is False (Vaswani et al. 2017, eq. 1).

    Parameters
    ----------
    q : (n_heads, T, d_head)
    k : (n_kv_heads, T, d_head)   n_kv_heads divides n_heads; head h reads key head h // group.
    attn_mask : (T, T) bool       True where query i may attend to key j.
    scale : float                 1/sqrt(d_head), or 1 (GPT-Neo).

    Returns
    -------
    (n_heads, T, T) float32, read-only.
    """
    qt = torch.from_numpy(np.array(q, dtype=np.float32))  # copies (the trace's arrays are read-only)
    kt = torch.from_numpy(np.array(k, dtype=np.float32))
    group = qt.shape[0] // max(1, kt.shape[0])
    if group > 1:
        kt = kt.repeat_interleave(group, dim=0)  # (n_heads, T, d_head)
    scores = (qt @ kt.transpose(-2, -1)) * scale  # (n_heads, T, T)
    if not attn_mask.all():
        scores.masked_fill_(torch.from_numpy(~attn_mask), float("-inf"))
    out = scores.numpy()
    out.setflags(write=False)
    return out


# Dotted name of each LayerTrace field, relative to ``blocks.N`` (the table in the module docstring).
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
    "attn_out": "attn.W_O",
    "resid_mid": "resid_mid",
    "ln2": "ln2",
    "mlp_out": "mlp.fc_out",
    "resid_post": "resid_post",
}


_FIELD_OF = {name: field for field, name in _LAYER_NAMES.items()}  # and back


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
    arrays["_attn_scores"] = arrays.pop("attn_scores")
    return LayerTrace(**arrays, attn_scale=float(scale))


@dataclass(frozen=True)
class NonFinite:
    """Where a trace's values stop being finite numbers: the first tensor in model order that
    holds NaN or an infinity (``-inf`` in ``attn_scores`` marks a masked cell and is not counted).

    Attributes
    ----------
    name : str            dotted name of that tensor, e.g. ``blocks.0.attn.attn_scores``.
    layer : int | None    its block, or None for the embeddings, ``ln_f`` and ``logits``.
    tensor : str          its LayerTrace attribute within the block (``attn_scores``, ``attn_out``)
                          or, outside the blocks, the dotted name.
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


_HEAD_ROWS = ("q", "k", "v", "q_pre_rope", "k_pre_rope", "head_out", "attn_scores", "attn_weights")


def _rows_from(name: str, a: np.ndarray, start: int) -> np.ndarray:
    """Rows (positions) start.. of the tensor with this dotted name (axis 1 of per-head tensors)."""
    if not start:
        return a
    return a[:, start:] if name.rsplit(".", 1)[-1] in _HEAD_ROWS else a[start:]


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
                                  (:mod:`model.core.interventions`; None: the plain model).
    reused_rows : int             rows 0 .. reused_rows - 1 of every tensor were taken from the
                                  trace passed as ``GPT.trace(..., reuse=)``; the model computed
                                  positions reused_rows .. T-1 (0: everything was computed).

    Every array is also reachable by a dotted name, its place in the model's module tree
    (``trace["blocks.0.attn.attn_weights"]``, ``trace["blocks.0.attn.W_O"]`` for ``attn_out``; the
    table is in this module's docstring); :meth:`names` lists them.
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
    reused_rows: int = 0
    _reuse: Any = field(default=None, repr=False, compare=False)  # model.tracing.reuse.Origin: where the rows live
    _finite_rows: int = field(default=0, repr=False, compare=False)  # leading rows known to be finite

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
        every tensor (about 0.1 s for a GPT-2-small-sized trace of 1,024 tokens); a trace that
        reused the rows of one whose ``nonfinite`` was None checks only its new rows.
        """
        start = self._finite_rows
        for name, get in self._entries():
            if name.endswith("attn_scores") and not self.blocks[int(name.split(".")[1])].attn_scores_ready:
                # Not kept (a trace that reused rows): scores that are NaN or +inf make their
                # softmax rows NaN, so they need computing only when the weights are not finite.
                weights = self.blocks[int(name.split(".")[1])].attn_weights
                if _bad_mask("attn_weights", _rows_from("attn_weights", weights, start)) is None:
                    continue
            a = get()
            part = _rows_from(name, a, start)
            bad = _bad_mask(name, part)
            if bad is not None:
                parts = name.split(".")
                layer = int(parts[1]) if parts[0] == "blocks" else None
                tensor = _FIELD_OF[".".join(parts[2:])] if layer is not None else name  # attn.W_O -> attn_out
                return NonFinite(name, layer, tensor, int(np.count_nonzero(bad)), int(a.size),
                                 bool(np.isnan(part).any()))
        return None

    @classmethod
    def from_records(
        cls, token_ids, dropped, positional_encoding, causal, rec, logits, scales=None, interventions=None,
        origin=None,
    ) -> "Trace":
        """Build a trace from the dict of torch tensors that ``GPT._run`` fills (``scales``: each
        layer's attn_scale; ``origin``: what a later trace needs to reuse this one's rows)."""
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
            _reuse=origin,
        )

    @property
    def n_tokens(self) -> int:
        """T, the number of tokens run."""
        return int(self.token_ids.shape[0])

    def named(self) -> Iterator[tuple[str, np.ndarray]]:
        """Yield (dotted name, array) for every tensor, in model order."""
        for name, get in self._entries():
            yield name, get()
        yield "probs", self.probs

    def _entries(self) -> Iterator[tuple[str, Callable[[], np.ndarray]]]:
        """(dotted name, getter) of every tensor but ``probs``, in model order: nothing computed
        on first use (probs, attn_scores not kept) is computed until its getter is called."""
        yield "tok_emb", lambda: self.tok
        yield "pos_emb", lambda: self.pos
        yield "x", lambda: self.x
        for i, layer in enumerate(self.blocks):
            for name, dotted in _LAYER_NAMES.items():
                yield f"blocks.{i}.{dotted}", functools.partial(getattr, layer, name)
        yield "ln_f", lambda: self.ln_final
        yield "logits", lambda: self.logits

    def names(self) -> list[str]:
        """Every dotted name, in model order."""
        return [name for name, _ in self._entries()] + ["probs"]

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
        if name == "probs":
            return self.probs
        for key, get in self._entries():
            if key == name:
                return get()
        raise KeyError(f"no tensor named {name!r}; try one of {self.names()[:6]} ...")
