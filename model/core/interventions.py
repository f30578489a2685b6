"""What-if changes to attention that the forward pass applies when asked (default: none).

An :class:`Interventions` object is passed to :meth:`model.core.transformer.GPT.trace` or
:meth:`~model.core.transformer.GPT.forward`; without one the forward path is the plain model. It can

- switch heads off (``ablate``: the head's output z_i is zeroed before W_O, so the block adds
  only W_O's bias for it; the same as a model whose W_O columns for that head are zero),
- hide keys (``key_mask``: ANDed with the model's own mask, per batch row; leave-one-out runs
  one batch row per hidden key),
- divide the scores by a temperature τ before the softmax (``temperature``),
- switch the 1/√d_head scale on or off (``scale_scores``; None keeps the model's own),
- replace activations with given values (``patches``: the residual stream before a layer, one
  head's output, a layer's attention or MLP output, at one position or at all; per batch row).

These are the classic interventions: head ablation (Michel et al. 2019, "Are sixteen heads really
better than one?"), attention knockout of single keys (Geva et al. 2023), activation patching
(Meng et al. 2022, "Locating and editing factual associations in GPT"; Heimersheim & Nanda 2024,
"How to use and interpret activation patching").
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace
from typing import Iterable

import torch

from model.core.config import GPTConfig

#: Where a :class:`Patch` replaces an activation, and the shape of one sequence's activation there:
#: the residual stream before block ``layer`` (its input: the embeddings for layer 0), one head's
#: output before W_O, the block's attention output (after W_O) and its MLP output.
PATCH_SITES = {
    "resid_pre": "(T, d_model)",
    "head_out": "(n_heads, T, d_head)",
    "attn_out": "(T, d_model)",
    "mlp_out": "(T, d_model)",
}


@dataclass(frozen=True)
class Patch:
    """Replace one activation of the forward pass (activation patching), from a given value or
    from another row of the same batch.

    Parameters
    ----------
    site : str
        One of :data:`PATCH_SITES`.
    layer : int
        The block, 0 .. n_layers - 1.
    position : int or None
        The position replaced; None replaces every position.
    head : int or None
        With ``head_out``: the query head replaced (required); otherwise None.
    row : int or None
        The batch row patched; None patches every row (a trace of one sequence).
    source_row : int or None
        Copy the activation from this batch row of the same forward (as it was computed there,
        before any patch of this site): a clean run in row 0 patched into corrupted runs in the
        other rows. Rows of one batch are computed alike, so a row patched from an identical row
        is unchanged to the last bit.
    value : Tensor or None
        Instead of ``source_row``: one sequence's whole activation at the site, shaped as
        :data:`PATCH_SITES` says (e.g. from another text's trace); the patch copies the part it names.

    Raises
    ------
    ValueError
        On an unknown site, a negative index, a head given for another site or missing for
        ``head_out``, or not exactly one of ``source_row`` and ``value`` (a tensor).
    """

    site: str
    layer: int
    position: int | None = None
    head: int | None = None
    row: int | None = None
    source_row: int | None = None
    value: torch.Tensor | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.site not in PATCH_SITES:
            raise ValueError(f"no patch site {self.site!r}; try one of {sorted(PATCH_SITES)}")
        for name in ("layer", "position", "head", "row", "source_row"):
            v = getattr(self, name)
            try:
                bad = v is not None and (isinstance(v, bool) or operator.index(v) < 0)
            except TypeError:
                bad = True
            if bad:
                raise ValueError(f"a patch's {name} must be an integer >= 0, got {v!r}")
        if (self.site == "head_out") != (self.head is not None):
            raise ValueError("a head_out patch names its head; the other sites take no head")
        if (self.source_row is None) == (self.value is None) or not isinstance(self.value, (torch.Tensor, type(None))):
            raise ValueError("a patch takes either a source_row or a value (a tensor)")

    def describe(self) -> str:
        """``"resid_pre L0 @3"``, ``"head_out L1H2"`` (no position: every one)."""
        where = f"L{self.layer}" + (f"H{self.head}" if self.head is not None else "")
        return f"{self.site} {where}" + (f" @{self.position}" if self.position is not None else "")

    def apply(self, out: torch.Tensor, computed: torch.Tensor, rows: list[int] | None = None) -> None:
        """Write the patch into ``out`` in place, from ``computed`` (the activation before any patch).

        Both are (B, T', d_model), or (B, n_heads, T', d_head) for ``head_out``; with ``rows`` (the
        positions a last block kept) T' = len(rows), and a position not among them is skipped
        (nothing after it reads it).
        """
        batch = slice(None) if self.row is None else self.row
        if self.value is not None:
            value = self.value.to(out.device, out.dtype)  # (T, d_model) or (n_heads, T, d_head)
            if self.head is not None:
                value = value[self.head]  # (T, d_head)
            if rows is not None:
                value = value[rows]  # (T', ...)
        else:
            value = computed[self.source_row]  # (T', d_model) or (n_heads, T', d_head)
            if self.head is not None:
                value = value[self.head]
        if self.head is not None:
            out = out[:, self.head]  # (B, T', d_head), a view
        if self.position is None:
            out[batch] = value
        elif rows is None or self.position in rows:
            at = self.position if rows is None else rows.index(self.position)
            out[batch, at] = value[at]


@dataclass(frozen=True)
class Interventions:
    """Changes to every attention layer's arithmetic; the default changes nothing.

    Parameters
    ----------
    ablate : iterable of (layer, head)
        Query heads whose output is zeroed before W_O (stored as a sorted tuple).
    temperature : float
        τ > 0: the softmax receives attn_scores / τ (τ > 1 flattens the weights, τ < 1 sharpens).
    scale_scores : bool or None
        True multiplies q_i·k_j by 1/√d_head, False by 1; None keeps what the model does.
    key_mask : bool Tensor (T, T) or (B, T, T), optional
        True where query i may attend to key j; ANDed with the model's own mask (causal,
        window). (B, T, T) gives every batch row its own mask. Not compared by ``==``.
    patches : iterable of Patch
        Activations replaced, in this order (stored as a tuple); a batch of B rows may give each
        row its own (``Patch.row``). Compared by site and place, not by value.

    Raises
    ------
    ValueError
        On a temperature that is not a finite positive number, a bad (layer, head) pair, a
        key_mask that is not a bool tensor of 2 or 3 dimensions or a patch that is not a Patch.
    """

    ablate: tuple[tuple[int, int], ...] = ()
    temperature: float = 1.0
    scale_scores: bool | None = None
    key_mask: torch.Tensor | None = field(default=None, compare=False)
    patches: tuple[Patch, ...] = ()

    def __post_init__(self) -> None:
        pairs = []
        for pair in self.ablate:
            try:
                layer, head = (operator.index(v) for v in pair)
            except (TypeError, ValueError):
                raise ValueError(f"ablate takes (layer, head) pairs of integers, got {pair!r}") from None
            if layer < 0 or head < 0 or isinstance(pair[0], bool) or isinstance(pair[1], bool):
                raise ValueError(f"ablate takes (layer, head) pairs of integers >= 0, got {pair!r}")
            pairs.append((layer, head))
        object.__setattr__(self, "ablate", tuple(sorted(set(pairs))))
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"temperature must be a finite number above 0, got {t!r}")
        if self.scale_scores is not None and not isinstance(self.scale_scores, bool):
            raise ValueError(f"scale_scores must be true, false or None, got {self.scale_scores!r}")
        m = self.key_mask
        if m is not None and (not isinstance(m, torch.Tensor) or m.dtype != torch.bool or m.dim() not in (2, 3)):
            raise ValueError("key_mask must be a bool tensor (T, T) or (B, T, T), True = may attend")
        object.__setattr__(self, "patches", tuple(self.patches))
        if not all(isinstance(p, Patch) for p in self.patches):
            raise ValueError("patches takes Patch objects (model.core.interventions.Patch)")
        by_place: dict[tuple[str, int], list[Patch]] = {}
        for p in self.patches:
            by_place.setdefault((p.site, p.layer), []).append(p)
        object.__setattr__(self, "_patches_at", by_place)

    @property
    def changes_nothing(self) -> bool:
        """True when running with these interventions is the plain model."""
        return (not self.ablate and self.temperature == 1 and self.scale_scores is None and self.key_mask is None
                and not self.patches)

    def check(self, config: GPTConfig, T: int | None = None) -> None:
        """Raise ValueError when a head is outside the model (any head, for the model before
        attention, whose config has no heads), or (given T, for a trace of one sequence) the key
        mask is not one (T, T) mask."""
        if self.ablate and not hasattr(config, "n_heads"):
            raise ValueError("the model before attention has no attention heads to switch off")
        for layer, head in self.ablate:
            if layer >= config.n_layers or head >= config.n_heads:
                raise ValueError(f"cannot ablate layer {layer} head {head}: the model has "
                                 f"{config.n_layers} layers of {config.n_heads} heads")
        m = self.key_mask
        if m is not None and T is not None and (tuple(m.shape[-2:]) != (T, T) or (m.dim() == 3 and m.shape[0] != 1)):
            raise ValueError(f"a trace takes one key_mask of ({T}, {T}), got {tuple(m.shape)}")
        for p in self.patches:
            self._check_patch(p, config, T)

    @staticmethod
    def _check_patch(p: Patch, config: GPTConfig, T: int | None) -> None:
        """Raise ValueError when a patch is outside the model or its value has another shape."""
        if p.layer >= config.n_layers or (p.head is not None and p.head >= config.n_heads):
            raise ValueError(f"cannot patch {p.describe()}: the model has {config.n_layers} layers of "
                             f"{config.n_heads} heads")
        if p.value is None:
            return
        n = p.value.shape[-2] if p.value.dim() >= 2 else -1
        want = (config.n_heads, n, config.d_head) if p.site == "head_out" else (n, config.d_model)
        if tuple(p.value.shape) != want or (T is not None and n != T):
            raise ValueError(f"the value of {p.describe()} is {tuple(p.value.shape)}, not {PATCH_SITES[p.site]}"
                             + (f" with T = {T}" if T is not None else ""))
        if p.position is not None and p.position >= n:
            raise ValueError(f"cannot patch {p.describe()}: the value has {n} positions")

    def heads_off(self, layer: int) -> list[int]:
        """The ablated query heads of ``layer``."""
        return [h for li, h in self.ablate if li == layer]

    def multiplier(self, attn) -> float:
        """What q_i·k_j is multiplied by in ``attn`` (an :class:`Attention`): its scale, or the
        forced one, divided by τ."""
        if self.scale_scores is None:
            scale = attn.scale
        else:
            scale = 1.0 / math.sqrt(attn.d_head) if self.scale_scores else 1.0
        return scale / self.temperature

    def mask(self, attn_mask: torch.Tensor) -> torch.Tensor:
        """The model's mask (T, T) ANDed with ``key_mask``: (T, T), or (B, 1, T, T) for a batch of masks."""
        if self.key_mask is None:
            return attn_mask
        extra = self.key_mask.to(attn_mask.device)
        combined = attn_mask & extra  # (T, T) or (B, T, T)
        return combined.unsqueeze(1) if combined.dim() == 3 else combined  # (B, 1, T, T): one per batch row

    def head_out(self, layer: int, head_out: torch.Tensor) -> torch.Tensor:
        """``head_out`` (B, n_heads, T, d_head) with the ablated heads of ``layer`` zeroed, then its patches."""
        off = self.heads_off(layer)
        if off:
            keep = torch.ones(head_out.shape[1], dtype=head_out.dtype, device=head_out.device)
            keep[off] = 0
            head_out = head_out * keep[:, None, None]  # (B, n_heads, T, d_head)
        return self.patched("head_out", layer, head_out)

    def patched(self, site: str, layer: int, activation: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
        """``activation`` at ``site`` of block ``layer`` with its patches written in (a copy; the
        same tensor when there are none). ``rows``: see :meth:`Patch.apply`."""
        patches = self._patches_at.get((site, layer))
        if not patches:
            return activation
        out = activation.clone()
        for p in patches:
            p.apply(out, activation, rows)
        return out

    def with_ablated(self, pairs: Iterable[tuple[int, int]]) -> "Interventions":
        """A copy with these heads switched off as well."""
        return replace(self, ablate=tuple(self.ablate) + tuple(tuple(p) for p in pairs))

    def with_key_mask(self, key_mask: torch.Tensor | None) -> "Interventions":
        """A copy with ``key_mask`` (replacing any key mask this one has)."""
        return replace(self, key_mask=key_mask)

    def describe(self) -> str:
        """One line for a status bar: e.g. ``"heads off: L0H1; τ = 2; no 1/√d_head"``; "" for none."""
        parts = []
        if self.ablate:
            parts.append("heads off: " + ", ".join(f"L{layer}H{head}" for layer, head in self.ablate))
        if self.temperature != 1:
            parts.append(f"τ = {self.temperature:g}")
        if self.scale_scores is not None:
            parts.append("1/√d_head forced on" if self.scale_scores else "no 1/√d_head")
        if self.key_mask is not None:
            parts.append("keys hidden")
        if self.patches:
            shown = ", ".join(p.describe() for p in self.patches[:3])
            parts.append("patched: " + shown + (f" and {len(self.patches) - 3} more" if len(self.patches) > 3 else ""))
        return "; ".join(parts)


def leave_one_out_masks(T: int, keys: Iterable[int], device=None) -> torch.Tensor:
    """One key mask per hidden key: bool (len(keys), T, T), row b hides key keys[b] from every
    query except itself (True = may attend)."""
    keys = torch.as_tensor(list(keys), dtype=torch.long, device=device)  # (B,)
    eye = torch.eye(T, dtype=torch.bool, device=device)  # (T, T): a query always sees itself
    masks = torch.ones(len(keys), T, T, dtype=torch.bool, device=device)
    masks[torch.arange(len(keys), device=device), :, keys] = eye[:, keys].t()  # column keys[b] of row b: only query keys[b]
    return masks


class WithInterventions:
    """A model seen through ``interventions``: every ``trace`` and forward call that passes no
    ``interventions`` of its own gets these; every other attribute is the model's own.

    The explorer's session hands this to panels' jobs while heads are switched off, so that what a
    panel computes (the positional panel's traces, generation) is the model the user is looking
    at. A call that passes its own interventions (what-ifs and leave-one-out, which start from a
    trace's) is passed through unchanged.

    Parameters
    ----------
    model : GPT
    interventions : Interventions
    """

    def __init__(self, model, interventions: Interventions) -> None:
        self.model = model
        self.interventions = interventions

    def trace(self, token_ids, *args, interventions: Interventions | None = None, **kwargs):
        """``model.trace`` with these interventions unless others are given."""
        return self.model.trace(token_ids, *args, interventions=self._pick(interventions), **kwargs)

    def __call__(self, *args, interventions: Interventions | None = None, **kwargs):
        """The model's forward with these interventions unless others are given."""
        return self.model(*args, interventions=self._pick(interventions), **kwargs)

    forward = __call__

    def _pick(self, given: Interventions | None) -> Interventions:
        return self.interventions if given is None else given

    def __getattr__(self, name: str):
        return getattr(self.model, name)
