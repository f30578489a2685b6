"""The trace: an immutable record of everything the model computed for one input.

Which tensors a trace holds, their attributes, shapes and dotted names (``trace[name]``,
``trace.named()``, the .npz export, ``python -m model.trace --json``) are the rows of the schema,
:mod:`model.tracing.schema`, written once: a :class:`LayerTrace` has an attribute per row of
``schema.LAYER``, a :class:`Trace` one per row of ``schema.EMBEDDING`` and ``schema.FINAL``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np
import torch

from model.tracing.schema import EMBEDDING, FINAL, FULL, LAYER, Row, TraceSchema, attributes_doc, fill, part, schema_for


def _frozen(t, batched: bool = True) -> np.ndarray:
    """A read-only numpy copy of a torch tensor: float32 (bool stays bool), batch axis removed."""
    t = t.detach()
    if t.dtype != torch.bool and (t.device.type != "cpu" or not (t.dtype.is_floating_point and t.element_size() == 4)):
        t = t.to("cpu").float()  # skipped for CPU float32 (each call costs dispatch time)
    a = np.ascontiguousarray(t.cpu().numpy()[0] if batched else t.cpu().numpy())
    a.setflags(write=False)
    return a


def _frozen_rows(rec: Mapping, rows: tuple[Row, ...]) -> dict[str, np.ndarray]:
    """{attr: read-only array} of ``rows`` from a record dict of ``GPT._run`` (batch axis first in
    each); a row recorded as its alias's very tensor shares the alias's array."""
    out: dict[str, np.ndarray] = {}
    for row in rows:
        t = rec.get(row.attr)
        if t is not None:
            same = row.same_as(rec.get)
            out[row.attr] = out[same] if same is not None else _frozen(t)
    return out


class _ReadOnly:
    """Attributes are set once, when the record is made."""

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")


class LayerTrace(_ReadOnly):
    """One block's intermediates, one read-only attribute per row of :data:`model.tracing.schema.LAYER`.
    Shapes in config names; T is the number of tokens run.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        The block's arrays by attribute, for every row of ``recorded`` (``attn_scores`` may be
        left out: it is then computed from q and k on first use).
    attn_scale : float
        What q_i.k_j was multiplied by: 1/sqrt(d_head), another factor (Gemma), or 1 (GPT-Neo).
    recorded : tuple of Row
        The rows this block's config has (``schema_for(config).layer``); a row it lacks is its
        alias's array (``q_pre_rope`` is ``q`` without RoPE) or None.
    attn_softcap : float
        c when the scores were soft-capped, c · tanh(s / c) (Gemma 2); 0 for none.

    Raises
    ------
    KeyError
        When a recorded row other than attn_scores has no array.

    Notes
    -----
    attn_scores are what the softmax received. A trace made without ``reuse`` keeps them as the
    model computed them; one made with ``reuse`` keeps q and k only and computes the scores on
    first use (the same product, equal up to float rounding; 144 maps of 1,024 x 1,024, GPT-2
    small's, are 600 MB that no view needs all at once). :meth:`head_attn_scores` computes one
    head's; :attr:`attn_scores_ready` says whether it costs nothing.

    Attributes
    ----------
    attn_scale : float
    attn_softcap : float
    recorded : tuple of Row
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], attn_scale: float = 1.0,
                 recorded: tuple[Row, ...] = LAYER, attn_softcap: float = 0.0) -> None:
        fill(self, LAYER, recorded, arrays)
        object.__setattr__(self, "attn_scale", float(attn_scale))
        object.__setattr__(self, "attn_softcap", float(attn_softcap))
        object.__setattr__(self, "recorded", recorded)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{row.attr}={getattr(self, row.attr).shape}" for row in self.recorded if not row.lazy)
        return f"LayerTrace({shapes}, attn_scale={self.attn_scale:.4g})"

    @functools.cached_property
    def attn_scores(self) -> np.ndarray:
        """(n_heads, T, T) float32, read-only: the kept scores, or computed from q and k once."""
        return scores_from(self.q, self.k, self.attn_mask, self.attn_scale, self.attn_softcap)

    @property
    def attn_scores_ready(self) -> bool:
        """True when :attr:`attn_scores` costs nothing: kept, or computed before."""
        return "attn_scores" in self.__dict__

    def head_attn_scores(self, head: int) -> np.ndarray:
        """(T, T) attn_scores of query head ``head``; computes only that head's when the layer's
        scores were neither kept nor computed yet (a twelfth of the work with 12 heads)."""
        if self.attn_scores_ready:
            return self.attn_scores[head]
        kv = self.kv_head(head)
        return scores_from(self.q[head:head + 1], self.k[kv:kv + 1], self.attn_mask, self.attn_scale,
                           self.attn_softcap)[0]

    @property
    def n_heads(self) -> int:
        """Query heads."""
        return int(self.q.shape[0])

    def kv_head(self, head: int) -> int:
        """The key/value head (a row of k and v) that query head ``head`` reads."""
        return int(head) // (self.q.shape[0] // self.k.shape[0])


LayerTrace.__doc__ = LayerTrace.__doc__.rstrip() + "\n" + attributes_doc(LAYER) + "\n"


def soft_cap(s: torch.Tensor, cap: float) -> torch.Tensor:
    """c · tanh(s / c), squeezing s into (-c, c) smoothly (Gemma 2's soft-capping of attention
    scores and logits, in transformers' order of operations); ``cap`` 0 returns s itself. The
    model's (:mod:`model.core.transformer`) and :func:`scores_from`'s one definition."""
    return torch.tanh(s / cap) * cap if cap else s


def scores_from(q: np.ndarray, k: np.ndarray, attn_mask: np.ndarray, scale: float, softcap: float = 0.0) -> np.ndarray:
    """attn_scores from queries and keys, as the model computes them: (q_i.k_j) * scale, soft-capped
    (c · tanh(s / c)) when ``softcap`` > 0, -inf where ``attn_mask`` is False (Vaswani et al. 2017,
    eq. 1; Gemma 2's soft-capping).

    Parameters
    ----------
    q : (n_heads, T, d_head)
    k : (n_kv_heads, T, d_head)   n_kv_heads divides n_heads; head h reads key head h // group.
    attn_mask : (T, T) bool       True where query i may attend to key j.
    scale : float                 1/sqrt(d_head), another factor (Gemma), or 1 (GPT-Neo).
    softcap : float               c, or 0 for none.

    Returns
    -------
    (n_heads, T, T) float32, read-only.
    """
    qt = torch.from_numpy(np.array(q, dtype=np.float32))  # copies (the trace's arrays are read-only)
    kt = torch.from_numpy(np.array(k, dtype=np.float32))
    group = qt.shape[0] // max(1, kt.shape[0])
    if group > 1:
        kt = kt.repeat_interleave(group, dim=0)  # (n_heads, T, d_head)
    scores = soft_cap((qt @ kt.transpose(-2, -1)) * scale, softcap)  # (n_heads, T, T)
    if not attn_mask.all():
        scores.masked_fill_(torch.from_numpy(~attn_mask), float("-inf"))
    out = scores.numpy()
    out.setflags(write=False)
    return out


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


def _bad_mask(a: np.ndarray, masked: bool = False) -> np.ndarray | None:
    """Where ``a`` is NaN or infinite (``masked``, as attn_scores: NaN or +inf), or None when nowhere.

    Reductions first (no temporary array): max is NaN when any value is NaN and +inf when any is.
    """
    if a.size == 0:
        return None
    if masked:  # -inf = masked (the causal mask, or any other)
        return None if a.max() < np.inf else (np.isnan(a) | np.isposinf(a))
    if np.isfinite(a.min()) and np.isfinite(a.max()):
        return None
    return ~np.isfinite(a)


class _Entry(NamedTuple):
    """One tensor of a trace: its dotted name, its schema row, the record that holds it, its block."""

    name: str
    row: Row
    owner: Any
    layer: int | None

    def get(self) -> np.ndarray:
        """The array (a lazy row is computed now, once)."""
        return getattr(self.owner, self.row.attr)

    def like(self) -> np.ndarray:
        """The array, or for a lazy row the stored one of its shape (``Row.like``), never computing."""
        return getattr(self.owner, self.row.like or self.row.attr)


@dataclass(frozen=True)
class Trace:
    """Everything the model computed for one sequence: batch axis removed, float32 numpy, CPU.

    Every array is also reachable by a dotted name, its place in the model's module tree
    (``trace["blocks.0.attn.attn_weights"]``, ``trace["blocks.0.attn.W_O"]`` for ``attn_out``;
    the table is :mod:`model.tracing.schema`); :meth:`names` lists them. probs are computed on
    first use (the app draws from logits, and softmax over the vocabulary would be a tenth of a
    trace's time).

    Attributes
    ----------
    token_ids : (T,) int64        the ids that were run (after cropping to the context).
    dropped : int                 how many leading ids were cropped away (0 if none).
    positional_encoding : bool    whether x_i = e_i + p_i (True) or x_i = e_i (False) was used.
    causal : bool                 whether the causal mask was applied.
    blocks : tuple of LayerTrace  one per layer.
    interventions : Interventions or None   the what-if changes this trace ran with
                                  (:mod:`model.core.interventions`; None: the plain model).
    reused_rows : int             rows 0 .. reused_rows - 1 of every tensor were taken from the
                                  trace passed as ``GPT.trace(..., reuse=)``; the model computed
                                  positions reused_rows .. T-1 (0: everything was computed).
    start_position : int          the position of the first token run (0 unless the trace was made
                                  with ``GPT.trace(..., start_position=)``).
    schema : TraceSchema          the rows this trace holds (those its model's config has). The
                                  model before attention (:mod:`model.core.window`) has no blocks
                                  (``blocks == ()``) and rows of its own (:data:`model.tracing.
                                  window_schema.WINDOW`), attributes too; the transformer's rows it
                                  lacks (``pos``, ``x``) are None.
    """

    token_ids: np.ndarray
    dropped: int
    positional_encoding: bool
    causal: bool
    blocks: tuple[LayerTrace, ...]
    _arrays: Mapping[str, np.ndarray] = field(repr=False, compare=False)  # the model-level rows by attribute
    schema: TraceSchema = field(default=FULL, repr=False, compare=False)
    interventions: object = None
    reused_rows: int = 0
    start_position: int = 0
    _reuse: Any = field(default=None, repr=False, compare=False)  # model.tracing.reuse.Origin: where the rows live
    _finite_rows: int = field(default=0, repr=False, compare=False)  # leading rows known to be finite

    def __post_init__(self) -> None:
        fill(self, self.schema.attributes, self.schema.model, self._arrays)

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
        A row computed on first use (attn_scores, probs) is checked only when the row its bad
        values would show in (``Row.like``: attn_weights, logits) is not finite, and so computed
        only then. Costs one pass over every tensor (about 0.1 s for a GPT-2-small-sized trace of
        1,024 tokens); a trace that reused the rows of one whose ``nonfinite`` was None checks
        only its new rows.
        """
        start = self._finite_rows
        for e in self._entries():
            if e.row.lazy and _bad_mask(part(e.row.kind, e.like(), start)) is None:
                continue  # a NaN or +inf in it would show in its ``like`` row
            a = e.get()
            rows = part(e.row.kind, a, start)
            bad = _bad_mask(rows, e.row.masked)
            if bad is not None:
                return NonFinite(e.name, e.layer, e.row.attr if e.layer is not None else e.name,
                                 int(np.count_nonzero(bad)), int(a.size), bool(np.isnan(rows).any()))
        return None

    @classmethod
    def from_records(
        cls, config, token_ids, dropped, positional_encoding, causal, rec, scales=None, interventions=None,
        origin=None, start_position: int = 0, softcaps=None,
    ) -> "Trace":
        """Build a trace from the dict of torch tensors that ``GPT._run`` fills for a model with
        ``config`` (``scales``, ``softcaps``: each layer's attn_scale and attn_softcap; ``origin``:
        what a later trace needs to reuse this one's rows). Raises KeyError when the record lacks a
        row of the config's schema."""
        ids = np.asarray(token_ids, dtype=np.int64).copy()
        ids.setflags(write=False)
        sch = schema_for(config)
        scales = scales or [1.0] * len(rec["blocks"])
        softcaps = softcaps or [0.0] * len(rec["blocks"])
        layers = tuple(LayerTrace(_frozen_rows(layer, sch.layer), scale, sch.layer, cap)
                       for layer, scale, cap in zip(rec["blocks"], scales, softcaps))
        return cls(token_ids=ids, dropped=int(dropped), positional_encoding=bool(positional_encoding),
                   causal=bool(causal), blocks=layers, _arrays=_frozen_rows(rec, sch.model), schema=sch,
                   interventions=interventions, start_position=int(start_position), _reuse=origin)

    @property
    def n_tokens(self) -> int:
        """T, the number of tokens run."""
        return int(self.token_ids.shape[0])

    def _entries(self) -> Iterator[_Entry]:
        """Every tensor, in model order: nothing computed on first use (probs, attn_scores not
        kept) is computed until its ``get`` is called."""
        for row in self.schema.embedding:
            yield _Entry(row.name, row, self, None)
        for i, layer in enumerate(self.blocks):
            for row in layer.recorded:
                yield _Entry(f"blocks.{i}.{row.name}", row, layer, i)
        for row in self.schema.final:
            yield _Entry(row.name, row, self, None)

    def named(self) -> Iterator[tuple[str, np.ndarray]]:
        """Yield (dotted name, array) for every tensor, in model order."""
        for e in self._entries():
            yield e.name, e.get()

    def names(self) -> list[str]:
        """Every dotted name, in model order."""
        return [e.name for e in self._entries()]

    def as_dict(self) -> Mapping[str, np.ndarray]:
        """{dotted name: array} for every tensor (a new dict of the same read-only arrays)."""
        return dict(self.named())

    def _entry(self, name: str) -> _Entry:
        """The entry with this dotted name (KeyError when there is none)."""
        owner, rows, layer, rest = self, self.schema.model, None, name
        if name.startswith("blocks."):
            index, _, rest = name[len("blocks."):].partition(".")
            layer = int(index) if index.isdigit() and str(int(index)) == index else len(self.blocks)
            owner = self.blocks[layer] if layer < len(self.blocks) else None
            rows = owner.recorded if owner is not None else ()
        for row in rows:
            if row.name == rest:
                return _Entry(name, row, owner, layer)
        raise KeyError(f"no tensor named {name!r}; try one of {self.names()[:6]} ...")

    def __getitem__(self, name: str) -> np.ndarray:
        """The array with this dotted name.

        Raises
        ------
        KeyError
            For an unknown name, listing a few valid ones.
        """
        return self._entry(name).get()

    def nbytes(self, name: str) -> int:
        """Bytes of the tensor with this dotted name, without computing it (a row computed on
        first use has the size of its ``Row.like``). Raises KeyError for an unknown name."""
        return int(self._entry(name).like().nbytes)


Trace.__doc__ = Trace.__doc__.rstrip() + "\n" + attributes_doc(EMBEDDING + FINAL) + "\n"
