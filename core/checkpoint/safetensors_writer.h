#pragma once

#include "base/dtype.h"
#include "base/progress.h"
#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// A tensor to be written: name, dtype, shape and a function that fills its bytes in place
/// (the span is exactly numel × dtype size bytes, inside the output file's memory map).
struct TensorSource {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::function<Result<void>(std::span<std::byte> out)> fill;

    /// Bytes the tensor occupies (numel × dtype size).
    [[nodiscard]] std::uint64_t bytes() const;
};

/// A source that copies `data` (kept alive by the caller until the write returns).
TensorSource tensorFromBytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
    std::span<const std::byte> data);

/// The header the writer would produce for these tensors (8-byte length + JSON padded with
/// spaces to a multiple of 8), with data_offsets in the writer's order: by descending element
/// size, then by name, so every tensor starts aligned to its element size. Fails on duplicate or
/// reserved names.
Result<std::string> buildSafetensorsHeader(
    std::vector<TensorSource>& tensors, const std::map<std::string, std::string>& metadata);

/// Writes a safetensors file the reference reader accepts. The data goes to a temporary file in
/// the same folder that is renamed over `path` only when complete, so a failure or cancellation
/// never leaves a partial file. Progress advances by bytes written. Returns the file size.
Result<std::uint64_t> writeSafetensors(const std::filesystem::path& path,
    std::vector<TensorSource> tensors, const std::map<std::string, std::string>& metadata = {},
    Progress* progress = nullptr, std::stop_token stop = {});

} // namespace day0::checkpoint
