"""Per-layer settings of a Hugging Face config: which layers attend through a sliding window.

transformers 5 writes ``layer_types`` (``"full_attention"`` or ``"sliding_attention"`` per layer);
older files leave it out and each family derives it from its own keys (Gemma 2 alternates, Gemma 3
repeats ``sliding_window_pattern``, Qwen2 and Qwen3 slide from ``max_window_layers`` on when
``use_sliding_window``, SmolLM3 in its layers without RoPE). A sliding layer's query i sees keys
i − w < j ≤ i, w = ``sliding_window`` (transformers' ``sliding_window_overlay``), our window.
"""

from __future__ import annotations

from typing import Callable

from model.formats.hf.fields import HFConfig

FULL, SLIDING = "full_attention", "sliding_attention"


def layer_types(cfg: HFConfig, n_layers: int, derive: Callable[[int], bool]) -> list[str]:
    """Each layer's type: ``layer_types`` from the config, else ``derive(layer)`` (True: sliding).

    Raises
    ------
    CheckpointError
        When ``layer_types`` is not one of the two types per layer.
    """
    types = cfg.get("layer_types")
    if types is None:
        return [SLIDING if derive(i) else FULL for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers or any(t not in (FULL, SLIDING) for t in types):
        raise cfg.refuse("layer_types", f"expected {n_layers} entries, each {FULL!r} or {SLIDING!r}")
    return types


def sliding_window(cfg: HFConfig, default: int | None) -> int:
    """The window w of the sliding layers (``sliding_window``, ``default`` when absent); 0 when
    the config says null (no window).

    Raises
    ------
    CheckpointError
        For a window that is not a whole number of at least 1.
    """
    if "sliding_window" not in cfg.data:
        return default or 0
    return 0 if cfg.data["sliding_window"] is None else cfg.positive_int("sliding_window")


def windows(types: list[str], window: int, context_length: int) -> tuple[int, ...]:
    """Our per-layer attention windows: ``window`` in the sliding layers (0, global, where the
    window is at least the context: it hides nothing), 0 in the others; () when none slides."""
    if not window or window >= context_length:
        return ()
    out = tuple(window if t == SLIDING else 0 for t in types)
    return out if any(out) else ()
