#!/usr/bin/env python3
"""Writes broken/: one small checkpoint per way a checkpoint can be broken. Each case is a folder
(or file) that `day0 verify` must reject with one line naming the file and the tensor (exit 2;
exit 1 for the hash mismatch). The files double as seeds for the fuzz targets. Plain Python, no
dependencies: rerun after changing a case."""
import hashlib
import json
import os
import shutil
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "broken")


def st(header, data, pad=True):
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if pad:
        raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def good_bytes():
    return st({"__metadata__": {"format": "pt"}, "model.norm.weight": entry("BF16", [4], 0, 8),
               "lm_head.weight": entry("BF16", [2, 4], 8, 24)}, bytes(range(24)))


def write(case, name, data):
    d = os.path.join(ROOT, case)
    os.makedirs(d, exist_ok=True)
    mode = "w" if isinstance(data, str) else "wb"
    with open(os.path.join(d, name), mode) as f:
        f.write(data)


shutil.rmtree(ROOT, ignore_errors=True)
good = good_bytes()
write("truncated", "model.safetensors", good[:-5])
write("header_too_long", "model.safetensors", struct.pack("<Q", 200_000_000) + b"{}")
write("overlapping_offsets", "model.safetensors",
      st({"a.weight": entry("U8", [8], 0, 8), "b.weight": entry("U8", [8], 4, 12)}, bytes(12)))
write("size_mismatch", "model.safetensors",
      st({"model.embed_tokens.weight": entry("F32", [3, 2], 0, 16)}, bytes(16)))
write("bad_json", "model.safetensors", st('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]', bytes(4)))
write("duplicate_names", "model.safetensors",
      st('{"x.weight":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
         '"x.weight":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', bytes(2)))
write("unknown_dtype", "model.safetensors", st({"q.weight": entry("Q4_K", [32], 0, 18)}, bytes(18)))
write("trailing_bytes", "model.safetensors", good + b"PK\x03\x04")
write("missing_shard", "model-00001-of-00002.safetensors", good)
write("missing_shard", "model.safetensors.index.json", json.dumps({
    "metadata": {"total_size": 40},
    "weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors",
                   "lm_head.weight": "model-00001-of-00002.safetensors",
                   "model.layers.0.mlp.down_proj.weight": "model-00002-of-00002.safetensors"}}, indent=2))
write("unindexed_tensor", "model-00001-of-00001.safetensors", good)
write("unindexed_tensor", "model.safetensors.index.json", json.dumps({
    "metadata": {"total_size": 24},
    "weight_map": {"model.norm.weight": "model-00001-of-00001.safetensors"}}, indent=2))
write("bad_index_json", "model-00001-of-00001.safetensors", good)
write("bad_index_json", "model.safetensors.index.json", '{"weight_map": {"lm_head.weight": }')
write("wrong_hash", "model.safetensors", good)
write("wrong_hash", "day0-manifest.json", json.dumps({
    "format": "day0-manifest", "version": 1,
    "files": [{"file": "model.safetensors", "size": len(good),
               "sha256": hashlib.sha256(good[:-1] + b"\xff").hexdigest()}]}, indent=2) + "\n")
write("pickle", "pytorch_model.bin", b"PK\x03\x04" + bytes(60))
gguf = (b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + struct.pack("<Q", 20) + b"general.architecture"
        + struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama"
        + struct.pack("<Q", 12) + b"token_embd.w" + struct.pack("<I", 2) + struct.pack("<QQ", 8, 4)
        + struct.pack("<I", 0) + struct.pack("<Q", 0))
gguf += bytes((32 - len(gguf) % 32) % 32) + bytes(64)  # data for 32 F32, cut in half
write("truncated_gguf", "model.gguf", gguf)

# Seeds for the fuzz targets (tests/fuzz/corpus/<target>/): the broken files plus valid ones.
FUZZ = os.path.join(os.path.dirname(ROOT), "..", "..", "fuzz", "corpus")


def seed(target, name, data):
    d = os.path.join(FUZZ, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


for target in ("safetensors_header", "shard_index", "gguf_header", "manifest"):
    shutil.rmtree(os.path.join(FUZZ, target), ignore_errors=True)
seed("safetensors_header", "good.safetensors", good)
seed("safetensors_header", "empty.safetensors", st({}, b""))
seed("safetensors_header", "scalar_and_empty.safetensors",
     st({"s": entry("F64", [], 0, 8), "e": entry("F8_E4M3", [0, 7], 8, 8)}, bytes(8)))
for case in sorted(os.listdir(ROOT)):
    path = os.path.join(ROOT, case, "model.safetensors")
    if os.path.exists(path):
        with open(path, "rb") as f:
            seed("safetensors_header", case + ".safetensors", f.read())
    path = os.path.join(ROOT, case, "model.safetensors.index.json")
    if os.path.exists(path):
        with open(path, "rb") as f:
            seed("shard_index", case + ".json", f.read())
seed("shard_index", "good.json", json.dumps({"metadata": {"total_size": 24, "total_parameters": 12},
                                             "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                            "b": "sub/model-00002-of-00002.safetensors"}}))
seed("gguf_header", "truncated.gguf", gguf)
valid = (b"GGUF" + struct.pack("<IQQ", 3, 2, 3)
         + struct.pack("<Q", 20) + b"general.architecture" + struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama"
         + struct.pack("<Q", 17) + b"general.alignment" + struct.pack("<I", 4) + struct.pack("<I", 64)
         + struct.pack("<Q", 6) + b"tokens" + struct.pack("<I", 9) + struct.pack("<IQ", 8, 2)
         + struct.pack("<Q", 1) + b"a" + struct.pack("<Q", 2) + b"bc"
         + struct.pack("<Q", 1) + b"w" + struct.pack("<I", 2) + struct.pack("<QQ", 32, 2)
         + struct.pack("<I", 8) + struct.pack("<Q", 0)
         + struct.pack("<Q", 1) + b"v" + struct.pack("<I", 1) + struct.pack("<Q", 4)
         + struct.pack("<I", 0) + struct.pack("<Q", 128))
valid += bytes((64 - len(valid) % 64) % 64) + bytes(128 + 16)
seed("gguf_header", "valid_small.gguf", valid)
with open(os.path.join(ROOT, "wrong_hash", "day0-manifest.json"), "rb") as f:
    seed("manifest", "day0-manifest.json", f.read())
seed("manifest", "SHA256SUMS", hashlib.sha256(good).hexdigest() + "  model.safetensors\n"
     + hashlib.sha256(b"").hexdigest() + " *config.json\n# comment\n\\" + "0" * 64 + "  a\\\\b\n"
     + "SHA256 (c) = " + "A" * 64 + "\n")
