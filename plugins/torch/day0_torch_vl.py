"""Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3-VL-MoE in plain PyTorch (no transformers), written
from the math of HF `modeling_qwen2_vl.py`, `modeling_qwen2_5_vl.py`, `modeling_qwen3_vl*.py`:
the vision tower (Conv3d patch embedding; Qwen3-VL's learned position table bilinearly
interpolated to the patch grid; ViT blocks with 2-D rotary, LayerNorm + QuickGELU/GELU-tanh MLP
or RMSNorm + SwiGLU, Qwen2.5-VL's window attention by window reordering; the 2x2 patch merger
and Qwen3-VL's deepstack mergers), image features scattered into the image-pad rows, deepstack
features added after the first decoder layers, and M-RoPE (sectioned, or Qwen3-VL's interleaved).

Module names follow day0's anchors: the text model sits at `model.*` (Qwen3-VL's
`model.language_model.*` is renamed on load), the tower at `model.visual.*` (Qwen3-VL) or
`visual.*` (Qwen2-VL, Qwen2.5-VL), as the checkpoints name it.
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


CLIP_MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
CLIP_STD = np.array([0.26862954, 0.26130258, 0.27577711])


def image_patches(rgb, vc, kind="qwen3_vl"):
    """The Qwen VL processors' pixel_values (no resize): [gh*gw, C*T*P*P], plus (gh, gw)."""
    p, m, tp = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
    if kind.startswith("qwen3"):
        img = (rgb.astype(np.float64) / 255.0 - 0.5) / 0.5  # image_mean = image_std = 0.5
    else:
        img = (rgb.astype(np.float64) / 255.0 - CLIP_MEAN) / CLIP_STD
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

    def forward(self, x, cos, sin, segments=None):
        n, d = x.shape
        q, k, v = self.qkv(x).reshape(n, 3, self.heads, -1).permute(1, 0, 2, 3).unbind(0)
        q = q * cos[:, None] + rotate_half(q) * sin[:, None]
        k = k * cos[:, None] + rotate_half(k) * sin[:, None]
        scores = torch.einsum("qhd,khd->hqk", q, k) * q.shape[-1] ** -0.5
        if segments is not None:  # block-diagonal: attention within each window segment
            seg = torch.repeat_interleave(torch.arange(len(segments)), torch.tensor(segments))
            scores = scores.masked_fill(seg[:, None] != seg[None, :], float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) if q.dtype != torch.float64 \
            else F.softmax(scores, dim=-1)
        return self.proj(torch.einsum("hqk,khd->qhd", probs, v).reshape(n, d))


ACTIVATIONS = {
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "silu": F.silu,
    "gelu": F.gelu,
}


class VisionMLP(nn.Module):
    """Qwen3-VL: linear_fc1/linear_fc2; Qwen2-VL: fc1/fc2."""

    def __init__(self, d, inter, act, names):
        super().__init__()
        self.names = names
        setattr(self, names[0], nn.Linear(d, inter, bias=True))
        setattr(self, names[1], nn.Linear(inter, d, bias=True))
        self.act = ACTIVATIONS[act]

    def forward(self, x):
        return getattr(self, self.names[1])(self.act(getattr(self, self.names[0])(x)))


class GatedVisionMLP(nn.Module):
    """Qwen2.5-VL: SwiGLU with biases."""

    def __init__(self, d, inter, act):
        super().__init__()
        self.gate_proj = nn.Linear(d, inter, bias=True)
        self.up_proj = nn.Linear(d, inter, bias=True)
        self.down_proj = nn.Linear(inter, d, bias=True)
        self.act = ACTIVATIONS[act]

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class VisionRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def vision_norm(kind, dim):
    return VisionRMSNorm(dim) if kind == "qwen2_5_vl" else nn.LayerNorm(dim, eps=1e-6)


class VisionBlock(nn.Module):
    def __init__(self, vc, kind):
        super().__init__()
        d = vision_width(vc, kind)
        self.norm1 = vision_norm(kind, d)
        self.norm2 = vision_norm(kind, d)
        self.attn = VisionAttention(d, vc["num_heads"])
        inter = vc.get("intermediate_size") or d * vc.get("mlp_ratio", 4)
        if kind == "qwen2_5_vl":
            self.mlp = GatedVisionMLP(d, inter, vc.get("hidden_act", "silu"))
        elif kind == "qwen2_vl":
            self.mlp = VisionMLP(d, inter, vc.get("hidden_act", "quick_gelu"), ("fc1", "fc2"))
        else:
            self.mlp = VisionMLP(d, inter, vc["hidden_act"], ("linear_fc1", "linear_fc2"))

    def forward(self, x, cos, sin, segments=None):
        x = x + self.attn(self.norm1(x), cos, sin, segments)
        return x + self.mlp(self.norm2(x))


def vision_width(vc, kind):
    return vc["embed_dim"] if kind == "qwen2_vl" else vc["hidden_size"]


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


class Qwen2PatchMerger(nn.Module):
    """Qwen2-VL / Qwen2.5-VL: ln_q, then mlp = Linear, GELU, Linear over 2x2 windows."""

    def __init__(self, vc, kind, out):
        super().__init__()
        d = vision_width(vc, kind)
        self.width = d * vc["spatial_merge_size"] ** 2
        self.ln_q = vision_norm(kind, d)
        self.mlp = nn.Sequential(nn.Linear(self.width, self.width), nn.GELU(), nn.Linear(self.width, out))

    def forward(self, x):
        return self.mlp(self.ln_q(x).view(-1, self.width))


class PatchEmbed(nn.Module):
    def __init__(self, vc, kind):
        super().__init__()
        channels = vc.get("in_channels", vc.get("in_chans", 3))
        self.shape = (channels, vc["temporal_patch_size"], vc["patch_size"], vc["patch_size"])
        self.proj = nn.Conv3d(channels, vision_width(vc, kind), kernel_size=self.shape[1:],
                              stride=self.shape[1:], bias=kind == "qwen3_vl")

    def forward(self, x):
        return self.proj(x.view(-1, *self.shape).to(self.proj.weight.dtype)).view(x.shape[0], -1)


class VisionModel(nn.Module):
    def __init__(self, vc, kind, text_hidden):
        super().__init__()
        self.vc, self.kind = vc, kind
        self.width = vision_width(vc, kind)
        self.patch_embed = PatchEmbed(vc, kind)
        self.blocks = nn.ModuleList(VisionBlock(vc, kind) for _ in range(vc["depth"]))
        self.deepstack_indexes = []
        if kind == "qwen3_vl":
            self.pos_embed = nn.Embedding(vc["num_position_embeddings"], vc["hidden_size"])
            self.side = int(math.isqrt(vc["num_position_embeddings"]))
            self.merger = PatchMerger(vc, False)
            self.deepstack_indexes = list(vc.get("deepstack_visual_indexes", []))
            self.deepstack_merger_list = nn.ModuleList(PatchMerger(vc, True) for _ in self.deepstack_indexes)
        else:
            self.merger = Qwen2PatchMerger(vc, kind, vc.get("out_hidden_size", text_hidden))

    def window_index(self, gh, gw):
        """Qwen2.5-VL get_window_index for one frame: merged-token order and window lengths."""
        m = self.vc["spatial_merge_size"]
        size = self.vc["window_size"] // m // self.vc["patch_size"]
        lh, lw = gh // m, gw // m
        index = np.arange(lh * lw).reshape(lh, lw)
        ph, pw = (size - lh % size) % size, (size - lw % size) % size
        padded = np.pad(index, ((0, ph), (0, pw)), constant_values=-100)
        nh, nw = (lh + ph) // size, (lw + pw) // size
        windows = padded.reshape(nh, size, nw, size).transpose(0, 2, 1, 3).reshape(nh * nw, size * size)
        order = [i for w in windows for i in w if i != -100]
        lengths = [int((w != -100).sum()) * m * m for w in windows if (w != -100).any()]
        return torch.tensor(order), lengths

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
        dim = self.width // self.vc["num_heads"] // 2
        inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        rows = torch.arange(gh)[:, None].expand(gh, gw)
        cols = torch.arange(gw)[None, :].expand(gh, gw)
        ids = self.grid_order(gh, gw, torch.stack((rows, cols), dim=-1))
        freqs = torch.cat((ids[:, :1] * inv, ids[:, 1:] * inv), dim=-1)
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = self.patch_embed.proj.weight.dtype
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, patches, gh, gw):
        x = self.patch_embed(patches)
        if self.kind == "qwen3_vl":
            x = x + self.positions(gh, gw)
        cos, sin = self.rotary(gh, gw)
        windows, full = None, range(len(self.blocks))
        if self.kind == "qwen2_5_vl" and self.vc.get("window_size"):
            # HF reorders the patches window by window (in whole 2x2 merge units), runs window
            # blocks block-diagonally and the fullatt blocks over everything, and undoes the
            # order after the merger.
            order, windows = self.window_index(gh, gw)
            unit = self.vc["spatial_merge_size"] ** 2
            x = x.view(-1, unit, x.shape[-1])[order].reshape(x.shape)
            cos = cos.view(-1, unit, cos.shape[-1])[order].reshape(cos.shape)
            sin = sin.view(-1, unit, sin.shape[-1])[order].reshape(sin.shape)
            full = self.vc.get("fullatt_block_indexes", [])
        deep = []
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, None if windows is None or i in full else windows)
            if i in self.deepstack_indexes:
                deep.append(self.deepstack_merger_list[self.deepstack_indexes.index(i)](x))
        out = self.merger(x)
        if windows is not None:
            out = out[torch.argsort(order)]
        return out, deep


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
    """M-RoPE: Qwen3-VL's interleaved form (HF apply_interleaved_mrope) or Qwen2-VL's sections
    (HF apply_multimodal_rotary_pos_emb); attention modules read cos/sin here."""

    def __init__(self, c, head_dim, interleaved):
        self.inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.section = ((c.get("rope_scaling") or {}).get("mrope_section")) or [24, 20, 20]
        self.interleaved = interleaved
        self.cos = self.sin = None

    def set(self, positions3, dtype):
        freqs = positions3[..., None].double() * self.inv  # [3, T, hd/2]
        if self.interleaved:
            f = freqs[0].clone()
            for dim, offset in ((1, 1), (2, 2)):
                f[..., offset:self.section[dim] * 3:3] = freqs[dim, ..., offset:self.section[dim] * 3:3]
            emb = torch.cat((f, f), dim=-1)
        else:
            emb = torch.cat((freqs, freqs), dim=-1)  # [3, T, hd]
            parts = emb.split(list(self.section) * 2, dim=-1)
            emb = torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1)
        self.cos, self.sin = emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def build(config, models):
    """(module, flat text config) for a qwen3_vl / qwen3_vl_moe config; `models` is
    day0_torch_models (for the shared decoder pieces)."""
    kind = config["model_type"]
    qwen3 = kind.startswith("qwen3")
    tower = "qwen3_vl" if qwen3 else kind
    text = dict(config["text_config"]) if qwen3 else {k: v for k, v in config.items() if k != "vision_config"}
    moe = kind == "qwen3_vl_moe"
    text["model_type"] = ("qwen3_moe" if moe else "qwen3") if qwen3 else "qwen2"
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    mrope = MRope(text, head_dim, interleaved=qwen3)
    text["rope_scaling"] = None  # the decoder's own 1-D tables are unused: MRope supplies cos/sin

    class Attention(models.Attention):
        def forward(self, x):
            t = x.shape[0]
            q = self.q_proj(x).view(t, self.heads, self.head_dim)
            k = self.k_proj(x).view(t, self.kv_heads, self.head_dim)
            if hasattr(self, "q_norm"):
                q, k = self.q_norm(q), self.k_norm(k)
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
            if qwen3:
                self.visual = VisionModel(config["vision_config"], tower, text["hidden_size"])

        def forward(self, ids, image=None, visual=None):
            x = self.embed_tokens(ids)
            deep, mask = [], ids == config["image_token_id"]
            if image is not None:
                patches, gh, gw = image
                feats, deep = (visual or self.visual)(patches.to(x.dtype), gh, gw)
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
            if not qwen3:  # Qwen2-VL / Qwen2.5-VL checkpoints keep the tower at visual.*
                self.visual = VisionModel(config["vision_config"], tower, text["hidden_size"])

        def forward(self, ids, image=None):
            return self.lm_head(self.model(ids[0], image, getattr(self, "visual", None)))[None]

    flat = dict(text)
    flat["model_type"] = kind
    flat["vision_config"] = config["vision_config"]
    flat["image_token_id"] = config["image_token_id"]
    return VLModel(), flat


def rename(tensors):
    """Checkpoint names -> this module tree (text model at model.*)."""
    return {("model." + k[len("model.language_model."):]) if k.startswith("model.language_model.") else k: v
            for k, v in tensors.items()}
