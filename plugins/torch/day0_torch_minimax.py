"""MiniMax-M2 (MiniMaxM2ForCausalLM: M2, M2.1, M2.5, M2.7) for the PyTorch twin.

Attention: bias-free q/k/v/o, one RMSNorm over the whole q projection and one over the whole k
projection (qk_norm_type "per_layer"), before a partial rotary embedding (the first `rotary_dim`
lanes of each head, rotate-half), GQA. Feed-forward `block_sparse_moe`: an F32 router `gate`,
sigmoid scores in fp32, experts chosen by score + `e_score_correction_bias`, weighted by their
scores renormalised over the chosen (times routed_scaling_factor), Mixtral's w1 / w3 / w2
experts.

DAY0_TWIN_WITHOUT (day0_torch_models.WITHOUT) switches off: qk_norm, partial_rotary (every lane
rotates), score_bias (experts chosen by score alone).
"""

import torch
import torch.nn.functional as F
from torch import nn

import day0_torch_models as base


def rotary_lanes(c):
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    if c.get("rotary_dim"):
        return head_dim, c["rotary_dim"]
    return head_dim, int(head_dim * (c.get("partial_rotary_factor") or 1.0))


class MiniMaxM2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim, self.rotary = rotary_lanes(c)
        if "partial_rotary" in base.WITHOUT:
            self.rotary = self.head_dim
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.q_norm = base.RMSNorm(self.heads * self.head_dim, c["rms_norm_eps"])
        self.k_norm = base.RMSNorm(self.kv_heads * self.head_dim, c["rms_norm_eps"])
        self.inv_freq, self.rope_scale = base.rope_parameters(c, self.rotary)

    def forward(self, x):
        t = x.shape[0]
        q, k = self.q_proj(x), self.k_proj(x)
        if "qk_norm" not in base.WITHOUT:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(t, self.heads, self.head_dim)
        k = k.view(t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
        cos, sin = base.rope_cos_sin(self.inv_freq, self.rope_scale, torch.arange(t))
        cos, sin = cos[:, None, :].to(q.dtype), sin[:, None, :].to(q.dtype)

        def rotate(z):  # the first `rotary` lanes rotate (rotate-half), the rest pass through
            r, rest = z[..., : self.rotary], z[..., self.rotary:]
            return torch.cat((r * cos + base.rotate_half(r) * sin, rest), dim=-1)

        q, k = rotate(q), rotate(k)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        return self.o_proj(base.causal_attention(q, k, v, self.head_dim ** -0.5))


class MiniMaxM2Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c["num_local_experts"], c["hidden_size"]))

    def forward(self, x):
        # HF's F32 router; float64 itself in the float64 gradient reference (base.EXACT).
        wide = base._wide(x.dtype)
        return F.linear(x.to(wide), self.weight.to(wide))


class MiniMaxM2MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, e = c["hidden_size"], c["num_local_experts"]
        self.c = c
        self.gate = MiniMaxM2Router(c)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(e))
        self.experts = nn.ModuleList(
            base.MLP(h, c["intermediate_size"], names=("w1", "w3", "w2")) for _ in range(e))

    def forward(self, x):
        c = self.c
        scores = self.gate(x).sigmoid()
        choice = scores if "score_bias" in base.WITHOUT else scores + self.e_score_correction_bias
        selected = torch.topk(choice, k=c["num_experts_per_tok"], dim=-1, sorted=False)[1]
        weights = scores.gather(1, selected)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights * c.get("routed_scaling_factor", 1.0)
        self.day0_selected = selected
        self.day0_scores = choice
        self.day0_scoring = {"scoring": "sigmoid", "top_k": c["num_experts_per_tok"],
                             "n_group": c.get("num_expert_group") or 1,
                             "topk_group": c.get("topk_group") or 1}
        out = torch.zeros_like(x, dtype=weights.dtype)
        for ex in range(c["num_local_experts"]):
            token, slot = torch.where(selected == ex)
            if token.numel():
                out.index_add_(0, token, self.experts[ex](x[token]).to(weights.dtype) * weights[token, slot, None])
        return out.to(x.dtype)


class MiniMaxM2Layer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = base.RMSNorm(h, eps)
        self.self_attn = MiniMaxM2Attention(c)
        self.post_attention_layernorm = base.RMSNorm(h, eps)
        self.block_sparse_moe = MiniMaxM2MoE(c)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.block_sparse_moe(self.post_attention_layernorm(x))
