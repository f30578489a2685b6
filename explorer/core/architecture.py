"""The loaded model's architecture in words, and what its position switch means (no Qt here).

Everything here is read from the model's :class:`model.core.config.GPTConfig` (or, for the model
before attention, its :class:`model.core.window.WindowConfig`): the panels never guess an
architecture from the file it came from. :func:`position_switch` says what the "positional
encoding" check box of the text and positional panels does for this model (a learned table
added to the input, RoPE's rotation inside attention, or nothing at all), and
:func:`describe_architecture` writes the Model panel's rows, each number of the config once.
"""

from __future__ import annotations


from dataclasses import dataclass

from model.core.architectures import has_attention
from model.core.config import GPTConfig
from model.core.window import WindowConfig

# What the two RoPE pair layouts rotate together, and who uses each.
PAIR_LAYOUTS = {
    "halves": "pairs in halves (j, j + d_head/2), Hugging Face's rotate_half",
    "interleaved": "interleaved pairs (2j, 2j + 1), as llama2.c and Meta's Llama code",
}


def theta_text(theta: float) -> str:
    """A RoPE base as people write it: "10,000", "1,000,000" (not "1e+06"), "500.5"."""
    return f"{theta:,.0f}" if float(theta).is_integer() and abs(theta) < 1e15 else f"{theta:,g}"


def pair_layout(config: GPTConfig) -> str:
    """:data:`PAIR_LAYOUTS`' words for the config, with the rotated width r in place of d_head
    under partial rotary ("pairs in halves (j, j + r/2) of the first r = 4 dimensions, ...")."""
    words = PAIR_LAYOUTS[config.rope_pairs]
    if config.rotary_dims is None:
        return words
    return words.replace("d_head/2", "r/2").replace("), ", f") of the first r = {config.rotary_dims} dimensions, ", 1)


def rotation_extent(config: GPTConfig) -> str:
    """How much of each head RoPE turns: "" for the whole head; else "the first r of d_head
    dimensions (p %) turn; the other n carry no position" (partial rotary: Pythia, Phi)."""
    if config.positional != "rope" or config.rotary_dims is None:
        return ""
    r, d = config.rotary_dims, config.d_head
    return (f"only the first {r} of each head's {d} dimensions turn ({100 * r / d:g} %, partial rotary); "
            f"the other {d - r} are not rotated and carry no position")


def rope_layers_text(config: GPTConfig) -> str:
    """Which layers rotate with which base, and which have no RoPE (NoPE), in words; "" when every
    layer rotates with rope_theta."""
    if config.positional != "rope" or (not config.rope_thetas and not config.nope_layers):
        return ""
    by_theta: dict[float, list[int]] = {}
    for layer in range(config.n_layers):
        theta = config.layer_rope_theta(layer)
        if theta is not None:
            by_theta.setdefault(theta, []).append(layer)
    parts = [f"{blocks_text(layers)}: θ = {theta_text(theta)}" for theta, layers in by_theta.items()]
    if config.nope_layers:
        parts.append(f"{blocks_text(list(config.nope_layers))}: no RoPE (NoPE: attention there sees no "
                     "position at all)")
    return "; ".join(parts)


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
    if isinstance(config, WindowConfig):
        return PositionSwitch(
            "positional encoding (this model has none)" if formula else "positional encoding", False,
            f"The model before attention has no positional encoding to switch off: where a token stands in its "
            f"window of {config.context_length} decides which block of W_in it is multiplied by.")
    kind = config.positional if config is not None else "learned"
    if kind == "rope":
        extras = "".join(f" {t[0].upper()}{t[1:]}." for t in (rotation_extent(config), rope_layers_text(config)) if t)
        return PositionSwitch(
            "RoPE rotation of q and k" if formula else "RoPE rotation",
            True,
            "This model has no positional table: position enters inside attention, where RoPE turns "
            f"q_i and k_j by angles proportional to their positions i and j.{extras} Off: q and k are not "
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


def blocks_text(layers: list[int]) -> str:
    """"block 3" or "blocks 0–1, 4"."""
    return f"block {layers[0]}" if len(layers) == 1 else f"blocks {ranges_text(layers)}"


def causal_switch(config) -> PositionSwitch:
    """The causal-mask switch of the text panel for ``config``: enabled for a transformer; greyed, with
    the reason, for the model before attention, which has no mask (it only ever reads earlier tokens)."""
    if config is None or has_attention(config):
        return PositionSwitch("causal mask", True, "Off: every query attends to every key, later ones too.")
    return PositionSwitch("causal mask", False,
                          f"The model before attention has no attention mask to switch off: its prediction after "
                          f"a token reads only the {config.context_length} tokens up to it.")


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
    parts = [f"{blocks_text([b for b, w in enumerate(windows) if w == size])}: local, the last {size} keys"
             for size in local]
    glob = [b for b, w in enumerate(windows) if not w]
    if glob:
        parts.append(f"{blocks_text(glob)}: global")
    return "; ".join(parts)


def _position(cfg: GPTConfig) -> str:
    if cfg.positional == "learned":
        return (f"a learned table p_i of {cfg.context_length} positions added to the input: x_i = e_i + p_i")
    if cfg.positional == "none":
        return "none: x_i = e_i, and nothing inside attention; only the causal mask tells places apart"
    r = "d_head" if cfg.rotary_dims is None else "r"
    where = "in every block" if not cfg.nope_layers else "in the blocks with RoPE"
    text = (f"RoPE, no table: {where} q_i and k_j are turned, pair j by the angle i·θ^(−2j/{r}), "
            + (f"θ = {theta_text(cfg.rope_theta)}" if not cfg.rope_thetas else "θ per block") + f"; {pair_layout(cfg)}")
    extras = [e for e in (rotation_extent(cfg), rope_layers_text(cfg)) if e]
    return text + "".join(f"; {e}" for e in extras)


def _norm(cfg: GPTConfig) -> str:
    where = {"pre": "before attention, before the MLP and after the last block",
             "sandwich": "before and after attention, before and after the MLP (four per block), and after "
                         "the last block",
             "post": "after attention's and the MLP's outputs (none before them) and after the last block"}
    at = where[cfg.norm_placement]
    if cfg.block_layout == "parallel_one_norm":
        at = "one before attention and the MLP together, and one after the last block"
    if cfg.norm == "rmsnorm":
        gain = "(1 + w), its stored weight w offset by one (Gemma)" if cfg.norm_unit_offset else "g"
        return f"RMSNorm x / √(mean(x²) + ε) ⊙ {gain}, ε = {cfg.norm_eps:g}, {at}"
    shift = " + b" if cfg.norm_bias else " (no shift b)"
    return f"LayerNorm (x − mean) / √(var + ε) ⊙ g{shift}, ε = {cfg.norm_eps:g}, {at}"


def _mlp(cfg: GPTConfig) -> str:
    b_in, b_out = (" + b_in", " + b_out") if cfg.mlp_bias else ("", "")
    gelu = "exact GELU (with erf)" if cfg.gelu == "exact" else "GELU's tanh approximation"
    if cfg.mlp == "swiglu":
        return f"SwiGLU (SiLU(h W_gate{b_in.replace('in', 'gate')}) ⊙ (h W_in{b_in})) W_out{b_out}, hidden width {cfg.d_mlp:,}"
    if cfg.mlp == "geglu":
        return (f"gated GELU (GELU(h W_gate{b_in.replace('in', 'gate')}) ⊙ (h W_in{b_in})) W_out{b_out} with "
                f"{gelu}, hidden width {cfg.d_mlp:,}")
    return f"GELU(h W_in{b_in}) W_out{b_out} with {gelu}, hidden width {cfg.d_mlp:,}"


def _blocks(cfg: GPTConfig) -> str:
    shape = f"{cfg.n_layers} of width {cfg.d_model}"
    if cfg.block_layout == "parallel":
        return shape + ", attention and the MLP side by side from the block's input: x + Attn(LN1(x)) + MLP(LN2(x))"
    if cfg.block_layout == "parallel_one_norm":
        return shape + ", attention and the MLP side by side from one norm: x + Attn(LN(x)) + MLP(LN(x))"
    order = {"pre": "pre-norm", "sandwich": "norms before and after each part",
             "post": "norms after each part, none before"}[cfg.norm_placement]
    return f"{shape}, attention then the MLP, {order}"


def _qk(cfg: GPTConfig) -> str:
    if cfg.qk_norm == "none":
        return ""
    norm = "RMSNorm" if cfg.norm == "rmsnorm" else "LayerNorm"
    if cfg.qk_norm == "head":
        return (f"; q and k normalised per head ({norm} over d_head = {cfg.d_head}, QK-norm) after the "
                "projection and before RoPE")
    return (f"; q and k normalised over the whole projection ({norm} over n_heads·d_head before the split "
            "into heads, QK-norm) before RoPE")


def _scores(cfg: GPTConfig) -> str:
    if not cfg.scale_scores:
        text = "q_i·k_j, not divided by √d_head (as GPT-Neo)"
    elif cfg.score_scale is None:
        text = "q_i·k_j / √d_head"
    else:
        text = (f"q_i·k_j × {cfg.score_scale:.4g} (= 1/√{1 / cfg.score_scale ** 2:.4g}; not 1/√d_head = "
                f"{1 / cfg.d_head ** 0.5:.4g})")
    if cfg.attn_softcap:
        c = f"{cfg.attn_softcap:g}"
        text += f", soft-capped to {c}·tanh(s/{c}) before the mask (every score within ±{c})"
    return text


def _embedding(cfg: GPTConfig) -> str:
    if cfg.embed_scale == 1:
        return "e_i, the token's row of the table"
    root = cfg.d_model ** 0.5
    note = " = √d_model" if abs(cfg.embed_scale - root) <= 1e-4 * root else ""
    return f"e_i × {cfg.embed_scale:.4g}{note}: the token's row scaled before the first block"


def _unembed(cfg: GPTConfig) -> str:
    text = ("tied: the logits use the token-embedding table" if cfg.tied_unembed
            else "its own matrix (not the token-embedding table)")
    if cfg.unembed_bias:
        text += ", plus a bias per token"
    if cfg.final_softcap:
        c = f"{cfg.final_softcap:g}"
        text += f"; logits soft-capped to {c}·tanh(z/{c})"
    return text


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
    if isinstance(config, WindowConfig):
        return describe_window(config)
    cfg = config
    position_fields = ("positional, rope_theta, rope_pairs, rotary_dims, rope_thetas, nope_layers"
                       if cfg.positional == "rope" else "positional")
    return [
        ("blocks", _blocks(cfg), "n_layers, d_model, block_layout"),
        ("context window", f"{cfg.context_length:,} tokens", "context_length"),
        ("vocabulary", f"{cfg.vocab_size:,} tokens", "vocab_size"),
        ("embedding", _embedding(cfg), "embed_scale"),
        ("attention", _attention(cfg) + _qk(cfg), "n_heads, d_head, n_kv_heads, qk_norm"),
        ("scores", _scores(cfg), "scale_scores, score_scale, attn_softcap"),
        ("keys seen", _span(cfg), "attn_windows"),
        ("position", _position(cfg), position_fields),
        ("normalisation", _norm(cfg), "norm, norm_eps, norm_bias, norm_unit_offset, norm_placement"),
        ("MLP", _mlp(cfg), "mlp, d_mlp" if cfg.mlp == "swiglu" else "mlp, gelu, d_mlp"),
        ("biases", f"W_Q, W_K, W_V: {_yes(cfg.qkv_bias)}; W_O: {_yes(cfg.o_bias)}; MLP: {_yes(cfg.mlp_bias)}",
         "qkv_bias, o_bias, mlp_bias"),
        ("unembedding", _unembed(cfg), "tied_unembed, unembed_bias, final_softcap"),
    ]


def describe_window(cfg: WindowConfig) -> list[tuple[str, str, str]]:
    """The Model panel's rows for the model before attention (each field of its config once)."""
    n, d, h = cfg.context_length, cfg.d_model, cfg.d_mlp
    return [
        ("model", "the model before attention: a fixed-window MLP language model (Bengio et al. 2003), "
                  "no attention, no positional table", ""),
        ("context window", f"{n:,} tokens: the prediction after token i reads tokens i − {n - 1} … i side by side",
         "context_length"),
        ("vocabulary", f"{cfg.vocab_size:,} tokens", "vocab_size"),
        ("embedding", f"{d} numbers per token, the same table at every position", "d_model"),
        ("first layer", f"x_i W_in + b_in, x_i the window's embeddings concatenated ({n * d:,} numbers); "
                        f"W_in is {n} blocks of {d} × {h}, one per position in the window", ""),
        ("hidden layer", f"GELU, width {h}", "d_mlp"),
        ("second layer", "hidden W_out + b_out, back to the embedding's width", ""),
        ("normalisation", f"LayerNorm (x − mean) / √(var + ε) ⊙ g + b, ε = {cfg.norm_eps:g}, after the second layer",
         "norm_eps"),
        ("unembedding", "tied: the logits use the token-embedding table", ""),
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
    e = "e_i token embedding"
    if isinstance(config, WindowConfig):
        return EmbeddingTitles(e, "", "", f"The model before attention adds nothing to e_i: it reads the last "
                                          f"{config.context_length} embeddings side by side, each through its "
                                          "position's own block of W_in (the Why attention? panel shows two).")
    kind = config.positional if config is not None else "learned"
    if kind == "learned":
        if positional_encoding:
            return EmbeddingTitles(e, "p_i position (learned table)", "x_i = e_i + p_i", "")
        return EmbeddingTitles(e, "p_i position: switched off (p_i = 0)", "x_i = e_i (positional encoding off)", "")
    if kind == "none":
        return EmbeddingTitles(e, "", "x_i = e_i",
                               "This model has no positional encoding: no table p_i is added (x_i = e_i) and nothing "
                               "is rotated inside attention. Only the causal mask tells places apart.")
    pairs = pair_layout(config)
    off = "" if positional_encoding else " (rotation switched off: not applied now)"
    r = "d_head" if config.rotary_dims is None else "r"
    e = "e_i token embedding" if config.embed_scale == 1 else f"e_i token embedding (× {config.embed_scale:.4g})"
    first = next((i for i in range(config.n_layers) if config.layer_rope_theta(i) is not None), 0)
    theta = config.layer_rope_theta(first) or config.rope_theta
    where = "in every block" if not (config.nope_layers or config.rope_thetas) else "in the blocks with RoPE"
    extras = "".join(f" {t[0].upper()}{t[1:]}." for t in (rotation_extent(config), rope_layers_text(config)) if t)
    return EmbeddingTitles(
        e, f"RoPE angle i·θ^(−2j/{r}) mod 2π{off}", "x_i = e_i (no position added here)",
        f"This model has no positional table: x_i = e_i. Position enters inside attention, {where}: "
        f"RoPE turns pair j of q_i and k_j by i·θ_j and j·θ_j (θ = {theta_text(theta)} in block {first}, {pairs}), "
        f"so a score q_i·k_j depends on the offset i − j.{extras} The middle map shows block {first}'s angles.")


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
    normed = "QK-norm and " if config.qk_norm != "none" else ""
    if config.positional == "rope" and vectors and config.layer_rope_theta(layer) is None:
        text += f" · q and k after {normed[:-5] or 'the projection'}: no RoPE in this layer (NoPE)"
    elif config.positional == "rope" and vectors:
        text += (f" · q and k after {normed}RoPE's rotation" if positional_encoding
                 else " · q and k not rotated (RoPE off)")
    elif normed and vectors:
        text += " · q and k after QK-norm"
    return text
