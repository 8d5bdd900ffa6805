"""PyTorch twin of DeepSeek-V4 (model_type deepseek_v4), with Hugging Face module names, written
from transformers' modeling_deepseek_v4.py / configuration_deepseek_v4.py (DeepseekV4Attention,
DeepseekV4HCACompressor, DeepseekV4CSACompressor, DeepseekV4Indexer, DeepseekV4HyperConnection,
DeepseekV4HyperHead, DeepseekV4SparseMoeBlock, DeepseekV4TopKRouter, DeepseekV4HashRouter,
DeepseekV4MLP) and reading DeepSeek's native checkpoint names (embed, layers.{i}.attn.wq_a, ...).

What it computes, over the whole sequence at once (HF's stateless path, which the cached path
reproduces step by step):
- the embedding copied into hc_mult streams; per block two hyper-connections: from the streams
  flattened and RMS-normalised (no weight, rms_norm_eps), fn·x gives pre (sigmoid(·scale + base)
  + hc_eps), post (2·sigmoid(·scale + base)) and comb (softmax over the last axis + hc_eps, then
  Sinkhorn: columns, then hc_sinkhorn_iters - 1 times rows and columns, each sum + hc_eps); the
  block input is sum_j pre_j·h_j and the streams become post_k·out + sum_j comb[j, k]·h_j;
- attention: q = RMS(wq_b(q_norm(wq_a(x)))) per head (no weight), kv = kv_norm(wkv(x)), one K=V
  head; interleaved RoPE on the last qk_rope_head_dim lanes (sliding blocks: rope_theta plain;
  compressed blocks: compress_rope_theta with the YaRN of rope_scaling, attention factor 1);
  keys = the window (i - j < sliding_window) plus the compressed entries; scores · head_dim^-1/2,
  a per-head sink in the softmax; the output's rope lanes rotated back (-sin) at the query's
  position; grouped output projection (o_groups blocks of wo_a) then wo_b;
- compressors: ratio 4 (CSA) overlapping (entry w pools window w-1's first half and window w's
  second half of 2·head_dim projections), any other ratio plain; softmax over the window of
  wgate(x) + ape, the weighted sum of wkv(x), norm, RoPE at position w·ratio; entry w is visible
  to query t when w < (t + 1) // ratio;
- the CSA indexer: its own compressor at index_head_dim, q = wq_b(q latent) roped at the query's
  position, score = sum_h weights_proj(x)_h·index_n_heads^-1/2 · relu(q_h·k)·index_head_dim^-1/2;
  each query keeps the top index_topk visible entries;
- MoE: sqrtsoftplus scores sqrt(softplus(x·Wᵀ)), top-k of score + bias (hash layers: tid2eid[id]),
  weights the chosen scores renormalised (sum + 1e-20) times routed_scaling_factor; SwiGLU
  experts and the shared expert with gate clamped above and up both ways at swiglu_limit;
- the head: hc_head collapses the streams (pre only), norm, head.
The MTP blocks are not run (as for DeepSeek-V3).

Test switch (DAY0_TWIN_WITHOUT, see day0_torch_models.WITHOUT): each name computes the model
without one feature, so that a test can show its agreement with the engine depends on it.
"""

import glob
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# DAY0_TWIN_WITHOUT names of this family.
SWITCHES = {
    "window",  # the sliding part sees every earlier token
    "compressor",  # no compressed entries (window only)
    "overlap",  # the ratio-4 compressor pools its own window only
    "indexer",  # CSA queries see every visible compressed entry (no top-k selection)
    "hyper_connections",  # one residual stream, plain adds
    "sinkhorn",  # comb is the softmax, not Sinkhorn-normalised
    "hash_routing",  # hash layers route by top-k scores
    "sqrtsoftplus",  # sigmoid router scores
    "grouped_o_proj",  # heads assigned to output groups round-robin instead of contiguously
    "compress_rope",  # compressed blocks use the sliding blocks' plain RoPE
    "output_rope",  # the attention output's rope lanes are not rotated back
    "q_norm",  # no per-head RMS of q
    "sinks",  # no attention sinks
    "swiglu_clamp",  # no clamp in the SwiGLU
    "shared_expert",  # no shared expert
}


def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.weight * rms(x, self.eps)


def yarn_inv_freq(dim, base, scaling):
    """HF _compute_yarn_parameters' inverse frequencies (truncated correction range)."""
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if not scaling or scaling.get("type", scaling.get("rope_type")) != "yarn":
        return inv
    factor = scaling["factor"]
    original = scaling["original_max_position_embeddings"]
    fast, slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

    def correction(rot):
        return dim * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction(fast)), 0)
    high = min(math.ceil(correction(slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    return inv / factor * (1 - extrapolation) + inv * extrapolation


def rope(x, positions, inv_freq, sign=1.0):
    """Interleaved RoPE on the last 2·len(inv_freq) lanes of x [..., S, heads, D]; positions [S]."""
    rd = 2 * inv_freq.shape[0]
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cos(angles).repeat_interleave(2, -1).to(x.dtype)[:, None, :]
    sin = (sign * torch.sin(angles)).repeat_interleave(2, -1).to(x.dtype)[:, None, :]
    nope, r = x[..., :-rd], x[..., -rd:]
    rotated = torch.stack((-r[..., 1::2], r[..., 0::2]), -1).flatten(-2)
    return torch.cat([nope, r * cos + rotated * sin], -1)


class Compressor(nn.Module):
    """The ratio:1 KV compressor (overlapping for ratio 4)."""

    def __init__(self, c, ratio, width, without):
        super().__init__()
        self.ratio, self.width = ratio, width
        self.overlap = ratio == 4 and "overlap" not in without
        coff = 2 if ratio == 4 else 1
        self.kv_proj = nn.Linear(c["hidden_size"], coff * width, bias=False)
        self.gate_proj = nn.Linear(c["hidden_size"], coff * width, bias=False)
        self.position_bias = nn.Parameter(torch.zeros(ratio, coff * width))
        self.kv_norm = RMSNorm(width, c["rms_norm_eps"])

    def forward(self, x, inv_freq):
        r, d = self.ratio, self.width
        windows = x.shape[0] // r
        kv = self.kv_proj(x[: windows * r]).view(windows, r, -1)
        gate = self.gate_proj(x[: windows * r]).view(windows, r, -1) + self.position_bias
        if kv.shape[-1] == 2 * d:  # ratio 4: Ca = [:d] feeds the next entry, Cb = [d:] this one
            pooled_kv = kv.new_zeros(windows, 2 * r, d)
            pooled_gate = gate.new_full((windows, 2 * r, d), float("-inf"))
            pooled_kv[:, r:], pooled_gate[:, r:] = kv[..., d:], gate[..., d:]
            if self.overlap and windows > 1:
                pooled_kv[1:, :r], pooled_gate[1:, :r] = kv[:-1, :, :d], gate[:-1, :, :d]
            kv, gate = pooled_kv, pooled_gate
        entries = self.kv_norm((kv * gate.softmax(dim=1)).sum(dim=1))
        positions = torch.arange(windows) * r
        return rope(entries[:, None, :], positions, inv_freq)[:, 0, :]


class Indexer(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        self.heads, self.dim, self.top_k = c["index_n_heads"], c["index_head_dim"], c["index_topk"]
        self.compressor = Compressor(c, 4, self.dim, without)
        self.q_b_proj = nn.Linear(c["q_lora_rank"], self.heads * self.dim, bias=False)
        self.weights_proj = nn.Linear(c["hidden_size"], self.heads, bias=False)

    def forward(self, x, q_latent, inv_freq, visible):
        """(top-k entries per query with -1 where none is visible, their scores)."""
        keys = self.compressor(x, inv_freq)  # [T, dim]
        q = self.q_b_proj(q_latent).view(x.shape[0], self.heads, self.dim)
        q = rope(q, torch.arange(x.shape[0]), inv_freq)
        scores = F.relu(torch.einsum("shd,td->sht", q, keys)) * self.dim ** -0.5
        weights = self.weights_proj(x) * self.heads ** -0.5
        scores = (scores * weights[..., None]).sum(1).masked_fill(~visible, float("-inf"))
        k = min(self.top_k, keys.shape[0])
        picked = scores.topk(k, dim=-1).indices
        valid = visible.gather(1, picked)
        picked = torch.where(valid, picked, torch.full_like(picked, -1))
        # Always index_topk columns (-1 beyond the entries there are), as the engine records.
        pad = torch.full((picked.shape[0], self.top_k - k), -1, dtype=picked.dtype)
        return torch.cat([picked, pad], 1), scores


class Attention(nn.Module):
    def __init__(self, c, ratio, without):
        super().__init__()
        self.c, self.ratio, self.without = c, ratio, without
        h, heads, d = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
        self.heads, self.d, self.groups = heads, d, c["o_groups"]
        self.q_a_proj = nn.Linear(h, c["q_lora_rank"], bias=False)
        self.q_a_norm = RMSNorm(c["q_lora_rank"], c["rms_norm_eps"])
        self.q_b_proj = nn.Linear(c["q_lora_rank"], heads * d, bias=False)
        self.kv_proj = nn.Linear(h, d, bias=False)
        self.kv_norm = RMSNorm(d, c["rms_norm_eps"])
        self.o_a_proj = nn.Linear(heads * d // self.groups, self.groups * c["o_lora_rank"], bias=False)
        self.o_b_proj = nn.Linear(self.groups * c["o_lora_rank"], h, bias=False)
        self.sinks = nn.Parameter(torch.zeros(heads))
        if ratio > 0:
            self.compressor = Compressor(c, ratio, d, without)
            if ratio == 4:
                self.compressor.indexer = Indexer(c, without)

    def forward(self, x, inv_freq):
        s, eps = x.shape[0], self.c["rms_norm_eps"]
        positions = torch.arange(s)
        q_latent = self.q_a_norm(self.q_a_proj(x))
        q = self.q_b_proj(q_latent).view(s, self.heads, self.d)
        if "q_norm" not in self.without:
            q = rms(q, eps)
        q = rope(q, positions, inv_freq)
        kv = rope(self.kv_norm(self.kv_proj(x))[:, None, :], positions, inv_freq)[:, 0, :]
        window = self.c["sliding_window"]
        i, j = positions[:, None], positions[None, :]
        allowed = (j <= i) & ((i - j < window) | ("window" in self.without))
        keys = kv
        if self.ratio > 0 and "compressor" not in self.without:
            entries = self.compressor(x, inv_freq)
            visible = torch.arange(entries.shape[0])[None, :] < ((positions + 1) // self.ratio)[:, None]
            if self.ratio == 4:
                picked, _ = self.compressor.indexer(x, q_latent, inv_freq, visible)
                if "indexer" not in self.without:
                    chosen = torch.zeros_like(visible)
                    rows = torch.arange(s)[:, None].expand_as(picked)
                    chosen[rows[picked >= 0], picked[picked >= 0]] = True
                    visible = chosen
            keys = torch.cat([kv, entries], 0)
            allowed = torch.cat([allowed, visible], 1)
        logits = torch.einsum("shd,td->hst", q, keys) * self.d ** -0.5
        logits = logits.masked_fill(~allowed[None], float("-inf"))
        sinks = self.sinks[:, None, None].expand(-1, s, 1)
        if "sinks" in self.without:
            sinks = torch.full_like(sinks, float("-inf"))
        probs = torch.cat([logits, sinks], -1).softmax(-1)[..., :-1]
        out = torch.einsum("hst,td->shd", probs, keys)
        if "output_rope" not in self.without:
            out = rope(out, positions, inv_freq, sign=-1.0)
        if "grouped_o_proj" in self.without:
            out = out.view(s, self.heads // self.groups, self.groups, self.d).transpose(1, 2)
        grouped = out.reshape(s, self.groups, -1)
        w = self.o_a_proj.weight.view(self.groups, -1, grouped.shape[-1])
        return self.o_b_proj(torch.einsum("sgi,goi->sgo", grouped, w).reshape(s, -1))


class HyperConnection(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        n = c["hc_mult"]
        self.n, self.c, self.without = n, c, without
        self.fn = nn.Parameter(torch.zeros((2 + n) * n, n * c["hidden_size"]))
        self.base = nn.Parameter(torch.zeros((2 + n) * n))
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, streams):
        """(post [S, n], comb [S, n, n], collapsed [S, D]) of streams [S, n, D]."""
        n, eps = self.n, self.c["hc_eps"]
        mixes = F.linear(rms(streams.flatten(1), self.c["rms_norm_eps"]), self.fn)
        pre_w, post_w, comb_w = mixes.split([n, n, n * n], -1)
        pre_b, post_b, comb_b = self.base.split([n, n, n * n])
        pre = torch.sigmoid(pre_w * self.scale[0] + pre_b) + eps
        post = 2 * torch.sigmoid(post_w * self.scale[1] + post_b)
        comb = torch.softmax(comb_w.view(-1, n, n) * self.scale[2] + comb_b.view(n, n), -1) + eps
        if "sinkhorn" not in self.without:
            comb = comb / (comb.sum(-2, keepdim=True) + eps)
            for _ in range(self.c["hc_sinkhorn_iters"] - 1):
                comb = comb / (comb.sum(-1, keepdim=True) + eps)
                comb = comb / (comb.sum(-2, keepdim=True) + eps)
        return post, comb, (pre[..., None] * streams).sum(1)


class HyperHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        n = c["hc_mult"]
        self.c = c
        self.hc_fn = nn.Parameter(torch.zeros(n, n * c["hidden_size"]))
        self.hc_base = nn.Parameter(torch.zeros(n))
        self.hc_scale = nn.Parameter(torch.ones(1))

    def forward(self, streams):
        mixes = F.linear(rms(streams.flatten(1), self.c["rms_norm_eps"]), self.hc_fn)
        pre = torch.sigmoid(mixes * self.hc_scale + self.hc_base) + self.c["hc_eps"]
        return (pre[..., None] * streams).sum(1)


class MLP(nn.Module):
    def __init__(self, h, width, limit, without):
        super().__init__()
        self.gate_proj = nn.Linear(h, width, bias=False)
        self.up_proj = nn.Linear(h, width, bias=False)
        self.down_proj = nn.Linear(width, h, bias=False)
        self.limit = None if "swiglu_clamp" in without or not limit else limit

    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        if self.limit is not None:
            gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        return self.down_proj(F.silu(gate) * up)


class Gate(nn.Module):
    def __init__(self, c, hashed):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c["n_routed_experts"], c["hidden_size"]))
        if hashed:
            self.register_buffer("tid2eid", torch.zeros(c["vocab_size"], c["num_experts_per_tok"],
                                                        dtype=torch.long))
        else:
            self.e_score_correction_bias = nn.Parameter(torch.zeros(c["n_routed_experts"]))


class MoE(nn.Module):
    def __init__(self, c, hashed, without):
        super().__init__()
        self.c, self.without = c, without
        self.hashed = hashed and "hash_routing" not in without
        self.gate = Gate(c, hashed)
        h, w, limit = c["hidden_size"], c["moe_intermediate_size"], c.get("swiglu_limit", 0.0)
        self.experts = nn.ModuleList([MLP(h, w, limit, without) for _ in range(c["n_routed_experts"])])
        self.shared_experts = MLP(h, w, limit, without)
        self.day0_selected = None

    def forward(self, x, ids):
        logits = F.linear(x, self.gate.weight)
        if "sqrtsoftplus" in self.without:
            scores = torch.sigmoid(logits)
        else:
            scores = torch.sqrt(F.softplus(logits))
        k = self.c["num_experts_per_tok"]
        if self.hashed:
            chosen = self.gate.tid2eid[ids]
        else:
            bias = getattr(self.gate, "e_score_correction_bias", None)
            ranked = scores + bias if bias is not None else scores
            chosen = ranked.topk(k, dim=-1).indices
        weights = scores.gather(1, chosen)
        if self.c.get("norm_topk_prob", True):
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = weights * self.c.get("routed_scaling_factor", 1.0)
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for slot in range(k):
                out[t] += weights[t, slot] * self.experts[int(chosen[t, slot])](x[t])
        self.day0_selected = chosen
        if "shared_expert" not in self.without:
            out = out + self.shared_experts(x)
        return out


class Layer(nn.Module):
    def __init__(self, c, index, without):
        super().__init__()
        ratio = c["compress_ratios"][index]
        self.c, self.without = c, without
        self.self_attn = Attention(c, ratio, without)
        self.mlp = MoE(c, index < c.get("num_hash_layers", 0), without)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.attn_hc = HyperConnection(c, without)
        self.ffn_hc = HyperConnection(c, without)
        compressed = ratio > 0 and "compress_rope" not in without
        dim = c["qk_rope_head_dim"]
        self.register_buffer("inv_freq", yarn_inv_freq(dim, c["compress_rope_theta"], c.get("rope_scaling"))
                             if compressed else yarn_inv_freq(dim, c["rope_theta"], None), persistent=False)

    def forward(self, streams, ids):
        if "hyper_connections" in self.without:  # streams: [S, 1, D]
            h = streams[:, 0]
            h = h + self.self_attn(self.input_layernorm(h), self.inv_freq)
            h = h + self.mlp(self.post_attention_layernorm(h), ids)
            return h[:, None]
        post, comb, collapsed = self.attn_hc(streams)
        out = self.self_attn(self.input_layernorm(collapsed), self.inv_freq)
        streams = post[..., None] * out[:, None, :] + torch.einsum("sjk,sjd->skd", comb, streams)
        post, comb, collapsed = self.ffn_hc(streams)
        out = self.mlp(self.post_attention_layernorm(collapsed), ids)
        return post[..., None] * out[:, None, :] + torch.einsum("sjk,sjd->skd", comb, streams)


class Model(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        self.c, self.without = c, without
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c, i, without) for i in range(c["num_hidden_layers"])])
        self.hc_head = HyperHead(c)
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        x = self.embed_tokens(ids)
        streams = 1 if "hyper_connections" in self.without else self.c["hc_mult"]
        h = x[:, None, :].expand(-1, streams, -1).contiguous()
        for layer in self.layers:
            h = layer(h, ids)
        h = h[:, 0] if "hyper_connections" in self.without else self.hc_head(h)
        return self.norm(h)


class DeepseekV4ForCausalLM(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        self.model = Model(c, without)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids[0]))[None]


def hf_name(native):
    """The twin's module name of a native DeepSeek-V4 checkpoint tensor; None for MTP tensors."""
    if native.startswith("mtp."):
        return None
    top = {"embed.weight": "model.embed_tokens.weight", "head.weight": "lm_head.weight",
           "norm.weight": "model.norm.weight", "hc_head_fn": "model.hc_head.hc_fn",
           "hc_head_base": "model.hc_head.hc_base", "hc_head_scale": "model.hc_head.hc_scale"}
    if native in top:
        return top[native]
    parts = native.split(".")
    prefix, rest = "model.layers." + parts[1], ".".join(parts[2:])
    for old, new in (("attn_norm.", "input_layernorm."), ("ffn_norm.", "post_attention_layernorm."),
                     ("hc_attn_", "attn_hc."), ("hc_ffn_", "ffn_hc."),
                     ("attn.indexer.compressor.", "self_attn.compressor.indexer.compressor."),
                     ("attn.indexer.", "self_attn.compressor.indexer."),
                     ("attn.attn_sink", "self_attn.sinks"), ("attn.", "self_attn."),
                     ("ffn.gate.bias", "mlp.gate.e_score_correction_bias"), ("ffn.", "mlp.")):
        if rest.startswith(old):
            rest = new + rest[len(old):]
            break
    leaf = {"wq_a": "q_a_proj", "q_norm": "q_a_norm", "wq_b": "q_b_proj", "wkv": "kv_proj",
            "wo_a": "o_a_proj", "wo_b": "o_b_proj", "wgate": "gate_proj", "ape": "position_bias",
            "w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}
    pieces = rest.split(".")
    pieces = [leaf.get(p, p) for p in pieces]
    # The compressors' norm is their kv_norm; the attention's own kv_norm keeps its name.
    if len(pieces) >= 2 and pieces[-2] == "norm" and "compressor" in pieces:
        pieces[-2] = "kv_norm"
    return prefix + "." + ".".join(pieces)


def load(folder, config, dtype, without, read_safetensors):
    """(model, config) of a deepseek_v4 checkpoint without quantisation."""
    if config.get("quantization_config"):
        raise NotImplementedError("the deepseek_v4 twin reads unquantised checkpoints (shrink the "
                                  "config without quantization_config)")
    c = dict(config)
    c.setdefault("rope_theta", 10000.0)
    c.setdefault("compress_rope_theta", 160000.0)
    c.setdefault("hc_sinkhorn_iters", 20)
    c.setdefault("hc_eps", 1e-6)
    model = DeepseekV4ForCausalLM(c, without & SWITCHES)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update(part)
    state = {}
    for name, t in tensors.items():
        mapped = hf_name(name)
        if mapped is None:
            continue
        if mapped.endswith("tid2eid"):
            state[mapped] = torch.from_numpy(np.ascontiguousarray(t, dtype=np.int64))
        else:
            state[mapped] = torch.from_numpy(np.ascontiguousarray(t, dtype=np.float64))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("inv_freq")]
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        raise KeyError(f"{folder}: tensors the deepseek_v4 twin does not use {unexpected[:5]}")
    model = model.to(dtype)
    for layer in model.model.layers:  # the tables stay float64; the rotation casts to x's dtype
        layer.inv_freq = layer.inv_freq.double()
    model.eval()
    return model, c
