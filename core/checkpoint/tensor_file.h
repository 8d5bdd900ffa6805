#pragma once

#include "base/result.h"
#include "numerics/dump.h"
#include "numerics/tensor.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// A tensor with the name it is stored under.
struct NamedTensor {
    std::string name;
    numerics::Tensor tensor;
};

// The tensor files of dumps (numerics), on this module's safetensors reader (validating,
// memory-mapped) and writer (atomic, reference-reader conformant).

/// Writes `tensors` as a safetensors file, atomically. Error names the file.
Result<void> writeTensorFile(const std::filesystem::path& path,
    const std::vector<NamedTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of a safetensors file into memory (copies), with every check of the
/// reference reader. Errors name the file and the tensor.
Result<std::vector<NamedTensor>> readTensorFile(const std::filesystem::path& path);

/// Writes a dump folder: `dir/tensors.safetensors` (stored captures) and `dir/dump.json`.
Result<void> writeDump(const numerics::Dump& dump, const std::filesystem::path& dir);

/// Reads a dump folder written by writeDump (or by plugins/torch/day0_dump.py). Errors name the
/// folder and file and say what is missing or inconsistent.
Result<numerics::Dump> readDump(const std::filesystem::path& dir);

} // namespace day0::checkpoint
