"""Kimi-Linear (kimi_linear, moonshotai/Kimi-Linear-48B-A3B) for the PyTorch twin, written from
the public reference code: vLLM vllm/model_executor/layers/kda.py (KimiDeltaAttention) and
models/kimi_linear.py, FLA fla/layers/kda.py, fla/ops/kda/gate.py (kda_gate_ref) and
fla/ops/kda/naive.py (the recurrent and chunked forms of the rule).

Layers: linear_attn_config.kda_layers (1-based) are Kimi Delta Attention, the others
(full_attn_layers) DeepSeek-style MLA; both live at `self_attn`.
- KDA: q_proj, k_proj, v_proj, each through its own causal depthwise conv (short_conv_kernel_size
  taps, no bias) and SiLU; q, k L2-normalised per head (x / sqrt(sum x^2 + 1e-6)), q scaled by
  head_dim^-1/2; the log decay per key channel g = -exp(A_log[h]) * softplus(f_b(f_a(x)) +
  dt_bias); beta = sigmoid(b_proj(x)); the rule per head, S [dk, dv]:
  S <- diag(exp(g_t)) S; S <- S + k_t (beta_t (v_t - S^T k_t))^T; o_t = S^T q_t.
  Output: o_norm (RMS norm over a head, times its weight, times sigmoid(g_b(g_a(x)))), o_proj.
- MLA with mla_use_nope: q_proj (no q LoRA), kv_a_proj_with_mqa -> (latent, k_pe), kv_a_layernorm,
  kv_b_proj -> (k_nope, v); the k_pe slice is shared by the heads and nothing is rotated;
  softmax scale (qk_nope + qk_rope)^-1/2; causal.
- FFN: layers before first_k_dense_replace a SwiGLU `mlp`; the others `block_sparse_moe`: a
  sigmoid router with e_score_correction_bias for the choice (noaux_tc; num_expert_group groups),
  weights sigma(logit) of the chosen, renormalised (moe_renormalize) and times
  routed_scaling_factor, experts w1 (gate), w3 (up), w2 (down), plus the shared experts.
Every RMSNorm is x_hat * w.

Both forms of the rule are here: the chunked one (the WY form of fla's naive_chunk_kda over chunks
of DAY0_TWIN_CHUNK tokens, default 64, the partial last chunk padded) and the recurrent one. A
forward runs as the engine does: the prompt (day0_set_prompt_length; all T when unset) in the
chunked form, each later token recurrent from the carried conv windows and state.
DAY0_TWIN_KDA_FORM=chunked or recurrent runs every token in that form instead.

DAY0_TWIN_WITHOUT switches off: conv (no convolution; SiLU kept), l2norm, decay (g = 0),
channel_decay (each head's decay the mean of its channels'), beta (beta = 1), state (each decode
step starts from zero conv windows and state), output_gate (o_norm without sigmoid(gate)),
nope (the MLA rotates its rope slices, interleaved pairs at rope_theta), mla_gate (the MLA
without Kimi-K3's output gate).

Kimi-K3's linear_attn_config.gate_lower_bound (fla fused_kda_gate lower_bound): the log decay
g = lower_bound * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias)) instead of the softplus form
(switch safe_gate: the softplus form regardless).

Kimi-K3's linear_attn_config.use_full_rank_gate (vLLM kda.py): the output gate is one g_proj
(hidden -> heads * head_dim) instead of g_b_proj(g_a_proj(x)).

Kimi-K3's latent MoE (routed_expert_hidden_size; HF KimiK3 LatentMoE, vLLM models/kimi_linear.py):
the router reads x, the routed experts run on routed_expert_down_proj(x), their weighted sum goes
through routed_expert_norm (an RMSNorm, latent_moe_use_norm; switch latent_norm) and
routed_expert_up_proj; the shared experts run on x.

Kimi-K3's mla_use_output_gate (vLLM models/kimi_linear.py, g_proj): the MLA's attention output
times sigmoid(g_proj(x)), one gate per value channel, before o_proj.

Kimi-K3 whole (model_type kimi_k3: the text model under language_model, its MoonViT-3 tower and
projector not computed, their tensors not read), from Moonshot's modeling_kimi_linear.py as public
transcriptions of it give it:
- SiTU-GLU (hidden_act "situ"; SituAndMul) in the dense MLP, the shared and the routed experts:
  beta * tanh(gate / beta) * sigmoid(gate) * up, up replaced by lb * tanh(up / lb) when
  activation_situ_linear_beta lb is set; beta is activation_situ_beta or 1 (switch situ: SwiGLU).
- Block Attention Residuals (attn_res_block_size B; _forward_attn_residual, _apply_attn_res): the
  stream is the sealed block sums and a partial sum p (the embedding first). Layer l reads
  x = mix(blocks, p) with self_attention_res_* when a block is sealed (else p); when l % B == 0 p
  is sealed as a block and restarts empty; p <- p + self_attn(input_layernorm(x)); the MLP reads
  post_attention_layernorm(mix(blocks, p)) with mlp_res_*; p <- p + mlp; the layer outputs p.
  After the last layer output_attn_res_* mixes once more before the final norm. mix scores each
  value v by sum(v / rms(v) * res_norm.weight * res_proj.weight) and returns the softmax-weighted
  sum of the values themselves, in float32 (or float64) (switch attn_res: the plain residual
  stream, the AttnRes tensors unused).
- A_log stored as [head_dim], the heads' values then zeros (the real shard: 96 of 128): the
  official code passes it to fla's chunk_kda, whose gate kernel loads A_log at the head index, so
  head h reads A_log[h] (switch a_log_channels: each key channel c reads A_log[c] instead, as a
  per-channel reading of the same tensor would).
- The MLA's q LoRA (q_lora_rank: q_b_proj(q_a_layernorm(q_a_proj(x)))).
"""

import glob
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

SWITCHES = {"conv", "l2norm", "decay", "channel_decay", "beta", "state", "output_gate", "nope",
            "mla_gate", "safe_gate", "latent_norm", "situ", "attn_res", "a_log_channels",
            "latent_eps"}

MODEL_TYPES = ("kimi_linear", "kimi_k3")

WITHOUT = set()


def _off(feature):
    return feature in WITHOUT


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.to(h.dtype) * h).to(x.dtype)


def l2normalise(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def recurrent_kda(q, k, v, g, beta, state):
    """q, k [T, H, dk], v [T, H, dv], g [T, H, dk], beta [T, H], state [H, dk, dv] ->
    (out [T, H, dv], state)."""
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=v.dtype)
    for t in range(q.shape[0]):
        state = state * g[t].exp()[:, :, None]
        remembered = torch.einsum("hk,hkv->hv", k[t], state)
        update = (v[t] - remembered) * beta[t][:, None]
        state = state + torch.einsum("hk,hv->hkv", k[t], update)
        out[t] = torch.einsum("hk,hkv->hv", q[t], state)
    return out, state


def chunked_kda(q, k, v, g, beta, state, chunk):
    """The WY form over chunks: the same arguments and result as recurrent_kda."""
    t = q.shape[0]
    pad = (chunk - t % chunk) % chunk
    # Padding: zero keys, values and beta leave the state alone; g = 0 does not decay it.
    q, k, v, g = (F.pad(x.transpose(0, 1), (0, 0, 0, pad)) for x in (q, k, v, g))  # [H, T', d]
    beta = F.pad(beta.transpose(0, 1), (0, pad))
    heads, total = q.shape[0], q.shape[1]
    n = total // chunk
    q, k, v, g = (x.reshape(heads, n, chunk, x.shape[-1]) for x in (q, k, v, g))
    beta = beta.reshape(heads, n, chunk)
    g = g.cumsum(dim=2)  # G_i per channel within each chunk
    lower = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool))  # j <= i
    strict = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=-1)  # j < i
    # diff[..., i, j, c] = G_i[c] - G_j[c], only where j <= i (else 0 before exp, then masked).
    diff = (g[..., :, None, :] - g[..., None, :, :]).masked_fill(~lower[..., None], 0.0)
    kk = torch.einsum("hnic,hnijc,hnjc->hnij", k, diff.exp(), k)
    qk = torch.einsum("hnic,hnijc,hnjc->hnij", q, diff.exp(), k).masked_fill(~lower, 0.0)
    # T = (I + strictly lower beta_i (e^{G_i - G_j} k_i).k_j)^-1 diag(beta).
    a = (kk * beta[..., :, None]).masked_fill(~strict, 0.0)
    eye = torch.eye(chunk, dtype=q.dtype)
    tmat = torch.linalg.solve_triangular(eye + a, torch.diag_embed(beta), upper=False)
    u = tmat @ v  # [H, n, C, dv]
    w = tmat @ (k * g.exp())  # [H, n, C, dk]
    out = torch.zeros_like(u)
    for c in range(n):
        new_v = u[:, c] - w[:, c] @ state
        out[:, c] = (q[:, c] * g[:, c].exp()) @ state + qk[:, c] @ new_v
        last = g[:, c, -1]  # [H, dk]
        state = state * last.exp()[:, :, None] + (
            (k[:, c] * (last[:, None, :] - g[:, c]).exp()).transpose(-1, -2) @ new_v)
    out = out.reshape(heads, total, -1)[:, :t].transpose(0, 1)
    return out, state


class KimiDeltaAttention(nn.Module):
    def __init__(self, c, steps):
        super().__init__()
        la = c["linear_attn_config"]
        h = c["hidden_size"]
        self.heads, self.d = la["num_heads"], la["head_dim"]
        self.kernel = la["short_conv_kernel_size"]
        self.lower_bound = la.get("gate_lower_bound")
        width = self.heads * self.d
        self.width = width
        self.steps = steps
        for name in ("q", "k", "v"):
            setattr(self, f"{name}_proj", nn.Linear(h, width, bias=False))
            setattr(self, f"{name}_conv1d", nn.Conv1d(width, width, self.kernel, groups=width, bias=False))
        self.f_a_proj = nn.Linear(h, self.d, bias=False)
        self.f_b_proj = nn.Linear(self.d, width, bias=False)
        # Kimi-K3 pads A_log to head_dim (c["day0_padded_a_log"], set by load for kimi_k3).
        self.padded_a_log = c.get("day0_padded_a_log", False)
        self.A_log = nn.Parameter(torch.zeros(self.d) if self.padded_a_log else torch.zeros(1, 1, self.heads, 1))
        self.dt_bias = nn.Parameter(torch.zeros(width))
        self.b_proj = nn.Linear(h, self.heads, bias=False)
        if la.get("use_full_rank_gate"):  # Kimi-K3: one full-rank output gate projection
            self.g_proj = nn.Linear(h, width, bias=False)
        else:
            self.g_a_proj = nn.Linear(h, self.d, bias=False)
            self.g_b_proj = nn.Linear(self.d, width, bias=False)
        self.o_norm = RMSNorm(self.d, c["rms_norm_eps"])
        self.o_proj = nn.Linear(width, h, bias=False)

    def convolve(self, conv, x, window):
        """Causal depthwise conv + SiLU of x [T, W] after `window` [K-1, W]."""
        if _off("conv"):
            return F.silu(x), window
        full = torch.cat((window, x), dim=0)
        out = F.conv1d(full.t()[None], conv.weight, groups=self.width)[0].t()
        return F.silu(out), full[-(self.kernel - 1):]

    def forward(self, x):
        t = x.shape[0]
        projected = [self.q_proj(x), self.k_proj(x), self.v_proj(x)]
        convs = [self.q_conv1d, self.k_conv1d, self.v_conv1d]
        raw_g = self.f_b_proj(self.f_a_proj(x)).view(t, self.heads, self.d)
        if not self.padded_a_log:
            rate = self.A_log.view(self.heads, 1).exp()
        elif _off("a_log_channels"):
            rate = self.A_log.view(1, self.d).exp()
        else:
            rate = self.A_log[: self.heads].view(self.heads, 1).exp()
        biased = raw_g + self.dt_bias.view(self.heads, self.d)
        if self.lower_bound and not _off("safe_gate"):
            g_all = self.lower_bound * torch.sigmoid(rate * biased)
        else:
            g_all = -rate * F.softplus(biased)
        if _off("channel_decay"):
            g_all = g_all.mean(dim=-1, keepdim=True).expand_as(g_all)
        if _off("decay"):
            g_all = torch.zeros_like(g_all)
        beta_all = self.b_proj(x).sigmoid()
        if _off("beta"):
            beta_all = torch.ones_like(beta_all)
        prompt = self.steps.get("prompt") or t
        forced = os.environ.get("DAY0_TWIN_KDA_FORM", "")
        bounds = [(0, min(prompt, t))] + [(s, s + 1) for s in range(min(prompt, t), t)]
        if forced == "recurrent":
            bounds = [(s, s + 1) for s in range(t)]
        windows = [torch.zeros(self.kernel - 1, self.width, dtype=x.dtype) for _ in range(3)]
        state = torch.zeros(self.heads, self.d, self.d, dtype=x.dtype)
        outs = []
        for first, end in bounds:
            if _off("state") and first > 0:
                windows = [torch.zeros_like(wd) for wd in windows]
                state = torch.zeros_like(state)
            mixed = []
            for i in range(3):
                y, windows[i] = self.convolve(convs[i], projected[i][first:end], windows[i])
                mixed.append(y.view(end - first, self.heads, self.d))
            q, k, v = mixed
            if not _off("l2norm"):
                q, k = l2normalise(q), l2normalise(k)
            q = q * self.d ** -0.5
            g, beta = g_all[first:end], beta_all[first:end]
            form = forced or ("chunked" if end - first > 1 else "recurrent")
            if form == "chunked":
                o, state = chunked_kda(q, k, v, g, beta, state, int(os.environ.get("DAY0_TWIN_CHUNK", "64")))
            else:
                o, state = recurrent_kda(q, k, v, g, beta, state)
            outs.append(o)
        core = self.o_norm(torch.cat(outs, dim=0))  # [T, H, d]
        if not _off("output_gate"):
            gate = self.g_proj(x) if hasattr(self, "g_proj") else self.g_b_proj(self.g_a_proj(x))
            gate = gate.view(t, self.heads, self.d)
            core = core * gate.sigmoid()
        return self.o_proj(core.reshape(t, -1))


class NopeMLA(nn.Module):
    """Kimi's MLA with mla_use_nope (no q LoRA in Kimi-Linear)."""

    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.nope, self.rope, self.v_dim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.kv_lora = c["kv_lora_rank"]
        self.q_lora = c.get("q_lora_rank")
        # KimiMLAAttention builds its latent norms with KimiRMSNorm's default eps, 1e-6.
        latent_eps = c["rms_norm_eps"] if _off("latent_eps") else 1e-6
        if self.q_lora:  # Kimi-K3
            self.q_a_proj = nn.Linear(h, self.q_lora, bias=False)
            self.q_a_layernorm = RMSNorm(self.q_lora, latent_eps)
            self.q_b_proj = nn.Linear(self.q_lora, self.heads * (self.nope + self.rope), bias=False)
        else:
            self.q_proj = nn.Linear(h, self.heads * (self.nope + self.rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.kv_lora + self.rope, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_lora, latent_eps)
        self.kv_b_proj = nn.Linear(self.kv_lora, self.heads * (self.nope + self.v_dim), bias=False)
        self.o_proj = nn.Linear(self.heads * self.v_dim, h, bias=False)
        self.theta = float(c.get("rope_theta", 10000.0))
        self.use_nope = c.get("mla_use_nope", False)
        if c.get("mla_use_output_gate"):
            self.g_proj = nn.Linear(h, self.heads * self.v_dim, bias=False)

    def rotate(self, z):
        """Interleaved RoPE of z [T, heads, rope]: lanes (2i, 2i+1) turn as a complex number."""
        t = z.shape[0]
        inv = 1.0 / (self.theta ** (torch.arange(0, self.rope, 2, dtype=torch.float64) / self.rope))
        angles = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = angles.cos()[:, None, :].to(z.dtype), angles.sin()[:, None, :].to(z.dtype)
        even, odd = z[..., 0::2], z[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(self, x):
        t = x.shape[0]
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))) if self.q_lora else self.q_proj(x)
        q = q.view(t, self.heads, self.nope + self.rope)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope], dim=-1)
        latent, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [self.kv_lora, self.rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(t, self.heads, self.nope + self.v_dim)
        k_nope, value = torch.split(kv, [self.nope, self.v_dim], dim=-1)
        k_pe = k_pe.view(t, 1, self.rope)
        if not self.use_nope or _off("nope"):
            q_pe, k_pe = self.rotate(q_pe), self.rotate(k_pe)
        query = torch.cat((q_nope, q_pe), dim=-1)
        key = torch.cat((k_nope, k_pe.expand(t, self.heads, self.rope)), dim=-1)
        scores = torch.einsum("thd,shd->hts", query, key) * (self.nope + self.rope) ** -0.5
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=scores.dtype)
        out = torch.einsum("hts,shd->thd", probs, value).reshape(t, -1)
        if hasattr(self, "g_proj") and not _off("mla_gate"):
            out = out * self.g_proj(x).sigmoid()
        return self.o_proj(out)


class SwiGLU(nn.Module):
    """gate/up/down with SiLU, or with Kimi-K3's SiTU (act: (beta, linear_beta))."""

    def __init__(self, h, inter, names=("gate_proj", "up_proj", "down_proj"), act=None):
        super().__init__()
        self.names = names
        self.act = act
        setattr(self, names[0], nn.Linear(h, inter, bias=False))
        setattr(self, names[1], nn.Linear(h, inter, bias=False))
        setattr(self, names[2], nn.Linear(inter, h, bias=False))

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self.names)
        if self.act is None or _off("situ"):
            return down(F.silu(gate(x)) * up(x))
        beta, linear_beta = self.act
        g, u = gate(x), up(x)
        if linear_beta is not None:
            u = linear_beta * torch.tanh(u / linear_beta)
        return down(beta * torch.tanh(g / beta) * torch.sigmoid(g) * u)


def situ_params(c):
    """(beta, linear_beta) of SiTU, or None for SiLU."""
    if c.get("hidden_act", "silu") != "situ":
        return None
    return c.get("activation_situ_beta") or 1.0, c.get("activation_situ_linear_beta")


class Router(nn.Module):
    def __init__(self, h, experts):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(experts, h))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(experts))

    def forward(self, x):
        """The router's logits (its module output: the `gate` anchor of the dumps)."""
        return F.linear(x, self.weight)


class SparseMoe(nn.Module):
    """KimiSparseMoeBlock: sigmoid router (noaux_tc), experts w1/w3/w2, shared experts."""

    def __init__(self, c):
        super().__init__()
        h, e = c["hidden_size"], c["num_experts"]
        self.c = c
        self.gate = Router(h, e)
        latent = c.get("routed_expert_hidden_size")
        width = latent or h
        if latent:
            self.routed_expert_down_proj = nn.Linear(h, latent, bias=False)
            if c.get("latent_moe_use_norm"):
                self.routed_expert_norm = RMSNorm(latent, c["rms_norm_eps"])
            self.routed_expert_up_proj = nn.Linear(latent, h, bias=False)
        act = situ_params(c)
        self.experts = nn.ModuleList(SwiGLU(width, c["moe_intermediate_size"], ("w1", "w3", "w2"), act)
                                     for _ in range(e))
        shared = c.get("num_shared_experts") or 0
        if shared:
            self.shared_experts = SwiGLU(h, c["moe_intermediate_size"] * shared, act=act)

    def forward(self, x):
        c = self.c
        e = c["num_experts"]
        groups = c.get("num_expert_group", 1) if c.get("use_grouped_topk", False) else 1
        topk_group = c.get("topk_group", 1) if c.get("use_grouped_topk", False) else 1
        top_k = c["num_experts_per_token"]
        scores = self.gate(x).sigmoid()
        choice = scores + self.gate.e_score_correction_bias
        group_scores = choice.view(-1, groups, e // groups).topk(min(2, e // groups), dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, groups, e // groups).reshape(-1, e)
        masked = choice.masked_fill(~score_mask.bool(), float("-inf"))
        selected = torch.topk(masked, k=top_k, dim=-1, sorted=False)[1]
        weights = scores.gather(1, selected)
        if c.get("moe_renormalize", True) and top_k > 1:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        weights = weights * c.get("routed_scaling_factor", 1.0)
        self.day0_selected = selected
        self.day0_scores = choice
        self.day0_scoring = {"scoring": "sigmoid", "top_k": top_k, "n_group": groups, "topk_group": topk_group}
        routed = self.routed_expert_down_proj(x) if hasattr(self, "routed_expert_down_proj") else x
        out = torch.zeros_like(routed)
        for ex in range(e):
            token, slot = torch.where(selected == ex)
            if token.numel():
                out.index_add_(0, token, self.experts[ex](routed[token]) * weights[token, slot, None])
        if hasattr(self, "routed_expert_down_proj"):
            if hasattr(self, "routed_expert_norm") and not _off("latent_norm"):
                out = self.routed_expert_norm(out)
            out = self.routed_expert_up_proj(out)
        if hasattr(self, "shared_experts"):
            out = out + self.shared_experts(x)
        return out


class DecoderLayer(nn.Module):
    def __init__(self, c, index, steps):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
        la = c.get("linear_attn_config") or {}
        kda = (index + 1) in (la.get("kda_layers") or [])
        self.self_attn = KimiDeltaAttention(c, steps) if kda else NopeMLA(c)
        self.moe = index >= c.get("first_k_dense_replace", 0) and c.get("num_experts", 0) > 0
        if self.moe:
            self.block_sparse_moe = SparseMoe(c)
        else:
            self.mlp = SwiGLU(h, c["intermediate_size"], act=situ_params(c))
        self.index = index
        self.block = c.get("attn_res_block_size")
        if self.block:
            for part in ("self_attention", "mlp"):
                setattr(self, part + "_res_norm", RMSNorm(h, eps))
                setattr(self, part + "_res_proj", nn.Linear(h, 1, bias=False))
        self.blocks = None  # the sealed block sums, a list shared with Body

    def forward(self, x):
        ffn = self.block_sparse_moe if self.moe else self.mlp
        if not self.block or _off("attn_res"):
            x = x + self.self_attn(self.input_layernorm(x))
            return x + ffn(self.post_attention_layernorm(x))
        blocks = self.blocks
        partial = x
        if blocks:
            x = attn_res_mix(blocks, partial, self.self_attention_res_norm, self.self_attention_res_proj)
        if self.index % self.block == 0:
            blocks.append(partial)
            partial = None
        attn = self.self_attn(self.input_layernorm(x))
        partial = attn if partial is None else partial + attn
        mixed = attn_res_mix(blocks, partial, self.mlp_res_norm, self.mlp_res_proj)
        return partial + ffn(self.post_attention_layernorm(mixed))


def attn_res_mix(blocks, partial, norm, proj):
    """The softmax mix of the values (blocks..., partial) [T, h] each, scored by
    sum(v / rms(v) * norm.weight * proj.weight), computed in float32 at least."""
    values = torch.stack(list(blocks) + [partial], dim=1)  # [T, m + 1, h]
    wide = values.to(torch.promote_types(values.dtype, torch.float32))
    unit = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + norm.eps)
    weight = norm.weight.to(wide.dtype) * proj.weight[0].to(wide.dtype)
    probs = (unit * weight).sum(-1).softmax(-1)  # [T, m + 1]
    return torch.einsum("tm,tmh->th", probs, wide).to(values.dtype)


class Body(nn.Module):
    def __init__(self, c, steps):
        super().__init__()
        h = c["hidden_size"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], h)
        self.layers = nn.ModuleList(DecoderLayer(c, i, steps) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(h, c["rms_norm_eps"])
        self.attn_res = bool(c.get("attn_res_block_size"))
        if self.attn_res:
            self.output_attn_res_norm = RMSNorm(h, c["rms_norm_eps"])
            self.output_attn_res_proj = nn.Linear(h, 1, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        blocks = []
        for layer in self.layers:
            layer.blocks = blocks
            x = layer(x)
        if self.attn_res and not _off("attn_res"):
            x = attn_res_mix(blocks, x, self.output_attn_res_norm, self.output_attn_res_proj)
        return self.norm(x)


class KimiLinearForCausalLM(nn.Module):
    """Batch of one: forward(ids [1, T]) -> logits [1, T, V]."""

    def __init__(self, c):
        super().__init__()
        self.steps = {"prompt": None}
        self.model = Body(c, self.steps)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def day0_set_prompt_length(self, length):
        """The first `length` tokens of each forward are the prompt (one chunked step)."""
        self.steps["prompt"] = int(length)

    def forward(self, ids):
        return self.lm_head(self.model(ids[0]))[None]


def check_config(c):
    """What this twin does not compute, refused by name."""
    refused = []
    if c.get("hidden_act", "silu") not in ("silu", "situ"):
        refused.append(f"hidden_act {c['hidden_act']}")
    if c.get("moe_router_activation_func", "sigmoid") != "sigmoid":
        refused.append("moe_router_activation_func " + c["moe_router_activation_func"])
    if refused:
        raise NotImplementedError("kimi_linear twin: " + ", ".join(refused))


def load(folder, config, dtype, without, read_safetensors):
    WITHOUT.clear()
    WITHOUT.update(without & SWITCHES)
    c = dict(config.get("text_config") or config)
    k3 = config.get("model_type") == "kimi_k3"
    if k3:
        # The wrapper's fingerprint; the [head_dim] A_log of its KDA layers.
        c.update(model_type="kimi_k3", day0_padded_a_log=True)
    check_config(c)
    model = KimiLinearForCausalLM(c)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update(part)
    if k3:
        # The text model lives under language_model; the MoonViT-3 tower and its projector are
        # not computed (a text prompt never reaches them).
        tensors = {n[len("language_model."):]: t for n, t in tensors.items() if n.startswith("language_model.")}
    if c.get("tie_word_embeddings") and "lm_head.weight" not in tensors:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        raise KeyError(f"{folder}: tensors the kimi_linear twin does not use {unexpected[:5]}")
    model = model.to(dtype)
    model.eval()
    return model, c
