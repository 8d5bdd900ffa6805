"""DeepSeek Sparse Attention for the PyTorch twins: the lightning indexer of DeepSeek-V3.2
(deepseek_v32) and GLM-5 (glm_moe_dsa), and MLA restricted to the keys it selects.

Written from transformers' DeepseekV32Indexer / GlmMoeDsaIndexer and DeepSeek's reference
(inference/model.py, class Indexer), with HF module names (self_attn.indexer.{wq_b, wk, k_norm,
weights_proj}):
- q = wq_b(q_a_layernorm(q_a_proj(x))) as index_n_heads heads of index_head_dim, k =
  k_norm(wk(x)) (LayerNorm with bias, eps 1e-6), one key shared by the heads; the first
  qk_rope_head_dim lanes of each are rotated with MLA's frequencies: halves for DeepSeek-V3.2
  (its reference: "rope in indexer is not interleaved"), adjacent pairs when the config says
  indexer_rope_interleave (GLM-5), as vLLM's is_neox_style = not indexer_rope_interleave;
- score[s, t] = sum_h weights_proj(x)[s, h] * H^-1/2 * D^-1/2 * relu(q[s, h] . k[t]), plus the
  causal mask; each query keeps its index_topk best keys and MLA's scores get -inf elsewhere;
- GLM-5 layers whose indexer_types entry is "shared" have no indexer and reuse the previous
  layer's selection.
The reference's fp8 scoring (Hadamard rotation, per-block fp8 q and k) is a deployment
approximation that transformers does not apply either: the twin scores in its own dtype.

Status: checked against the engine for deepseek_v32 and for glm_moe_dsa, GLM-5 (interleaved
indexer rope) and GLM-5.2 (shared layers): tests/core/exec/dsa_test.cpp.

The selection is captured as `<layer>.self_attn.indexer#topk`: per query the kept key ids in
increasing order, -1 padding the rows of the first queries, which see fewer than top-k keys.

Test switches (DAY0_TWIN_WITHOUT, see day0_torch_models.py): indexer (dense MLA, no selection),
indexer_rope (the other rotary pairing), indexer_relu (no ReLU on the head scores),
indexer_weights (every head weighted alike), indexer_k_norm (keys not normalised),
indexer_shared (GLM-5 shared layers run dense instead of reusing the selection).
"""

import torch
import torch.nn.functional as F
from torch import nn

SWITCHES = {"indexer", "indexer_rope", "indexer_relu", "indexer_weights", "indexer_k_norm",
            "indexer_shared"}


def indexed_layers(c):
    """Which layers have their own indexer: all for deepseek_v32, indexer_types for GLM-5
    (default: max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0)."""
    n = c["num_hidden_layers"]
    if c["model_type"] != "glm_moe_dsa":
        return [True] * n
    if c.get("indexer_types") is not None:
        return [t == "full" for t in c["indexer_types"]]
    freq, offset = c.get("index_topk_freq", 1), c.get("index_skip_topk_offset", 2)
    return [max(i - offset + 1, 0) % freq == 0 for i in range(n)]


def _rotate(z, cos, sin, interleaved):
    """Rotates the last dim of z [T, ..., R] by cos/sin [T, R/2] (frequencies, not doubled)."""
    shape = z.shape
    half = shape[-1] // 2
    if interleaved:
        a, b = z[..., 0::2], z[..., 1::2]
    else:
        a, b = z[..., :half], z[..., half:]
    extra = z.dim() - 2
    cos = cos.view(cos.shape[0], *([1] * extra), half)
    sin = sin.view(sin.shape[0], *([1] * extra), half)
    ra, rb = a * cos - b * sin, b * cos + a * sin
    if interleaved:
        return torch.stack((ra, rb), dim=-1).reshape(shape)
    return torch.cat((ra, rb), dim=-1)


class Indexer(nn.Module):
    def __init__(self, c, without):
        super().__init__()
        h = c["hidden_size"]
        self.heads, self.dim = c["index_n_heads"], c["index_head_dim"]
        self.rope, self.topk = c["qk_rope_head_dim"], c["index_topk"]
        self.wq_b = nn.Linear(c["q_lora_rank"], self.heads * self.dim, bias=False)
        self.wk = nn.Linear(h, self.dim, bias=False)
        self.k_norm = nn.LayerNorm(self.dim, eps=1e-6)
        self.weights_proj = nn.Linear(h, self.heads, bias=False)
        interleave = bool(c.get("indexer_rope_interleave", False))
        self.interleave = not interleave if "indexer_rope" in without else interleave
        self.without = without

    def forward(self, x, qr, cos, sin):
        """x [T, H], qr [T, q_lora]; cos/sin [T, rope/2] (scaled). Returns (ids, scores)."""
        t = x.shape[0]
        q = self.wq_b(qr).view(t, self.heads, self.dim)
        q = torch.cat((_rotate(q[..., :self.rope], cos, sin, self.interleave), q[..., self.rope:]), -1)
        k = self.wk(x) if "indexer_k_norm" in self.without else self.k_norm(self.wk(x))
        k = torch.cat((_rotate(k[..., :self.rope], cos, sin, self.interleave), k[..., self.rope:]), -1)
        weights = self.weights_proj(x) * self.heads ** -0.5 * self.dim ** -0.5
        if "indexer_weights" in self.without:
            weights = torch.full_like(weights, float(weights.abs().mean()))
        head_scores = torch.einsum("shd,td->sht", q, k)
        if "indexer_relu" not in self.without:
            head_scores = F.relu(head_scores)
        scores = torch.einsum("sht,sh->st", head_scores, weights)
        causal = torch.full((t, t), float("-inf"), dtype=scores.dtype).triu(1)
        ids = (scores + causal).topk(min(self.topk, t), dim=-1).indices
        return ids, scores


def selection_rows(ids, topk):
    """The capture form: per query the kept, causally visible key ids in increasing order,
    padded with -1 to topk."""
    t = ids.shape[0]
    out = torch.full((t, topk), -1, dtype=torch.long)
    for s in range(t):
        kept = sorted(int(j) for j in ids[s] if int(j) <= s)
        out[s, :len(kept)] = torch.tensor(kept, dtype=torch.long)
    return out


def attach(attention, c, index, without):
    """Gives an MLAttention of layer `index` its DSA: an indexer when the layer has one."""
    attention.dsa_without = without
    attention.dsa_index = index
    attention.dsa_topk = c["index_topk"]
    attention.dsa_own = indexed_layers(c)[index]
    if attention.dsa_own:
        attention.indexer = IndexerModule(c, without)


class IndexerModule(Indexer):
    """Indexer whose forward returns (capture rows, scores), so that the dump hook records the
    selection; the kept ids themselves stay on the module for the attention to read."""

    def forward(self, x, qr, cos, sin):
        ids, scores = super().forward(x, qr, cos, sin)
        self.day0_ids = ids
        return selection_rows(ids, self.topk), scores


def link(model):
    """Points each layer without an indexer (GLM-5 "shared") at the previous layer, whose
    selection it reuses; plain attributes in a list so that torch does not register them."""
    previous = None
    for layer in model.model.layers:
        attn = getattr(layer, "self_attn", None)  # Nemotron-NAS no-op blocks have none
        if attn is None or not hasattr(attn, "dsa_own"):
            continue
        attn.dsa_previous = [previous]
        previous = attn


def mask(attention, x, qr, cos, sin):
    """The additive [T, T] mask of the selection (0 kept, -inf dropped), or None for dense."""
    without = attention.dsa_without
    if "indexer" in without:
        return None
    if attention.dsa_own:
        attention.indexer(x, qr, cos, sin)
        ids = attention.indexer.day0_ids
    else:
        if "indexer_shared" in without:
            attention.dsa_ids = None
            return None
        source = attention.dsa_previous[0]
        ids = source.dsa_ids if source is not None else None
        if ids is None:
            return None
    attention.dsa_ids = ids
    t = x.shape[0]
    return torch.full((t, t), float("-inf"), dtype=x.dtype).scatter(-1, ids, 0.0)
