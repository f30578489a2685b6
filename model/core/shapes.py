"""The name and shape of every tensor of a model's state dict, from its config alone.

The checkpoint readers check files against this before building anything
(:meth:`model.core.transformer.GPT.state_dict_shapes`; a test checks it against real models).
"""

from __future__ import annotations

from model.core.config import GPTConfig


def state_dict_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every tensor in ``GPT(config).state_dict()``, without building it.

    Returns
    -------
    dict of str to tuple of int
        ``tok_emb.weight`` (vocab_size, d_model), ``pos_emb.weight`` (context_length, d_model)
        with a positional table, per block its norms (before and/or after each branch), W_Q
        (n_heads · d_head, d_model), W_K and W_V (n_kv_heads · d_head, d_model), the QK-norms,
        W_O (d_model, n_heads · d_head), the MLP's linears (and biases where the config has them),
        ``ln_f`` and, untied, ``unembed.weight`` (and ``unembed.bias``).
    """
    d, v, n, dh = config.d_model, config.vocab_size, config.context_length, config.d_head
    shapes: dict[str, tuple[int, ...]] = {"tok_emb.weight": (v, d)}
    if config.has_pos_table:
        shapes["pos_emb.weight"] = (n, d)

    def linear(name: str, d_in: int, d_out: int, bias: bool) -> None:
        shapes[f"{name}.weight"] = (d_out, d_in)
        if bias:
            shapes[f"{name}.bias"] = (d_out,)

    def norm(name: str, width: int = d) -> None:
        shapes[f"{name}.weight"] = (width,)
        if config.norm == "layernorm" and config.norm_bias:
            shapes[f"{name}.bias"] = (width,)

    pre, post = config.norm_placement != "post", config.norm_placement != "pre"
    qk = {"head": (dh, dh), "full": (config.n_heads * dh, config.n_kv_heads * dh)}.get(config.qk_norm)
    for i in range(config.n_layers):
        if pre:
            norm(f"blocks.{i}.ln1")
        linear(f"blocks.{i}.attn.W_Q", d, config.n_heads * dh, config.qkv_bias)
        for w in ("W_K", "W_V"):
            linear(f"blocks.{i}.attn.{w}", d, config.n_kv_heads * dh, config.qkv_bias)
        if qk is not None:
            norm(f"blocks.{i}.attn.q_norm", qk[0])
            norm(f"blocks.{i}.attn.k_norm", qk[1])
        linear(f"blocks.{i}.attn.W_O", config.n_heads * dh, d, config.o_bias)
        if post:
            norm(f"blocks.{i}.ln_attn_out")
        if pre and config.block_layout != "parallel_one_norm":
            norm(f"blocks.{i}.ln2")
        if config.mlp != "gelu":
            linear(f"blocks.{i}.mlp.fc_gate", d, config.d_mlp, config.mlp_bias)
        linear(f"blocks.{i}.mlp.fc_in", d, config.d_mlp, config.mlp_bias)
        linear(f"blocks.{i}.mlp.fc_out", config.d_mlp, d, config.mlp_bias)
        if post:
            norm(f"blocks.{i}.ln_mlp_out")
    norm("ln_f")
    if not config.tied_unembed:
        linear("unembed", d, v, config.unembed_bias)
    return shapes
