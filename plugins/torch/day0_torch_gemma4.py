"""PyTorch twin of Gemma-4's text tower (model_type gemma4 / gemma4_text), with Hugging Face
module names, written from transformers' modeling_gemma4.py (Gemma4TextModel,
Gemma4TextDecoderLayer, Gemma4TextAttention, Gemma4TextRouter, Gemma4TextExperts, Gemma4RMSNorm,
Gemma4TextScaledWordEmbedding, Gemma4ForCausalLM) and modeling_rope_utils.py's proportional RoPE.

What it computes: the embedding times sqrt(hidden_size); Gemma4RMSNorm x * (mean(x^2) + eps)^-1/2
* w (the weight as stored; v_norm and the router's norm have none); per layer input_layernorm ->
attention -> post_attention_layernorm -> residual, then pre_feedforward_layernorm -> gated MLP
(gelu tanh), with enable_moe_block plus post_feedforward_layernorm_1(mlp) +
post_feedforward_layernorm_2(experts(pre_feedforward_layernorm_2(residual))), then
post_feedforward_layernorm -> residual, times layer_scalar; attention with q_norm/k_norm before
RoPE, weightless v_norm, scaling 1, a window on sliding layers, global_head_dim and
num_global_key_value_heads on full layers, values = raw k_proj output with attention_k_eq_v;
RoPE per layer type (default, proportional); the router softmax(proj(norm(x) * scale *
h^-1/2)), top-k, renormalised, times per_expert_scale; logits soft-capped. Per-layer input
embeddings (Gemma4TextModel.get_per_layer_inputs / project_per_layer_inputs and the decoder
layer's per_layer_input_gate branch) and KV-shared layers (Gemma4TextAttention.is_kv_shared_layer
reading shared_kv_states of the last unshared layer of their kind, store_full_length_kv; twice
as wide MLPs with use_double_wide_mlp). The vision tower is day0_torch_gemma4_vision.py (built
for an --image run); the audio tower is not built.

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
    "embed_scale",  # no sqrt(hidden_size) on the embedding
    "plain_norm_weight",  # RMSNorm weights used as 1 + w (Gemma 1-3) instead of w
    "sandwich_norms",  # no post_attention_layernorm / post_feedforward_layernorm(_1, _2)
    "qk_norm",  # no q_norm / k_norm
    "v_norm",  # no v_norm
    "attention_scaling",  # 1/sqrt(head_dim) instead of 1
    "window",  # sliding layers attend to everything
    "proportional_rope",  # full layers rotate their first partial * d lanes (plain partial RoPE)
    "k_eq_v",  # attention_k_eq_v values taken after k_norm instead of from the raw k_proj
    "moe",  # no MoE branch beside the dense MLP
    "moe_residual_input",  # router and experts fed the MLP's normalised input, not the residual
    "router_scale",  # no learned router.scale
    "per_expert_scale",  # no router.per_expert_scale
    "layer_scalar",  # no layer_scalar
    "softcap",  # no final logit soft-capping
    "per_layer_inputs",  # no per-layer input branch
    "ple_token",  # per-layer inputs without embed_tokens_per_layer (the projection only)
    "ple_context",  # per-layer inputs without per_layer_model_projection (the token rows only)
    "kv_sharing",  # KV-shared layers project their own keys and values (the shipped k/v_proj)
    # The vision path (day0_torch_gemma4_vision.py):
    "vision_position_table",  # no learned position rows on the patch embedding
    "vision_rope",  # no 2-D rotary in the vision attention
    "vision_pool_by_position",  # pool k*k consecutive patches instead of k x k blocks
    "vision_standardize",  # no std_bias / std_scale
    "image_bidirectional",  # image rows attend causally (no "vision" blockwise overlay)
}


def text_config(config):
    """The text config with Gemma4TextConfig's defaults where the keys this twin reads are absent;
    model_type and the MoE counts as day0's fingerprint reads them."""
    c = dict(config.get("text_config") or config)
    c["model_type"] = config.get("model_type", "gemma4")
    defaults = {"hidden_size": 2304, "num_hidden_layers": 30, "num_attention_heads": 8,
                "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
                "vocab_size": 262144, "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
                "attention_bias": False, "sliding_window": 512, "global_head_dim": 512,
                "attention_k_eq_v": False, "num_kv_shared_layers": 0, "enable_moe_block": False,
                "hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144,
                "use_double_wide_mlp": False, "final_logit_softcapping": None}
    for key, value in defaults.items():
        c.setdefault(key, value)
    n = c["num_hidden_layers"]
    if not c.get("layer_types"):
        c["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    c["layer_types"] = list(c["layer_types"])
    c["layer_types"][-1] = "full_attention"  # as Gemma4TextConfig forces it
    if c.get("use_bidirectional_attention") == "all":
        raise NotImplementedError("gemma4: use_bidirectional_attention 'all' is not in the twin")
    if c["hidden_activation"] not in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        raise NotImplementedError(f"gemma4: activation {c['hidden_activation']}")
    if c["enable_moe_block"]:
        c["num_experts_per_tok"] = c["top_k_experts"]
    else:
        c["num_experts"] = None
    return c


class Gemma4RMSNorm(nn.Module):
    """Gemma4RMSNorm in (at least) fp32, scaled by the weight as stored (with_scale False: none);
    float64 inputs stay float64."""

    def __init__(self, dim, eps, with_scale=True):
        super().__init__()
        self.eps = eps
        if with_scale:
            self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, without=frozenset()):
        dtype = x.dtype
        h = x.to(torch.promote_types(dtype, torch.float32))
        h = h * torch.pow(h.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        if hasattr(self, "weight"):
            w = self.weight.to(h.dtype)
            h = h * ((1 + w) if "plain_norm_weight" in without else w)
        return h.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_inv_freq(params, dim, wide, proportional_off):
    """The inverse frequencies of one layer type over a head of `dim` lanes ([dim / 2])."""
    ftype = torch.float64 if wide else torch.float32
    base = params.get("rope_theta", 10000.0)
    kind = params.get("rope_type", "default")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(ftype) / dim
    if kind == "default":
        return 1.0 / (base ** exponents)
    if kind != "proportional":
        raise NotImplementedError(f"gemma4: rope_type {kind}")
    partial = params.get("partial_rotary_factor", 1.0)
    factor = params.get("factor", 1.0)
    angles = int(partial * dim // 2)
    if proportional_off:
        # What a plain partial RoPE would do: rotate the first partial * dim lanes as a head of
        # their own (pairs i, i + rotary / 2), the rest unrotated; returned over the whole head by
        # the caller's rotate_partial.
        rotary = int(dim * partial)
        return 1.0 / (base ** (torch.arange(0, rotary, 2, dtype=torch.int64).to(ftype) / rotary)) / factor
    inv = 1.0 / (base ** exponents[:angles])
    return torch.cat((inv, torch.zeros(dim // 2 - angles, dtype=ftype))) / factor


class Gemma4TextAttention(nn.Module):
    def __init__(self, c, index, without):
        super().__init__()
        self.without = without
        first_shared = c["num_hidden_layers"] - (c.get("num_kv_shared_layers") or 0)
        self.layer_type = c["layer_types"][index]
        self.kv_shared = index >= first_shared and "kv_sharing" not in without
        earlier = c["layer_types"][:first_shared]
        # store_full_length_kv: the last unshared layer of its kind hands its keys and values on.
        self.store = (index < first_shared and self.layer_type in earlier
                      and index == len(earlier) - 1 - earlier[::-1].index(self.layer_type))
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.sliding = c["layer_types"][index] == "sliding_attention"
        self.head_dim = c["head_dim"] if self.sliding or not c.get("global_head_dim") else c["global_head_dim"]
        self.k_eq_v = bool(c.get("attention_k_eq_v")) and not self.sliding
        self.kv_heads = c["num_global_key_value_heads"] if self.k_eq_v else c["num_key_value_heads"]
        self.window = c["sliding_window"] if self.sliding and "window" not in without else 0
        bias = bool(c.get("attention_bias"))
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        if not self.kv_shared:
            self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
            if not self.k_eq_v:
                self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        eps = c["rms_norm_eps"]
        self.q_norm = Gemma4RMSNorm(self.head_dim, eps)
        if not self.kv_shared:
            self.k_norm = Gemma4RMSNorm(self.head_dim, eps)
        self.v_norm = Gemma4RMSNorm(self.head_dim, eps, with_scale=False)
        rope = c.get("rope_parameters") or {}
        kind = "sliding_attention" if self.sliding else "full_attention"
        self.rope_params = rope.get(kind) or rope
        self.partial_off = (not self.sliding and "proportional_rope" in without
                            and self.rope_params.get("rope_type") == "proportional")
        self.scaling = self.head_dim ** -0.5 if "attention_scaling" in without else 1.0

    def rope(self, x, positions):
        wide = x.dtype == torch.float64
        inv = rope_inv_freq(self.rope_params, self.head_dim, wide, self.partial_off)
        angles = positions.to(torch.float64)[:, None] * inv.to(torch.float64)[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos()[:, None, :].to(x.dtype), emb.sin()[:, None, :].to(x.dtype)
        if self.partial_off:
            rotary = cos.shape[-1]
            turned, rest = x[..., :rotary], x[..., rotary:]
            return torch.cat((turned * cos + rotate_half(turned) * sin, rest), dim=-1)
        return x * cos + rotate_half(x) * sin

    def forward(self, x, shared_kv):
        t, w = x.shape[0], self.without
        positions = torch.arange(t)
        q = self.q_proj(x).view(t, self.heads, self.head_dim)
        if "qk_norm" not in w:
            q = self.q_norm(q, w)
        q = self.rope(q, positions)
        if self.kv_shared:
            k, v = shared_kv[self.layer_type]
        else:
            raw_k = self.k_proj(x).view(t, self.kv_heads, self.head_dim)
            k = raw_k if "qk_norm" in w else self.k_norm(raw_k, w)
            if self.k_eq_v:
                v = k if "k_eq_v" in w else raw_k
            else:
                v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
            if "v_norm" not in w:
                v = self.v_norm(v)
            k = self.rope(k, positions)
        if self.store:
            shared_kv[self.layer_type] = (k, v)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * self.scaling
        pos = torch.arange(t)
        allowed = pos[None, :] <= pos[:, None]
        if self.window > 0:
            allowed = allowed & (pos[None, :] > pos[:, None] - self.window)
        block = getattr(self, "day0_block", None)  # image runs (day0_torch_gemma4_vision.py)
        if block is not None:
            allowed = allowed | ((block[:, None] == block[None, :]) & (block[:, None] >= 0))
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=scores.dtype).to(v.dtype)
        return self.o_proj(torch.einsum("hts,shd->thd", probs, v).reshape(t, -1))


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


class Gemma4TextMLP(nn.Module):
    def __init__(self, h, inter):
        super().__init__()
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.down_proj(gelu_tanh(self.gate_proj(x)) * self.up_proj(x))


class Gemma4TextRouter(nn.Module):
    """Returns the expert scores over all experts (the router anchor); the layer takes the
    softmax, top-k, renormalisation and per_expert_scale."""

    def __init__(self, c, without):
        super().__init__()
        h, e = c["hidden_size"], c["num_experts"]
        self.without = without
        self.norm = Gemma4RMSNorm(h, c["rms_norm_eps"], with_scale=False)
        self.proj = nn.Linear(h, e, bias=False)
        self.scale = nn.Parameter(torch.ones(h))
        self.per_expert_scale = nn.Parameter(torch.ones(e))
        self.root = h ** -0.5

    def forward(self, x):
        x = self.norm(x)
        if "router_scale" not in self.without:
            x = x * self.scale.to(x.dtype)
        return self.proj(x * self.root)


class Gemma4TextExperts(nn.Module):
    """Fused experts as Gemma4TextExperts stores them: gate_up_proj [E, 2I, H] (gate the first I
    rows), down_proj [E, H, I]."""

    def __init__(self, c):
        super().__init__()
        e, h, inter = c["num_experts"], c["hidden_size"], c["moe_intermediate_size"]
        self.gate_up_proj = nn.Parameter(torch.zeros(e, 2 * inter, h))
        self.down_proj = nn.Parameter(torch.zeros(e, h, inter))

    def forward(self, x, selected, weights):
        out = torch.zeros_like(x)
        for e in range(self.gate_up_proj.shape[0]):
            token, slot = torch.where(selected == e)
            if token.numel():
                gate, up = F.linear(x[token], self.gate_up_proj[e]).chunk(2, dim=-1)
                y = F.linear(gelu_tanh(gate) * up, self.down_proj[e])
                out.index_add_(0, token, y * weights[token, slot, None].to(y.dtype))
        return out


class Gemma4TextDecoderLayer(nn.Module):
    def __init__(self, c, index, without):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.without = without
        self.self_attn = Gemma4TextAttention(c, index, without)
        # Gemma4TextMLP: twice as wide on the KV-shared layers with use_double_wide_mlp.
        first_shared = c["num_hidden_layers"] - (c.get("num_kv_shared_layers") or 0)
        double = c.get("use_double_wide_mlp") and index >= first_shared > 0
        self.mlp = Gemma4TextMLP(h, c["intermediate_size"] * (2 if double else 1))
        self.ple = c.get("hidden_size_per_layer_input") or 0
        if self.ple:
            self.per_layer_input_gate = nn.Linear(h, self.ple, bias=False)
            self.per_layer_projection = nn.Linear(self.ple, h, bias=False)
            self.post_per_layer_input_norm = Gemma4RMSNorm(h, eps)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            setattr(self, name, Gemma4RMSNorm(h, eps))
        # A buffer in HF (Gemma4TextDecoderLayer), not a parameter: no gradient reaches it.
        self.register_buffer("layer_scalar", torch.ones(1))
        self.moe = bool(c.get("enable_moe_block"))
        if self.moe:
            self.top_k = c["top_k_experts"]
            self.router = Gemma4TextRouter(c, without)
            self.experts = Gemma4TextExperts(c)
            for name in ("pre_feedforward_layernorm_2", "post_feedforward_layernorm_1",
                         "post_feedforward_layernorm_2"):
                setattr(self, name, Gemma4RMSNorm(h, eps))
            self.day0_router = "router"

    def norm(self, name, x):
        return getattr(self, name)(x, self.without)

    def forward(self, x, shared_kv, per_layer_input):
        w = self.without
        post = "sandwich_norms" not in w
        a = self.self_attn(self.norm("input_layernorm", x), shared_kv)
        x = x + (self.norm("post_attention_layernorm", a) if post else a)
        residual = x
        normed = self.norm("pre_feedforward_layernorm", x)
        y = self.mlp(normed)
        if self.moe and "moe" not in w:
            y1 = self.norm("post_feedforward_layernorm_1", y) if post else y
            source = normed if "moe_residual_input" in w else residual
            logits = self.router(source)
            probs = F.softmax(logits, dim=-1, dtype=logits.dtype)
            top, selected = torch.topk(probs, self.top_k, dim=-1)
            top = top / top.sum(dim=-1, keepdim=True)
            if "per_expert_scale" not in w:
                top = top * self.router.per_expert_scale.to(top.dtype)[selected]
            self.day0_selected = selected
            y2 = self.experts(self.norm("pre_feedforward_layernorm_2", source), selected, top)
            y = y1 + (self.norm("post_feedforward_layernorm_2", y2) if post else y2)
        x = residual + (self.norm("post_feedforward_layernorm", y) if post else y)
        if self.ple and "per_layer_inputs" not in w:
            g = gelu_tanh(self.per_layer_input_gate(x)) * per_layer_input
            x = x + self.norm("post_per_layer_input_norm", self.per_layer_projection(g))
        if "layer_scalar" not in w:
            x = x * self.layer_scalar.to(x.dtype)
        return x


class Gemma4ScaledEmbedding(nn.Embedding):
    """Gemma4TextScaledWordEmbedding: the lookup times sqrt(hidden_size) taken in the weights'
    dtype."""

    def __init__(self, vocab, h, without):
        super().__init__(vocab, h)
        self.scale = 1.0 if "embed_scale" in without else h ** 0.5

    def forward(self, ids):
        return super().forward(ids) * torch.tensor(self.scale, dtype=torch.float64).to(self.weight.dtype)


class Gemma4TextModel(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        self.without = without
        h, n = c["hidden_size"], c["num_hidden_layers"]
        self.embed_tokens = Gemma4ScaledEmbedding(c["vocab_size"], h, without)
        self.layers = nn.ModuleList(Gemma4TextDecoderLayer(c, i, without) for i in range(n))
        self.norm = Gemma4RMSNorm(h, c["rms_norm_eps"])
        self.ple = c.get("hidden_size_per_layer_input") or 0
        if self.ple:
            # Per-layer embeddings: the token rows scaled by sqrt(width) (in the weights' dtype),
            # and the embedding's projection scaled by h^-1/2 and normalised per layer.
            self.embed_tokens_per_layer = nn.Embedding(c["vocab_size_per_layer_input"], n * self.ple)
            self.per_layer_model_projection = nn.Linear(h, n * self.ple, bias=False)
            self.per_layer_projection_norm = Gemma4RMSNorm(self.ple, c["rms_norm_eps"])

    def per_layer_inputs(self, ids, x):
        n, w = len(self.layers), self.without
        dtype = self.embed_tokens_per_layer.weight.dtype
        scale = torch.tensor(self.ple ** 0.5, dtype=torch.float64).to(dtype)
        token = (self.embed_tokens_per_layer(ids) * scale).view(-1, n, self.ple)
        context = self.per_layer_model_projection(x) * (x.shape[-1] ** -0.5)
        context = self.per_layer_projection_norm(context.view(-1, n, self.ple), w)
        if "ple_token" in w:
            return context
        if "ple_context" in w:
            return token
        return (context + token) * (2.0 ** -0.5)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        inputs = self.per_layer_inputs(ids, x) if self.ple else None
        shared_kv = {}
        for i, layer in enumerate(self.layers):
            x = layer(x, shared_kv, inputs[:, i, :] if inputs is not None else None)
        return self.norm(x, self.without)


class Gemma4LMHead(nn.Linear):
    """lm_head with Gemma4ForCausalLM's final soft-capping, so that the lm_head anchor holds the
    model's logits (cap * tanh(logits / cap))."""

    def __init__(self, h, vocab, cap):
        super().__init__(h, vocab, bias=False)
        self.cap = cap

    def forward(self, x):
        logits = super().forward(x)
        if self.cap:
            logits = torch.tanh(logits / self.cap) * self.cap
        return logits


class Gemma4ForCausalLM(nn.Module):
    """Batch of one: forward(ids [1, T]) -> logits [1, T, V]; modules see [T, H]."""

    def __init__(self, c, without):
        super().__init__()
        self.model = Gemma4TextModel(c, without)
        cap = None if "softcap" in without else c.get("final_logit_softcapping")
        self.lm_head = Gemma4LMHead(c["hidden_size"], c["vocab_size"], cap)

    def forward(self, ids):
        return self.lm_head(self.model(ids[0]))[None]


def load(folder, config, dtype, without, read_safetensors):
    """(model, flat text config) of a gemma4 checkpoint: the text tower's tensors renamed from
    model.language_model.* (Gemma4ForConditionalGeneration) to model.*; the towers' dropped."""
    c = text_config(config)
    model = Gemma4ForCausalLM(c, without & SWITCHES)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update(part)
    prefix = "model.language_model."
    if any(n.startswith(prefix) for n in tensors):
        tensors = {"model." + n[len(prefix):]: t for n, t in tensors.items() if n.startswith(prefix)}
    tensors = {n: t for n, t in tensors.items() if n.startswith("model.") or n == "lm_head.weight"}
    # The KV-shared layers' k_proj / v_proj / k_norm that the checkpoints ship and HF ignores
    # (Gemma4TextModel._keys_to_ignore_on_load_unexpected).
    expected = set(model.state_dict())
    tensors = {n: t for n, t in tensors.items()
               if n in expected or not any(n.endswith(f".self_attn.{m}.weight")
                                           for m in ("k_proj", "v_proj", "k_norm"))}
    if "lm_head.weight" not in tensors:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]  # tied (the default)
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        raise KeyError(f"{folder}: tensors the gemma4 twin does not use {unexpected[:5]}")
    model = model.to(dtype)
    model.eval()
    return model, c
