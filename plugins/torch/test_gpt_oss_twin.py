#!/usr/bin/env python3
"""Self-test of the gpt_oss PyTorch twin (day0_torch_models.py), without the C++ engine.

    /usr/bin/python3 plugins/torch/test_gpt_oss_twin.py

Builds a tiny random gpt-oss checkpoint (hidden 64, one sliding and one full layer, 4 heads over
2 KV heads of 16, 4 experts top-2, intermediate 32, vocab 97, sliding window 3, non-zero biases
and sinks, YaRN with truncate false) and checks:
  1. day0_dump.py runs on it and writes the anchors (layers, self_attn, mlp, mlp.router and its
     #topk, lm_head) with the gpt_oss fingerprint;
  2. the twin's float64 logits equal a naive loop implementation written here (per token, per
     head, per key with the sink term, per expert) to 1e-10;
  3. an MXFP4 copy (experts quantised here: scale 2^(floor(log2 amax) - 2) per 32, nearest E2M1)
     loads and gives the logits of the unquantised checkpoint holding the dequantised experts,
     to 1e-12;
  4. removing the sinks or the window changes the logits;
plus YaRN checks (truncate false honoured; absent truncate unchanged) and the fp32 path.
Exits non-zero on the first failure.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import day0_torch_models  # noqa: E402
import safetensors_io  # noqa: E402

H, LAYERS, HEADS, KV, HD, E, K, I, V = 64, 2, 4, 2, 16, 4, 2, 32, 97
PROMPT = [5, 17, 42, 3, 88, 61, 29, 70]  # 8 tokens: the window of 3 cuts into them

CONFIG = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
    "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
    "num_key_value_heads": KV, "head_dim": HD, "num_local_experts": E, "num_experts_per_tok": K,
    "intermediate_size": I, "vocab_size": V, "sliding_window": 3,
    "layer_types": ["sliding_attention", "full_attention"], "attention_bias": True,
    "rms_norm_eps": 1e-5, "rope_theta": 150000, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "original_max_position_embeddings": 4096, "truncate": False},
    # Below the default 7 so that the clamps act on this tiny model's pre-activations.
    "swiglu_limit": 2.0, "tie_word_embeddings": False,
}

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def random_weights(seed=7):
    rng = np.random.default_rng(seed)

    def n(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"model.embed_tokens.weight": n(V, H), "model.norm.weight": 1 + n(H, scale=0.1),
         "lm_head.weight": n(V, H, scale=H ** -0.5)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + n(H, scale=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + n(H, scale=0.1)
        for name, rows in (("q_proj", HEADS * HD), ("k_proj", KV * HD), ("v_proj", KV * HD)):
            w[p + f"self_attn.{name}.weight"] = n(rows, H, scale=H ** -0.5)
            w[p + f"self_attn.{name}.bias"] = n(rows, scale=0.3)
        w[p + "self_attn.o_proj.weight"] = n(H, HEADS * HD, scale=(HEADS * HD) ** -0.5)
        w[p + "self_attn.o_proj.bias"] = n(H, scale=0.3)
        w[p + "self_attn.sinks"] = n(HEADS, scale=1.0) + 1.0
        w[p + "mlp.router.weight"] = n(E, H, scale=H ** -0.5)
        w[p + "mlp.router.bias"] = n(E, scale=0.3)
        w[p + "mlp.experts.gate_up_proj"] = n(E, H, 2 * I, scale=1.5 * H ** -0.5)
        w[p + "mlp.experts.gate_up_proj_bias"] = n(E, 2 * I, scale=0.3)
        w[p + "mlp.experts.down_proj"] = n(E, I, H, scale=I ** -0.5)
        w[p + "mlp.experts.down_proj_bias"] = n(E, H, scale=0.3)
    return w


def write_checkpoint(folder, config, tensors):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    safetensors_io.write(os.path.join(folder, "model.safetensors"), tensors)
    return folder


def twin_logits(folder, ids=PROMPT, dtype=torch.float64):
    model, _ = day0_torch_models.load(folder, dtype)
    with torch.no_grad():
        return model(torch.tensor([ids]))[0].double().numpy()


# ---- MXFP4 quantisation (written here, independently of the loader's dequantiser) ----

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantise_mxfp4(w):
    """w [E, A, B] (unquantised layout) -> (blocks U8 [E, B, A/32, 16], scales U8 [E, B, A/32],
    dequantised float64 [E, A, B])."""
    e, a, b = w.shape
    rows = np.swapaxes(w.astype(np.float64), 1, 2).reshape(e, b, a // 32, 32)
    amax = np.abs(rows).max(axis=-1)
    exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, -127).astype(np.int64)
    scaled = rows / np.ldexp(1.0, exp)[..., None]
    mag = np.abs(scaled)
    idx = np.abs(mag[..., None] - E2M1).argmin(axis=-1)  # nearest; ties go to the smaller code
    codes = (idx | np.where(scaled < 0, 8, 0)).astype(np.uint8)
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scales = (exp + 127).astype(np.uint8)
    deq = np.where(scaled < 0, -1.0, 1.0) * E2M1[idx] * np.ldexp(1.0, exp)[..., None]
    deq = np.swapaxes(deq.reshape(e, b, a), 1, 2)
    return blocks, scales, deq


# ---- the naive reference: loops over tokens, heads, keys and experts, float64 ----

def naive_logits(config, w, ids):
    c = day0_torch_models.gpt_oss_config(config)
    eps, window, limit = c["rms_norm_eps"], c["sliding_window"], c["swiglu_limit"]
    alpha = c.get("swiglu_alpha", 1.702)
    g = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    # Frequencies as HF holds them (fp32, checked against a float64 YaRN in check_yarn); the
    # attention factor from its formula.
    inv_freq = day0_torch_models.rope_parameters(c, HD)[0].double().numpy()
    attn_factor = 0.1 * math.log(c["rope_scaling"]["factor"]) + 1.0
    stats = {"clamped": 0, "window_cut": 0, "chosen": {}}

    def rms(x, weight):
        return x / math.sqrt(float(np.mean(x * x)) + eps) * weight

    def rope(vec, pos):
        half = HD // 2
        out = np.empty(HD)
        for i in range(half):
            cs = math.cos(pos * inv_freq[i]) * attn_factor
            sn = math.sin(pos * inv_freq[i]) * attn_factor
            out[i] = vec[i] * cs - vec[i + half] * sn
            out[i + half] = vec[i + half] * cs + vec[i] * sn
        return out

    t = len(ids)
    xs = [g["model.embed_tokens.weight"][tok].copy() for tok in ids]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        sliding = c["layer_types"][layer] == "sliding_attention"
        normed = [rms(x, g[p + "input_layernorm.weight"]) for x in xs]

        def proj(name, x):
            return g[p + f"self_attn.{name}.weight"] @ x + g[p + f"self_attn.{name}.bias"]

        qs = [proj("q_proj", x).reshape(HEADS, HD) for x in normed]
        ks = [proj("k_proj", x).reshape(KV, HD) for x in normed]
        vs = [proj("v_proj", x).reshape(KV, HD) for x in normed]
        sinks = g[p + "self_attn.sinks"]
        new = []
        for qi in range(t):
            heads_out = []
            for h in range(HEADS):
                kvh = h // (HEADS // KV)
                q = rope(qs[qi][h], qi)
                keys, logits = [], []
                for kj in range(qi + 1):
                    if sliding and kj <= qi - window:
                        stats["window_cut"] += 1
                        continue
                    keys.append(kj)
                    logits.append(float(q @ rope(ks[kj][kvh], kj)) / math.sqrt(HD))
                m = max(max(logits), float(sinks[h]))
                denom = sum(math.exp(s - m) for s in logits) + math.exp(float(sinks[h]) - m)
                acc = np.zeros(HD)
                for kj, s in zip(keys, logits):
                    acc += math.exp(s - m) / denom * vs[kj][kvh]
                heads_out.append(acc)
            attn = g[p + "self_attn.o_proj.weight"] @ np.concatenate(heads_out) + g[p + "self_attn.o_proj.bias"]
            new.append(xs[qi] + attn)
        xs = new
        new = []
        stats["chosen"][layer] = []
        for x in xs:
            y = rms(x, g[p + "post_attention_layernorm.weight"])
            router = g[p + "mlp.router.weight"] @ y + g[p + "mlp.router.bias"]
            chosen = sorted(range(E), key=lambda e: -router[e])[:K]
            stats["chosen"][layer].append(chosen)
            top = [router[e] for e in chosen]
            mx = max(top)
            weights = [math.exp(v - mx) / sum(math.exp(u - mx) for u in top) for v in top]
            out = np.zeros(H)
            for e, wt in zip(chosen, weights):
                gu = y @ g[p + "mlp.experts.gate_up_proj"][e] + g[p + "mlp.experts.gate_up_proj_bias"][e]
                hidden = np.empty(I)
                for j in range(I):
                    gate, up = gu[2 * j], gu[2 * j + 1]
                    if gate > limit or abs(up) > limit:
                        stats["clamped"] += 1
                    gate = min(gate, limit)
                    up = min(max(up, -limit), limit)
                    glu = gate / (1.0 + math.exp(-gate * alpha))
                    hidden[j] = (up + 1.0) * glu
                out += wt * (hidden @ g[p + "mlp.experts.down_proj"][e] + g[p + "mlp.experts.down_proj_bias"][e])
            new.append(x + out)
        xs = new
    logits = np.stack([g["lm_head.weight"] @ rms(x, g["model.norm.weight"]) for x in xs])
    return logits, stats


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def check_yarn():
    c = day0_torch_models.gpt_oss_config(CONFIG)
    s = c["rope_scaling"]
    d, base, orig, factor = HD, float(c["rope_theta"]), s["original_max_position_embeddings"], s["factor"]

    def yarn64(truncate):
        def cdim(r):
            return d * math.log(orig / (r * 2 * math.pi)) / (2 * math.log(base))
        low, high = cdim(s["beta_fast"]), cdim(s["beta_slow"])
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001
        out = []
        for i in range(d // 2):
            extrap = 1.0 / base ** (2 * i / d)
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            ext_factor = 1 - ramp
            out.append(extrap / factor * (1 - ext_factor) + extrap * ext_factor)
        return np.array(out)

    inv, att = day0_torch_models.rope_parameters(c, d)
    check(rel(inv.double().numpy(), yarn64(False)) < 1e-6 and abs(att - (0.1 * math.log(32) + 1)) < 1e-15,
          "YaRN (truncate false) matches a float64 evaluation of _compute_yarn_parameters")
    truncated = dict(c, rope_scaling=dict(s, truncate=True))
    absent = dict(c, rope_scaling={k: v for k, v in s.items() if k != "truncate"})
    inv_t, _ = day0_torch_models.rope_parameters(truncated, d)
    inv_a, _ = day0_torch_models.rope_parameters(absent, d)
    check(rel(inv_t.double().numpy(), yarn64(True)) < 1e-6, "YaRN (truncate true) matches float64")
    check(torch.equal(inv_t, inv_a), "YaRN without 'truncate' rounds the correction range (as before)")
    check(not torch.equal(inv, inv_t), "truncate false changes the tiny model's frequencies")
    given = dict(c, rope_scaling=dict(s, attention_factor=1.25))
    check(day0_torch_models.rope_parameters(given, d)[1] == 1.25, "rope_scaling.attention_factor is used")


def main():
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    check_yarn()
    w = random_weights()
    with tempfile.TemporaryDirectory(prefix="gpt_oss_twin_") as tmp:
        plain = write_checkpoint(os.path.join(tmp, "plain"), CONFIG, w)

        # 1. The dump script: anchors, router selection, fingerprint, logits.
        out = os.path.join(tmp, "dump")
        forced = PROMPT[5:]
        cmd = [sys.executable, os.path.join(HERE, "day0_dump.py"), plain, "--ids",
               ",".join(map(str, PROMPT[:5])), "--tokens", "4", "--forced", ",".join(map(str, forced)),
               "--dtype", "float64", "--out", out]
        run = subprocess.run(cmd, capture_output=True, text=True)
        check(run.returncode == 0, "day0_dump.py runs" + ("" if run.returncode == 0 else ": " + run.stderr[-2000:]))
        if run.returncode == 0:
            with open(os.path.join(out, "dump.json")) as f:
                info = json.load(f)
            names = {c["name"] for c in info["captures"]}
            want = {"model.embed_tokens", "model.norm", "lm_head"}
            for i in range(LAYERS):
                p = f"model.layers.{i}"
                want |= {p, p + ".input_layernorm", p + ".post_attention_layernorm", p + ".self_attn",
                         p + ".mlp", p + ".mlp.router", p + ".mlp.router#topk"}
            check(want <= names, "dump has the anchors (missing: {})".format(sorted(want - names)))
            check(not any("experts" in n for n in names), "mlp.experts is not an anchor")
            check(info["fingerprint"] == f"gpt_oss/h{H}/l{LAYERS}/a{HEADS}/kv{KV}/v{V}/e{E}k{K}",
                  "fingerprint " + info["fingerprint"])
            check(info["input_ids"] == PROMPT and info["prompt_length"] == 5, "dump fed the prompt and forced tokens")
            dumped, _ = safetensors_io.read(os.path.join(out, "tensors.safetensors"))
            check(dumped["model.layers.0.mlp.router"].shape == (len(PROMPT), E), "router capture is [T, E] logits")
            check(dumped["model.layers.1.mlp.router#topk"].shape == (len(PROMPT), K), "router #topk is [T, k]")
            lm = dumped["lm_head"]
        else:
            lm = None

        # 2. Twin against the naive loops.
        ours = twin_logits(plain)
        ref, stats = naive_logits(CONFIG, w, PROMPT)
        err = rel(ours, ref)
        check(err < 1e-10, f"twin float64 logits = naive loops (max|d|/max|ref| {err:.2e})")
        check(stats["clamped"] > 0 and stats["window_cut"] > 0,
                "the naive run exercised the clamps ({clamped}) and the window ({window_cut})".format(**stats))
        if lm is not None:
            check(rel(lm, ref) < 1e-10, "dump's lm_head = naive loops")
            for i in range(LAYERS):
                topk = dumped[f"model.layers.{i}.mlp.router#topk"]
                check(topk.tolist() == stats["chosen"][i], f"layer {i} router #topk = naive selection (ranked)")
                check(len({tuple(sorted(r)) for r in topk.tolist()}) > 1, f"layer {i} tokens route to different experts")
        f32 = twin_logits(plain, dtype=torch.float32)
        check(rel(f32, ref) < 1e-5, f"twin float32 logits near float64 ({rel(f32, ref):.2e})")

        # 3. MXFP4 experts.
        quant, deq = dict(w), dict(w)
        for i in range(LAYERS):
            for name in ("gate_up_proj", "down_proj"):
                key = f"model.layers.{i}.mlp.experts.{name}"
                blocks, scales, values = quantise_mxfp4(w[key])
                del quant[key]
                quant[key + "_blocks"], quant[key + "_scales"] = blocks, scales
                deq[key] = values
                check(blocks.dtype == np.uint8 and blocks.shape[-1] == 16 and scales.shape == blocks.shape[:-1],
                      f"{key} quantised to blocks {blocks.shape} scales {scales.shape}")
        qconfig = dict(CONFIG, quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})
        mx = twin_logits(write_checkpoint(os.path.join(tmp, "mxfp4"), qconfig, quant))
        dq = twin_logits(write_checkpoint(os.path.join(tmp, "dequant"), CONFIG, deq))
        err = rel(mx, dq)
        check(err < 1e-12, f"MXFP4 checkpoint = dequantised checkpoint ({err:.2e})")
        check(rel(dq, ours) > 1e-4, f"quantisation moved the logits ({rel(dq, ours):.2e})")
        naive_dq, _ = naive_logits(CONFIG, deq, PROMPT)
        check(rel(mx, naive_dq) < 1e-10, "MXFP4 twin = naive loops on the dequantised experts")

        # 4. The sinks and the window matter.
        nosink = dict(w)
        for i in range(LAYERS):
            nosink[f"model.layers.{i}.self_attn.sinks"] = np.full(HEADS, -np.inf, dtype=np.float32)
        a = twin_logits(write_checkpoint(os.path.join(tmp, "nosink"), CONFIG, nosink))
        check(np.isfinite(a).all() and rel(a, ours) > 1e-3, f"sinks = -inf changes the logits ({rel(a, ours):.2e})")
        b = twin_logits(write_checkpoint(os.path.join(tmp, "nowindow"), dict(CONFIG, sliding_window=1 << 20), w))
        check(rel(b, ours) > 1e-3, f"a huge sliding window changes the logits ({rel(b, ours):.2e})")
        # Without a window cut (first 3 positions) the sliding layer is a full one.
        check(rel(b[:3], ours[:3]) < 1e-12, "positions inside the window are unaffected by it")
        full = twin_logits(write_checkpoint(os.path.join(tmp, "allfull"),
                                            dict(CONFIG, layer_types=["full_attention"] * LAYERS), w))
        check(rel(full, b) < 1e-12, "all-full layer_types = huge window")

    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
