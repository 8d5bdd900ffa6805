"""Small PyTorch implementations of the decoder families day0 runs, with Hugging Face module
names, written from the HF `modeling_*.py` math (eager attention, fp32 softmax and norms).

They exist so that day0's CPU engine can be checked against an independent PyTorch computation
of the same checkpoint (a shrunk one, typically) without `transformers`, which Debian does not
package. `load(folder, dtype)` reads config.json and *.safetensors and returns (model, config).

Families: llama, mistral, qwen2, qwen3 (QK-norm), mixtral, qwen3_moe, deepseek_v3 / kimi_k2
(MLA, YaRN, sigmoid group-limited routing with e_score_correction_bias, shared experts), glm4_moe
(GLM-4.5: biased q/k/v, optional per-head QK-norm, partial rotate-half RoPE, DeepSeek-V3's router
and shared experts after first_k_dense_replace dense layers), llama4
(text tower: chunked attention with complex RoPE and weightless QK-norm, NoPE layers with attention
temperature tuning, top-k sigmoid MoE with fused 3-D experts and a shared expert), gpt_oss
(attention sinks, alternating sliding-window / full layers, YaRN without truncation, biased top-k
softmax router, clamped SwiGLU experts with interleaved gate/up, MXFP4 experts dequantised on load), and
qwen2_vl / qwen2_5_vl / qwen3_vl / qwen3_vl_moe with their vision towers (day0_torch_vl.py; forward(ids, image)),
gemma4's text tower (day0_torch_gemma4.py), qwen3_next / qwen3_5 / qwen3_5_moe's text towers
(Gated DeltaNet hybrids, day0_torch_qwen3next.py), and nemotron_h (Mamba-2 / attention / relu2 MLP /
latent MoE hybrids, day0_torch_nemotron_h.py), and kimi_linear (KDA / MLA-without-RoPE hybrids,
day0_torch_kimi_linear.py).
"""

import glob
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import day0_torch_deepseek_v4
import day0_torch_dsa
import day0_torch_gemma4
import day0_torch_kimi_linear
import day0_torch_qwen3next
import day0_torch_minimax_m3
import day0_torch_nemotron_h
import safetensors_io

# The gradient reference (day0_dump.py --grad in float64) computes everything in float64: the
# norms, softmaxes and RoPE tables that HF computes in float32 then keep float64, as day0's fp64
# engine does. Off, the models follow HF's float32 islands.
EXACT = False


def _wide(dtype):
    """The dtype HF's float32 islands use: float64 itself in EXACT float64 runs."""
    return torch.float64 if EXACT and dtype == torch.float64 else torch.float32


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(_wide(dtype))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def _yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def rope_parameters(config, dim):
    """(inv_freq float32 tensor [dim/2], attention_scaling), as HF modeling_rope_utils."""
    base = config.get("rope_theta", 10000.0)
    ft = torch.float64 if EXACT else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(ft) / dim))
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", "dynamic"):
        return inv_freq, 1.0
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor, 1.0
    if kind == "llama3":
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, llama), 1.0
    if kind == "yarn":
        # _compute_yarn_parameters: an explicit attention_factor wins, else mscale / mscale_all_dim,
        # else 0.1 ln(factor) + 1; the correction range is rounded outwards unless truncate is false
        # (gpt-oss), and always kept inside [0, dim - 1].
        original = scaling.get("original_max_position_embeddings") or config["max_position_embeddings"]
        mscale, mscale_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if scaling.get("attention_factor") is not None:
            attention = float(scaling["attention_factor"])
        elif mscale and mscale_all:
            attention = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
        else:
            attention = _yarn_mscale(factor)
        beta_fast, beta_slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

        def correction_dim(rotations):
            return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if scaling.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=ft) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        pos_freqs = base ** (torch.arange(0, dim, 2).to(ft) / dim)
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
        return inv, attention
    raise NotImplementedError(f"rope_scaling type {kind}")


def rope_cos_sin(inv_freq, scaling, positions):
    freqs = positions.to(inv_freq.dtype)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scaling, emb.sin() * scaling


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def causal_attention(q, k, v, scaling, extra_mask=None):
    """q [T, H, D], k [T, H, D], v [T, H, Dv] -> [T, H*Dv] (eager, fp32 softmax); extra_mask
    [T, T] joins the causal one (DSA's selection)."""
    t = q.shape[0]
    scores = torch.einsum("thd,shd->hts", q, k) * scaling
    mask = torch.full((t, t), float("-inf")).triu(1)
    if extra_mask is not None:
        mask = mask + extra_mask
    probs = F.softmax(scores + mask, dim=-1, dtype=_wide(q.dtype)).to(q.dtype)
    return torch.einsum("hts,shd->thd", probs, v).reshape(t, -1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or h // self.heads
        glm = c["model_type"] == "glm4_moe"
        bias = c.get("attention_bias", False) or c["model_type"] == "qwen2"
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        # Glm4MoeAttention: q/k/v take attention_bias, o_proj never has a bias.
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=c.get("attention_bias", False) and not glm)
        if c["model_type"] in ("qwen3", "qwen3_moe") or (glm and c.get("use_qk_norm", False)):
            self.q_norm = RMSNorm(self.head_dim, c["rms_norm_eps"])
            self.k_norm = RMSNorm(self.head_dim, c["rms_norm_eps"])
        # GLM-4.5 rotates the first head_dim * partial_rotary_factor lanes (rotate-half).
        self.rotary = self.head_dim
        if glm and "partial_rotary" not in WITHOUT:
            self.rotary = int(self.head_dim * c.get("partial_rotary_factor", 1.0))
        self.glm = glm
        self.inv_freq, self.rope_scale = rope_parameters(c, self.rotary)

    def forward(self, x):
        t = x.shape[0]
        glm = self.glm
        q = _linear(self.q_proj, x, "attention_bias") if glm else self.q_proj(x)
        k = _linear(self.k_proj, x, "attention_bias") if glm else self.k_proj(x)
        v = _linear(self.v_proj, x, "attention_bias") if glm else self.v_proj(x)
        q = q.view(t, self.heads, self.head_dim)
        k = k.view(t, self.kv_heads, self.head_dim)
        v = v.view(t, self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm") and not (glm and "qk_norm" in WITHOUT):
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_cos_sin(self.inv_freq, self.rope_scale, torch.arange(t))
        cos, sin = cos[:, None, :].to(q.dtype), sin[:, None, :].to(q.dtype)

        def rotate(z):  # the first `rotary` lanes rotate (rotate-half), the rest pass through
            r, rest = z[..., : self.rotary], z[..., self.rotary:]
            return torch.cat((r * cos + rotate_half(r) * sin, rest), dim=-1)

        q, k = rotate(q), rotate(k)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        return self.o_proj(causal_attention(q, k, v, self.head_dim ** -0.5))


class MLAttention(nn.Module):
    """DeepSeek-V3 multi-head latent attention (HF naming, interleaved rope)."""

    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.nope, self.rope, self.v_dim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.kv_lora = c["kv_lora_rank"]
        qk = self.nope + self.rope
        # HF builds the latent norms with its RMSNorm's default eps (1e-6), not rms_norm_eps.
        latent_eps = c["rms_norm_eps"] if "latent_eps" in WITHOUT else 1e-6
        if c.get("q_lora_rank"):
            self.q_a_proj = nn.Linear(h, c["q_lora_rank"], bias=False)
            self.q_a_layernorm = RMSNorm(c["q_lora_rank"], latent_eps)
            self.q_b_proj = nn.Linear(c["q_lora_rank"], self.heads * qk, bias=False)
        else:
            self.q_proj = nn.Linear(h, self.heads * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.kv_lora + self.rope, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_lora, latent_eps)
        self.kv_b_proj = nn.Linear(self.kv_lora, self.heads * (self.nope + self.v_dim), bias=False)
        self.o_proj = nn.Linear(self.heads * self.v_dim, h, bias=False)
        self.inv_freq, self.rope_scale = rope_parameters(c, self.rope)
        self.scaling = qk ** -0.5
        scaling = c.get("rope_scaling") or {}
        if scaling.get("mscale_all_dim"):
            m = _yarn_mscale(scaling["factor"], scaling["mscale_all_dim"])
            self.scaling = self.scaling * m * m

    def forward(self, x):
        t = x.shape[0]
        qr = None
        if hasattr(self, "q_b_proj"):
            qr = self.q_a_layernorm(self.q_a_proj(x))
            q = self.q_b_proj(qr)
        else:
            q = self.q_proj(x)
        q = q.view(t, self.heads, self.nope + self.rope)
        q_pass, q_rot = torch.split(q, [self.nope, self.rope], dim=-1)
        ckv = self.kv_a_proj_with_mqa(x)
        k_pass, k_rot = torch.split(ckv, [self.kv_lora, self.rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(t, self.heads, self.nope + self.v_dim)
        k_pass, value = torch.split(kv, [self.nope, self.v_dim], dim=-1)
        k_rot = k_rot.view(t, 1, self.rope)
        cos, sin = rope_cos_sin(self.inv_freq, self.rope_scale, torch.arange(t))
        cos, sin = cos[:, None, :].to(q.dtype), sin[:, None, :].to(q.dtype)
        selection = None
        if hasattr(self, "dsa_own"):  # DeepSeek-V3.2 / GLM-5 sparse attention
            half = self.rope // 2
            selection = day0_torch_dsa.mask(self, x, qr, cos[:, 0, :half], sin[:, 0, :half])

        def interleave(z):  # HF apply_rotary_pos_emb_interleave: even lanes, then odd lanes
            b, h, d = z.shape
            return z.view(b, h, d // 2, 2).transpose(3, 2).reshape(b, h, d)

        q_rot, k_rot = interleave(q_rot), interleave(k_rot)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        k_rot = k_rot.expand(t, self.heads, self.rope)
        query = torch.cat((q_pass, q_rot), dim=-1)
        key = torch.cat((k_pass, k_rot), dim=-1)
        return self.o_proj(causal_attention(query, key, value, self.scaling, selection))


class MLP(nn.Module):
    def __init__(self, h, inter, names=("gate_proj", "up_proj", "down_proj")):
        super().__init__()
        self.names = names
        setattr(self, names[0], nn.Linear(h, inter, bias=False))
        setattr(self, names[1], nn.Linear(h, inter, bias=False))
        setattr(self, names[2], nn.Linear(inter, h, bias=False))

    def forward(self, x):
        g, u, d = (getattr(self, n) for n in self.names)
        return d(F.silu(g(x)) * u(x))


class SoftmaxMoE(nn.Module):
    """Mixtral (w1/w3/w2, always renormalised) and Qwen3-MoE (norm_topk_prob)."""

    def __init__(self, c, mixtral):
        super().__init__()
        h = c["hidden_size"]
        self.num_experts = c["num_local_experts"] if mixtral else c["num_experts"]
        self.top_k = c["num_experts_per_tok"]
        self.renorm = True if mixtral else c.get("norm_topk_prob", False)
        inter = c["intermediate_size"] if mixtral else c["moe_intermediate_size"]
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        self.gate = nn.Linear(h, self.num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(h, inter, names) for _ in range(self.num_experts))

    def forward(self, x):
        logits = self.gate(x)
        weights = F.softmax(logits, dim=1, dtype=_wide(x.dtype))
        weights, selected = torch.topk(weights, self.top_k, dim=-1)
        if self.renorm:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        self.day0_selected = selected
        out = torch.zeros_like(x)
        for e in range(self.num_experts):
            token, slot = torch.where(selected == e)
            if token.numel():
                out.index_add_(0, token, self.experts[e](x[token]) * weights[token, slot, None])
        return out


class DeepseekRouter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c["n_routed_experts"], c["hidden_size"]))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(c["n_routed_experts"]))

    def forward(self, x):
        wide = _wide(x.dtype)
        return F.linear(x.to(wide), self.weight.to(wide))


class DeepseekMoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.c = c
        self.gate = DeepseekRouter(c)
        self.experts = nn.ModuleList(MLP(h, c["moe_intermediate_size"]) for _ in range(c["n_routed_experts"]))
        if c.get("n_shared_experts"):
            self.shared_experts = MLP(h, c["moe_intermediate_size"] * c["n_shared_experts"])

    def forward(self, x):
        c = self.c
        scores = self.gate(x).sigmoid()
        choice = scores + self.gate.e_score_correction_bias
        if "score_bias" in WITHOUT and c["model_type"] == "glm4_moe":
            choice = scores  # experts chosen by score alone
        e, groups = c["n_routed_experts"], c.get("n_group", 1)
        group_scores = choice.view(-1, groups, e // groups).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=c.get("topk_group", 1), dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, groups, e // groups).reshape(-1, e)
        choice = choice.masked_fill(~score_mask.bool(), 0.0)
        selected = torch.topk(choice, k=c["num_experts_per_tok"], dim=-1, sorted=False)[1]
        weights = scores.gather(1, selected)
        if c.get("norm_topk_prob", True):
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        weights = weights * c.get("routed_scaling_factor", 1.0)
        self.day0_selected = selected
        # What the router ranked by before its group stage, for the margins of flipped choices.
        self.day0_scores = scores + self.gate.e_score_correction_bias
        self.day0_scoring = {"scoring": "sigmoid", "top_k": c["num_experts_per_tok"],
                             "n_group": groups, "topk_group": c.get("topk_group", 1)}
        out = torch.zeros_like(x, dtype=weights.dtype)
        for ex in range(e):
            token, slot = torch.where(selected == ex)
            if token.numel():
                out.index_add_(0, token, self.experts[ex](x[token]).to(weights.dtype) * weights[token, slot, None])
        out = out.to(x.dtype)
        if hasattr(self, "shared_experts"):
            out = out + self.shared_experts(x)
        return out


def chunked_causal_mask(t, chunk):
    """[t, t] additive mask: causal, and with chunk > 0 only keys of the query's own chunk."""
    pos = torch.arange(t)
    allowed = pos[None, :] <= pos[:, None]
    if chunk > 0:
        allowed = allowed & (pos[None, :] // chunk == pos[:, None] // chunk)
    return torch.zeros(t, t).masked_fill(~allowed, float("-inf"))


def llama4_uses_rope(c, index):
    nope = c.get("no_rope_layers")
    if nope:
        return bool(nope[index])
    return (index + 1) % c.get("no_rope_layer_interval", 4) != 0


class Llama4Attention(nn.Module):
    """Llama4TextAttention: RoPE layers rotate (even, odd) lane pairs as complex numbers, then
    RMS-normalise q and k without a weight (use_qk_norm) and attend within their chunk; NoPE layers
    attend causally over everything and scale the queries by the temperature of their position."""

    def __init__(self, c, index):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or h // self.heads
        bias = c.get("attention_bias", False)
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.use_rope = llama4_uses_rope(c, index)
        self.chunk = c.get("attention_chunk_size", 8192) if self.use_rope and "chunk" not in WITHOUT else 0
        self.qk_norm = self.use_rope and c.get("use_qk_norm", True) and "qk_norm" not in WITHOUT
        self.eps = c["rms_norm_eps"]
        self.tuning = (bool(c.get("attn_temperature_tuning", True)) and not self.use_rope
                       and "temperature" not in WITHOUT)
        self.floor_scale, self.attn_scale = c.get("floor_scale", 8192), c.get("attn_scale", 0.1)
        self.inv_freq, _ = rope_parameters(c, self.head_dim)

    def forward(self, x):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.heads, self.head_dim)
        k = self.k_proj(x).view(t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
        pos = torch.arange(t, dtype=torch.float64)
        if self.use_rope:
            angles = pos[:, None] * self.inv_freq.double()[None, :]
            wide = x.dtype == torch.float64
            cis = torch.polar(torch.ones_like(angles), angles)
            cis = cis if wide else cis.to(torch.complex64)

            def rotate(z):
                pairs = z.double() if wide else z.float()
                pairs = torch.view_as_complex(pairs.reshape(t, z.shape[1], -1, 2).contiguous())
                return torch.view_as_real(pairs * cis[:, None, :]).flatten(2).to(z.dtype)

            q, k = rotate(q), rotate(k)
            if self.qk_norm:
                q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + self.eps)
                k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + self.eps)
        elif self.tuning:
            scale = torch.log(torch.floor((pos + 1.0) / self.floor_scale) + 1.0) * self.attn_scale + 1.0
            q = q * scale[:, None, None].to(q.dtype)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * self.head_dim ** -0.5
        scores = scores + chunked_causal_mask(t, self.chunk).to(scores.dtype)
        probs = F.softmax(scores, dim=-1, dtype=scores.dtype)
        return self.o_proj(torch.einsum("hts,shd->thd", probs, v).reshape(t, -1))


class Llama4Experts(nn.Module):
    """Fused expert weights as published: gate_up_proj [E, H, 2I] (gate first), down_proj [E, I, H]."""

    def __init__(self, e, h, inter):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.zeros(e, h, 2 * inter))
        self.down_proj = nn.Parameter(torch.zeros(e, inter, h))

    def forward(self, x):  # x [E, T, H]
        gate, up = torch.bmm(x, self.gate_up_proj).chunk(2, dim=-1)
        return torch.bmm(F.silu(gate) * up, self.down_proj)


class Llama4MoE(nn.Module):
    """Llama4TextMoe: every expert sees every token scaled by its sigmoid router score (zero unless
    the expert is in the token's top-k), and the shared expert is added."""

    def __init__(self, c):
        super().__init__()
        h, e, inter = c["hidden_size"], c["num_local_experts"], c["intermediate_size"]
        self.top_k = c["num_experts_per_tok"]
        self.router = nn.Linear(h, e, bias=False)
        self.experts = Llama4Experts(e, h, inter)
        self.shared_expert = MLP(h, inter)
        self.day0_router = "router"

    def forward(self, x):
        logits = self.router(x)
        top, selected = torch.topk(logits, self.top_k, dim=-1)
        scores = torch.full_like(logits, float("-inf")).scatter_(1, selected, top).sigmoid()
        self.day0_selected = selected
        if "input_scale" in WITHOUT:  # the score scaling the expert's output instead
            routed = (self.experts(x[None, :, :].expand(scores.shape[1], -1, -1)) * scores.t()[:, :, None]).sum(dim=0)
        else:
            routed = self.experts(x[None, :, :] * scores.t()[:, :, None]).sum(dim=0)
        return self.shared_expert(x) + routed


def llama4_moe_layers(c):
    if c.get("moe_layers") is not None:
        return set(c["moe_layers"])
    step = c.get("interleave_moe_layer_step", 1)
    return set(range(step - 1, c["num_hidden_layers"], step))


# Test switch: DAY0_TWIN_WITHOUT=sinks,window,... computes gpt-oss WITHOUT those features, so that
# a test can show its agreement with the engine depends on each of them (an engine lacking one
# would fail it). Names: sinks, window, clamp, yarn_truncate, expert_bias, attention_bias,
# router_bias, interleave (gpt-oss); latent_eps (MLA's latent norms with rms_norm_eps); qk_norm,
# partial_rotary, score_bias (MiniMax-M2; also GLM-4.5's, with attention_bias: q/k/v without their
# biases);
# ntk_alpha, norm_after_rope (Hunyuan); chunk, temperature, input_scale, qk_norm (Llama-4: full
# attention on its RoPE layers, no attention temperature on its NoPE layers, the router score
# scaling each expert's output, no weightless q/k norm); the DSA indexer's, Gemma-4's, Qwen3-Next's, DeepSeek-V4's,
# MiniMax-M3's and Nemotron-H's are listed in day0_torch_dsa.SWITCHES, day0_torch_gemma4.SWITCHES,
# day0_torch_qwen3next.SWITCHES, day0_torch_deepseek_v4.SWITCHES, day0_torch_minimax_m3.SWITCHES and
# day0_torch_nemotron_h.SWITCHES, day0_torch_kimi_linear.SWITCHES. Unset in every real use.
WITHOUT = {f for f in os.environ.get("DAY0_TWIN_WITHOUT", "").split(",") if f}
_KNOWN_SWITCHES = ({"sinks", "window", "clamp", "yarn_truncate", "expert_bias", "attention_bias",
                    "router_bias", "interleave", "qk_norm", "partial_rotary", "score_bias",
                    "ntk_alpha", "norm_after_rope", "latent_eps", "chunk", "temperature",
                    "input_scale"} | day0_torch_dsa.SWITCHES
                   | day0_torch_gemma4.SWITCHES | day0_torch_qwen3next.SWITCHES
                   | day0_torch_deepseek_v4.SWITCHES | day0_torch_minimax_m3.SWITCHES
                   | day0_torch_nemotron_h.SWITCHES | day0_torch_kimi_linear.SWITCHES)
if WITHOUT - _KNOWN_SWITCHES:
    raise ValueError(f"DAY0_TWIN_WITHOUT: unknown feature(s) {sorted(WITHOUT - _KNOWN_SWITCHES)} "
                     f"(known: {', '.join(sorted(_KNOWN_SWITCHES))})")


def _linear(module, x, switch):
    """module(x), or without its bias when the switch is set."""
    return F.linear(x, module.weight) if switch in WITHOUT else module(x)


def gpt_oss_config(config):
    """A gpt_oss config.json with GptOssConfig's defaults filled in where keys are absent."""
    c = dict(config)
    c.setdefault("head_dim", 64)
    c.setdefault("num_key_value_heads", 8)
    c.setdefault("num_local_experts", 128)
    if "num_experts_per_tok" not in c:
        c["num_experts_per_tok"] = c.get("experts_per_token", 4)
    c.setdefault("sliding_window", 128)
    c.setdefault("swiglu_limit", 7.0)
    c.setdefault("rope_theta", 150000.0)
    c.setdefault("rms_norm_eps", 1e-5)
    c.setdefault("attention_bias", True)
    if not c.get("layer_types"):
        c["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                            for i in range(c["num_hidden_layers"])]
    if len(c["layer_types"]) != c["num_hidden_layers"]:
        raise ValueError(f"gpt_oss: 'layer_types' has {len(c['layer_types'])} entries but the model has "
                         f"{c['num_hidden_layers']} layers")
    return c


class GptOssRMSNorm(nn.Module):
    """GptOssRMSNorm: normalise in (at least) fp32 and scale by the weight before casting back.
    Wide inputs (the float64 reference) stay wide instead of being narrowed to fp32."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.promote_types(dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.to(h.dtype) * h).to(dtype)


class GptOssAttention(nn.Module):
    """GptOssAttention: biased q/k/v/o projections, YaRN RoPE on the two halves of each head, GQA,
    a causal mask narrowed to the last `sliding_window` keys on sliding layers, and one learned
    sink logit per head that joins each row's softmax and is then dropped."""

    def __init__(self, c, index):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads, self.head_dim = c["num_key_value_heads"], c["head_dim"]
        bias = c.get("attention_bias", True)
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.sinks = nn.Parameter(torch.zeros(self.heads))
        self.window = (c["sliding_window"] or 0) if c["layer_types"][index] == "sliding_attention" else 0
        if "window" in WITHOUT:
            self.window = 0
        if "yarn_truncate" in WITHOUT and isinstance(c.get("rope_scaling"), dict):
            c = dict(c, rope_scaling=dict(c["rope_scaling"], truncate=True))
        self.inv_freq, self.rope_scale = rope_parameters(c, self.head_dim)

    def forward(self, x):
        t = x.shape[0]
        q = _linear(self.q_proj, x, "attention_bias").view(t, self.heads, self.head_dim)
        k = _linear(self.k_proj, x, "attention_bias").view(t, self.kv_heads, self.head_dim)
        v = _linear(self.v_proj, x, "attention_bias").view(t, self.kv_heads, self.head_dim)
        if x.dtype == torch.float64:
            # HF's fp32 frequencies, angles and cos/sin evaluated exactly.
            angles = torch.arange(t, dtype=torch.float64)[:, None] * self.inv_freq.double()[None, :]
            angles = torch.cat((angles, angles), dim=-1)
            cos, sin = angles.cos() * self.rope_scale, angles.sin() * self.rope_scale
        else:
            cos, sin = rope_cos_sin(self.inv_freq, self.rope_scale, torch.arange(t))
        cos, sin = cos[:, None, :].to(q.dtype), sin[:, None, :].to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * self.head_dim ** -0.5
        pos = torch.arange(t)
        allowed = pos[None, :] <= pos[:, None]
        if self.window > 0:
            allowed = allowed & (pos[None, :] > pos[:, None] - self.window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        if "sinks" in WITHOUT:
            probs = F.softmax(scores, dim=-1, dtype=scores.dtype).to(v.dtype)
        else:
            sinks = self.sinks.to(scores.dtype)[:, None, None].expand(self.heads, t, 1)
            combined = torch.cat((scores, sinks), dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            probs = F.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1].to(v.dtype)
        return _linear(self.o_proj, torch.einsum("hts,shd->thd", probs, v).reshape(t, -1), "attention_bias")


class GptOssRouter(nn.Module):
    """GptOssTopKRouter's linear part: returns the logits over all experts (the router anchor);
    the block picks the top k of them."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c["num_local_experts"], c["hidden_size"]))
        self.bias = nn.Parameter(torch.zeros(c["num_local_experts"]))

    def forward(self, x):
        return F.linear(x, self.weight, None if "router_bias" in WITHOUT else self.bias)


class GptOssExperts(nn.Module):
    """Fused biased experts as published: gate_up_proj [E, H, 2I] with gate and up interleaved
    (even and odd columns), down_proj [E, I, H]; clamped SwiGLU (up + 1) * g * sigmoid(alpha g)."""

    def __init__(self, c):
        super().__init__()
        e, h, inter = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
        self.gate_up_proj = nn.Parameter(torch.zeros(e, h, 2 * inter))
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(e, 2 * inter))
        self.down_proj = nn.Parameter(torch.zeros(e, inter, h))
        self.down_proj_bias = nn.Parameter(torch.zeros(e, h))
        self.limit = float(c["swiglu_limit"])
        self.alpha = float(c.get("swiglu_alpha", 1.702))

    def expert(self, e, x):  # x [N, H] -> [N, H]
        biased = "expert_bias" not in WITHOUT
        gate_up = x @ self.gate_up_proj[e] + (self.gate_up_proj_bias[e] if biased else 0)
        if "interleave" in WITHOUT:
            gate, up = gate_up.chunk(2, dim=-1)
        else:
            gate, up = gate_up[..., 0::2], gate_up[..., 1::2]
        if "clamp" not in WITHOUT:
            gate = gate.clamp(max=self.limit)
            up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        return ((up + 1) * glu) @ self.down_proj[e] + (self.down_proj_bias[e] if biased else 0)


class GptOssMoE(nn.Module):
    """GptOssMLP: top-k of the router logits, softmax over those k, weighted sum of the experts."""

    def __init__(self, c):
        super().__init__()
        self.top_k = c["num_experts_per_tok"]
        self.router = GptOssRouter(c)
        self.experts = GptOssExperts(c)
        self.day0_router = "router"

    def forward(self, x):
        logits = self.router(x)
        top, selected = torch.topk(logits, self.top_k, dim=-1)
        weights = F.softmax(top, dim=-1, dtype=top.dtype)
        self.day0_selected = selected
        out = torch.zeros_like(x)
        for e in range(self.router.weight.shape[0]):
            token, slot = torch.where(selected == e)
            if token.numel():
                out.index_add_(0, token, self.experts.expert(e, x[token]) * weights[token, slot, None].to(x.dtype))
        return out


def dequantize_mxfp4(blocks, scales):
    """MXFP4 experts as gpt-oss stores them: blocks U8 [E, rows, G, 16] (byte k: element 2k in the
    low nibble, 2k+1 in the high one), scales U8 [E, rows, G] (2^(s - 127) per 32 elements) ->
    float64 [E, G*32, rows], the transpose of the stored rows (HF convert_moe_packed_tensors)."""
    lut = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)
    blocks, scales = np.asarray(blocks, dtype=np.uint8), np.asarray(scales)
    if blocks.shape[:-1] != scales.shape or blocks.shape[-1] != 16:
        raise ValueError(f"MXFP4 blocks {blocks.shape} do not match scales {scales.shape}")
    values = np.empty(blocks.shape[:-1] + (32,), dtype=np.float64)
    values[..., 0::2] = lut[blocks & 0x0F]
    values[..., 1::2] = lut[blocks >> 4]
    values = np.ldexp(values, scales.astype(np.int32)[..., None] - 127)
    e, rows, groups = scales.shape
    return np.swapaxes(values.reshape(e, rows, groups * 32), 1, 2)


class DecoderLayer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        h, kind = c["hidden_size"], c["model_type"]
        norm = GptOssRMSNorm if kind == "gpt_oss" else RMSNorm
        self.input_layernorm = norm(h, c["rms_norm_eps"])
        self.post_attention_layernorm = norm(h, c["rms_norm_eps"])
        deepseek = kind in ("deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa")
        # GLM-4.5 (glm4_moe): standard attention, DeepSeek-V3's sigmoid-routed MoE with shared
        # experts after first_k_dense_replace dense layers.
        deepseek_moe = deepseek or kind == "glm4_moe"
        llama4 = kind in ("llama4", "llama4_text")
        if kind == "gpt_oss":
            self.self_attn = GptOssAttention(c, index)
        elif llama4:
            self.self_attn = Llama4Attention(c, index)
        else:
            self.self_attn = MLAttention(c) if deepseek else Attention(c)
            if c.get("index_n_heads"):
                day0_torch_dsa.attach(self.self_attn, c, index, WITHOUT)
        self.ffn_name = "feed_forward" if llama4 else "mlp"
        if kind == "gpt_oss":
            ffn = GptOssMoE(c)
        elif llama4:
            moe = index in llama4_moe_layers(c)
            ffn = Llama4MoE(c) if moe else MLP(h, c.get("intermediate_size_mlp", c["intermediate_size"]))
        elif kind == "mixtral":
            self.ffn_name = "block_sparse_moe"
            ffn = SoftmaxMoE(c, mixtral=True)
        elif kind == "qwen3_moe" and index not in c.get("mlp_only_layers", []):
            ffn = SoftmaxMoE(c, mixtral=False)
        elif deepseek_moe and index >= c.get("first_k_dense_replace", 0):
            ffn = DeepseekMoE(c)
        else:
            ffn = MLP(h, c["intermediate_size"])
        setattr(self, self.ffn_name, ffn)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + getattr(self, self.ffn_name)(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        if c["model_type"] == "nemotron-nas":
            import day0_torch_nas
            layer = day0_torch_nas.DeciLMLayer
        elif c["model_type"] == "hunyuan":
            import day0_torch_hunyuan
            layer = day0_torch_hunyuan.HunyuanLayer
        elif c["model_type"] == "minimax_m2":
            import day0_torch_minimax
            layer = day0_torch_minimax.MiniMaxM2Layer
        elif c["model_type"] == "minimax_m3":
            layer = day0_torch_minimax_m3.MiniMaxM3Layer
        else:
            layer = DecoderLayer
        self.layers = nn.ModuleList(layer(c, i) for i in range(c["num_hidden_layers"]))
        norm = GptOssRMSNorm if c["model_type"] == "gpt_oss" else RMSNorm
        if c["model_type"] == "minimax_m3":
            self.norm = day0_torch_minimax_m3.final_norm(c)
        else:
            self.norm = norm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class CausalLM(nn.Module):
    """Batch of one: forward(ids [1, T]) -> logits [1, T, V]; modules see [T, H]."""

    def __init__(self, c):
        super().__init__()
        self.model = Body(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids[0]))[None]


SUPPORTED = (("nemotron-nas", "minimax_m2", "minimax_m3", "hunyuan", "llama", "mistral", "qwen2", "qwen3", "mixtral",
             "qwen3_moe", "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa", "glm4_moe",
             "llama4", "llama4_text", "gpt_oss", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
             "gemma4", "gemma4_text", "deepseek_v4", "nemotron_h") + day0_torch_qwen3next.MODEL_TYPES
             + day0_torch_kimi_linear.MODEL_TYPES)


def glm_moe_dsa_config(config):
    """GLM-5 keeps its rope in rope_parameters (transformers 5); the MLA code reads rope_theta and
    rope_scaling."""
    c = dict(config)
    rope = c.get("rope_parameters") or {}
    c.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    if rope.get("rope_type", "default") != "default":
        c.setdefault("rope_scaling", rope)
    return c


def load(folder, dtype=torch.float32):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") not in SUPPORTED:
        raise NotImplementedError(f"model_type {config.get('model_type')} (supported: {', '.join(SUPPORTED)})")
    if config["model_type"] in ("gemma4", "gemma4_text"):
        return day0_torch_gemma4.load(folder, config, dtype, WITHOUT, safetensors_io.read)
    if config["model_type"] in day0_torch_qwen3next.MODEL_TYPES:
        return day0_torch_qwen3next.load(folder, config, dtype, WITHOUT, safetensors_io.read)
    if config["model_type"] == "deepseek_v4":
        return day0_torch_deepseek_v4.load(folder, config, dtype, WITHOUT, safetensors_io.read)
    if config["model_type"] in day0_torch_kimi_linear.MODEL_TYPES:
        return day0_torch_kimi_linear.load(folder, config, dtype, WITHOUT, safetensors_io.read)
    if config["model_type"] == "nemotron_h":
        return day0_torch_nemotron_h.load(folder, config, dtype, WITHOUT, safetensors_io.read)
    vl = config["model_type"] in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
    llama4 = config["model_type"] == "llama4"
    if config["model_type"] == "gpt_oss":
        config = gpt_oss_config(config)
    if vl:
        import day0_torch_vl
        model, flat = day0_torch_vl.build(config, sys.modules[__name__])
    elif llama4:
        # Llama4ForConditionalGeneration: the text tower only (a text prompt never reaches the
        # vision model); its tensors live under language_model.
        flat = dict(config["text_config"], model_type="llama4")
        model = CausalLM(flat)
    else:
        if config["model_type"] == "glm_moe_dsa":
            config = glm_moe_dsa_config(config)
        model = CausalLM(config)
        day0_torch_dsa.link(model)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = safetensors_io.read(path)
        tensors.update(part)
    if vl:
        tensors = day0_torch_vl.rename(tensors)
        config = flat
    elif llama4 or config["model_type"] == "minimax_m3":
        # Llama-4 and MiniMax-M3 keep the text decoder under language_model.
        tensors = {n[len("language_model."):]: t for n, t in tensors.items() if n.startswith("language_model.")}
        config = flat if llama4 else config
    # Block-scaled FP8 weights: multiply by their per-block scales (edge blocks are partial).
    block = (config.get("quantization_config") or {}).get("weight_block_size") or [128, 128]
    for name in [n for n in tensors if n.endswith("_scale_inv")]:
        weight_name = name[: -len("_scale_inv")]
        w, s = tensors[weight_name].astype(np.float64), tensors.pop(name).astype(np.float64)
        scale = np.repeat(np.repeat(s, block[0], 0), block[1], 1)[: w.shape[0], : w.shape[1]]
        tensors[weight_name] = w * scale
    # MXFP4 experts (gpt-oss): <p>_blocks and <p>_scales become the float64 <p> they encode.
    if (config.get("quantization_config") or {}).get("quant_method") == "mxfp4":
        for name in [n for n in tensors if n.endswith("_blocks")]:
            weight_name = name[: -len("_blocks")]
            tensors[weight_name] = dequantize_mxfp4(tensors.pop(name), tensors.pop(weight_name + "_scales"))
    if config.get("tie_word_embeddings") and "lm_head.weight" not in tensors:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    model = model.to(dtype)
    model.eval()
    return model, config
