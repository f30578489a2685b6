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

Scaled dot-product attention is Vaswani et al. 2017, eq. 1. Attention is computed explicitly,
so the attention weights a trace records are the ones that made the prediction.

Other families change single components (see :class:`model.core.config.GPTConfig`): RoPE instead of
the table (q_i and k_j rotated by their positions before the dot product), RMSNorm instead of
LayerNorm, a SwiGLU MLP, fewer key/value heads than query heads, no 1/sqrt(d_head) (GPT-Neo) and
local attention windows (GPT-Neo's local layers).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from model.core.components import MLP, RoPE, make_norm
from model.core.config import GPTConfig
from model.core.inputs import checked_ids
from model.core.shapes import state_dict_shapes
from model.tracing.records import Trace
from model.tracing.reuse import origin, trace_reusing


class Attention(nn.Module):
    """Causal multi-head self-attention with explicit scores and weights.

    ``W_Q`` and ``W_O`` are ``nn.Linear`` between d_model and n_heads · d_head, ``W_K`` and ``W_V``
    map d_model to n_kv_heads · d_head; head h uses rows ``h*d_head:(h+1)*d_head`` of W_Q (heads are
    contiguous groups, as in nanoGPT) and key/value head :meth:`kv_head` (h).

    Which keys a query may see (:meth:`allowed_keys`), the factor the dot products are multiplied
    by (:attr:`scale`) and each head's weights (:meth:`head_weights`) are defined here once.
    """

    #: The entries of :meth:`head_weights`.
    HEAD_WEIGHTS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")

    def __init__(self, config: GPTConfig, layer: int = 0, device=None) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = config.n_heads, config.n_kv_heads, config.d_head
        d, dh = config.d_model, config.d_head
        self.W_Q = nn.Linear(d, self.n_heads * dh, bias=config.qkv_bias, device=device)
        self.W_K = nn.Linear(d, self.n_kv_heads * dh, bias=config.qkv_bias, device=device)
        self.W_V = nn.Linear(d, self.n_kv_heads * dh, bias=config.qkv_bias, device=device)
        self.W_O = nn.Linear(self.n_heads * dh, d, bias=config.o_bias, device=device)
        #: What q_i·k_j is multiplied by: 1/sqrt(d_head), or 1 without scaling (GPT-Neo).
        self.scale = 1.0 / math.sqrt(dh) if config.scale_scores else 1.0
        #: 0 for global attention; w > 0: query i sees keys j with i - w < j (GPT-Neo's local layers).
        self.window = config.attn_window(layer)
        self.rope = RoPE(config, device) if config.positional == "rope" else None
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

    def forward(
        self, h: torch.Tensor, causal: bool, rotate: bool, record: dict | None, intervene=None, cache=None,
        offset: int = 0,
    ) -> torch.Tensor:
        """Attention output after W_O.

        Parameters
        ----------
        h : Tensor (B, T, d_model)
            LN1's output (of the positions cache.start .. cache.start + T - 1 with a cache).
        causal : bool
            True masks keys after the query (decoder); False lets every query see every key
            (within the window).
        rotate : bool
            Apply RoPE (a model with RoPE only): False runs without position.
        record : dict or None
            When a dict, q, k, v (and q, k before rotation), attn_mask, attn_scores,
            attn_weights and head_out are stored in it (k and v: this call's positions only).
        intervene : Interventions or None
            What-if changes (:mod:`model.core.interventions`): extra key masks, τ, scale on/off,
            ablated heads. None is the plain model.
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
        attn_scores = (q @ k_h.transpose(-2, -1)) * scale  # (B, n_heads, T, start + T)
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
            record.update(q=q, k=k_new, v=v_new, q_pre_rope=q_pre, k_pre_rope=k_pre, attn_scores=attn_scores,
                          attn_mask=attn_mask[None] if attn_mask.dim() == 2 else attn_mask[:1, 0],  # (1, T, start + T)
                          attn_weights=attn_weights, head_out=head_out)
        return self.W_O(z)

    def head_out_direction(self, d: np.ndarray) -> np.ndarray:
        """A direction d (d_model,) of W_O's output, pulled back to each head: (n_heads, d_head)
        float64 whose row h is W_O[h] d, so that head_out[h, i] · row h is head h's share of
        (W_O's output at i, less its bias) · d (direct logit attribution's readout)."""
        w = self.W_O.weight.detach().double().cpu()  # (d_model, n_heads * d_head)
        return (w.t() @ torch.from_numpy(np.asarray(d, dtype=np.float64))).view(self.n_heads, self.d_head).numpy()

    def head_weights(self, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Per-head weight matrices and biases, in the course's orientation (q_i = h_i W_Q + b_Q).

        Parameters
        ----------
        names : sequence of str, optional
            The entries wanted (all of :attr:`HEAD_WEIGHTS` by default).

        Returns
        -------
        dict
            ``W_Q``: (n_heads, d_model, d_head); ``W_K``, ``W_V``: (n_kv_heads, d_model, d_head);
            ``W_O``: (n_heads, d_head, d_model); ``b_Q``: (n_heads, d_head), ``b_K``, ``b_V``:
            (n_kv_heads, d_head), ``b_O``: (d_model,), zeros where the model has no bias;
            float32 numpy copies.

        Raises
        ------
        ValueError
            For a name that is not one of :attr:`HEAD_WEIGHTS`.
        """
        want = self.HEAD_WEIGHTS if names is None else tuple(names)
        if unknown := sorted(set(want) - set(self.HEAD_WEIGHTS)):
            raise ValueError(f"no head weights named {unknown}; try {self.HEAD_WEIGHTS}")
        out = {}
        for p, lin, n in (("Q", self.W_Q, self.n_heads), ("K", self.W_K, self.n_kv_heads),
                          ("V", self.W_V, self.n_kv_heads), ("O", self.W_O, self.n_heads)):
            w = lin.weight.detach().float().cpu()  # (n * d_head, d_model); W_O: (d_model, n_heads * d_head)
            if f"W_{p}" in want:  # (n, d_model, d_head); W_O (n_heads, d_head, d_model)
                heads = w.t().reshape(n, self.d_head, -1) if p == "O" else w.view(n, self.d_head, -1).transpose(1, 2)
                out[f"W_{p}"] = heads.clone(memory_format=torch.contiguous_format).numpy()
            if f"b_{p}" in want:  # (n, d_head); b_O (d_model,)
                b = lin.bias.detach().float().cpu() if lin.bias is not None else torch.zeros(w.shape[0])
                out[f"b_{p}"] = (b if p == "O" else b.view(n, self.d_head)).clone().numpy()
        return out


class Block(nn.Module):
    """One pre-norm transformer block: x + Attn(LN1(x)), then + MLP(LN2(x))."""

    def __init__(self, config: GPTConfig, layer: int = 0, device=None) -> None:
        super().__init__()
        self.ln1 = make_norm(config, device)
        self.attn = Attention(config, layer, device)
        self.ln2 = make_norm(config, device)
        self.mlp = MLP(config, device)

    def forward(
        self, x: torch.Tensor, causal: bool, rotate: bool, record: dict | None, intervene=None, rows=None,
        cache=None, offset: int = 0,
    ) -> torch.Tensor:
        """(B, T, d_model) -> (B, T, d_model); fills ``record`` when it is a dict.

        ``rows`` (a list of positions): only those rows are wanted after this block, so the MLP
        runs on them alone and the result is (B, len(rows), d_model). ``cache``, ``offset``: see
        :meth:`Attention.forward`.
        """
        h1 = self.ln1(x)
        attn_out = self.attn(h1, causal, rotate, record, intervene, cache, offset)
        if rows is not None:
            x, attn_out = x[:, rows], attn_out[:, rows]  # (B, len(rows), d_model)
        resid_mid = x + attn_out
        h2 = self.ln2(resid_mid)
        mlp_out = self.mlp(h2)
        resid_post = resid_mid + mlp_out
        if record is not None:  # the rest of model.tracing.schema.LAYER
            record.update(ln1=h1, attn_out=attn_out, resid_mid=resid_mid, ln2=h2, mlp_out=mlp_out,
                          resid_post=resid_post)
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
        self.blocks = nn.ModuleList(Block(config, i, device) for i in range(config.n_layers))
        self.ln_f = make_norm(config, device)
        self.unembed = None if config.tied_unembed else nn.Linear(d, config.vocab_size, bias=False, device=device)
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
            What-if changes to attention (ablated heads, extra key masks per batch row, τ,
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
        if start + T > self.config.context_length:
            raise ValueError(
                f"{start + T} tokens exceed the context length of {self.config.context_length}"
            )
        tok = self.tok_emb(ids)  # (B, T, d_model)
        if self.pos_emb is not None and positional_encoding:
            pos = self.pos_emb(torch.arange(start, start + T, device=ids.device))  # (T, d_model)
            x = tok + pos
        else:
            pos = torch.zeros_like(tok[0])
            x = tok
        if records is not None:
            records.update(tok=tok, pos=pos[None], x=x, blocks=[])  # pos: (1, T, d_model), shared by the batch
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            layer = {} if records is not None else None
            rows = None if positions is None or i < last else list(positions)  # the last block: those rows only
            x = block(x, causal, positional_encoding, layer, interventions, rows,
                      None if caches is None else caches[i], offset)
            if records is not None:
                records["blocks"].append(layer)
        h = self.ln_f(x)
        logits = F.linear(h, self.unembed_weight)  # (B, T, vocab_size), or (B, P, vocab_size) at P positions
        if records is not None:
            records.update(ln_final=h, logits=logits)
        return logits

    @property
    def unembed_weight(self) -> torch.Tensor:
        """The unembedding (vocab_size, d_model): the token-embedding table when tied (logits =
        LN_f(x) unembed_weightᵀ)."""
        return self.tok_emb.weight if self.unembed is None else self.unembed.weight

    def final_logits(self, resid: torch.Tensor) -> torch.Tensor:
        """What the model does after its last block, LN_f then the unembedding: a residual stream
        (..., d_model) to logits (..., vocab_size) in nats (the logit lens passes earlier residuals)."""
        return F.linear(self.ln_f(resid), self.unembed_weight)

    def rope_angles(self, T: int) -> np.ndarray | None:
        """RoPE's rotation angles (T, d_head/2) in radians for positions 0..T-1, or None without RoPE."""
        rope = self.blocks[0].attn.rope
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
                                  start_position=int(start_position))
