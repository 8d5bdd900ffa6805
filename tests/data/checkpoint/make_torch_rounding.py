#!/usr/bin/python3
"""Writes torch_rounding.json: PyTorch's answers for F16/BF16/F32 conversions, as SHA-256 digests of
the little-endian result arrays plus a few readable samples. Run with Debian's /usr/bin/python3
(torch 1.13). NaN results are canonicalised (F32 0x7FC00000, F16 0x7E00, BF16 0x7FC0, sign
dropped) because NaN payloads and signs are not part of the contract."""
import hashlib
import json

import numpy as np
import torch


def canon16(bits, nan_bits, is_nan):
    out = bits.copy()
    out[is_nan] = nan_bits
    return out


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest()


all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
f16 = torch.from_numpy(all16.view(np.int16)).view(torch.float16)
bf16 = torch.from_numpy(all16.view(np.int16)).view(torch.bfloat16)

# 1. Every F16 value to F32.
f16_to_f32 = f16.float().numpy().view(np.uint32).copy()
f16_to_f32[np.isnan(f16.float().numpy())] = 0x7FC00000
# 2. Every BF16 value to F16, 3. every F16 value to BF16.
bf16_to_f16 = bf16.to(torch.float16)
b2h = canon16(bf16_to_f16.view(torch.int16).numpy().view(np.uint16), 0x7E00, torch.isnan(bf16_to_f16).numpy())
f16_to_bf16 = f16.to(torch.bfloat16)
h2b = canon16(f16_to_bf16.view(torch.int16).numpy().view(np.uint16), 0x7FC0, torch.isnan(f16_to_bf16).numpy())
# 4./5. F32 inputs: every top half with low halves that probe ties and near-ties of both roundings.
lows = np.array([0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
inputs = ((np.arange(65536, dtype=np.uint32)[:, None] << 16) | lows[None, :]).reshape(-1)
x = torch.from_numpy(inputs.view(np.float32))
to_bf16 = x.to(torch.bfloat16)
f2b = canon16(to_bf16.view(torch.int16).numpy().view(np.uint16), 0x7FC0, torch.isnan(to_bf16).numpy())
to_f16 = x.to(torch.float16)
f2h = canon16(to_f16.view(torch.int16).numpy().view(np.uint16), 0x7E00, torch.isnan(to_f16).numpy())

samples = []
for bits in [0x3F808000, 0x3F818000, 0x3F800001, 0x477FF000, 0x477FEFFF, 0x33800000, 0x33800001,
             0x387FC000, 0x7F7FFFFF, 0xC0490FDB, 0x00000001, 0x80000000]:
    v = torch.tensor([bits], dtype=torch.int64).to(torch.int32).view(torch.float32)
    samples.append({
        "f32": f"0x{bits:08X}",
        "bf16": f"0x{int(v.to(torch.bfloat16).view(torch.int16).item()) & 0xFFFF:04X}",
        "f16": f"0x{int(v.to(torch.float16).view(torch.int16).item()) & 0xFFFF:04X}",
    })

out = {
    "generator": f"tests/data/checkpoint/make_torch_rounding.py with torch {torch.__version__}",
    "f32_low_halves": [f"0x{v:04X}" for v in lows],
    "sha256": {
        "f16_to_f32": digest(f16_to_f32),
        "bf16_to_f16": digest(b2h),
        "f16_to_bf16": digest(h2b),
        "f32_to_bf16": digest(f2b),
        "f32_to_f16": digest(f2h),
    },
    "samples": samples,
}
with open("torch_rounding.json", "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")
