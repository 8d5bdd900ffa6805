"""PyTorch twin of Gemma-4's vision path (model_type gemma4 with a gemma4_vision vision_config),
with Hugging Face module names, written from transformers' modeling_gemma4.py
(Gemma4VisionModel, Gemma4VisionPatchEmbedder, Gemma4VisionEncoder / EncoderLayer /
Attention / MLP, Gemma4VisionRotaryEmbedding with apply_multidimensional_rope,
Gemma4VisionPooler, Gemma4MultimodalEmbedder, Gemma4Model.forward's masked_scatter of the image
features and its use_bidirectional_attention "vision" mask) and image_processing_gemma4.py
(convert_image_to_patches and the (x, y) patch positions), for an image whose sides are already
multiples of patch_size * pooling_kernel_size (no resize).

What it computes: pixels / 255 cut into patches in raster order, each flattened (y, x, channel);
input_proj(2 * (p - 0.5)) plus position_embedding_table[0][x] + [1][y] (a one-hot product in HF);
per encoder layer input_layernorm -> attention -> post_attention_layernorm -> residual,
pre_feedforward_layernorm -> down(gelu_tanh(gate) * up) -> post_feedforward_layernorm ->
residual, where the attention normalises q and k per head (weighted RMSNorm) and v (no weight),
rotates the first half of each head by the patch's x and the second half by its y (rotate-half
within each half, theta from rope_parameters), scales q.k by 1 and lets every patch see every
patch; then each k x k block of patches (by position, soft token x/k + (W/k) * (y/k)) averaged
and times sqrt(hidden), (h - std_bias) * std_scale with standardize; embed_vision: a weightless
RMSNorm and a projection to the text width. The text tower embeds the image rows as the pad
token and the features replace them; with use_bidirectional_attention "vision" the image rows
attend to each other both ways (on top of the causal and sliding masks).

Test switches (DAY0_TWIN_WITHOUT, listed in day0_torch_gemma4.SWITCHES):
vision_position_table (no learned position rows), vision_rope (no 2-D rotary),
vision_pool_by_position (the pool takes k*k consecutive patches instead of k x k blocks),
vision_standardize (no std_bias / std_scale), image_bidirectional (image rows causal).
"""

import glob
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from day0_torch_gemma4 import Gemma4RMSNorm


def vision_config(config):
    v = dict(config["vision_config"])
    defaults = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16,
                "num_attention_heads": 12, "head_dim": 64, "patch_size": 16,
                "position_embedding_size": 10240, "pooling_kernel_size": 3, "rms_norm_eps": 1e-6,
                "standardize": False, "use_clipped_linears": False,
                "hidden_activation": "gelu_pytorch_tanh"}
    for key, value in defaults.items():
        v.setdefault(key, value)
    v.setdefault("num_key_value_heads", v["num_attention_heads"])
    v["rope_theta"] = (v.get("rope_parameters") or {}).get("rope_theta", 100.0)
    if v["hidden_activation"] not in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        raise NotImplementedError(f"gemma4 vision: activation {v['hidden_activation']}")
    return v


def image_inputs(rgb, v):
    """uint8 [H, W, 3] -> (pixel rows [N, 3 * p * p] in [0, 1], positions [N, 2] as (x, y))."""
    p, k = v["patch_size"], v["pooling_kernel_size"]
    h, w, _ = rgb.shape
    if h % (p * k) or w % (p * k):
        raise ValueError(f"image {h}x{w}: sides must be multiples of {p * k}")
    img = torch.from_numpy(rgb.astype(np.float64) / 255.0)  # [H, W, C]
    gh, gw = h // p, w // p
    rows = img.reshape(gh, p, gw, p, 3).permute(0, 2, 1, 3, 4).reshape(gh * gw, p * p * 3)
    ys, xs = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    positions = torch.stack((xs.reshape(-1), ys.reshape(-1)), dim=-1)
    return rows, positions


class ClippableLinear(nn.Module):
    """Gemma4ClippableLinear: nn.Linear at `.linear`, clamped before and after when clipped."""

    def __init__(self, n_in, n_out, clipped):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out, bias=False)
        self.clipped = clipped
        if clipped:
            for name in ("input_min", "input_max", "output_min", "output_max"):
                self.register_buffer(name, torch.tensor(0.0))

    def forward(self, x):
        if self.clipped:
            x = torch.clamp(x, self.input_min.to(x.dtype), self.input_max.to(x.dtype))
        y = self.linear(x)
        if self.clipped:
            y = torch.clamp(y, self.output_min.to(y.dtype), self.output_max.to(y.dtype))
        return y


class PatchEmbedder(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        self.without = without
        self.input_proj = nn.Linear(3 * v["patch_size"] ** 2, v["hidden_size"], bias=False)
        self.position_embedding_table = nn.Parameter(
            torch.zeros(2, v["position_embedding_size"], v["hidden_size"]))

    def forward(self, pixels, positions):
        x = self.input_proj((2 * (pixels - 0.5)).to(self.input_proj.weight.dtype))
        if "vision_position_table" in self.without:
            return x
        table = self.position_embedding_table
        return x + table[0][positions[:, 0]] + table[1][positions[:, 1]]


def rotate_2d(x, positions, theta):
    """x [N, heads, d]: lanes [0, d/2) turn with positions[:, 0], [d/2, d) with positions[:, 1];
    each half rotate-half style with d/4 frequencies theta^(-2i / (d/2))."""
    d = x.shape[-1]
    half, quarter = d // 2, d // 4
    inv = 1.0 / theta ** (torch.arange(0, half, 2, dtype=torch.float64) / half)
    parts = []
    for axis in range(2):
        part = x[..., axis * half:(axis + 1) * half]
        angles = positions[:, axis].to(torch.float64)[:, None] * inv[None, :]
        cos = angles.cos()[:, None, :].to(x.dtype)
        sin = angles.sin()[:, None, :].to(x.dtype)
        a, b = part[..., :quarter], part[..., quarter:]
        parts.append(torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1))
    return torch.cat(parts, dim=-1)


class VisionAttention(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        self.without = without
        e, d = v["hidden_size"], v["head_dim"]
        self.heads, self.kv_heads, self.d, self.theta = (
            v["num_attention_heads"], v["num_key_value_heads"], d, v["rope_theta"])
        clip = bool(v["use_clipped_linears"])
        self.q_proj = ClippableLinear(e, self.heads * d, clip)
        self.k_proj = ClippableLinear(e, self.kv_heads * d, clip)
        self.v_proj = ClippableLinear(e, self.kv_heads * d, clip)
        self.o_proj = ClippableLinear(self.heads * d, e, clip)
        self.q_norm = Gemma4RMSNorm(d, v["rms_norm_eps"])
        self.k_norm = Gemma4RMSNorm(d, v["rms_norm_eps"])
        self.v_norm = Gemma4RMSNorm(d, v["rms_norm_eps"], with_scale=False)
        self.positions = None

    def forward(self, x):
        n = x.shape[0]
        q = self.q_norm(self.q_proj(x).view(n, self.heads, self.d))
        k = self.k_norm(self.k_proj(x).view(n, self.kv_heads, self.d))
        val = self.v_norm(self.v_proj(x).view(n, self.kv_heads, self.d))
        if "vision_rope" not in self.without:
            q = rotate_2d(q, self.positions, self.theta)
            k = rotate_2d(k, self.positions, self.theta)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        val = val.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k)  # scaling 1
        probs = F.softmax(scores, dim=-1, dtype=scores.dtype)
        return self.o_proj(torch.einsum("hts,shd->thd", probs, val).reshape(n, -1))


class VisionMLP(nn.Module):
    def __init__(self, v):
        super().__init__()
        e, i, clip = v["hidden_size"], v["intermediate_size"], bool(v["use_clipped_linears"])
        self.gate_proj = ClippableLinear(e, i, clip)
        self.up_proj = ClippableLinear(e, i, clip)
        self.down_proj = ClippableLinear(i, e, clip)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class VisionLayer(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        e, eps = v["hidden_size"], v["rms_norm_eps"]
        self.self_attn = VisionAttention(v, without)
        self.mlp = VisionMLP(v)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            setattr(self, name, Gemma4RMSNorm(e, eps))

    def forward(self, x):
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x)))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))


class VisionEncoder(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        self.layers = nn.ModuleList(VisionLayer(v, without) for _ in range(v["num_hidden_layers"]))

    def forward(self, x, positions):
        for layer in self.layers:
            layer.self_attn.positions = positions
            x = layer(x)
        return x


class VisionPooler(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        self.k, self.e, self.without = v["pooling_kernel_size"], v["hidden_size"], without

    def forward(self, x, positions):
        k = self.k
        if "vision_pool_by_position" in self.without:
            pooled = x.reshape(-1, k * k, x.shape[-1]).mean(dim=1)
        else:
            across = int(positions[:, 0].max()) // k + 1
            token = positions[:, 0] // k + across * (positions[:, 1] // k)
            count = int(token.max()) + 1
            weights = F.one_hot(token, count).to(x.dtype) / (k * k)
            pooled = weights.t() @ x
        return pooled * torch.tensor(self.e ** 0.5, dtype=torch.float64).to(x.dtype)


class Gemma4VisionModel(nn.Module):
    def __init__(self, v, without):
        super().__init__()
        self.without = without
        self.patch_embedder = PatchEmbedder(v, without)
        self.encoder = VisionEncoder(v, without)
        self.pooler = VisionPooler(v, without)
        self.standardize = bool(v["standardize"])
        if self.standardize:
            self.std_bias = nn.Parameter(torch.zeros(v["hidden_size"]))
            self.std_scale = nn.Parameter(torch.ones(v["hidden_size"]))

    def forward(self, pixels, positions):
        x = self.encoder(self.patch_embedder(pixels, positions), positions)
        x = self.pooler(x, positions)
        if self.standardize and "vision_standardize" not in self.without:
            x = (x - self.std_bias.to(x.dtype)) * self.std_scale.to(x.dtype)
        return x


class Gemma4MultimodalEmbedder(nn.Module):
    def __init__(self, v, text_hidden):
        super().__init__()
        self.embedding_pre_projection_norm = Gemma4RMSNorm(v["hidden_size"], v["rms_norm_eps"],
                                                           with_scale=False)
        self.embedding_projection = nn.Linear(v["hidden_size"], text_hidden, bias=False)

    def forward(self, x):
        return self.embedding_projection(self.embedding_pre_projection_norm(x))


class Gemma4ImageModel(nn.Module):
    """The text twin (Gemma4ForCausalLM) with the vision tower beside it: forward(ids [1, T],
    (pixels, positions)) -> logits [1, T, V]; the image rows are the image_token_id runs."""

    def __init__(self, text, config, without):
        super().__init__()
        self.model = text.model
        self.lm_head = text.lm_head
        v = vision_config(config)
        t = config.get("text_config") or config
        if t.get("hidden_size_per_layer_input"):
            raise NotImplementedError("gemma4 image twin: per-layer input embeddings")
        self.model.vision_tower = Gemma4VisionModel(v, without)
        self.model.embed_vision = Gemma4MultimodalEmbedder(v, t["hidden_size"])
        self.image_token_id = config["image_token_id"]
        self.pad_token_id = t.get("pad_token_id", 0)
        self.bidirectional = (t.get("use_bidirectional_attention") == "vision"
                              and "image_bidirectional" not in without)

    def forward(self, ids, image):
        ids = ids[0]
        mask = ids == self.image_token_id
        x = self.model.embed_tokens(torch.where(mask, torch.full_like(ids, self.pad_token_id), ids))
        pixels, positions = image
        features = self.model.embed_vision(self.model.vision_tower(pixels.to(x.dtype), positions))
        if int(mask.sum()) != features.shape[0]:
            raise ValueError(f"{int(mask.sum())} image tokens for {features.shape[0]} features")
        x = x.clone()
        x[mask] = features.to(x.dtype)
        block = None
        if self.bidirectional:
            starts = mask & ~torch.cat((torch.tensor([False]), mask[:-1]))
            block = torch.where(mask, torch.cumsum(starts.long(), 0) - 1, torch.full_like(ids, -1))
        shared_kv = {}
        for layer in self.model.layers:
            layer.self_attn.day0_block = block
            x = layer(x, shared_kv, None)
        return self.lm_head(self.model.norm(x, self.model.without))[None]


def wrap(text, folder, dtype, without, read_safetensors):
    """The image model around the loaded text twin, its vision tensors read from `folder`."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    model = Gemma4ImageModel(text, config, without)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update({n: t for n, t in part.items()
                        if n.startswith(("model.vision_tower.", "model.embed_vision."))})
    state = {k: torch.from_numpy(np.ascontiguousarray(t, dtype=np.float64)) for k, t in tensors.items()}
    expected = {n for n in model.state_dict() if n.startswith(("model.vision_tower.",
                                                                "model.embed_vision."))}
    missing = sorted(expected - set(state))
    if missing:
        raise KeyError(f"{folder}: missing vision tensors {missing[:5]}")
    unexpected = sorted(set(state) - expected)
    if unexpected:
        raise KeyError(f"{folder}: vision tensors the twin does not use {unexpected[:5]}")
    model.load_state_dict(state, strict=False)
    model = model.to(dtype)
    model.eval()
    return model, (image_inputs, vision_config(config))
