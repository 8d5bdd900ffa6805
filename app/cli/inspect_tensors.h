#pragma once

#include "command.h"

#include <string>

namespace day0::cli {

/// `day0 inspect <checkpoint or file> --tensors`: lists the tensors of a checkpoint folder, a
/// .safetensors or a .gguf file (name, dtype, shape, file, bytes) and, when a config.json lies
/// beside the weights, each tensor's status against the architecture. Prints a table, or with
/// --json {"path", "format", "tensors", "bytes", "checked", "counts", "rows": [...]}. Returns
/// the exit code: 0, 1 when the architecture check fails, 2 for unreadable input.
int runInspectTensors(const std::string& path, const GlobalOptions& global);

} // namespace day0::cli
