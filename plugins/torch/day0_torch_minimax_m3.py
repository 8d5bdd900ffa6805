"""MiniMax-M3's text decoder (model_type minimax_m3) for the PyTorch twin, computing in the
dtype it is given (float64 in the tests), with HF module names.

Written from NVIDIA-NeMo/Automodel nemo_automodel/components/models/minimax_m3_vl/layers.py and
model.py (their stated reference: sglang's models/minimax_m3.py), checked against transformers'
models/minimax_m3_vl/modular_minimax_m3_vl.py (MiniMaxM3VLIndexer: the same selection, its
index scores unscaled, which ranks alike; sparse_local_block > 1 and sparse_init_block, where the
two differ, the engine refuses):
- RMSNorm x_hat * (1 + w) everywhere when use_gemma_norm (MiniMaxM3RMSNorm, gemma=True);
- attention: q/k/v, per-head q_norm/k_norm over head_dim (qk_norm_type "per_head") before the
  partial rotary embedding (the first rotary_dim lanes, rotate-half, inverse frequencies over
  rotary_dim), GQA, softmax(q.k * head_dim^-1/2);
- MiniMax Sparse Attention on the layers sparse_attention_freq marks: index_q_proj(x) as
  sparse_num_index_heads heads of sparse_index_dim and index_k_proj(x) one shared key, from the
  same normed input as q/k/v, normed per head (index_q_norm/index_k_norm) and rotated like q/k;
  score[i, h, j] = idx_q[i, h] . idx_k[j] * dim^-1/2 over causal keys; a key block's score is the
  max over its keys (sparse_score_type "max"), per query; the first sparse_init_block blocks and
  the query's own block (sparse_local_block > 0) are forced in, the rest of the
  min(sparse_topk_blocks, blocks) slots go to the best causal blocks; index head h's blocks serve
  the query heads of KV group h, which attend causally inside them;
- feed-forward: `mlp` (dense_intermediate_size) on the layers moe_layer_freq marks 0, else
  `block_sparse_moe`: an fp32 sigmoid router `gate`, experts chosen by score +
  e_score_correction_bias, weighted by their scores renormalised and times
  routed_scaling_factor, w1/w3/w2 experts, plus one shared_experts MLP (gate/up/down_proj);
- every MLP uses swigluoai: g = min(gate, limit), u = clamp(up, +-limit),
  g * sigmoid(alpha * g) * (u + 1).

The kept blocks are captured as `<layer>.self_attn.indexer#topk`: rows (query, index head) in
that order, the kept block ids increasing, -1 padding.

DAY0_TWIN_WITHOUT switches (day0_torch_models.WITHOUT): msa (dense attention on the sparse
layers), block_max (a block scores by the mean of its keys' scores instead of the max),
local_block (the own block not forced), index_norm (no
index q/k norms), index_rope (index q/k not rotated), gemma_norm (norms scale by w, not 1 + w),
swiglu_clamp (no clamps), swiglu_up_one (up not shifted by one), shared_expert (none),
routed_scaling (factor 1).
"""

import torch
import torch.nn.functional as F
from torch import nn

import day0_torch_models as base

SWITCHES = {"msa", "block_max", "local_block", "index_norm", "index_rope",
            "gemma_norm", "swiglu_clamp", "swiglu_up_one", "shared_expert", "routed_scaling"}


def _without(feature):
    return feature in base.WITHOUT


class M3RMSNorm(nn.Module):
    def __init__(self, dim, eps, gemma):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps, self.gemma = eps, gemma and not _without("gemma_norm")

    def forward(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * (1.0 + self.weight if self.gemma else self.weight)


def swigluoai(g, u, alpha, limit):
    if limit > 0 and not _without("swiglu_clamp"):
        g = g.clamp(max=limit)
        u = u.clamp(min=-limit, max=limit)
    return g * torch.sigmoid(alpha * g) * (u if _without("swiglu_up_one") else u + 1.0)


class M3MLP(nn.Module):
    def __init__(self, c, inter):
        super().__init__()
        h = c["hidden_size"]
        self.alpha, self.limit = c.get("swiglu_alpha", 1.702), c.get("swiglu_limit", 7.0)
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.down_proj(swigluoai(self.gate_proj(x), self.up_proj(x), self.alpha, self.limit))


class Expert(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, inter = c["hidden_size"], c["intermediate_size"]
        self.alpha, self.limit = c.get("swiglu_alpha", 1.702), c.get("swiglu_limit", 7.0)
        self.w1 = nn.Linear(h, inter, bias=False)
        self.w3 = nn.Linear(h, inter, bias=False)
        self.w2 = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.w2(swigluoai(self.w1(x), self.w3(x), self.alpha, self.limit))


class Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c["num_local_experts"], c["hidden_size"]))

    def forward(self, x):
        return F.linear(x, self.weight)


class M3MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["num_local_experts"]
        self.c = c
        self.gate = Router(c)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(e))
        self.experts = nn.ModuleList(Expert(c) for _ in range(e))
        shared = c.get("shared_intermediate_size") or 0
        self.shared_experts = M3MLP(c, shared) if shared > 0 else None

    def forward(self, x):
        c = self.c
        scores = self.gate(x).sigmoid()
        choice = scores + self.e_score_correction_bias
        selected = torch.topk(choice, k=c["num_experts_per_tok"], dim=-1, sorted=False)[1]
        weights = scores.gather(1, selected)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        if not _without("routed_scaling"):
            weights = weights * c.get("routed_scaling_factor", 1.0)
        self.day0_selected = selected
        self.day0_scores = choice
        self.day0_scoring = {"scoring": "sigmoid", "top_k": c["num_experts_per_tok"], "n_group": 1,
                             "topk_group": 1}
        out = torch.zeros_like(x)
        for ex in range(c["num_local_experts"]):
            token, slot = torch.where(selected == ex)
            if token.numel():
                out.index_add_(0, token, self.experts[ex](x[token]) * weights[token, slot, None])
        if self.shared_experts is not None and not _without("shared_expert"):
            out = out + self.shared_experts(x)
        return out


class BlockSelection(nn.Module):
    """No weights: scores the key blocks and returns (capture rows, kept-block mask)."""

    def __init__(self, sparse):
        super().__init__()
        self.block = sparse["sparse_block_size"]
        self.topk = sparse["sparse_topk_blocks"]
        self.init = sparse.get("sparse_init_block", 0)  # Automodel's; transformers ignores it
        self.local = 0 if _without("local_block") else sparse.get("sparse_local_block", 1)

    def forward(self, idx_q, idx_k):
        """idx_q [T, H, D], idx_k [T, D] -> (rows [T*H, topk] long, keep [H, T, T] bool)."""
        t, heads, dim = idx_q.shape
        scores = torch.einsum("thd,sd->hts", idx_q, idx_k) * dim ** -0.5
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        blocks = (t + self.block - 1) // self.block
        padded = torch.full((heads, t, blocks * self.block), float("-inf"), dtype=scores.dtype)
        padded[..., :t] = scores.masked_fill(~causal, float("-inf"))
        grouped = padded.view(heads, t, blocks, self.block)
        if _without("block_max"):
            seen = torch.isfinite(grouped)
            block_score = torch.where(seen, grouped, torch.zeros_like(grouped)).sum(-1) / seen.sum(-1).clamp(min=1)
            block_score = block_score.masked_fill(seen.sum(-1) == 0, float("-inf"))
        else:
            block_score = grouped.amax(-1)
        ids = torch.arange(blocks)
        current = torch.arange(t) // self.block
        visible = ids[None, :] <= current[:, None]  # [T, blocks]
        forced = ((ids[None, :] == current[:, None]) & (self.local > 0)) | (ids[None, :] < self.init)
        forced = forced & visible
        ranked = block_score.masked_fill(~visible, float("-inf")).masked_fill(forced, float("inf"))
        picks = ranked.topk(min(self.topk, blocks), dim=-1).indices  # [H, T, k]
        kept = torch.zeros(heads, t, blocks, dtype=torch.bool).scatter(-1, picks, True) & visible
        rows = torch.full((t, heads, self.topk), -1, dtype=torch.long)
        for i in range(t):
            for h in range(heads):
                chosen = torch.nonzero(kept[h, i]).flatten()
                rows[i, h, :chosen.numel()] = chosen
        keep = kept.repeat_interleave(self.block, dim=-1)[..., :t] & causal
        self.day0_keep = keep
        return rows.reshape(t * heads, self.topk), keep.to(idx_q.dtype)


class M3Attention(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        gemma = bool(c.get("use_gemma_norm", False))
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or h // self.heads
        self.rotary = c.get("rotary_dim") or int(self.head_dim * (c.get("partial_rotary_factor") or 1.0))
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.qk_norm = c.get("use_qk_norm", True)
        if self.qk_norm:
            self.q_norm = M3RMSNorm(self.head_dim, eps, gemma)
            self.k_norm = M3RMSNorm(self.head_dim, eps, gemma)
        self.inv_freq, self.rope_scale = base.rope_parameters(c, self.rotary)
        sparse = c.get("sparse_attention_config") or {}
        freq = sparse.get("sparse_attention_freq")
        self.sparse = bool(sparse.get("use_sparse_attention", True)) and bool(sparse) and (
            freq is None or freq[index] != 0)
        if self.sparse:
            self.index_heads, self.index_dim = sparse["sparse_num_index_heads"], sparse["sparse_index_dim"]
            self.index_q_proj = nn.Linear(h, self.index_heads * self.index_dim, bias=False)
            self.index_k_proj = nn.Linear(h, self.index_dim, bias=False)
            self.index_q_norm = M3RMSNorm(self.index_dim, eps, gemma)
            self.index_k_norm = M3RMSNorm(self.index_dim, eps, gemma)
            self.indexer = BlockSelection(sparse)

    def _rotate(self, z, cos, sin):
        r, rest = z[..., : self.rotary], z[..., self.rotary:]
        return torch.cat((r * cos + base.rotate_half(r) * sin, rest), dim=-1)

    def forward(self, x):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.heads, self.head_dim)
        k = self.k_proj(x).view(t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = base.rope_cos_sin(self.inv_freq, self.rope_scale, torch.arange(t))
        cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        rep = self.heads // self.kv_heads
        scores = torch.einsum("thd,shd->hts", q, k.repeat_interleave(rep, dim=1)) * self.head_dim ** -0.5
        keep = torch.ones(t, t, dtype=torch.bool).tril()[None].expand(self.heads, t, t)
        if self.sparse:
            iq = self.index_q_proj(x).view(t, self.index_heads, self.index_dim)
            ik = self.index_k_proj(x).view(t, 1, self.index_dim)
            if not _without("index_norm"):
                iq, ik = self.index_q_norm(iq), self.index_k_norm(ik)
            if not _without("index_rope"):
                iq, ik = self._rotate(iq, cos, sin), self._rotate(ik, cos, sin)
            self.indexer(iq, ik[:, 0])
            if not _without("msa"):
                keep = self.indexer.day0_keep.repeat_interleave(rep, dim=0)
        probs = F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
        out = torch.einsum("hts,shd->thd", probs, v.repeat_interleave(rep, dim=1))
        return self.o_proj(out.reshape(t, -1))


class MiniMaxM3Layer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        gemma = bool(c.get("use_gemma_norm", False))
        self.input_layernorm = M3RMSNorm(h, eps, gemma)
        self.self_attn = M3Attention(c, index)
        self.post_attention_layernorm = M3RMSNorm(h, eps, gemma)
        freq = c.get("moe_layer_freq")
        self.moe = freq is None or freq[index] != 0
        if self.moe:
            self.block_sparse_moe = M3MoE(c)
        else:
            self.mlp = M3MLP(c, c["dense_intermediate_size"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        ffn = self.block_sparse_moe if self.moe else self.mlp
        return x + ffn(self.post_attention_layernorm(x))


def final_norm(c):
    return M3RMSNorm(c["hidden_size"], c["rms_norm_eps"], bool(c.get("use_gemma_norm", False)))
