"""PyTorch twin of Nemotron-H (model_type nemotron_h: Nemotron-H, Nemotron 3 Nano / Super), with
the checkpoint's module names (backbone.embeddings, backbone.layers.N.{norm,mixer},
backbone.norm_f, lm_head), written from transformers' modeling_nemotron_h.py
(NemotronHMamba2Mixer.torch_forward, Zamba2RMSNormGated, NemotronHRMSNorm, NemotronHMLP,
NemotronHMoE, NemotronHTopkRouter, NemotronHAttention, NemotronHBlock) and
configuration_nemotron_h.py.

What it computes: the layers of hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE),
each h + mixer(rmsnorm(h)); the Mamba-2 mixer: in_proj -> z | xBC | dt, causal depthwise conv1d
over xBC with its bias and SiLU, dt = softplus(dt + dt_bias) clamped to time_step_limit (the
mamba_ssm kernels' dt_limit, default (0, inf); HF's torch_forward clamps at time_step_min
instead, which its CUDA path and vLLM do not), A = -exp(A_log), the SSD scan with the D skip,
B and C of n_groups groups shared by heads / n_groups heads each, then
rms_g(y * silu(z)) * w over the groups and out_proj; attention without RoPE (GQA, head_dim^-1/2);
the relu2 MLP down(relu(up(x))^2); the MoE: sigmoid router with e_score_correction_bias for the
choice (n_group / topk_group as HF), the unbiased scores renormalised (+1e-20) and times
routed_scaling_factor, relu2 experts between fc1_latent_proj and fc2_latent_proj when
moe_latent_size is set, plus the shared expert on the block's input.

The scan has two independent forms: the chunked SSD form (chunk_size blocks: within a block
the decays exp(cumsum(dt A)) between positions, across blocks the carried state; the default)
and the recurrence token by token (DAY0_TWIN_SCAN=recurrent). A forward over the whole sequence
is what the engine's chunked prefill followed by recurrent decode steps must reproduce. With
day0_keep_states set on a mixer (day0_dump.py --state), it leaves in day0_states the SSM state
[heads, head_dim, state] and the conv window [K-1, conv channels] after the prompt and after
each later token, computed from their definitions (step_states), not from the scan.

Test switch (DAY0_TWIN_WITHOUT, see day0_torch_models.WITHOUT): each name computes the model
without one feature, so that a test can show its agreement with the engine depends on it.
"""

import glob
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# DAY0_TWIN_WITHOUT names of this family.
SWITCHES = {
    "conv",  # no depthwise convolution over xBC (SiLU of the projection itself)
    "conv_bias",  # the convolution without its bias
    "gate",  # no z gate in the gated norm
    "gate_order",  # the gate applied after the norm instead of before it
    "softplus",  # dt = dt + dt_bias without the softplus
    "dt_bias",  # dt = softplus(dt) without dt_bias
    "d_skip",  # no D skip
    "state",  # the SSM state not carried from one chunk to the next (zero at each chunk)
    # day0_dump --state rows only: the states recorded after each decode step are those of a
    # state reset at the step's start (the forward keeps its whole-sequence scan)
    "step_state",
    "groups",  # B and C of group h % n_groups instead of h // (heads / n_groups)
    "norm_groups",  # the gated norm over the whole inner width instead of per group
    "relu2",  # relu instead of relu squared in MLPs and experts
    "latent",  # experts read the first latent lanes of h, no fc1/fc2_latent_proj
    "e_score_bias",  # experts chosen by the sigmoid scores alone
    "routed_scaling",  # routed_scaling_factor left out
    "shared_experts",  # no shared expert
}

WITHOUT = set()
SCAN = os.environ.get("DAY0_TWIN_SCAN", "chunked")
if SCAN not in ("chunked", "recurrent"):
    raise ValueError(f"DAY0_TWIN_SCAN: '{SCAN}' (chunked or recurrent)")


def flat_config(config):
    """The config with NemotronHConfig's defaults for the keys this twin reads, and
    num_hidden_layers from the pattern (day0's fingerprint reads it)."""
    c = dict(config)
    pattern = c.get("hybrid_override_pattern")
    if pattern is None:
        names = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*",
                 "mlp": "-", "moe": "E"}
        pattern = "".join(names[k] for k in c["layers_block_type"])
    c["hybrid_override_pattern"] = pattern
    c["num_hidden_layers"] = len(pattern)
    c.setdefault("n_groups", c.get("mamba_n_groups", 1))
    c.setdefault("conv_kernel", c.get("mamba_d_conv", 4))
    c.setdefault("use_conv_bias", c.get("mamba_conv_bias", True))
    c.setdefault("chunk_size", 128)
    c.setdefault("layer_norm_epsilon", 1e-5)
    c.setdefault("use_bias", False)
    c.setdefault("mlp_bias", False)
    c.setdefault("head_dim", c.get("attention_head_dim"))
    limit = c.get("time_step_limit") or (0.0, float("inf"))
    c["time_step_limit"] = (float(limit[0]), float(limit[1]))
    return c


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class GatedRMSNorm(nn.Module):
    """Zamba2RMSNormGated with norm_before_gate False: rms over each group of y * silu(z)."""

    def __init__(self, dim, groups, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.groups = 1 if "norm_groups" in WITHOUT else groups
        self.eps = eps

    def forward(self, y, z):
        t, dim = y.shape
        if "gate" not in WITHOUT and "gate_order" not in WITHOUT:
            y = y * F.silu(z)
        g = y.view(t, self.groups, dim // self.groups)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * g.reshape(t, dim)
        if "gate_order" in WITHOUT:
            out = out * F.silu(z)
        return out


def ssd_chunked(x, dt, a, b, c, chunk):
    """The chunked SSD form. x [T, h, P], dt [T, h], a [h], b and c [T, h, N] -> y [T, h, P]."""
    t_len, heads, p = x.shape
    state = x.new_zeros(heads, p, b.shape[-1])
    ys = []
    for c0 in range(0, t_len, chunk):
        xs, dts, bs, cs = x[c0:c0 + chunk], dt[c0:c0 + chunk], b[c0:c0 + chunk], c[c0:c0 + chunk]
        length = xs.shape[0]
        if "state" in WITHOUT:
            state = torch.zeros_like(state)
        cum = torch.cumsum(dts * a, dim=0)  # [L, h]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        gaps = (cum[:, None, :] - cum[None, :, :]).masked_fill(~causal[..., None], float("-inf"))
        weights = torch.einsum("ihn,jhn->ijh", cs, bs) * torch.exp(gaps) * dts[None]  # [i, j, h]
        diagonal = torch.einsum("ijh,jhp->ihp", weights, xs)
        carried = torch.einsum("ihn,hpn->ihp", cs, state) * torch.exp(cum)[..., None]
        ys.append(diagonal + carried)
        to_end = torch.exp(cum[-1][None] - cum) * dts  # [L, h]
        state = torch.exp(cum[-1])[:, None, None] * state + torch.einsum("jh,jhp,jhn->hpn", to_end, xs, bs)
    return torch.cat(ys, dim=0)


def ssd_recurrent(x, dt, a, b, c):
    """The recurrence S_t = exp(dt_t a) S_{t-1} + dt_t x_t (x) B_t, y_t = S_t C_t."""
    t_len, heads, p = x.shape
    state = x.new_zeros(heads, p, b.shape[-1])
    ys = []
    for t in range(t_len):
        state = torch.exp(dt[t] * a)[:, None, None] * state \
            + dt[t][:, None, None] * x[t][:, :, None] * b[t][:, None, :]
        ys.append(torch.einsum("hpn,hn->hp", state, c[t]))
    return torch.stack(ys)


class Mamba2Mixer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.heads, self.p = c["mamba_num_heads"], c["mamba_head_dim"]
        self.n, self.groups = c["ssm_state_size"], c["n_groups"]
        self.inner = self.heads * self.p
        self.conv_dim = self.inner + 2 * self.groups * self.n
        self.kernel = c["conv_kernel"]
        self.chunk = c["chunk_size"]
        self.limit = c["time_step_limit"]
        self.in_proj = nn.Linear(h, self.inner + self.conv_dim + self.heads, bias=c["use_bias"])
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                padding=self.kernel - 1, bias=c["use_conv_bias"])
        self.dt_bias = nn.Parameter(torch.ones(self.heads))
        self.A_log = nn.Parameter(torch.zeros(self.heads))
        self.D = nn.Parameter(torch.ones(self.heads))
        self.norm = GatedRMSNorm(self.inner, self.groups, c["layer_norm_epsilon"])
        self.out_proj = nn.Linear(self.inner, h, bias=c["use_bias"])
        self.prompt = None  # day0_set_prompt_length: the engine's steps, for day0_states

    def step_states(self, xbc_in, x, dt, a, b):
        """(state [h, P, N], conv window [K-1, C]) after each step (the prompt, then each token),
        from their definitions: S_e = sum_{j<e} exp(sum_{j<i<e} dt_i a) dt_j x_j (x) B_j, and the
        last K-1 inputs of the conv (zeros before the sequence)."""
        t_len = x.shape[0]
        prompt = min(self.prompt or t_len, t_len)
        cum = torch.cumsum(dt * a, dim=0)  # [T, h]
        pad = xbc_in.new_zeros(self.kernel - 1, self.conv_dim)
        out = []
        for end in range(prompt, t_len + 1):
            first = 0 if "step_state" not in WITHOUT or end == prompt else end - 1
            decay = torch.exp(cum[end - 1][None] - cum[first:end]) * dt[first:end]  # [j, h]
            state = torch.einsum("jh,jhp,jhn->hpn", decay, x[first:end], b[first:end])
            inputs = torch.cat((pad, xbc_in[first:end]), dim=0)
            out.append((state, inputs[-(self.kernel - 1):]))
        return out

    def forward(self, u):  # u [T, H]
        t_len = u.shape[0]
        z, xbc, dt = self.in_proj(u).split([self.inner, self.conv_dim, self.heads], dim=-1)
        xbc_in = xbc
        if "conv" in WITHOUT:
            xbc = F.silu(xbc)
        else:
            bias = None if "conv_bias" in WITHOUT else self.conv1d.bias
            conv = F.conv1d(xbc.t()[None], self.conv1d.weight, bias, padding=self.kernel - 1,
                            groups=self.conv_dim)
            xbc = F.silu(conv[0, :, :t_len].t())
        x, b, c = xbc.split([self.inner, self.groups * self.n, self.groups * self.n], dim=-1)
        if "dt_bias" not in WITHOUT:
            dt = dt + self.dt_bias
        if "softplus" not in WITHOUT:
            dt = F.softplus(dt)
        dt = dt.clamp(self.limit[0], self.limit[1])
        a = -torch.exp(self.A_log)
        x = x.reshape(t_len, self.heads, self.p)
        b = b.reshape(t_len, self.groups, self.n)
        c = c.reshape(t_len, self.groups, self.n)
        per = self.heads // self.groups
        if "groups" in WITHOUT:
            index = torch.arange(self.heads) % self.groups
        else:
            index = torch.arange(self.heads) // per
        b, c = b[:, index], c[:, index]
        if SCAN == "recurrent":
            y = ssd_recurrent(x, dt, a, b, c)
        else:
            y = ssd_chunked(x, dt, a, b, c, self.chunk)
        if getattr(self, "day0_keep_states", False):
            self.day0_states = self.step_states(xbc_in, x, dt, a, b)
        if "d_skip" not in WITHOUT:
            y = y + self.D[:, None] * x
        return self.out_proj(self.norm(y.reshape(t_len, self.inner), z))


class Attention(nn.Module):
    """NemotronHAttention: GQA without RoPE, scaled by head_dim^-1/2, no biases."""

    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.heads, self.kv, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(h, self.heads * self.d, bias=False)
        self.k_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.heads * self.d, h, bias=False)

    def forward(self, x):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.heads, self.d)
        k = self.k_proj(x).view(t, self.kv, self.d).repeat_interleave(self.heads // self.kv, dim=1)
        v = self.v_proj(x).view(t, self.kv, self.d).repeat_interleave(self.heads // self.kv, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * self.d ** -0.5
        scores = scores + torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)
        probs = torch.softmax(scores, dim=-1)
        return self.o_proj(torch.einsum("hts,shd->thd", probs, v).reshape(t, -1))


def relu2(x):
    return F.relu(x) if "relu2" in WITHOUT else F.relu(x).square()


class Mlp(nn.Module):
    def __init__(self, dim, inter, bias):
        super().__init__()
        self.up_proj = nn.Linear(dim, inter, bias=bias)
        self.down_proj = nn.Linear(inter, dim, bias=bias)

    def forward(self, x):
        return self.down_proj(relu2(self.up_proj(x)))


class Router(nn.Module):
    def __init__(self, experts, h):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(experts, h))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(experts))

    def forward(self, x):
        return F.linear(x, self.weight)


class Moe(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.latent = c.get("moe_latent_size")
        width = self.latent or h
        self.e, self.k = c["n_routed_experts"], c["num_experts_per_tok"]
        self.n_group, self.topk_group = c.get("n_group", 1), c.get("topk_group", 1)
        self.norm_topk = c.get("norm_topk_prob", True)
        self.scaling = c.get("routed_scaling_factor", 1.0)
        self.gate = Router(self.e, h)
        self.experts = nn.ModuleList(Mlp(width, c["moe_intermediate_size"], False) for _ in range(self.e))
        self.shared_experts = Mlp(h, c["moe_shared_expert_intermediate_size"], c["mlp_bias"])
        if self.latent:
            self.fc1_latent_proj = nn.Linear(h, self.latent, bias=c["mlp_bias"])
            self.fc2_latent_proj = nn.Linear(self.latent, h, bias=c["mlp_bias"])
        self.day0_selected = None

    def forward(self, x):
        t, h = x.shape
        scores = torch.sigmoid(self.gate(x))
        choice = scores if "e_score_bias" in WITHOUT else scores + self.gate.e_score_correction_bias
        if self.n_group > 1:
            grouped = choice.view(t, self.n_group, -1)
            best = grouped.topk(2, dim=-1)[0].sum(-1).topk(self.topk_group, dim=-1)[1]
            keep = torch.zeros(t, self.n_group, dtype=torch.bool)
            keep[torch.arange(t)[:, None], best] = True
            choice = choice.masked_fill(~keep.repeat_interleave(self.e // self.n_group, dim=1),
                                        float("-inf"))
        chosen = choice.topk(self.k, dim=-1)[1]
        weights = scores.gather(1, chosen)
        if self.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        if "routed_scaling" not in WITHOUT:
            weights = weights * self.scaling
        self.day0_selected = chosen
        if self.latent and "latent" in WITHOUT:
            inputs = x[:, : self.latent]
        elif self.latent:
            inputs = self.fc1_latent_proj(x)
        else:
            inputs = x
        routed = torch.zeros_like(inputs)
        for i in range(t):
            for j in range(self.k):
                routed[i] += weights[i, j] * self.experts[int(chosen[i, j])](inputs[i:i + 1])[0]
        if self.latent and "latent" in WITHOUT:
            routed = F.pad(routed, (0, h - self.latent))
        elif self.latent:
            routed = self.fc2_latent_proj(routed)
        if "shared_experts" not in WITHOUT:
            routed = routed + self.shared_experts(x)
        return routed


class Block(nn.Module):
    def __init__(self, c, kind):
        super().__init__()
        self.norm = RMSNorm(c["hidden_size"], c["layer_norm_epsilon"])
        if kind == "M":
            self.mixer = Mamba2Mixer(c)
        elif kind == "*":
            self.mixer = Attention(c)
        elif kind == "-":
            self.mixer = Mlp(c["hidden_size"], c["intermediate_size"], c["mlp_bias"])
        elif kind == "E":
            self.mixer = Moe(c)
        else:
            raise NotImplementedError(f"nemotron_h layer kind '{kind}'")

    def forward(self, x):
        return x + self.mixer(self.norm(x))


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Block(c, kind) for kind in c["hybrid_override_pattern"])
        self.norm_f = RMSNorm(c["hidden_size"], c["layer_norm_epsilon"])

    def forward(self, ids):
        x = self.embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm_f(x)


class NemotronHForCausalLM(nn.Module):
    """Batch of one: forward(ids [1, T]) -> logits [1, T, V]; modules see [T, H]."""

    def __init__(self, c):
        super().__init__()
        self.backbone = Backbone(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def day0_set_prompt_length(self, length):
        """The first `length` tokens are the prompt: the steps whose states day0_states holds."""
        for module in self.modules():
            if isinstance(module, Mamba2Mixer):
                module.prompt = int(length)

    def forward(self, ids):
        return self.lm_head(self.backbone(ids[0]))[None]


def load(folder, config, dtype, without, read_safetensors):
    """(model, flat config) of a nemotron_h checkpoint; the MTP block (mtp.*) is not built (HF
    does not load it either)."""
    if config.get("quantization_config"):
        raise NotImplementedError("quantised nemotron_h checkpoints (the twin reads plain weights)")
    WITHOUT.clear()
    WITHOUT.update(without & SWITCHES)
    c = flat_config(config)
    model = NemotronHForCausalLM(c)
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        part, _ = read_safetensors(path)
        tensors.update(part)
    tensors = {n: t for n, t in tensors.items() if not n.startswith("mtp.")}
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing:
        raise KeyError(f"{folder}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        raise KeyError(f"{folder}: tensors the nemotron_h twin does not use {unexpected[:5]}")
    model = model.to(dtype)
    model.eval()
    return model, c
