"""Minimal safetensors reading and writing with numpy (no `safetensors` package needed).

Reads every dtype day0 writes (F64, F32, F16, BF16, F8_E4M3, F8_E5M2, integers) into numpy
arrays; BF16 and FP8 are widened to float32 exactly. Writes F32/F64/I64/I32 arrays with a
header padded to 8 bytes, as the reference writer does.
"""

import json
import struct

import numpy as np

_PLAIN = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _PLAIN.items() if k not in ("BOOL",)}


def _fp8_table(exponent_bits, mantissa_bits, bias, has_inf):
    table = np.zeros(256, dtype=np.float32)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> mantissa_bits) & ((1 << exponent_bits) - 1)
        m = b & ((1 << mantissa_bits) - 1)
        all_ones = (1 << exponent_bits) - 1
        if has_inf and e == all_ones:
            v = np.inf if m == 0 else np.nan
        elif not has_inf and e == all_ones and m == (1 << mantissa_bits) - 1:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mantissa_bits)
        else:
            v = (1.0 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
        table[b] = sign * v
    return table


_E4M3 = _fp8_table(4, 3, 7, False)
_E5M2 = _fp8_table(5, 2, 15, True)


def read(path):
    """Returns ({name: numpy array}, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too small for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin:base + end]
        dtype = entry["dtype"]
        shape = tuple(entry["shape"])
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif dtype == "F8_E4M3":
            arr = _E4M3[np.frombuffer(raw, dtype=np.uint8)]
        elif dtype == "F8_E5M2":
            arr = _E5M2[np.frombuffer(raw, dtype=np.uint8)]
        elif dtype in _PLAIN:
            arr = np.frombuffer(raw, dtype=_PLAIN[dtype])
        else:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {dtype}")
        out[name] = arr.reshape(shape).copy()
    return out, header.get("__metadata__", {})


def write(path, tensors, metadata=None):
    """Writes {name: numpy array} (F64, F32, F16, integer dtypes) as a safetensors file."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        if arr.dtype not in _NAMES:
            raise ValueError(f"tensor '{name}': cannot store numpy dtype {arr.dtype}")
        raw = arr.tobytes()
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
