#!/usr/bin/env python3
"""Self-test of the Kimi-Linear twin (day0_torch_kimi_linear.py), in float64: the chunked KDA rule
equals the recurrent one for every chunk size (per-channel decays); a whole model gives the same
logits with every token chunked, every token recurrent, and the prompt chunked then token by
token (the engine's steps); and a decode step without the carried state differs.

    /usr/bin/python3 plugins/torch/test_kimi_linear_twin.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import day0_torch_kimi_linear as twin  # noqa: E402

TINY = {"model_type": "kimi_linear", "hidden_size": 32, "num_hidden_layers": 3,
        "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 50,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "kv_lora_rank": 8, "qk_nope_head_dim": 4,
        "qk_rope_head_dim": 4, "v_head_dim": 4, "mla_use_nope": True,
        "linear_attn_config": {"kda_layers": [1, 2], "full_attn_layers": [3], "num_heads": 2,
                               "head_dim": 4, "short_conv_kernel_size": 4},
        "num_experts": 4, "num_experts_per_token": 2, "num_shared_experts": 1,
        "moe_intermediate_size": 8, "first_k_dense_replace": 1, "intermediate_size": 16,
        "routed_scaling_factor": 2.0, "moe_renormalize": True}


def check_rule():
    torch.manual_seed(0)
    t, h, d = 11, 3, 5
    q = twin.l2normalise(torch.randn(t, h, d, dtype=torch.float64)) * d ** -0.5
    k = twin.l2normalise(torch.randn(t, h, d, dtype=torch.float64))
    v = torch.randn(t, h, d, dtype=torch.float64)
    g = -torch.rand(t, h, d, dtype=torch.float64)
    beta = torch.rand(t, h, dtype=torch.float64)
    state = torch.randn(h, d, d, dtype=torch.float64)
    ref, ref_state = twin.recurrent_kda(q, k, v, g, beta, state)
    for chunk in (1, 3, 4, 16, 64):
        out, end = twin.chunked_kda(q, k, v, g, beta, state, chunk)
        assert (out - ref).abs().max() < 1e-12 and (end - ref_state).abs().max() < 1e-12, chunk
    # The decay is per channel: one decay per head (the channels' mean) gives another result.
    flat = g.mean(dim=-1, keepdim=True).expand_as(g)
    assert (twin.recurrent_kda(q, k, v, flat, beta, state)[0] - ref).abs().max() > 1e-3


def logits(model, ids, form="", chunk="64"):
    os.environ["DAY0_TWIN_KDA_FORM"] = form
    os.environ["DAY0_TWIN_CHUNK"] = chunk
    with torch.no_grad():
        return model(torch.tensor([ids]))[0]


def check_model():
    torch.manual_seed(1)
    model = twin.KimiLinearForCausalLM(TINY).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    ids = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 2, 38]
    model.day0_set_prompt_length(9)
    stepped = logits(model, ids, chunk="4")
    for form, chunk in (("chunked", "3"), ("chunked", "64"), ("recurrent", "64")):
        other = logits(model, ids, form, chunk)
        assert (other - stepped).abs().max() < 1e-10 * stepped.abs().max(), (form, chunk)
    twin.WITHOUT.add("state")
    try:
        forgetful = logits(model, ids, chunk="4")
    finally:
        twin.WITHOUT.discard("state")
    assert (forgetful[:9] - stepped[:9]).abs().max() < 1e-12
    assert (forgetful[9:] - stepped[9:]).abs().max() > 1e-3 * stepped.abs().max()


if __name__ == "__main__":
    check_rule()
    check_model()
    print("kimi_linear twin: chunked and recurrent forms agree; the carried state matters")
