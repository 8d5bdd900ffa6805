#pragma once

#include "base/result.h"
#include "numerics/dump.h"
#include "numerics/tensor.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace day0::numerics {

/// A tensor with the name it is stored under.
struct NamedTensor {
    std::string name;
    Tensor tensor;
};

// The tensor file I/O of dumps and engine checkpoints, kept behind these few functions so that
// the storage code can follow core/checkpoint's safetensors reader and writer.

/// Writes `tensors` as a safetensors file (header padded to 8 bytes, data in name order),
/// atomically. Error names the file.
Result<void> writeTensorFile(const std::filesystem::path& path,
    const std::vector<NamedTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of a safetensors file into memory, validating the header (size, JSON,
/// known dtypes, shape × dtype = byte span, offsets inside the data section without overlap).
Result<std::vector<NamedTensor>> readTensorFile(const std::filesystem::path& path);

/// Writes a dump folder: `dir/tensors.safetensors` (stored captures) and `dir/dump.json`.
Result<void> writeDump(const Dump& dump, const std::filesystem::path& dir);

/// Reads a dump folder written by writeDump (or by plugins/torch/day0_dump.py). Errors name the
/// folder and file and say what is missing or inconsistent.
Result<Dump> readDump(const std::filesystem::path& dir);

} // namespace day0::numerics
