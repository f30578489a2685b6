"""The transformer: a small decoder-only GPT, read top to bottom.

The default model is GPT-2 / nanoGPT's layout (pre-LayerNorm). For token ids t_0 .. t_{T-1}:

    x_i = tok_emb[t_i] + pos_emb[i]                          (learned positional table)
    per block:  h = LN1(x)
                q_i = h_i W_Q,  k_i = h_i W_K,  v_i = h_i W_V    (per head, d_head wide)
                attn_scores_ij = q_i . k_j / sqrt(d_head)        (j <= i; -inf above the diagonal)
                attn_weights_ij = softmax_j(attn_scores_ij)
                head_out_i = sum_j attn_weights_ij v_j
                x = x + concat(heads) W_O
                x = x + MLP(LN2(x)),  MLP(h) = GELU(h W_in + b_in) W_out + b_out
    logits = LN_f(x) unembed                                  (unembed = tok_embᵀ when tied)

Scaled dot-product attention is Vaswani et al. 2017, eq. 1, computed explicitly: a trace's weights made the prediction.

Other families change single components (see :class:`model.core.config.GPTConfig`): RoPE instead of the table (q_i
and k_j rotated by their positions before the dot product; all of each head or its first dimensions; a base per
layer, none in NoPE layers), RMSNorm instead of LayerNorm (with a gain of 1 + w in Gemma), a SwiGLU or gated-GELU
MLP, fewer key/value heads than query heads, QK-norm of q and k before RoPE, another factor than 1/sqrt(d_head) (1
in GPT-Neo, Gemma's), soft-capped scores and logits (c tanh(s/c)), local attention windows, scaled embeddings,
norms after the branches too (Gemma) or only (OLMo-2), and attention and MLP side by side (GPT-NeoX, Phi).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from model.core import stopping
from model.core.components import MLP, HeadWeights, RoPE, layer_ropes, make_norm, qk_normed, qk_norms
from model.core.config import GPTConfig
from model.core.inputs import checked_ids
from model.core.shapes import state_dict_shapes
from model.tracing.records import Trace, soft_cap
from model.tracing.reuse import origin, trace_reusing


class Attention(HeadWeights, nn.Module):
    """Causal multi-head self-attention with explicit scores and weights.

    ``W_Q`` and ``W_O`` are ``nn.Linear`` between d_model and n_heads · d_head, ``W_K`` and ``W_V``
    map d_model to n_kv_heads · d_head; head h uses rows ``h*d_head:(h+1)*d_head`` of W_Q (heads are
    contiguous groups, as in nanoGPT) and key/value head :meth:`kv_head` (h). In order:
    projections, QK-norm (:meth:`normed`, Qwen3, Gemma 3, OLMo-2), RoPE (:attr:`rope`: this
    layer's, or None), scores times :attr:`scale`, soft-capped by :attr:`softcap` (Gemma 2), masked.

    Which keys a query may see (:meth:`allowed_keys`), the factor the dot products are multiplied
    by (:attr:`scale`) and each head's weights (:meth:`head_weights`) are defined here once.
    """

    def __init__(self, config: GPTConfig, layer: int = 0, rope: RoPE | None = None, device=None) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = config.n_heads, config.n_kv_heads, config.d_head
        d, dh = config.d_model, config.d_head
        self.W_Q = nn.Linear(d, self.n_heads * dh, bias=config.qkv_bias, device=device)
        self.W_K = nn.Linear(d, self.n_kv_heads * dh, bias=config.qkv_bias, device=device)
        self.W_V = nn.Linear(d, self.n_kv_heads * dh, bias=config.qkv_bias, device=device)
        self.W_O = nn.Linear(self.n_heads * dh, d, bias=config.o_bias, device=device)
        #: "none", "head" (a norm over d_head, shared by the heads) or "full" (over the whole projection).
        self.qk_norm = config.qk_norm
        self.q_norm, self.k_norm = qk_norms(config, device)
        #: What q_i·k_j is multiplied by: 1/sqrt(d_head), the config's score_scale, or 1 (GPT-Neo).
        self.scale = config.attn_scale
        #: c > 0: scores are soft-capped to c · tanh(s / c) before the mask (Gemma 2); 0: not.
        self.softcap = float(config.attn_softcap)
        #: 0 for global attention; w > 0: query i sees keys j with i - w < j (local / sliding-window layers).
        self.window = config.attn_window(layer)
        #: This layer's rotation of q and k (shared by the layers with its base), None without RoPE here.
        self.rope = rope
        self.layer = layer

    def kv_head(self, head: int) -> int:
        """The key/value head that query head ``head`` reads (grouped-query attention)."""
        return head // (self.n_heads // self.n_kv_heads)

    def allowed_keys(self, T: int, causal: bool = True, device=None, start: int = 0) -> torch.Tensor:
        """The attention mask: bool (T - start, T), True where query i may attend to key j.

        Rows are the queries at positions start .. T-1 (all T by default), columns the keys
        0 .. T-1. With ``causal``: j <= i. With a window w: also i - j < w (without ``causal``,
        |i - j| < w). Every query may always see itself.
        """
        pos = torch.arange(T, device=device)
        offset = pos[start:, None] - pos[None, :]  # (T - start, T): i - j
        allowed = offset >= 0 if causal else torch.ones(T - start, T, dtype=torch.bool, device=device)
        if self.window:
            allowed = allowed & (offset.abs() < self.window)
        return allowed

    def normed(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """QK-norm of q (B, n_heads, T, d_head) and k (B, n_kv_heads, T, d_head)
        (:func:`model.core.components.qk_normed`); q and k themselves without one."""
        return qk_normed(self.qk_norm, self.q_norm, self.k_norm, q, k)

    def forward(
        self, h: torch.Tensor, causal: bool, rotate: bool, record: dict | None, intervene=None, cache=None,
        offset: int = 0,
    ) -> torch.Tensor:
        """Attention output after W_O.

        Parameters
        ----------
        h : Tensor (B, T, d_model)
            The attention's input (of the positions cache.start .. cache.start + T - 1 with a cache).
        causal : bool
            True masks keys after the query (decoder); False lets every query see every key
            (within the window).
        rotate : bool
            Apply RoPE (a layer with RoPE only): False runs without position.
        record : dict or None
            When a dict, q, k, v (and q, k before QK-norm and before rotation), attn_mask,
            attn_scores, attn_weights and head_out are stored in it (k and v: this call's positions only).
        intervene : Interventions or None
            What-if changes (:mod:`model.core.interventions`): extra key masks, τ, scale on/off,
            ablated heads. None is the plain model. τ divides the scores before the soft cap.
        cache : model.tracing.rowstore.KVSlot, optional
            The keys and values of the ``cache.start`` positions before these:
            ``cache.update(k, v)`` stores this call's and returns every position's,
            (B, n_kv_heads, start + T, d_head) each (a KVSlot for one sequence, B = 1;
            leave-one-out's prefix for a batch of masked copies, :mod:`model.explain.loo`).
        offset : int
            The whole sequence stands ``offset`` positions later (RoPE turns row r by position
            offset + r; which keys a query sees does not change).

        Returns
        -------
        Tensor (B, T, d_model)
        """
        B, T, _ = h.shape
        start = 0 if cache is None else cache.start
        q = self.W_Q(h).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, n_heads, T, d_head)
        k = self.W_K(h).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, n_kv_heads, T, d_head)
        v = self.W_V(h).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, n_kv_heads, T, d_head)
        q_proj, k_proj = q, k
        q, k = self.normed(q, k)
        q_pre, k_pre = q, k
        if self.rope is not None and rotate:
            q, k = self.rope(q, offset + start), self.rope(k, offset + start)
        k_new, v_new = k, v
        if cache is not None:
            k, v = cache.update(k, v)  # (1, n_kv_heads, start + T, d_head): every position so far
        group = self.n_heads // self.n_kv_heads
        k_h = k.repeat_interleave(group, dim=1) if group > 1 else k  # (B, n_heads, start + T, d_head)
        v_h = v.repeat_interleave(group, dim=1) if group > 1 else v
        attn_mask = self.allowed_keys(start + T, causal, h.device, start)  # (T, start + T), True = may attend
        scale = self.scale if intervene is None else intervene.multiplier(self)
        attn_scores = soft_cap((q @ k_h.transpose(-2, -1)) * scale, self.softcap)  # (B, n_heads, T, start + T)
        if intervene is not None:
            attn_mask = intervene.mask(attn_mask)  # (T, T), or (B, 1, T, T) with a mask per batch row
        if not bool(attn_mask.all()):
            attn_scores = attn_scores.masked_fill(~attn_mask, float("-inf"))
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, n_heads, T, start + T)
        head_out = attn_weights @ v_h  # (B, n_heads, T, d_head)
        if intervene is not None:
            head_out = intervene.head_out(self.layer, head_out)  # ablated heads zeroed
        B = head_out.shape[0]  # B' when one sequence (B = 1) meets a batch of B' key masks
        z = head_out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)  # (B, T, n_heads * d_head)
        if record is not None:  # the rows of model.tracing.schema.LAYER made here, batch axis first
            if self.q_norm is not None:
                record.update(q_pre_norm=q_proj, k_pre_norm=k_proj)
            record.update(q=q, k=k_new, v=v_new, q_pre_rope=q_pre, k_pre_rope=k_pre, attn_scores=attn_scores,
                          attn_mask=attn_mask[None] if attn_mask.dim() == 2 else attn_mask[:1, 0],  # (1, T, start + T)
                          attn_weights=attn_weights, head_out=head_out)
        return self.W_O(z)


class Block(nn.Module):
    """One transformer block: x + Attn(LN1(x)), then + MLP(LN2(x)) (pre-norm, the default).

    The config's ``norm_placement`` adds a norm after each branch (``"sandwich"``, Gemma:
    x + LN'(Attn(LN1(x)))) or keeps only those (``"post"``, OLMo-2: x + LN'(Attn(x))); its
    ``block_layout`` runs attention and the MLP side by side from the block's input
    (x + Attn(LN1(x)) + MLP(LN2(x)), GPT-NeoX; with one shared norm, MLP(LN1(x)), Phi).
    """

    def __init__(self, config: GPTConfig, layer: int = 0, rope: RoPE | None = None, device=None) -> None:
        super().__init__()
        pre, post = config.norm_placement != "post", config.norm_placement != "pre"
        self.sequential = config.block_layout == "sequential"
        self.ln1 = make_norm(config, device) if pre else None
        self.attn = Attention(config, layer, rope, device)
        self.ln_attn_out = make_norm(config, device) if post else None
        self.ln2 = make_norm(config, device) if pre and config.block_layout != "parallel_one_norm" else None
        self.mlp = MLP(config, device)
        self.ln_mlp_out = make_norm(config, device) if post else None

    def forward(self, x: torch.Tensor, causal: bool, rotate: bool, record: dict | None, intervene=None, rows=None,
                cache=None, offset: int = 0) -> torch.Tensor:
        """(B, T, d_model) -> (B, T, d_model); fills ``record`` when it is a dict.

        ``rows`` (a list of positions): only those rows are wanted after this block, so the MLP
        runs on them alone and the result is (B, len(rows), d_model). ``cache``, ``offset``: see
        :meth:`Attention.forward`.
        """
        h1 = x if self.ln1 is None else self.ln1(x)
        attn_out = self.attn(h1, causal, rotate, record, intervene, cache, offset)
        x_in, h1_in = (x, h1) if rows is None else (x[:, rows], h1[:, rows])  # (B, len(rows), d_model)
        if intervene is not None:
            attn_out = intervene.patched("attn_out", self.attn.layer, attn_out)
        if rows is not None:
            attn_out = attn_out[:, rows]
        attn_add = attn_out if self.ln_attn_out is None else self.ln_attn_out(attn_out)
        resid_mid = x_in + attn_add if self.sequential else None
        if self.ln2 is not None:
            h2 = self.ln2(resid_mid if self.sequential else x_in)
        else:
            h2 = resid_mid if self.sequential else h1_in  # OLMo-2: no norm before the MLP; Phi: LN1's
        mlp_out = self.mlp(h2)
        if intervene is not None:
            mlp_out = intervene.patched("mlp_out", self.attn.layer, mlp_out, rows)
        mlp_add = mlp_out if self.ln_mlp_out is None else self.ln_mlp_out(mlp_out)
        resid_post = resid_mid + mlp_add if self.sequential else x_in + attn_add + mlp_add
        if record is not None:  # the rest of model.tracing.schema.LAYER (only the rows this block has)
            record.update({"ln1" if self.ln1 is not None else "resid_pre": h1, "attn_out": attn_out,
                           "mlp_out": mlp_out, "resid_post": resid_post})
            if self.ln2 is not None:
                record["ln2"] = h2
            if resid_mid is not None:
                record["resid_mid"] = resid_mid
            if self.ln_attn_out is not None:
                record.update(ln_attn_out=attn_add, ln_mlp_out=mlp_add)
        return resid_post


class GPT(nn.Module):
    """Decoder-only transformer with a full trace of its insides.

    Parameters
    ----------
    config : GPTConfig
    device : torch.device or str, optional
        Where the parameters are created (default: the CPU).

    Notes
    -----
    Weights are initialised as nanoGPT does (normal, std 0.02; residual projections scaled by
    1/sqrt(2 n_layers); norms at 1 and 0); seed torch first for reproducible weights.
    """

    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        self.config = config
        d, n_ctx = config.d_model, config.context_length
        self.tok_emb = nn.Embedding(config.vocab_size, d, device=device)
        self.pos_emb = nn.Embedding(n_ctx, d, device=device) if config.has_pos_table else None
        ropes = layer_ropes(config, device)  # one RoPE per base θ, shared by its layers (None: no RoPE there)
        self.blocks = nn.ModuleList(Block(config, i, ropes[i], device) for i in range(config.n_layers))
        self.ln_f = make_norm(config, device)
        self.unembed = None if config.tied_unembed else nn.Linear(d, config.vocab_size, bias=config.unembed_bias,
                                                                  device=device)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("W_O.weight", "fc_out.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))

    #: The name and shape of every tensor of ``GPT(config).state_dict()``, without building it
    #: (:func:`model.core.shapes.state_dict_shapes`).
    state_dict_shapes = staticmethod(state_dict_shapes)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def n_params(self) -> int:
        """Number of parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, token_ids: torch.Tensor, *, positional_encoding: bool = True, causal: bool = True, interventions=None,
        positions: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """Logits at every position (or at ``positions``).

        Parameters
        ----------
        token_ids : LongTensor (B, T) or (T,), T <= context_length
        positional_encoding, causal : bool
            As in :meth:`trace`.
        interventions : model.core.interventions.Interventions, optional
            What-if changes (ablated heads, extra key masks per batch row, τ, patched activations,
            scale on/off); None runs the plain model. One sequence (B = 1) with a key mask
            (B', T, T) runs B' masked copies that share the embeddings and layer 0's q, k, v:
            the logits are then (B', T or P, vocab_size).
        positions : sequence of int, optional
            Only these positions' logits are wanted (P of them): the last block's MLP and the
            unembedding run on those rows alone, and the logits are (B, P, vocab_size).

        Returns
        -------
        Tensor (B, T, vocab_size) or (T, vocab_size)
            Unnormalised next-token scores (nats before softmax).

        Raises
        ------
        ValueError
            When T exceeds context_length.
        """
        squeeze = token_ids.dim() == 1
        ids = token_ids.unsqueeze(0) if squeeze else token_ids
        logits = self._run(ids, positional_encoding, causal, None, interventions, positions)
        return logits[0] if squeeze else logits

    def _run(
        self, ids: torch.Tensor, positional_encoding: bool, causal: bool, records: dict | None, interventions=None,
        positions: Sequence[int] | None = None, caches: Sequence | None = None, offset: int = 0,
    ) -> torch.Tensor:
        """The one forward path behind :meth:`forward` and :meth:`trace`. ids: (B, T).

        With ``caches`` (one :class:`model.tracing.rowstore.KVSlot` per block) ids are the positions
        start .. start + T - 1, after the ``start`` positions whose keys and values they hold.
        ``offset`` moves every position later by that much (the positional table's rows and RoPE's
        angles; :meth:`trace`'s ``start_position``). ``records`` gets the rows of
        :mod:`model.tracing.schema`, each with its batch axis first.
        """
        start = (0 if caches is None else caches[0].start) + offset
        T = ids.shape[1]
        if caches is not None and interventions is not None and interventions.patches:
            raise ValueError("patches replace whole sequences' activations: run them without a key/value cache")
        if start + T > self.config.context_length:
            raise ValueError(
                f"{start + T} tokens exceed the context length of {self.config.context_length}"
            )
        tok = self.tok_emb(ids)  # (B, T, d_model)
        scaled = tok * self.config.embed_scale if self.config.embed_scale != 1 else tok  # Gemma: × √d_model
        if self.pos_emb is not None and positional_encoding:
            pos = self.pos_emb(torch.arange(start, start + T, device=ids.device))  # (T, d_model)
            x = scaled + pos
        else:
            pos = torch.zeros_like(tok[0])
            x = scaled
        if records is not None:
            records.update(tok=tok, tok_scaled=scaled, pos=pos[None], x=x, blocks=[])  # pos: (1, T, d_model)
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            stopping.check()  # a slow model's trace gives way to a newer text's (model.core.stopping)
            layer = {} if records is not None else None
            rows = None if positions is None or i < last else list(positions)  # the last block: those rows only
            if interventions is not None:  # the residual before block i (records keep it unpatched)
                x = interventions.patched("resid_pre", i, x)
            x = block(x, causal, positional_encoding, layer, interventions, rows,
                      None if caches is None else caches[i], offset)
            if records is not None:
                records["blocks"].append(layer)
        h = self.ln_f(x)
        logits = self._unembed(h)  # (B, T, vocab_size), or (B, P, vocab_size) at P positions
        if records is not None:
            records.update(ln_final=h, logits=logits)
        return logits

    @property
    def unembed_weight(self) -> torch.Tensor:
        """The unembedding (vocab_size, d_model): the token-embedding table when tied (logits =
        LN_f(x) unembed_weightᵀ)."""
        return self.tok_emb.weight if self.unembed is None else self.unembed.weight

    def _unembed(self, h: torch.Tensor) -> torch.Tensor:
        """LN_f's output (..., d_model) to logits (..., vocab_size): times the unembedding, plus its
        bias (Phi), soft-capped (Gemma 2: c · tanh(z / c))."""
        bias = None if self.unembed is None else self.unembed.bias
        return soft_cap(F.linear(h, self.unembed_weight, bias), self.config.final_softcap)

    def final_logits(self, resid: torch.Tensor) -> torch.Tensor:
        """What the model does after its last block, LN_f then the unembedding (its bias and soft
        cap): a residual stream (..., d_model) to logits (..., vocab_size) in nats (the logit lens
        passes earlier residuals)."""
        return self._unembed(self.ln_f(resid))

    def rope_angles(self, T: int, layer: int | None = None) -> np.ndarray | None:
        """RoPE's rotation angles (T, rotary_width/2) in radians for positions 0..T-1 in ``layer``
        (by default the first layer with RoPE), or None where there is no RoPE (a NoPE layer)."""
        if layer is None:
            layer = next((i for i, b in enumerate(self.blocks) if b.attn.rope is not None), 0)
        rope = self.blocks[layer].attn.rope
        return None if rope is None else rope.angles[:T].detach().cpu().numpy().copy()

    @torch.no_grad()
    def trace(
        self, token_ids: Sequence[int] | np.ndarray | torch.Tensor, *, positional_encoding: bool = True,
        causal: bool = True, interventions=None, reuse: Trace | None = None, start_position: int = 0,
    ) -> Trace:
        """Run the model on one sequence and keep every intermediate.

        Parameters
        ----------
        token_ids : sequence of int, length N (any N >= 0)
            When N > context_length, only the last context_length ids are run and
            ``Trace.dropped`` says how many were left out.
        positional_encoding : bool
            False runs without position: x_i = e_i for a learned table, no rotation for RoPE
            (the weights are untouched). No effect on a model without either.
        causal : bool
            False drops the causal mask (every query attends to every key within its window).
        interventions : model.core.interventions.Interventions, optional
            What-if changes (ablated heads, τ, scale on/off, a (T, T) key mask), recorded in
            ``Trace.interventions``; each layer's ``attn_scale`` is then the multiplier used
            (scale / τ). None runs the plain model.
        reuse : Trace, optional
            An earlier trace of this model (the one shown before an edit). Where the ids run
            keep its first p ids, with the same options and weights and no ``interventions``,
            only positions p.. are computed, with its keys and values, and its rows 0..p-1 of
            every tensor are reused (``Trace.reused_rows`` is p); otherwise the whole sequence
            is computed. Either way the result equals a trace without ``reuse`` up to float
            rounding (logits within 1e-5), and its arrays live in buffers shared with related
            traces (:mod:`model.tracing.reuse`). Weights changed through ``.data`` are not noticed:
            pass no ``reuse`` after changing weights that way.
        start_position : int
            The position of the first token (0 by default): the tokens stand at positions
            start_position .. start_position + T - 1 for the positional table and RoPE, as if
            after others they do not see (the positional lesson's shift test). At most
            context_length - start_position ids are run. Such a trace is never reused.

        Returns
        -------
        Trace
            Immutable, batch axis removed, float32 numpy on the CPU. With N = 0 every array has
            T = 0 rows.

        Raises
        ------
        ValueError
            When ``interventions`` names a head outside the model or has a key mask of another
            size, or the input is not what :func:`model.core.inputs.checked_ids` takes (one
            sequence of integer ids in [0, vocab_size), ``start_position`` in the window).
        TypeError
            When ``reuse`` is not a Trace.
        """
        ids, dropped = checked_ids(token_ids, self.config, start_position)
        device = self.tok_emb.weight.device
        iv = None if interventions is None or interventions.changes_nothing else interventions
        if iv is not None:
            iv.check(self.config, ids.size)
        uses_pe = positional_encoding and self.config.uses_position
        if reuse is not None and iv is None and not start_position:
            return trace_reusing(self, ids, dropped, uses_pe, causal, reuse)
        rec: dict = {}
        self._run(torch.from_numpy(ids).to(device).unsqueeze(0), positional_encoding, causal, rec, iv,
                  offset=int(start_position))
        scales = [block.attn.scale if iv is None else iv.multiplier(block.attn) for block in self.blocks]
        return Trace.from_records(self.config, ids, dropped, uses_pe, causal, rec, scales, interventions=iv,
                                  origin=None if start_position else origin(self, uses_pe, causal, iv),
                                  start_position=int(start_position), softcaps=[b.attn.softcap for b in self.blocks])
