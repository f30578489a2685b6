"""RoPE's settings in a Hugging Face ``config.json``, as transformers 5 writes them and as 4 did.

transformers 5 keeps them in ``rope_parameters``: one object (``rope_type``, ``rope_theta``,
``partial_rotary_factor``), or, for a model whose layer types rotate differently (Gemma 3), one object
per layer type (``{"full_attention": {...}, "sliding_attention": {...}}``). transformers 4 wrote
``rope_theta`` and ``rope_scaling`` at the top level, ``partial_rotary_factor`` (Phi) or
``rotary_pct`` and ``rotary_emb_base`` (GPT-NeoX), and Gemma 3's local base as
``rope_local_base_freq``. Both are read here, with transformers 5's own precedence
(``PreTrainedConfig.convert_rope_params_to_dict``): ``rope_scaling``, when present, stands in for
``rope_parameters``, and the top-level keys fill what it leaves out.

Only the default RoPE is built. Any other ``rope_type`` (linear, dynamic, llama3, yarn, longrope,
...) is refused by name, never ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.core.plain import finite_number, short_repr
from model.formats.hf.fields import HFConfig

#: The layer types transformers nests ``rope_parameters`` by.
LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class RopeSettings:
    """The RoPE a config asks for.

    Attributes
    ----------
    thetas : dict of str to float   the base θ per layer type (``"full_attention"``, ...), or
                                    under ``""`` the one base of every layer.
    partial_rotary_factor : float   the share of each head's dimensions that turn, in (0, 1].
    """

    thetas: dict[str, float]
    partial_rotary_factor: float

    def theta(self, layer_type: str) -> float:
        """The base of a layer of ``layer_type``."""
        return self.thetas.get(layer_type, self.thetas.get("", next(iter(self.thetas.values()))))

    def rotary_dims(self, cfg: HFConfig, d_head: int) -> int | None:
        """How many of a head's dimensions turn: int(d_head · factor), as transformers computes it;
        None for the whole head.

        Raises
        ------
        CheckpointError
            When that is no even number of at least 2.
        """
        dims = int(d_head * self.partial_rotary_factor)
        if dims == d_head:
            return None
        if dims < 2 or dims % 2:
            raise cfg.error(f"partial_rotary_factor {self.partial_rotary_factor:g} of head_dim {d_head} turns {dims} "
                            "dimensions; RoPE turns pairs, so it must be an even number of at least 2")
        return dims


def _theta(cfg: HFConfig, where: str, value: Any) -> float:
    number = finite_number(value)
    if number is None or not number > 1 or isinstance(value, bool):
        raise cfg.error(f"{where} = {short_repr(value)}: expected a number above 1")
    return number


def _factor(cfg: HFConfig, where: str, value: Any) -> float:
    number = finite_number(value)
    if number is None or not 0 < number <= 1 or isinstance(value, bool):
        raise cfg.error(f"{where} = {short_repr(value)}: expected a share of the head in (0, 1]")
    return number


def _checked(cfg: HFConfig, where: str, params: Any) -> dict[str, Any]:
    """One rope object: a dict whose type is the default RoPE."""
    if not isinstance(params, dict):
        raise cfg.error(f"{where} = {short_repr(params)}: expected an object")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise cfg.error(f"{where}.rope_type = {short_repr(kind)}: only the default RoPE is built, not a scaled or "
                        "extended one (linear, dynamic, llama3, yarn, longrope, ...)")
    return params


def rope_settings(cfg: HFConfig, default_theta: float, default_factor: float = 1.0,
                  local_theta: float | None = None) -> RopeSettings:
    """The config's RoPE: its base per layer type and its partial rotary factor.

    Parameters
    ----------
    cfg : HFConfig
    default_theta : float
        The family's base when the config names none (transformers' ``default_theta``; for Gemma 3
        the global layers').
    default_factor : float
        The family's partial rotary factor when the config names none (GPT-NeoX 0.25, Phi 0.5).
    local_theta : float, optional
        Gemma 3: the sliding-window layers' default base (``rope_local_base_freq``).

    Raises
    ------
    CheckpointError
        For a rope_type other than the default (naming it), or a value that is not a number.
    """
    top_theta = cfg.get("rope_theta", cfg.get("rotary_emb_base"))
    top_factor = cfg.get("partial_rotary_factor", cfg.get("rotary_pct"))
    scaling = cfg.get("rope_scaling")
    source, params = ("rope_scaling", scaling) if scaling is not None else ("rope_parameters", cfg.get("rope_parameters"))
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise cfg.refuse(source, "expected an object")
    nested = {key: value for key, value in params.items() if key in LAYER_TYPES}
    if local_theta is not None and not nested:  # Gemma 3's transformers 4 keys: rope_scaling is the global layers'
        nested = {"full_attention": params, "sliding_attention": {}}
    groups = nested or {"": params}
    thetas, factors = {}, []
    for layer_type, group in groups.items():
        where = f"{source}.{layer_type}" if layer_type else source
        group = _checked(cfg, where, {} if group is None else group)
        fallback = top_theta
        if layer_type == "sliding_attention" and local_theta is not None:
            fallback = cfg.get("rope_local_base_freq", local_theta)
        theta = group.get("rope_theta", fallback if fallback is not None else default_theta)
        thetas[layer_type] = _theta(cfg, f"{where}.rope_theta" if "rope_theta" in group else "rope_theta", theta)
        factor = group.get("partial_rotary_factor", top_factor if top_factor is not None else default_factor)
        factors.append(_factor(cfg, "partial_rotary_factor", factor))
    if not thetas:
        thetas[""] = _theta(cfg, "rope_theta", top_theta if top_theta is not None else default_theta)
        factors.append(_factor(cfg, "partial_rotary_factor", top_factor if top_factor is not None else default_factor))
    if len(set(factors)) > 1:
        raise cfg.error(f"{source}: layer types with different partial_rotary_factor values are not supported")
    return RopeSettings(thetas, factors[0])
