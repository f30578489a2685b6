"""The loaded model's architecture in words, and what its position switch means (no Qt here).

Everything here is read from the model's :class:`model.core.config.GPTConfig`: the panels never guess
an architecture from the file it came from. :func:`position_switch` says what the "positional
encoding" check box of the text and positional panels does for this model (a learned table
added to the input, RoPE's rotation inside attention, or nothing at all), and
:func:`describe_architecture` writes the Model panel's rows, each number of the config once.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.core.config import GPTConfig

# What the two RoPE pair layouts rotate together, and who uses each.
PAIR_LAYOUTS = {
    "halves": "pairs in halves (j, j + d_head/2), Hugging Face's rotate_half",
    "interleaved": "interleaved pairs (2j, 2j + 1), as llama2.c and Meta's Llama code",
}


@dataclass(frozen=True)
class PositionSwitch:
    """What the positional-encoding check box means for one model.

    Attributes
    ----------
    label : str     the check box's text.
    enabled : bool  False when the model has no position signal to switch (the box is greyed).
    tooltip : str   what switching it off does, or why it can do nothing.
    """

    label: str
    enabled: bool
    tooltip: str


def position_switch(config: GPTConfig | None, formula: bool = False) -> PositionSwitch:
    """The position switch of the text panel (and, with ``formula``, the longer label of the
    positional panel) for ``config``'s positional scheme.

    A learned table: "positional encoding" (off: x_i = e_i). RoPE: the switch is the rotation of
    q and k (off: no rotation, so no position signal at all). None: disabled, with the reason.
    No model (None): the plain label, enabled.
    """
    kind = config.positional if config is not None else "learned"
    if kind == "rope":
        return PositionSwitch(
            "RoPE rotation of q and k" if formula else "RoPE rotation",
            True,
            "This model has no positional table: position enters inside attention, where RoPE turns "
            "q_i and k_j by angles proportional to their positions i and j. Off: q and k are not "
            "rotated, so the model runs without any signal of where a token stands.")
    if kind == "none":
        return PositionSwitch(
            "positional encoding (this model has none)" if formula else "positional encoding (none)",
            False,
            "This model has no positional encoding: nothing is added to the input (x_i = e_i) and "
            "nothing is rotated inside attention, so there is nothing to switch off.")
    return PositionSwitch(
        "positional encoding  x_i = e_i + p_i" if formula else "positional encoding",
        True,
        "Off: x_i = e_i, the learned table p_i is left out (the weights are not changed).")


def ranges_text(items: list[int]) -> str:
    """[0, 1, 2, 5] -> "0–2, 5"."""
    out, start = [], None
    for k, v in enumerate(items):
        if start is None:
            start = v
        if k + 1 == len(items) or items[k + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}–{v}")
            start = None
    return ", ".join(out)


def kv_groups(config: GPTConfig) -> list[list[int]]:
    """Per key/value head, the query heads that read it (grouped-query attention,
    ``Attention.kv_head``: query head h reads key/value head h // (n_heads // n_kv_heads))."""
    group = config.n_heads // config.n_kv_heads
    return [list(range(g * group, (g + 1) * group)) for g in range(config.n_kv_heads)]


def kv_sharing(config: GPTConfig) -> str:
    """Which query heads share which key/value head, in words ("" with one kv head per query head)."""
    if config.n_kv_heads == config.n_heads:
        return ""
    groups = kv_groups(config)
    if config.n_kv_heads == 1:
        return f"all {config.n_heads} query heads read the one key/value head"
    return "; ".join(f"heads {ranges_text(g)} read kv head {kv}" for kv, g in enumerate(groups))


def _attention(cfg: GPTConfig) -> str:
    heads = (f"{cfg.n_heads} query heads of width {cfg.d_head}" if cfg.n_heads > 1
             else f"one head of width {cfg.d_head}")
    if cfg.n_kv_heads == cfg.n_heads:
        return heads + ", each with its own keys and values"
    return (f"{heads} sharing {cfg.n_kv_heads} key/value head{'s' if cfg.n_kv_heads > 1 else ''} "
            f"(grouped-query attention: {kv_sharing(cfg)})")


def _span(cfg: GPTConfig) -> str:
    windows = [cfg.attn_window(layer) for layer in range(cfg.n_layers)]
    if not any(windows):
        return "every key up to the query, in every block (global)"
    local = sorted({w for w in windows if w})
    parts = [f"blocks {ranges_text([b for b, w in enumerate(windows) if w == size])}: local, the last {size} keys"
             for size in local]
    glob = [b for b, w in enumerate(windows) if not w]
    if glob:
        parts.append(f"blocks {ranges_text(glob)}: global")
    return "; ".join(parts)


def _position(cfg: GPTConfig) -> str:
    if cfg.positional == "learned":
        return (f"a learned table p_i of {cfg.context_length} positions added to the input: x_i = e_i + p_i")
    if cfg.positional == "none":
        return "none: x_i = e_i, and nothing inside attention; only the causal mask tells places apart"
    return (f"RoPE, no table: in every block q_i and k_j are turned, pair j by the angle i·θ^(−2j/d_head), "
            f"θ = {cfg.rope_theta:,g}; {PAIR_LAYOUTS[cfg.rope_pairs]}")


def _norm(cfg: GPTConfig) -> str:
    where = "before attention, before the MLP and after the last block"
    if cfg.norm == "rmsnorm":
        return f"RMSNorm x / √(mean(x²) + ε) ⊙ g, ε = {cfg.norm_eps:g}, {where}"
    shift = " + b" if cfg.norm_bias else " (no shift b)"
    return f"LayerNorm (x − mean) / √(var + ε) ⊙ g{shift}, ε = {cfg.norm_eps:g}, {where}"


def _mlp(cfg: GPTConfig) -> str:
    b_in, b_out = (" + b_in", " + b_out") if cfg.mlp_bias else ("", "")
    if cfg.mlp == "swiglu":
        return f"SwiGLU (SiLU(h W_gate{b_in.replace('in', 'gate')}) ⊙ (h W_in{b_in})) W_out{b_out}, hidden width {cfg.d_mlp:,}"
    gelu = "exact GELU (with erf)" if cfg.gelu == "exact" else "GELU's tanh approximation"
    return f"GELU(h W_in{b_in}) W_out{b_out} with {gelu}, hidden width {cfg.d_mlp:,}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def describe_architecture(config: GPTConfig) -> list[tuple[str, str, str]]:
    """The Model panel's architecture rows: (label, words, the config fields they say).

    Every field of the config appears in exactly one row (RoPE's θ and pair layout only for a
    RoPE model), and each number once.

    Returns
    -------
    list of (str, str, str)
    """
    cfg = config
    scale = ("q_i·k_j / √d_head" if cfg.scale_scores
             else "q_i·k_j, not divided by √d_head (as GPT-Neo)")
    position_fields = "positional, rope_theta, rope_pairs" if cfg.positional == "rope" else "positional"
    return [
        ("blocks", f"{cfg.n_layers} of width {cfg.d_model}, pre-norm", "n_layers, d_model"),
        ("context window", f"{cfg.context_length:,} tokens", "context_length"),
        ("vocabulary", f"{cfg.vocab_size:,} tokens", "vocab_size"),
        ("attention", _attention(cfg), "n_heads, d_head, n_kv_heads"),
        ("scores", scale, "scale_scores"),
        ("keys seen", _span(cfg), "attn_windows"),
        ("position", _position(cfg), position_fields),
        ("normalisation", _norm(cfg), "norm, norm_eps, norm_bias"),
        ("MLP", _mlp(cfg), "mlp, gelu, d_mlp" if cfg.mlp == "gelu" else "mlp, d_mlp"),
        ("biases", f"W_Q, W_K, W_V: {_yes(cfg.qkv_bias)}; W_O: {_yes(cfg.o_bias)}; MLP: {_yes(cfg.mlp_bias)}",
         "qkv_bias, o_bias, mlp_bias"),
        ("unembedding", "tied: the logits use the token-embedding table" if cfg.tied_unembed
         else "its own matrix (not the token-embedding table)", "tied_unembed"),
    ]


@dataclass(frozen=True)
class EmbeddingTitles:
    """What the embeddings panel calls its three maps, and the note above them, for one model.

    Attributes
    ----------
    e, position, x : str   titles of the e_i map, of the middle map (p_i, or RoPE's angles) and of x_i.
    note : str             "" for a learned table; otherwise where position enters (or that it does not).
    """

    e: str
    position: str
    x: str
    note: str


def embedding_titles(config: GPTConfig | None, positional_encoding: bool = True) -> EmbeddingTitles:
    """The embeddings panel's titles for ``config``'s positional scheme, with the switch on or off."""
    kind = config.positional if config is not None else "learned"
    e = "e_i token embedding"
    if kind == "learned":
        if positional_encoding:
            return EmbeddingTitles(e, "p_i position (learned table)", "x_i = e_i + p_i", "")
        return EmbeddingTitles(e, "p_i position: switched off (p_i = 0)", "x_i = e_i (positional encoding off)", "")
    if kind == "none":
        return EmbeddingTitles(e, "", "x_i = e_i",
                               "This model has no positional encoding: no table p_i is added (x_i = e_i) and nothing "
                               "is rotated inside attention. Only the causal mask tells places apart.")
    pairs = PAIR_LAYOUTS[config.rope_pairs]
    off = "" if positional_encoding else " (rotation switched off: not applied now)"
    return EmbeddingTitles(
        e, f"RoPE angle i·θ^(−2j/d_head) mod 2π{off}", "x_i = e_i (no position added here)",
        "This model has no positional table: x_i = e_i. Position enters inside attention, in every block: "
        f"RoPE turns pair j of q_i and k_j by i·θ_j and j·θ_j (θ = {config.rope_theta:,g}, {pairs}), "
        "so a score q_i·k_j depends on the offset i − j. The middle map shows those angles.")


def switch_name(config: GPTConfig | None) -> str:
    """What the order lesson calls its position switch in labels: "RoPE" for a RoPE model, else "PE"."""
    return "RoPE" if config is not None and config.positional == "rope" else "PE"


def order_warning(config: GPTConfig | None, positional_encoding: bool, twin: bool = False) -> str:
    """The positional panel's warning about switching position off for this model.

    ``twin``: the course's twin trained without positional encoding can be opened (the fair comparison).
    """
    if config is None:
        return ""
    if config.positional == "none":
        return "This model was trained without positional encoding: on and off are the same."
    what = "RoPE's rotation" if config.positional == "rope" else "Positional encoding"
    if not positional_encoding:
        text = (f"{what} is off, but this model was trained with it: it now runs outside what it was "
                "trained on, with no signal of where a token stands.")
        return text + (" The twin trained without it is the fair comparison." if twin else "")
    if config.positional == "rope":
        return ("This model was trained with RoPE: switching the rotation off takes it outside what it was "
                "trained on. The shift below shows what RoPE keeps: only offsets i − j matter.")
    return ("This model was trained with positional encoding: switching it off takes it outside what it was "
            "trained on.")


def qkv_caption(config: GPTConfig | None, layer: int, head: int, kv_head: int, positional_encoding: bool = True,
                vectors: bool = True) -> str:
    """The Q/K/V panel's caption: the layer and head, which key/value head k and v come from under
    grouped-query attention, and (``vectors``: q, k, v rather than the weights) whether q and k
    are shown after RoPE's rotation."""
    text = f"layer {layer}, head {head}"
    if config is None:
        return text
    if config.n_kv_heads < config.n_heads:
        shared = kv_groups(config)[kv_head]
        text += f" · k and v of key/value head {kv_head}, shared by query heads {ranges_text(shared)}"
    if config.positional == "rope" and vectors:
        text += " · q and k after RoPE's rotation" if positional_encoding else " · q and k not rotated (RoPE off)"
    return text


def score_title(config: GPTConfig | None) -> str:
    """The attention map's title: the scores as this model computes them (scaled or not)."""
    if config is not None and not config.scale_scores:
        return "scores q·k (this model does not divide by √d_head)"
    return "scores q·k/√d_head"
