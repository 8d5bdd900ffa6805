#!/usr/bin/python3
"""PyTorch's answer for the optimizer test (tests/core/train/optimizer_test.cpp): reads a JSON
list of problems (parameter shapes and values, one gradient per step, AdamW and schedule settings, the
clipping bound, the dtype), runs torch.nn.utils.clip_grad_norm_ then torch.optim.AdamW stepped by
a LambdaLR, and writes per step the learning rate used, the total norm clip_grad_norm_ returned
and every parameter after the step. Run with Debian's /usr/bin/python3 (torch 1.13).
Usage: torch_adamw.py PROBLEM.json ANSWER.json"""
import json
import math
import sys

import torch


def solve(problem):
    dtype = {"float32": torch.float32, "float64": torch.float64}[problem["dtype"]]
    params = []
    offset = 0
    for shape in problem["shapes"]:
        n = math.prod(shape)
        values = problem["params"][offset:offset + n]
        params.append(torch.tensor(values, dtype=dtype).reshape(shape).requires_grad_(True))
        offset += n

    sched = problem["schedule"]
    peak, floor, warmup, total = sched["peak"], sched["floor"], sched["warmup"], sched["total"]

    def multiplier(step):
        # Written from the schedule's definition (optimizer.h), independently of the C++.
        if step < warmup:
            return (step + 1) / warmup
        if sched["kind"] == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        r = floor / peak
        return r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * progress))

    opt = torch.optim.AdamW(params, lr=peak, betas=(problem["beta1"], problem["beta2"]),
                            eps=problem["eps"], weight_decay=problem["weight_decay"])
    lr_sched = torch.optim.lr_scheduler.LambdaLR(opt, multiplier)
    steps = []
    for grad in problem["grads"]:
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = torch.tensor(grad[offset:offset + n], dtype=dtype).reshape(p.shape)
            offset += n
        lr = opt.param_groups[0]["lr"]
        norm = torch.nn.utils.clip_grad_norm_(params, problem["max_norm"])
        opt.step()
        lr_sched.step()
        flat = torch.cat([p.detach().reshape(-1) for p in params]).double().tolist()
        steps.append({"lr": lr, "total_norm": float(norm), "params": flat})
    return steps


problems = json.load(open(sys.argv[1]))
json.dump({"torch": torch.__version__, "answers": [solve(p) for p in problems]}, open(sys.argv[2], "w"))
