#!/usr/bin/env python3
"""Self-test of the Qwen3-Next / Qwen3.5 twin (day0_torch_qwen3next.py), in float64: the chunked
delta rule equals the recurrent one for every chunk size; a whole model gives the same logits with
every token in the chunked form, every token in the recurrent form, and the prompt chunked then
token by token (the engine's steps); and a decode step without the carried state differs.

    /usr/bin/python3 plugins/torch/test_qwen3next_twin.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import day0_torch_qwen3next as twin  # noqa: E402

TINY = {"model_type": "qwen3_next", "hidden_size": 32, "num_hidden_layers": 4,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 50,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 4,
        "linear_value_head_dim": 4, "linear_conv_kernel_dim": 4, "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
        "intermediate_size": 16}


def check_rule():
    torch.manual_seed(0)
    t, h, dk, dv = 11, 3, 5, 4
    q = twin.l2normalise(torch.randn(t, h, dk, dtype=torch.float64)) * dk ** -0.5
    k = twin.l2normalise(torch.randn(t, h, dk, dtype=torch.float64))
    v = torch.randn(t, h, dv, dtype=torch.float64)
    g, beta = -torch.rand(t, h, dtype=torch.float64), torch.rand(t, h, dtype=torch.float64)
    state = torch.randn(h, dk, dv, dtype=torch.float64)
    ref, ref_state = twin.recurrent_delta_rule(q, k, v, g, beta, state)
    for chunk in (1, 3, 4, 16, 64):
        out, end = twin.chunked_delta_rule(q, k, v, g, beta, state, chunk)
        assert (out - ref).abs().max() < 1e-12 and (end - ref_state).abs().max() < 1e-12, chunk


def logits(model, ids, form="", chunk="64"):
    os.environ["DAY0_TWIN_GDN_FORM"] = form
    os.environ["DAY0_TWIN_CHUNK"] = chunk
    with torch.no_grad():
        return model(torch.tensor([ids]))[0]


def check_model():
    torch.manual_seed(1)
    model = twin.Qwen3NextForCausalLM(twin.text_config(TINY)).double()
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
    print("qwen3next twin: chunked and recurrent forms agree; the carried state matters")
