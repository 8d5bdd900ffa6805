"""Hunyuan-A13B (model_type "hunyuan", HunYuanMoEV1ForCausalLM) for the PyTorch twin.

Attention: a Llama GQA attention whose head width is hidden_size / num_attention_heads, RoPE with
Hunyuan's dynamic NTK-alpha base (theta * alpha^(d / (d - 2)), at every length), then per-head
RMSNorms `query_layernorm` / `key_layernorm` AFTER the rotation (use_qk_norm). Feed-forward
`mlp`: an FP32 router `gate.wg`, softmax over every expert in fp32, the top-k renormalised, SwiGLU
experts beside the shared `shared_mlp` (use_mixed_mlp_moe). Every token reaches its k experts,
as vLLM routes them: transformers' port also drops tokens beyond an expert's capacity
max(k, k * T / E), which this twin does not.

DAY0_TWIN_WITHOUT (day0_torch_models.WITHOUT): ntk_alpha (plain base), norm_after_rope (q/k
norms before the rotation, as Qwen3 places them).
"""

import torch
import torch.nn.functional as F
from torch import nn

import day0_torch_models as base


class HunyuanAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim = h // self.heads
        bias = c.get("attention_bias", False)
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.query_layernorm = base.RMSNorm(self.head_dim, c["rms_norm_eps"])
        self.key_layernorm = base.RMSNorm(self.head_dim, c["rms_norm_eps"])
        theta = c.get("rope_theta", 10000.0)
        alpha = (c.get("rope_scaling") or {}).get("alpha")
        if alpha and "ntk_alpha" not in base.WITHOUT:
            theta = theta * alpha ** (self.head_dim / (self.head_dim - 2))
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))

    def forward(self, x):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.heads, self.head_dim)
        k = self.k_proj(x).view(t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
        after = "norm_after_rope" not in base.WITHOUT
        if not after:
            q, k = self.query_layernorm(q), self.key_layernorm(k)
        angles = torch.arange(t, dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos()[:, None, :].to(q.dtype), angles.sin()[:, None, :].to(q.dtype)
        q = q * cos + base.rotate_half(q) * sin
        k = k * cos + base.rotate_half(k) * sin
        if after:
            q, k = self.query_layernorm(q), self.key_layernorm(k)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        return self.o_proj(base.causal_attention(q, k, v, self.head_dim ** -0.5))


class HunyuanGate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wg = nn.Linear(c["hidden_size"], c["num_experts"], bias=False)

    def forward(self, x):
        return F.linear(x.float(), self.wg.weight.float())


def first(value):
    return value[0] if isinstance(value, list) else value


class HunyuanMoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, e = c["hidden_size"], c["num_experts"]
        self.top_k = first(c["moe_topk"])
        self.gate = HunyuanGate(c)
        self.day0_router = "gate.wg"
        self.experts = nn.ModuleList(base.MLP(h, c["intermediate_size"]) for _ in range(e))
        if c.get("use_mixed_mlp_moe"):
            self.shared_mlp = base.MLP(h, c["intermediate_size"] * first(c["num_shared_expert"]))

    def forward(self, x):
        # The gate's linear is hooked as the router anchor (mlp.gate.wg); softmax here.
        gates = F.softmax(self.gate.wg(x.to(self.gate.wg.weight.dtype)).float()
                          if x.dtype != torch.float64 else self.gate.wg(x), dim=-1)
        top, selected = torch.topk(gates, self.top_k, dim=-1)
        weights = top / top.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(top.dtype).eps)
        self.day0_selected = selected
        out = torch.zeros_like(x, dtype=weights.dtype)
        for ex in range(len(self.experts)):
            token, slot = torch.where(selected == ex)
            if token.numel():
                out.index_add_(0, token, self.experts[ex](x[token]).to(weights.dtype) * weights[token, slot, None])
        out = out.to(x.dtype)
        if hasattr(self, "shared_mlp"):
            out = out + self.shared_mlp(x)
        return out


class HunyuanLayer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = base.RMSNorm(h, eps)
        self.self_attn = HunyuanAttention(c)
        self.post_attention_layernorm = base.RMSNorm(h, eps)
        self.mlp = HunyuanMoE(c) if first(c.get("num_experts", 1)) > 1 else base.MLP(h, c["intermediate_size"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))
