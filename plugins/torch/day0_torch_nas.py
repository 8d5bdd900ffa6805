"""Nemotron-NAS (DeciLM: Llama-3.3-Nemotron-Super-49B and relatives) for the PyTorch twin.

A Llama decoder whose every layer has its own `block_configs` entry: attention `no_op` (no
attention and no input_layernorm), `replace_with_linear` (one Linear(H, H) `self_attn.linear_attn`
after the norm) or GQA with `n_heads_in_group` query heads per KV head; FFN `no_op` (no MLP and no
post_attention_layernorm), `replace_with_linear` (`mlp.linear_mlp`) or a SwiGLU MLP of width
int(2 * ffn_mult * H / 3) rounded up to a multiple of 256 (DeciLM's
_ffn_mult_to_intermediate_size, ffn_mult rounded to 6 decimals).
"""

from torch import nn

import day0_torch_models as base


def ffn_width(mult, hidden):
    mult = round(mult, 6)
    width = int(2 * mult * hidden / 3)
    if width % 256:
        width += 256 - width % 256
    return width


class LinearReplacement(nn.Module):
    """A block replaced by one bias-free Linear(H, H), under its checkpoint name."""

    def __init__(self, h, name):
        super().__init__()
        self.name = name
        setattr(self, name, nn.Linear(h, h, bias=False))

    def forward(self, x):
        return getattr(self, self.name)(x)


class DeciLMLayer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        block = c["block_configs"][index]
        attention, ffn = block["attention"], block["ffn"]
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.attends = not attention.get("no_op", False)
        self.feeds = not ffn.get("no_op", False)
        if self.attends:
            self.input_layernorm = base.RMSNorm(h, eps)
            if attention.get("replace_with_linear", False):
                self.self_attn = LinearReplacement(h, "linear_attn")
            else:
                heads = c["num_attention_heads"]
                self.self_attn = base.Attention(
                    dict(c, num_key_value_heads=heads // attention["n_heads_in_group"]))
        if self.feeds:
            self.post_attention_layernorm = base.RMSNorm(h, eps)
            if ffn.get("replace_with_linear", False):
                self.mlp = LinearReplacement(h, "linear_mlp")
            else:
                self.mlp = base.MLP(h, ffn_width(ffn["ffn_mult"], h))

    def forward(self, x):
        if self.attends:
            x = x + self.self_attn(self.input_layernorm(x))
        if self.feeds:
            x = x + self.mlp(self.post_attention_layernorm(x))
        return x
