"""Qwen3-Next (qwen3_next) and the text towers of Qwen3.5 (qwen3_5, qwen3_5_moe) for the PyTorch
twin, written from transformers' modeling_qwen3_next.py / modular_qwen3_5.py math.

Layers follow layer_types (or full_attention_interval: layer i is full attention iff
(i + 1) % interval == 0):
- linear_attention: Gated DeltaNet (`linear_attn`). Qwen3-Next projects in_proj_qkvz (rows grouped
  per key head: q, k, the group's v heads, their z) and in_proj_ba (per key head: its b, its a);
  Qwen3.5 projects in_proj_qkv ([q | k | v]), in_proj_z, in_proj_b, in_proj_a. The q|k|v channels
  go through a causal depthwise conv1d (linear_conv_kernel_dim taps, no bias) and SiLU; q and k
  are L2-normalised per head (x / sqrt(sum x^2 + 1e-6)) and repeated onto the value heads (value
  head j reads key head j // (nv / nk)), q scaled by dk^-1/2; beta = sigmoid(b), the decay
  g = -exp(A_log) * softplus(a + dt_bias); the gated delta rule keeps a [nv, dk, dv] state:
  S <- exp(g) S; S <- S + k (beta (v - k^T S))^T; o = q^T S. The output goes through the gated
  RMSNorm (norm(o) * w * silu(z), one head wide, weight as stored) and out_proj.
- full_attention: q_proj emits, per head, the query and a sigmoid output gate; q/k RMSNorms per
  head (1 + w), the rotate-half RoPE on the first head_dim * partial_rotary_factor lanes, GQA
  causal attention, the output times sigmoid(gate), o_proj.
The feed-forward is a SwiGLU MLP (qwen3_5, Qwen3-Next's mlp_only_layers) or a softmax top-k MoE
(top-k renormalised when norm_topk_prob; qwen3_5_moe always) whose shared expert is scaled by
sigmoid(shared_expert_gate(x)). Every other RMSNorm is zero-centred: x_hat * (1 + w).

Both forms of the delta rule are here: the chunked one (the WY form over chunks of
DAY0_TWIN_CHUNK tokens, default 64, as transformers' torch_chunk_gated_delta_rule, with the
partial last chunk padded) and the recurrent one (one token at a time). A forward over T tokens
runs as the engine does: the prompt (day0_set_prompt_length; all T when unset) in the chunked form,
each later token in the recurrent form from the carried state (conv window and delta-rule state).
DAY0_TWIN_GDN_FORM=chunked or recurrent runs every token in that form instead. With
day0_keep_states set on a layer (day0_dump.py --state), the layer leaves its state [nv, dk, dv]
and conv window [K-1, conv_dim] (the last K-1 inputs of the conv) after each step in day0_states.

Everything computes in the input's dtype (the float64 reference stays float64 throughout).

DAY0_TWIN_WITHOUT (day0_torch_models.WITHOUT) switches off: conv (no convolution; SiLU kept),
l2norm, decay (g = 0), beta (beta = 1), state (each decode step starts from a zero conv window
and delta-rule state), gate (both gates below), output_gate (attention without its sigmoid gate),
norm_gate (the gated norm without silu(z)), norm_offset (RMSNorm weights used as w, not 1 + w),
partial_rotary (every lane rotates), shared_expert_gate (the shared expert ungated).
"""

import glob
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

SWITCHES = {"conv", "l2norm", "decay", "beta", "state", "gate", "output_gate", "norm_gate",
            "norm_offset", "partial_rotary", "shared_expert_gate"}

MODEL_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe")

WITHOUT = set()


def _off(feature):
    return feature in WITHOUT or (feature in ("output_gate", "norm_gate") and "gate" in WITHOUT)


def text_config(config):
    """The flat text config: Qwen3.5's text_config with the top-level model_type (day0's
    fingerprint reads it), rope_theta and partial_rotary_factor out of rope_parameters, and
    layer_types from full_attention_interval when absent."""
    c = dict(config.get("text_config") or config)
    c["model_type"] = config["model_type"]
    rope = c.get("rope_parameters") or {}
    c.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    if "partial_rotary_factor" not in c:
        c["partial_rotary_factor"] = rope.get("partial_rotary_factor", 1.0)
    kind = (c.get("rope_scaling") or rope or {}).get("rope_type", "default")
    if kind != "default":
        raise NotImplementedError(f"{c['model_type']}: rope_type {kind} (the twin computes 'default')")
    if not c.get("layer_types"):
        interval = c.get("full_attention_interval", 4)
        c["layer_types"] = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                            for i in range(c["num_hidden_layers"])]
    return c


class ZeroCentredRMSNorm(nn.Module):
    """Qwen3NextRMSNorm: x_hat * (1 + w), in at least fp32 (the float64 reference stays wide)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        w = self.weight.to(h.dtype)
        return (h * (w if _off("norm_offset") else 1.0 + w)).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """Qwen3NextRMSNormGated: norm(x) * w (as stored), times silu(z)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, z):
        wide = torch.promote_types(x.dtype, torch.float32)
        h = x.to(wide)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.weight * h.to(x.dtype)
        if not _off("norm_gate"):
            h = h * F.silu(z.to(wide))
        return h.to(x.dtype)


def l2normalise(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def chunked_delta_rule(q, k, v, g, beta, state, chunk):
    """The chunked (WY) gated delta rule over one sequence: q, k [T, H, dk] (scaled and
    normalised), v [T, H, dv], g, beta [T, H], state [H, dk, dv]; -> (out [T, H, dv], state)."""
    t = q.shape[0]
    pad = (chunk - t % chunk) % chunk
    q, k, v = (F.pad(x.transpose(0, 1), (0, 0, 0, pad)) for x in (q, k, v))  # [H, T', d]
    g, beta = (F.pad(x.transpose(0, 1), (0, pad)) for x in (g, beta))  # [H, T']
    heads, total = q.shape[0], q.shape[1]
    n = total // chunk
    q, k, v = (x.reshape(heads, n, chunk, x.shape[-1]) for x in (q, k, v))
    g, beta = g.reshape(heads, n, chunk), beta.reshape(heads, n, chunk)
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    g = g.cumsum(dim=-1)
    decay = (g[..., :, None] - g[..., None, :]).tril().exp().tril()  # exp(G_i - G_j), j <= i
    strict = torch.triu(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=0)
    # (I + strictly-lower beta_i exp(G_i - G_j) k_i.k_j)^-1 by forward substitution, row after
    # row into new tensors (no in-place update, so that autograd runs through it: --grad).
    a = -((k_beta @ k.transpose(-1, -2)) * decay).masked_fill(strict, 0)
    rows = [a[..., 0, :]]
    for i in range(1, chunk):
        row = a[..., i, :]
        rows.append(row + (row[..., :i, None] * torch.stack(rows, dim=-2)).sum(-2))
    a = torch.stack(rows, dim=-2) + torch.eye(chunk, dtype=a.dtype)
    u = a @ v_beta
    w = a @ (k_beta * g.exp()[..., None])
    out = torch.zeros_like(u)
    above = torch.triu(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=1)
    for c in range(n):
        qc, kc = q[:, c], k[:, c]
        scores = (qc @ kc.transpose(-1, -2) * decay[:, c]).masked_fill(above, 0)
        new_v = u[:, c] - w[:, c] @ state
        out[:, c] = (qc * g[:, c, :, None].exp()) @ state + scores @ new_v
        last = g[:, c, -1]
        state = state * last.exp()[:, None, None] + (
            kc * (last[:, None] - g[:, c]).exp()[..., None]).transpose(-1, -2) @ new_v
    out = out.reshape(heads, total, -1)[:, :t].transpose(0, 1)
    return out, state


def recurrent_delta_rule(q, k, v, g, beta, state):
    """One token at a time: the same arguments and result as chunked_delta_rule."""
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=v.dtype)
    for i in range(q.shape[0]):
        state = state * g[i].exp()[:, None, None]
        remembered = (state * k[i][:, :, None]).sum(dim=-2)  # [H, dv]
        delta = (v[i] - remembered) * beta[i][:, None]
        state = state + k[i][:, :, None] * delta[:, None, :]
        out[i] = (state * q[i][:, :, None]).sum(dim=-2)
    return out, state


class GatedDeltaNet(nn.Module):
    def __init__(self, c, steps):
        super().__init__()
        h = c["hidden_size"]
        self.nk, self.nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.kernel = c["linear_conv_kernel_dim"]
        self.fused = c["model_type"] == "qwen3_next"
        self.steps = steps
        key_dim, value_dim = self.nk * self.dk, self.nv * self.dv
        self.conv_dim = 2 * key_dim + value_dim
        if self.fused:
            self.in_proj_qkvz = nn.Linear(h, 2 * key_dim + 2 * value_dim, bias=False)
            self.in_proj_ba = nn.Linear(h, 2 * self.nv, bias=False)
        else:
            self.in_proj_qkv = nn.Linear(h, self.conv_dim, bias=False)
            self.in_proj_z = nn.Linear(h, value_dim, bias=False)
            self.in_proj_b = nn.Linear(h, self.nv, bias=False)
            self.in_proj_a = nn.Linear(h, self.nv, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                bias=False, padding=self.kernel - 1)
        self.dt_bias = nn.Parameter(torch.ones(self.nv))
        self.A_log = nn.Parameter(torch.zeros(self.nv))
        self.norm = GatedRMSNorm(self.dv, c["rms_norm_eps"])
        self.out_proj = nn.Linear(value_dim, h, bias=False)

    def projections(self, x):
        """(mixed q|k|v [T, conv_dim], z [T, nv, dv], b [T, nv], a [T, nv])."""
        t = x.shape[0]
        if not self.fused:
            return (self.in_proj_qkv(x), self.in_proj_z(x).view(t, self.nv, self.dv),
                    self.in_proj_b(x), self.in_proj_a(x))
        r = self.nv // self.nk
        groups = self.in_proj_qkvz(x).view(t, self.nk, 2 * self.dk + 2 * r * self.dv)
        q, k, v, z = torch.split(groups, [self.dk, self.dk, r * self.dv, r * self.dv], dim=-1)
        b, a = torch.split(self.in_proj_ba(x).view(t, self.nk, 2 * r), [r, r], dim=-1)
        mixed = torch.cat((q.reshape(t, -1), k.reshape(t, -1), v.reshape(t, -1)), dim=-1)
        return mixed, z.reshape(t, self.nv, self.dv), b.reshape(t, self.nv), a.reshape(t, self.nv)

    def convolve(self, mixed, window):
        """Causal depthwise conv + SiLU of mixed [T, C] after the previous `window` [K-1, C]
        inputs; -> (output, the last K-1 inputs)."""
        if _off("conv"):
            return F.silu(mixed), window
        full = torch.cat((window, mixed), dim=0)  # [K-1+T, C]
        out = F.conv1d(full.t()[None], self.conv1d.weight, groups=self.conv_dim)[0].t()
        return F.silu(out), full[-(self.kernel - 1):]

    def mix(self, q, k, v, g, beta, state, form):
        q = q * self.dk ** -0.5
        if form == "chunked":
            return chunked_delta_rule(q, k, v, g, beta, state, int(os.environ.get("DAY0_TWIN_CHUNK", "64")))
        return recurrent_delta_rule(q, k, v, g, beta, state)

    def forward(self, x):
        t = x.shape[0]
        mixed, z, b, a = self.projections(x)
        prompt = self.steps.get("prompt") or t
        forced = os.environ.get("DAY0_TWIN_GDN_FORM", "")
        # Steps as the engine runs them: the prompt in one, then one token at a time.
        bounds = [(0, min(prompt, t))] + [(s, s + 1) for s in range(min(prompt, t), t)]
        if forced == "recurrent":
            bounds = [(s, s + 1) for s in range(t)]
        window = torch.zeros(self.kernel - 1, self.conv_dim, dtype=x.dtype)
        state = torch.zeros(self.nv, self.dk, self.dv, dtype=x.dtype)
        outs = []
        # day0_dump's --state: the conv window and the delta-rule state after each step.
        steps = [] if getattr(self, "day0_keep_states", False) else None
        for first, end in bounds:
            if _off("state") and first > 0:
                window, state = torch.zeros_like(window), torch.zeros_like(state)
            conv, window = self.convolve(mixed[first:end], window)
            n = end - first
            key_dim = self.nk * self.dk
            q = conv[:, :key_dim].reshape(n, self.nk, self.dk)
            k = conv[:, key_dim:2 * key_dim].reshape(n, self.nk, self.dk)
            v = conv[:, 2 * key_dim:].reshape(n, self.nv, self.dv)
            if not _off("l2norm"):
                q, k = l2normalise(q), l2normalise(k)
            r = self.nv // self.nk
            q, k = q.repeat_interleave(r, dim=1), k.repeat_interleave(r, dim=1)
            beta = torch.ones_like(b[first:end]) if _off("beta") else b[first:end].sigmoid()
            g = -self.A_log.exp() * F.softplus(a[first:end] + self.dt_bias)
            if _off("decay"):
                g = torch.zeros_like(g)
            form = forced or ("chunked" if n > 1 else "recurrent")
            o, state = self.mix(q, k, v, g, beta, state, form)
            outs.append(o)
            if steps is not None:
                steps.append((state.clone(), window.clone()))
        if steps is not None:
            self.day0_states = steps
        core = torch.cat(outs, dim=0)  # [T, nv, dv]
        return self.out_proj(self.norm(core, z).reshape(t, -1))


class GatedAttention(nn.Module):
    """Qwen3NextAttention: query and sigmoid gate from q_proj, q/k norms per head, partial RoPE."""

    def __init__(self, c):
        super().__init__()
        h, self.heads, self.kv_heads = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c["head_dim"]
        bias = c.get("attention_bias", False)
        self.q_proj = nn.Linear(h, 2 * self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.q_norm = ZeroCentredRMSNorm(self.head_dim, c["rms_norm_eps"])
        self.k_norm = ZeroCentredRMSNorm(self.head_dim, c["rms_norm_eps"])
        self.rotary = self.head_dim if _off("partial_rotary") else int(self.head_dim * c["partial_rotary_factor"])
        self.theta = float(c["rope_theta"])

    def forward(self, x):
        t, d = x.shape[0], self.head_dim
        q, gate = torch.chunk(self.q_proj(x).view(t, self.heads, 2 * d), 2, dim=-1)
        q = self.q_norm(q)
        k = self.k_norm(self.k_proj(x).view(t, self.kv_heads, d))
        v = self.v_proj(x).view(t, self.kv_heads, d)
        # HF's inverse frequencies are float32 (float64 in the exact gradient reference,
        # day0_torch_models.EXACT, as day0's fp64 engine); the angles and cos/sin are evaluated
        # wide here.
        exact = getattr(sys.modules.get("day0_torch_models"), "EXACT", False) and q.dtype == torch.float64
        steps = torch.arange(0, self.rotary, 2, dtype=torch.int64).to(torch.float64 if exact else torch.float32)
        inv = 1.0 / (self.theta ** (steps / self.rotary))
        angles = torch.arange(t, dtype=torch.float64)[:, None] * inv.double()[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos()[:, None, :].to(q.dtype), angles.sin()[:, None, :].to(q.dtype)

        def rotate(z):
            r, rest = z[..., :self.rotary], z[..., self.rotary:]
            half = self.rotary // 2
            turned = torch.cat((-r[..., half:], r[..., :half]), dim=-1)
            return torch.cat((r * cos + turned * sin, rest), dim=-1)

        q, k = rotate(q), rotate(k)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * d ** -0.5
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=scores.dtype)
        out = torch.einsum("hts,shd->thd", probs, v).reshape(t, -1)
        if not _off("output_gate"):
            out = out * torch.sigmoid(gate.reshape(t, -1))
        return self.o_proj(out)


class SwiGLU(nn.Module):
    def __init__(self, h, inter):
        super().__init__()
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoe(nn.Module):
    """Qwen3NextSparseMoeBlock: softmax router, top-k (renormalised), experts, gated shared expert."""

    def __init__(self, c):
        super().__init__()
        h, e = c["hidden_size"], c["num_experts"]
        self.top_k = c["num_experts_per_tok"]
        self.renormalise = c["model_type"] == "qwen3_5_moe" or c.get("norm_topk_prob", True)
        self.gate = nn.Linear(h, e, bias=False)
        self.experts = nn.ModuleList(SwiGLU(h, c["moe_intermediate_size"]) for _ in range(e))
        self.shared_expert = SwiGLU(h, c["shared_expert_intermediate_size"])
        self.shared_expert_gate = nn.Linear(h, 1, bias=False)

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.promote_types(x.dtype, torch.float32))
        top, selected = torch.topk(probs, self.top_k, dim=-1)
        if self.renormalise:
            top = top / top.sum(dim=-1, keepdim=True)
        self.day0_selected = selected
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            token, slot = torch.where(selected == e)
            if token.numel():
                out.index_add_(0, token, self.experts[e](x[token]) * top[token, slot, None].to(x.dtype))
        shared = self.shared_expert(x)
        if not _off("shared_expert_gate"):
            shared = torch.sigmoid(self.shared_expert_gate(x)) * shared
        return out + shared


def is_moe_layer(c, index):
    if c["model_type"] == "qwen3_5":
        return False
    if c["model_type"] == "qwen3_5_moe":
        return True
    return (c.get("num_experts", 0) > 0 and index not in (c.get("mlp_only_layers") or [])
            and (index + 1) % c.get("decoder_sparse_step", 1) == 0)


class DecoderLayer(nn.Module):
    def __init__(self, c, index, steps):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = ZeroCentredRMSNorm(h, eps)
        self.post_attention_layernorm = ZeroCentredRMSNorm(h, eps)
        self.linear = c["layer_types"][index] == "linear_attention"
        if self.linear:
            self.linear_attn = GatedDeltaNet(c, steps)
        else:
            self.self_attn = GatedAttention(c)
        self.mlp = SparseMoe(c) if is_moe_layer(c, index) else SwiGLU(h, c["intermediate_size"])

    def forward(self, x):
        mixer = self.linear_attn if self.linear else self.self_attn
        x = x + mixer(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c, steps):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, i, steps) for i in range(c["num_hidden_layers"]))
        self.norm = ZeroCentredRMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Qwen3NextForCausalLM(nn.Module):
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


_PACKED = re.compile(r"^(.*\.experts)\.(gate_up_proj|down_proj)$")


def load(folder, config, dtype, without, read_safetensors):
    """(model, flat text config): Qwen3.5's model.language_model.* renamed to model.*, its vision
    tower and every checkpoint's mtp.* dropped, fused experts ([E, 2I, H] gate rows first,
    [E, H, I]) split into per-expert Linears."""
    WITHOUT.clear()
    WITHOUT.update(without & SWITCHES)
    c = text_config(config)
    model = Qwen3NextForCausalLM(c)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update(part)
    prefix = "model.language_model."
    if any(n.startswith(prefix) for n in tensors):
        tensors = {("model." + n[len(prefix):] if n.startswith(prefix) else n): t for n, t in tensors.items()}
    tensors = {n: t for n, t in tensors.items()
               if (n.startswith("model.") and not n.startswith("model.visual.")) or n == "lm_head.weight"}
    inter = c.get("moe_intermediate_size", 0)
    for name in [n for n in tensors if _PACKED.match(n)]:
        base, kind = _PACKED.match(name).groups()
        fused = tensors.pop(name)
        for e in range(fused.shape[0]):
            if kind == "gate_up_proj":
                tensors[f"{base}.{e}.gate_proj.weight"] = fused[e, :inter]
                tensors[f"{base}.{e}.up_proj.weight"] = fused[e, inter:]
            else:
                tensors[f"{base}.{e}.down_proj.weight"] = fused[e]
    if c.get("tie_word_embeddings") and "lm_head.weight" not in tensors:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        raise KeyError(f"{folder}: tensors the {c['model_type']} twin does not use {unexpected[:5]}")
    model = model.to(dtype)
    model.eval()
    return model, c
