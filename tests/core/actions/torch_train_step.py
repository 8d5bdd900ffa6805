#!/usr/bin/python3
"""PyTorch's answer for one training step of a checkpoint (tests/core/actions/
train_checkpoint_test.cpp): loads the checkpoint into the PyTorch twin (plugins/torch) in
float64, takes the mean next-token cross-entropy over every predicted position of the given
sequences, backpropagates, clips with torch.nn.utils.clip_grad_norm_, steps torch.optim.AdamW
once at the given learning rate, and writes every named parameter after the step (the tied
lm_head is the embedding, one parameter) with the loss and the norm clip_grad_norm_ returned.
Run with Debian's /usr/bin/python3 (torch 1.13).
Usage: torch_train_step.py PROBLEM.json ANSWER.json"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "plugins", "torch"))
import day0_torch_models  # noqa: E402


def main(problem_path, answer_path):
    with open(problem_path) as f:
        problem = json.load(f)
    day0_torch_models.EXACT = True
    model, config = day0_torch_models.load(problem["checkpoint"], torch.float64)
    if config.get("tie_word_embeddings") and hasattr(model, "lm_head"):
        model.lm_head.weight = model.model.embed_tokens.weight
    params = [(n, p) for n, p in model.named_parameters() if not n.endswith("e_score_correction_bias")]
    logits, targets = [], []
    for seq in problem["sequences"]:
        logits.append(model(torch.tensor([seq]))[0][:-1])
        targets.append(torch.tensor(seq[1:]))
    loss = F.cross_entropy(torch.cat(logits), torch.cat(targets))
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_([p for _, p in params], problem["max_grad_norm"])
    opt = torch.optim.AdamW([p for _, p in params], lr=problem["lr"],
                            betas=(problem["beta1"], problem["beta2"]), eps=problem["eps"],
                            weight_decay=problem["weight_decay"])
    opt.step()
    answer = {"loss": float(loss), "norm": float(norm),
              "params": {n: p.detach().reshape(-1).tolist() for n, p in params}}
    with open(answer_path, "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
