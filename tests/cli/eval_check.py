"""Independent numpy figures of `day0 eval` from the logits of two dumps (eval_cli_test.cpp).

Usage: eval_check.py REFERENCE.safetensors TARGET.safetensors IDS K

Reads the "lm_head" logits [tokens, vocab] of both (the dumps `day0 run --dump` writes), and
prints as JSON, over every position: KL(ref || target) mean, median, p99 and p99.9 (numpy's
default linear percentiles), the share of positions whose argmaxes agree, the mean top-K
overlap, and over the positions whose next token is in IDS both perplexities and the RMS of
p_target(next) - p_reference(next), as llama.cpp's perplexity --kl-divergence defines them
(tools/perplexity/perplexity.cpp). Written from those definitions, not from day0's C++.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "BF16": None}


def read_tensor(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        entry = header[name]
        begin, end = entry["data_offsets"]
        f.seek(8 + n + begin)
        raw = f.read(end - begin)
    dtype = DTYPES[entry["dtype"]]
    return np.frombuffer(raw, dtype=dtype).reshape(entry["shape"]).astype(np.float64)


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main():
    ref = read_tensor(sys.argv[1], "lm_head")
    tgt = read_tensor(sys.argv[2], "lm_head")
    ids = [int(v) for v in sys.argv[3].split(",")]
    k = int(sys.argv[4])
    lr, lt = log_softmax(ref), log_softmax(tgt)
    pr = np.exp(lr)
    kl = (pr * (lr - lt)).sum(axis=-1)
    same = ref.argmax(axis=-1) == tgt.argmax(axis=-1)
    topr = np.argsort(-ref, axis=-1, kind="stable")[:, :k]
    topt = np.argsort(-tgt, axis=-1, kind="stable")[:, :k]
    overlap = [len(set(a) & set(b)) / k for a, b in zip(topr, topt)]
    rows = min(len(ids) - 1, ref.shape[0])
    nxt = np.array(ids[1 : rows + 1])
    nll_r = -lr[np.arange(rows), nxt]
    nll_t = -lt[np.arange(rows), nxt]
    dp = np.exp(-nll_t) - np.exp(-nll_r)
    print(
        json.dumps(
            {
                "positions": int(kl.size),
                "kl_mean": float(kl.mean()),
                "kl_median": float(np.percentile(kl, 50)),
                "kl_p99": float(np.percentile(kl, 99)),
                "kl_p999": float(np.percentile(kl, 99.9)),
                "same_top": float(same.mean()),
                "topk_overlap": float(np.mean(overlap)),
                "reference_ppl": float(np.exp(nll_r.mean())),
                "target_ppl": float(np.exp(nll_t.mean())),
                "rms_delta_p": float(np.sqrt((dp * dp).mean())),
            }
        )
    )


if __name__ == "__main__":
    main()
