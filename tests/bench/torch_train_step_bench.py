#!/usr/bin/python3
"""PyTorch's side of tests/bench/train_step_bench.cpp: one full training step of the PyTorch twin
(plugins/torch) of a checkpoint, as day0's trainer takes it: the mean next-token cross-entropy
over every predicted position of the batch's sequences (each sequence through the twin on its
own, as the twins take one sequence), backward, torch.nn.utils.clip_grad_norm_ and one
torch.optim.AdamW step at a constant learning rate. The same batch every step. Prints one JSON
line: the median seconds of the timed steps and the first step's loss and gradient norm.
Run with Debian's /usr/bin/python3 (torch 1.13).
Usage: torch_train_step_bench.py PROBLEM.json"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "plugins", "torch"))
import day0_torch_models  # noqa: E402


def main(problem_path):
    with open(problem_path) as f:
        problem = json.load(f)
    dtype = torch.float64 if problem["dtype"] == "f64" else torch.float32
    # fp64: no float32 islands, as day0's fp64 trainer has none.
    day0_torch_models.EXACT = dtype == torch.float64
    model, config = day0_torch_models.load(problem["checkpoint"], dtype)
    if config.get("tie_word_embeddings") and hasattr(model, "lm_head"):
        model.lm_head.weight = model.model.embed_tokens.weight
    params = [p for n, p in model.named_parameters()
              if not n.endswith("e_score_correction_bias")]
    opt = torch.optim.AdamW(params, lr=problem["lr"], betas=(problem["beta1"], problem["beta2"]),
                            eps=problem["eps"], weight_decay=problem["weight_decay"])
    sequences = [torch.tensor([s]) for s in problem["sequences"]]
    targets = torch.cat([torch.tensor(s[1:]) for s in problem["sequences"]])

    def step():
        opt.zero_grad(set_to_none=True)
        logits = torch.cat([model(s)[0][:-1] for s in sequences])
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, problem["max_grad_norm"])
        opt.step()
        return float(loss), float(norm)

    first_loss, first_norm = step()  # also the warm-up
    times = []
    for _ in range(problem["timed_steps"]):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"seconds": times[len(times) // 2], "loss": first_loss,
                      "norm": first_norm, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main(sys.argv[1])
