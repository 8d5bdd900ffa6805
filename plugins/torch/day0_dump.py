#!/usr/bin/env python3
"""day0 PyTorch dump bridge: forward hooks that write a day0 dump.

A day0 dump is a folder with `tensors.safetensors` (captured tensors keyed by capture name) and
`dump.json` (model fingerprint, precision, backend, input ids, per-capture statistics). Capture
names are Hugging Face module paths (`model.layers.7.self_attn`, `lm_head`), so a dump of any
`torch.nn.Module` with HF module names lines up with `day0 run --dump` by name:

    from day0_dump import DumpRecorder
    rec = DumpRecorder(model, config)            # hooks on the day0 anchors
    with torch.no_grad():
        model(input_ids)                          # one forward over the whole sequence
    rec.write("torch-dump", input_ids=ids, prompt_length=5, precision="fp32")
    rec.close()

Tuple outputs (HF attention and decoder layers) keep their first tensor; a batch of one is
squeezed so tensors are [tokens, ...] like day0's; a router returning (indices, weights) is
stored as `<anchor>#topk`, and a sigmoid router's selection scores (sigma(logit) + bias, what
it ranked by; dump.json's extra "router" then names its group stage) as `<anchor>#score`. Each
forward call appends its rows, so step-by-step decoding gives
the same [positions, ...] tensors as one long forward. With states=True (--state) the recurrent
layers of the twins (Gated DeltaNet, Mamba-2) add their state after the prompt and after each
later token as `<anchor>#state` and their conv window as `<anchor>#conv_state`, one row per step.

Run as a script, it computes a checkpoint's reference with the models of day0_torch_models.py:

    /usr/bin/python3 day0_dump.py CHECKPOINT --ids 3,17,42 --tokens 4 --out DIR [--dtype float32]

With --grad it writes the gradient dump of `day0 run --grad` instead (exec/backward.h): one
forward over the ids with autograd, the mean next-token cross-entropy (position i predicts id
i + 1, as HF's labels=input_ids; --targets gives them explicitly, -1 skips one), and its
backward; the dump holds the logits as `lm_head`, each anchor's output gradient as
`<anchor>#grad` and each parameter's gradient as `<parameter>#grad` (an expert that received no
token: zeros; tied embeddings: one model.embed_tokens.weight) and, as a forward dump names
them, each MoE router's logits and choices (`<router>#topk`, a sigmoid router's `#score`). In
float64 the models then keep
every HF float32 island (norms, softmaxes, RoPE tables) in float64, as day0's fp64 engine does.
"""

import argparse
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

# Module paths captured by default: the anchors of DESIGN.md §3.
DEFAULT_ANCHORS = re.compile(
    r"^(model\.embed_tokens|model\.norm|lm_head|"
    r"model\.layers\.\d+(\.(input_layernorm|post_attention_layernorm|self_attn|self_attn\.indexer|linear_attn|"
    r"self_attn\.compressor\.indexer|mlp|"
    r"block_sparse_moe|"
    r"mlp\.gate|mlp\.gate\.wg|mlp\.router|block_sparse_moe\.gate|mlp\.shared_experts|mlp\.shared_expert|"
    r"block_sparse_moe\.shared_experts|"
    r"mlp\.shared_mlp|"
    r"feed_forward|feed_forward\.router|feed_forward\.shared_expert|"
    r"pre_feedforward_layernorm|post_feedforward_layernorm|router|experts))?|"
    r"(model\.)?visual\.(blocks\.\d+(\.(attn|mlp))?|merger|deepstack_merger_list\.\d+)|"
    r"model\.vision_tower(\.(patch_embedder|encoder(\.layers\.\d+(\.(self_attn|mlp))?)?|pooler))?|"
    r"model\.embed_vision|"
    r"backbone\.(embeddings|norm_f|layers\.\d+(\.(norm|mixer|mixer\.norm|mixer\.gate|mixer\.shared_experts))?))$")


def fingerprint(config):
    """The architecture fingerprint day0 writes (exec/engine.h modelFingerprint)."""
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    # Nemotron-NAS: the KV heads of the first attention block (its own n_heads_in_group).
    for block in config.get("block_configs") or []:
        attention = block.get("attention", {})
        if not attention.get("no_op") and not attention.get("replace_with_linear"):
            kv = heads // attention["n_heads_in_group"]
            break
    text = "{}/h{}/l{}/a{}/kv{}/v{}".format(
        config.get("model_type", ""), config["hidden_size"], config["num_hidden_layers"], heads,
        kv, config["vocab_size"])
    experts = config.get("n_routed_experts") or config.get("num_local_experts") or config.get("num_experts")
    if experts:
        top_k = (config.get("num_experts_per_tok") or config.get("num_experts_per_token")  # Kimi
                 or config.get("moe_topk") or 0)
        if isinstance(top_k, list):  # Hunyuan's per-layer moe_topk (uniform)
            top_k = top_k[0]
        text += "/e{}k{}".format(experts, top_k)
    return text


def _stats(arr):
    a = np.asarray(arr, dtype=np.float64).ravel()
    finite = a[np.isfinite(a)]
    stats = {"count": int(a.size), "nan": int(np.isnan(a).sum()), "inf": int(np.isinf(a).sum())}
    if finite.size:
        stats.update(min=float(finite.min()), max=float(finite.max()), mean=float(finite.mean()),
                     rms=float(np.sqrt(np.mean(finite * finite))), abs_max=float(np.abs(finite).max()))
    else:
        stats.update(min=0.0, max=0.0, mean=0.0, rms=0.0, abs_max=0.0)
    return stats


def _as_rows(t):
    """[1, T, ...] -> [T, ...]; numpy, float32/float64 kept, other floats widened to float32."""
    t = t.detach()
    if t.dim() >= 2 and t.shape[0] == 1:
        t = t[0]
    if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64):
        t = t.float()
    if not t.is_floating_point():
        t = t.long()
    return t.cpu().numpy()


class DumpRecorder:
    """Forward hooks on a module tree; collects outputs (and inputs if asked) by module path."""

    def __init__(self, model, config, anchors=DEFAULT_ANCHORS, inputs=False, states=False):
        self.config = config
        self.captures = {}  # name -> list of per-call arrays
        self.ops = {}
        self.order = []
        self.handles = []
        self.router = None  # dump.json extra "router" (scoring and group stage), when seen
        for name, module in model.named_modules():
            if name and (anchors is None or anchors.match(name)):
                self.handles.append(module.register_forward_hook(self._hook(name, inputs)))
                if states:
                    # Recurrent layers of the twins keep their per-step states when asked.
                    module.day0_keep_states = True

    def _add(self, name, arr, op=""):
        if name not in self.captures:
            self.captures[name] = []
            self.order.append(name)
            self.ops[name] = op
        self.captures[name].append(arr)

    def _hook(self, name, inputs):
        def hook(module, args, output):
            if inputs and args and torch.is_tensor(args[0]):
                self._add(name + "#in0", _as_rows(args[0]))
            steps = getattr(module, "day0_states", None)
            if steps is not None:
                # One row per step (the prompt, then each decode token), as the engine's.
                for suffix, i in (("#state", 0), ("#conv_state", 1)):
                    rows = torch.stack([step[i] for step in steps]).detach().cpu().numpy()
                    self._add(name + suffix, rows)
                module.day0_states = None
            # MoE blocks of day0_torch_models leave their routing choice here.
            selected = getattr(module, "day0_selected", None)
            if torch.is_tensor(output):
                self._add(name, _as_rows(output), "moe" if selected is not None else "")
                if selected is not None:
                    router = getattr(module, "day0_router", "gate")
                    self._add(name + "." + router + "#topk", _as_rows(selected), "router_selection")
                    module.day0_selected = None
                    scores = getattr(module, "day0_scores", None)
                    if scores is not None:
                        # Sigmoid routers: sigma(logit) + bias, what the selection ranked by.
                        self._add(name + "." + router + "#score", _as_rows(scores), "router_score")
                        self.router = module.day0_scoring
                        module.day0_scores = None
                return
            if isinstance(output, (tuple, list)) and output:
                tensors = [o for o in output if torch.is_tensor(o)]
                if len(tensors) >= 2 and not tensors[0].is_floating_point():
                    self._add(name + "#topk", _as_rows(tensors[0]), "router_selection")
                elif tensors:
                    self._add(name, _as_rows(tensors[0]))
        return hook

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def write(self, folder, input_ids, prompt_length, precision="fp32", generated_ids=(),
              backend="pytorch", model_name="", extra=None):
        os.makedirs(folder, exist_ok=True)
        tensors = {}
        entries = []
        for name in self.order:
            arr = np.concatenate(self.captures[name], axis=0)
            if arr.dtype not in (np.float32, np.float64, np.int64):
                arr = arr.astype(np.float32)
            tensors[name] = arr
            entry = {"name": name, "shape": list(arr.shape),
                     "dtype": {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
                               np.dtype(np.int64): "I64"}[arr.dtype],
                     "stored": True, "stats": _stats(arr)}
            if self.ops.get(name):
                entry["op"] = self.ops[name]
            entries.append(entry)
        safetensors_io.write(os.path.join(folder, "tensors.safetensors"), tensors, {"format": "day0-dump"})
        info = {"format": "day0-dump", "version": 1, "model": model_name,
                "fingerprint": fingerprint(self.config), "precision": precision, "backend": backend,
                "mode": "propagate", "input_ids": [int(i) for i in input_ids],
                "prompt_length": int(prompt_length), "generated_ids": [int(i) for i in generated_ids],
                "num_layers": int(self.config["num_hidden_layers"]), "captures": entries,
                "extra": dict(extra or {})}
        if self.router is not None:
            info["extra"]["router"] = self.router
        with open(os.path.join(folder, "dump.json"), "w") as f:
            json.dump(info, f, indent=1)


class GradRecorder:
    """Forward hooks that keep each anchor's output so that its gradient can be read after the
    backward (`<anchor>#grad`)."""

    def __init__(self, model, anchors=DEFAULT_ANCHORS):
        self.outputs = {}
        self.order = []
        self.handles = [module.register_forward_hook(self._hook(name))
                        for name, module in model.named_modules()
                        if name and (anchors is None or anchors.match(name))]

    def _hook(self, name):
        def hook(module, args, output):
            if isinstance(output, (tuple, list)):
                output = next((o for o in output if torch.is_tensor(o)), None)
            if torch.is_tensor(output) and output.requires_grad:
                output.retain_grad()
                self.outputs[name] = output
                self.order.append(name)
        return hook

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def gradients(model, config, ids, targets):
    """(logits, loss, [(capture name, array)]) of one forward and backward over `ids`."""
    if config.get("tie_word_embeddings") and hasattr(model, "lm_head"):
        model.lm_head.weight = model.model.embed_tokens.weight  # one parameter, as HF ties them
    recorder = GradRecorder(model)
    # The forward's routing (each MoE router's logits and choices, a sigmoid router's selection
    # scores), named as a forward dump names them: day0's gradient dumps carry it too, so that a
    # comparison finds the tokens whose experts flipped.
    routing = DumpRecorder(model, config)
    model.zero_grad(set_to_none=True)
    logits = model(torch.tensor([ids]))[0]
    target = torch.tensor(targets)
    counted = target >= 0
    loss = F.cross_entropy(logits[counted], target[counted])
    loss.backward()
    recorder.close()
    routing.close()
    captures = [("lm_head", _as_rows(logits))]
    for name in reversed(recorder.order):  # the backward's order, from the loss down, as day0's
        out = recorder.outputs[name]
        grad = out.grad if out.grad is not None else torch.zeros_like(out)
        captures.append((name + "#grad", _as_rows(grad)))
    for name, param in model.named_parameters():
        if name.endswith("e_score_correction_bias"):
            continue  # ranks the experts only (a buffer in HF): no gradient reaches it
        grad = param.grad if param.grad is not None else torch.zeros_like(param)
        captures.append((name + "#grad", grad.detach().cpu().numpy()))
    for name in routing.order:
        if name.endswith(("#topk", "#score")) or name + "#topk" in routing.captures:
            captures.append((name, np.concatenate(routing.captures[name], axis=0)))
    return logits, float(loss), captures, routing.router


def write_captures(folder, config, captures, input_ids, precision, model_name, extra):
    """A day0 dump of (name, array) captures in order (DumpRecorder.write's format)."""
    os.makedirs(folder, exist_ok=True)
    tensors, entries = {}, []
    for name, arr in captures:
        arr = np.ascontiguousarray(arr)
        if arr.dtype not in (np.float32, np.float64, np.int64):
            arr = arr.astype(np.float32)
        tensors[name] = arr
        entry = {"name": name, "shape": list(arr.shape),
                 "dtype": {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
                           np.dtype(np.int64): "I64"}[arr.dtype],
                 "stored": True, "stats": _stats(arr)}
        entries.append(entry)
    safetensors_io.write(os.path.join(folder, "tensors.safetensors"), tensors, {"format": "day0-dump"})
    info = {"format": "day0-dump", "version": 1, "model": model_name,
            "fingerprint": fingerprint(config), "precision": precision, "backend": "pytorch",
            "mode": "propagate", "input_ids": [int(i) for i in input_ids],
            "prompt_length": len(input_ids), "generated_ids": [],
            "num_layers": int(config["num_hidden_layers"]), "captures": entries, "extra": dict(extra)}
    with open(os.path.join(folder, "dump.json"), "w") as f:
        json.dump(info, f, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write a day0 dump of a checkpoint computed with PyTorch.")
    parser.add_argument("checkpoint", help="folder with config.json and *.safetensors")
    parser.add_argument("--ids", required=True, help="prompt token ids, comma-separated")
    parser.add_argument("--tokens", type=int, default=1, help="greedy tokens to generate (default 1)")
    parser.add_argument("--forced", default="", help="tokens fed on decode steps instead of greedy picks")
    parser.add_argument("--out", required=True, help="dump folder to write")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16", "float16"])
    parser.add_argument("--inputs", action="store_true", help="also capture module inputs (#in0)")
    parser.add_argument("--state", action="store_true",
                        help="also capture recurrent layers' states after each step (#state, #conv_state)")
    parser.add_argument("--image", default="", help="binary PPM image for a Qwen VL checkpoint")
    parser.add_argument("--grad", action="store_true",
                        help="write the loss's gradients (<anchor>#grad, <parameter>#grad) instead")
    parser.add_argument("--targets", default="",
                        help="with --grad: one target id per input id (-1: not counted); default next token")
    args = parser.parse_args(argv)

    import day0_torch_models  # noqa: E402  (next to this file)

    dtype = getattr(torch, args.dtype)
    names = {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16", "float16": "fp16"}
    if args.grad:
        day0_torch_models.EXACT = dtype == torch.float64
        model, config = day0_torch_models.load(args.checkpoint, dtype)
        ids = [int(x) for x in args.ids.split(",") if x]
        targets = [int(x) for x in args.targets.split(",") if x] if args.targets else ids[1:] + [-1]
        if len(targets) != len(ids):
            parser.error(f"--targets needs {len(ids)} ids, one per input id")
        _, loss, captures, router = gradients(model, config, ids, targets)
        extra = {"torch": torch.__version__, "gradients": True, "loss": loss, "targets": targets}
        if router is not None:
            extra["router"] = router
        write_captures(args.out, config, captures, ids, names[args.dtype],
                       os.path.basename(os.path.normpath(args.checkpoint)), extra)
        print(json.dumps({"dump": args.out, "loss": loss, "captures": len(captures)}))
        return 0
    model, config = day0_torch_models.load(args.checkpoint, dtype)
    prompt = [int(x) for x in args.ids.split(",") if x]
    forced = [int(x) for x in args.forced.split(",") if x]
    if forced and len(forced) < args.tokens - 1:
        parser.error(f"--forced needs {args.tokens - 1} tokens")
    ids = list(prompt)
    generated = []
    if hasattr(model, "day0_set_prompt_length"):  # recurrent layers step as the engine does
        model.day0_set_prompt_length(len(prompt))
    run = model
    if args.image and config.get("model_type") in ("gemma4", "gemma4_text"):
        import day0_torch_gemma4_vision  # noqa: E402
        import day0_torch_vl  # noqa: E402
        import safetensors_io as _io  # noqa: E402
        model, (inputs, vision) = day0_torch_gemma4_vision.wrap(
            model, args.checkpoint, dtype, day0_torch_models.WITHOUT, _io.read)
        image = inputs(day0_torch_vl.read_ppm(args.image), vision)

        def run(x):
            return model(x, image)
    elif args.image:
        import day0_torch_vl  # noqa: E402
        image = day0_torch_vl.image_patches(day0_torch_vl.read_ppm(args.image), config["vision_config"],
                                            config["model_type"])

        def run(x):
            return model(x, image)
    with torch.no_grad():
        # Greedy generation by full recomputation, then one hooked forward over every fed token.
        for step in range(args.tokens):
            logits = run(torch.tensor([ids]))
            generated.append(int(torch.argmax(logits[0, -1].double())))
            if step + 1 < args.tokens:
                ids.append(forced[step] if forced else generated[-1])
        recorder = DumpRecorder(model, config, inputs=args.inputs, states=args.state)
        run(torch.tensor([ids]))
        recorder.close()
    recorder.write(args.out, ids, len(prompt), precision=names[args.dtype], generated_ids=generated,
                   model_name=os.path.basename(os.path.normpath(args.checkpoint)),
                   extra={"torch": torch.__version__})
    print(json.dumps({"dump": args.out, "generated": generated, "captures": len(recorder.order)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
