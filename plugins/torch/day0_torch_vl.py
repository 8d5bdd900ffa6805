"""Qwen3-VL / Qwen3-VL-MoE in plain PyTorch (no transformers), written from the math of HF
`modeling_qwen3_vl*.py`: the vision tower (Conv3d patch embedding, learned position table
bilinearly interpolated to the patch grid, ViT blocks with 2-D rotary and LayerNorm, the 2x2
patch merger and the deepstack mergers), image features scattered into the image-pad rows,
deepstack features added after the first decoder layers, and interleaved M-RoPE.

Module names follow day0's anchors: the text model sits at `model.*` (the checkpoint's
`model.language_model.*` is renamed on load) and the tower at `model.visual.*`.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def read_ppm(path):
    """Binary PPM (P6, maxval 255) -> uint8 array [H, W, 3]."""
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    if fields[0] != b"P6" or fields[3] != b"255":
        raise ValueError(f"{path}: not an 8-bit binary PPM")
    w, h = int(fields[1]), int(fields[2])
    return np.frombuffer(data[pos + 1:pos + 1 + w * h * 3], dtype=np.uint8).reshape(h, w, 3)


def image_patches(rgb, vc):
    """The Qwen3-VL processor's pixel_values (no resize): [gh*gw, C*T*P*P], plus (gh, gw)."""
    p, m, tp = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
    img = (rgb.astype(np.float64) / 255.0 - 0.5) / 0.5  # image_mean = image_std = 0.5
    frames = np.repeat(img.transpose(2, 0, 1)[None], tp, axis=0)  # [T, C, H, W]
    c, h, w = frames.shape[1:]
    gh, gw = h // p, w // p
    x = frames.reshape(1, tp, c, gh // m, m, p, gw // m, m, p)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return torch.from_numpy(np.ascontiguousarray(x.reshape(gh * gw, c * tp * p * p))), gh, gw


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class VisionAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=True)
        self.proj = nn.Linear(d, d, bias=True)

    def forward(self, x, cos, sin):
        n, d = x.shape
        q, k, v = self.qkv(x).reshape(n, 3, self.heads, -1).permute(1, 0, 2, 3).unbind(0)
        q = q * cos[:, None] + rotate_half(q) * sin[:, None]
        k = k * cos[:, None] + rotate_half(k) * sin[:, None]
        scores = torch.einsum("qhd,khd->hqk", q, k) * q.shape[-1] ** -0.5
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) if q.dtype != torch.float64 \
            else F.softmax(scores, dim=-1)
        return self.proj(torch.einsum("hqk,khd->qhd", probs, v).reshape(n, d))


class VisionMLP(nn.Module):
    def __init__(self, d, inter, act):
        super().__init__()
        self.linear_fc1 = nn.Linear(d, inter, bias=True)
        self.linear_fc2 = nn.Linear(inter, d, bias=True)
        if act != "gelu_pytorch_tanh":
            raise NotImplementedError(f"vision hidden_act {act}")

    def forward(self, x):
        return self.linear_fc2(F.gelu(self.linear_fc1(x), approximate="tanh"))


class VisionBlock(nn.Module):
    def __init__(self, vc):
        super().__init__()
        d = vc["hidden_size"]
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.attn = VisionAttention(d, vc["num_heads"])
        self.mlp = VisionMLP(d, vc["intermediate_size"], vc["hidden_act"])

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class PatchMerger(nn.Module):
    def __init__(self, vc, post_shuffle_norm):
        super().__init__()
        self.width = vc["hidden_size"] * vc["spatial_merge_size"] ** 2
        self.post = post_shuffle_norm
        self.norm = nn.LayerNorm(self.width if post_shuffle_norm else vc["hidden_size"], eps=1e-6)
        self.linear_fc1 = nn.Linear(self.width, self.width)
        self.linear_fc2 = nn.Linear(self.width, vc["out_hidden_size"])

    def forward(self, x):
        x = self.norm(x.view(-1, self.width)) if self.post else self.norm(x).view(-1, self.width)
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class PatchEmbed(nn.Module):
    def __init__(self, vc):
        super().__init__()
        self.shape = (vc["in_channels"], vc["temporal_patch_size"], vc["patch_size"], vc["patch_size"])
        self.proj = nn.Conv3d(vc["in_channels"], vc["hidden_size"], kernel_size=self.shape[1:],
                              stride=self.shape[1:], bias=True)

    def forward(self, x):
        return self.proj(x.view(-1, *self.shape).to(self.proj.weight.dtype)).view(x.shape[0], -1)


class VisionModel(nn.Module):
    def __init__(self, vc):
        super().__init__()
        self.vc = vc
        self.patch_embed = PatchEmbed(vc)
        self.pos_embed = nn.Embedding(vc["num_position_embeddings"], vc["hidden_size"])
        self.side = int(math.isqrt(vc["num_position_embeddings"]))
        self.blocks = nn.ModuleList(VisionBlock(vc) for _ in range(vc["depth"]))
        self.merger = PatchMerger(vc, False)
        self.deepstack_indexes = list(vc.get("deepstack_visual_indexes", []))
        self.deepstack_merger_list = nn.ModuleList(PatchMerger(vc, True) for _ in self.deepstack_indexes)

    def grid_order(self, gh, gw, values):
        """[gh, gw, ...] in raster order -> rows in merge-window order."""
        m = self.vc["spatial_merge_size"]
        return values.view(gh // m, m, gw // m, m, *values.shape[2:]).permute(0, 2, 1, 3, *range(4, values.dim() + 2)) \
            .reshape(gh * gw, *values.shape[2:])

    def positions(self, gh, gw):
        dtype = self.pos_embed.weight.dtype
        hs = torch.linspace(0, self.side - 1, gh, dtype=torch.float64)
        ws = torch.linspace(0, self.side - 1, gw, dtype=torch.float64)
        h0, w0 = hs.long(), ws.long()
        h1, w1 = (h0 + 1).clamp(max=self.side - 1), (w0 + 1).clamp(max=self.side - 1)
        dh, dw = (hs - h0)[:, None], (ws - w0)[None, :]
        table = self.pos_embed.weight.view(self.side, self.side, -1)
        grid = (table[h0][:, w0] * ((1 - dh) * (1 - dw))[..., None].to(dtype)
                + table[h0][:, w1] * ((1 - dh) * dw)[..., None].to(dtype)
                + table[h1][:, w0] * (dh * (1 - dw))[..., None].to(dtype)
                + table[h1][:, w1] * (dh * dw)[..., None].to(dtype))
        return self.grid_order(gh, gw, grid)

    def rotary(self, gh, gw):
        dim = self.vc["hidden_size"] // self.vc["num_heads"] // 2
        inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        rows = torch.arange(gh)[:, None].expand(gh, gw)
        cols = torch.arange(gw)[None, :].expand(gh, gw)
        ids = self.grid_order(gh, gw, torch.stack((rows, cols), dim=-1))
        freqs = torch.cat((ids[:, :1] * inv, ids[:, 1:] * inv), dim=-1)
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = self.pos_embed.weight.dtype
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, patches, gh, gw):
        x = self.patch_embed(patches) + self.positions(gh, gw)
        cos, sin = self.rotary(gh, gw)
        deep = []
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin)
            if i in self.deepstack_indexes:
                deep.append(self.deepstack_merger_list[self.deepstack_indexes.index(i)](x))
        return self.merger(x), deep


class PackedExperts(nn.Module):
    """Qwen3-VL-MoE's fused experts: gate_up_proj [E, H, 2I], down_proj [E, I, H]."""

    def __init__(self, c):
        super().__init__()
        e, h, i = c["num_experts"], c["hidden_size"], c["moe_intermediate_size"]
        self.gate_up_proj = nn.Parameter(torch.zeros(e, h, 2 * i))
        self.down_proj = nn.Parameter(torch.zeros(e, i, h))

    def forward(self, x, e):
        gate, up = (x @ self.gate_up_proj[e]).chunk(2, dim=-1)
        return (F.silu(gate) * up) @ self.down_proj[e]


class PackedMoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.top_k = c["num_experts_per_tok"]
        self.gate = nn.Linear(c["hidden_size"], c["num_experts"], bias=False)
        self.experts = PackedExperts(c)

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        weights, selected = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        self.day0_selected = selected
        out = torch.zeros_like(x)
        for e in range(self.gate.out_features):
            token, slot = torch.where(selected == e)
            if token.numel():
                out.index_add_(0, token, self.experts(x[token], e) * weights[token, slot, None])
        return out


def rope_index(ids, image_token, merged_h, merged_w):
    """HF get_rope_index for one image of one frame: [3, T] (t, h, w) positions."""
    pos, nxt, i = [], 0, 0
    while i < len(ids):
        if ids[i] != image_token:
            pos.append((nxt, nxt, nxt))
            nxt += 1
            i += 1
            continue
        for r in range(merged_h):
            for c in range(merged_w):
                pos.append((nxt, nxt + r, nxt + c))
        i += merged_h * merged_w
        nxt += max(merged_h, merged_w)
    return torch.tensor(pos).T


class MRope:
    """Interleaved M-RoPE (HF apply_interleaved_mrope); attention modules read cos/sin here."""

    def __init__(self, c, head_dim):
        self.inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.section = ((c.get("rope_scaling") or {}).get("mrope_section")) or [24, 20, 20]
        self.cos = self.sin = None

    def set(self, positions3, dtype):
        freqs = positions3[..., None].double() * self.inv  # [3, T, hd/2]
        f = freqs[0].clone()
        for dim, offset in ((1, 1), (2, 2)):
            f[..., offset:self.section[dim] * 3:3] = freqs[dim, ..., offset:self.section[dim] * 3:3]
        emb = torch.cat((f, f), dim=-1)
        self.cos, self.sin = emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def build(config, models):
    """(module, flat text config) for a qwen3_vl / qwen3_vl_moe config; `models` is
    day0_torch_models (for the shared decoder pieces)."""
    text = dict(config["text_config"])
    moe = config["model_type"] == "qwen3_vl_moe"
    text["model_type"] = "qwen3_moe" if moe else "qwen3"
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    mrope = MRope(text, head_dim)

    class Attention(models.Attention):
        def forward(self, x):
            t = x.shape[0]
            q = self.q_norm(self.q_proj(x).view(t, self.heads, self.head_dim))
            k = self.k_norm(self.k_proj(x).view(t, self.kv_heads, self.head_dim))
            v = self.v_proj(x).view(t, self.kv_heads, self.head_dim)
            q = q * mrope.cos + models.rotate_half(q) * mrope.sin
            k = k * mrope.cos + models.rotate_half(k) * mrope.sin
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            return self.o_proj(models.causal_attention(q, k, v, self.head_dim ** -0.5))

    class Body(models.Body):
        def __init__(self):
            super().__init__(text)
            for layer in self.layers:
                layer.self_attn = Attention(text)
                if moe:
                    layer.mlp = PackedMoE(text)
            self.visual = VisionModel(config["vision_config"])

        def forward(self, ids, image=None):
            x = self.embed_tokens(ids)
            deep, mask = [], ids == config["image_token_id"]
            if image is not None:
                patches, gh, gw = image
                feats, deep = self.visual(patches.to(x.dtype), gh, gw)
                m = config["vision_config"]["spatial_merge_size"]
                positions = rope_index(ids.tolist(), config["image_token_id"], gh // m, gw // m)
                x = x.clone()
                x[mask] = feats
            else:
                positions = torch.arange(len(ids)).expand(3, -1)
            mrope.set(positions, x.dtype)
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < len(deep):
                    x = x.clone()
                    x[mask] = x[mask] + deep[i]
            return self.norm(x)

    class VLModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Body()
            self.lm_head = nn.Linear(text["hidden_size"], text["vocab_size"], bias=False)

        def forward(self, ids, image=None):
            return self.lm_head(self.model(ids[0], image))[None]

    flat = dict(text)
    flat["model_type"] = config["model_type"]
    flat["vision_config"] = config["vision_config"]
    flat["image_token_id"] = config["image_token_id"]
    return VLModel(), flat


def rename(tensors):
    """Checkpoint names -> this module tree (text model at model.*)."""
    return {("model." + k[len("model.language_model."):]) if k.startswith("model.language_model.") else k: v
            for k, v in tensors.items()}
