#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "checkpoint/gguf.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_index.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace day0::checkpoint {

/// How the weights of a checkpoint are stored.
enum class CheckpointFormat {
    Safetensors, ///< one .safetensors file
    ShardedSafetensors, ///< a folder with model.safetensors.index.json and its shards
    SafetensorsFolder, ///< a folder of .safetensors files without an index
    RankShards, ///< `day0 shard` output: plan.json and one rank-NNNNN.safetensors per rank
    Gguf, ///< one GGUF file
};

/// "safetensors", "sharded safetensors", ...
std::string_view checkpointFormatName(CheckpointFormat format);

/// One tensor as a checkpoint stores it.
struct CheckpointTensor {
    std::string name;
    std::string dtypeName; ///< "BF16", "F8_E4M3", or a ggml type such as "Q4_K"
    std::optional<DType> dtype; ///< nullopt for block-quantised GGUF types
    std::vector<std::int64_t> shape; ///< row-major, outermost first
    std::string file; ///< data file, relative to the checkpoint root
    std::uint64_t offset = 0; ///< absolute byte offset of the data in `file`
    std::uint64_t bytes = 0;
};

/// Something wrong with the checkpoint's structure. `error.message` is one line that names the
/// file and, when it concerns one tensor, the tensor.
struct CheckpointProblem {
    std::string file; ///< relative to the root; empty when it concerns the whole checkpoint
    std::string tensor; ///< empty when not about one tensor
    Error error;
    bool warning = false; ///< informational (e.g. index total_size differs), not a failure
};

/// An opened checkpoint: a folder of safetensors shards (with or without an index), a single
/// safetensors file or a GGUF file. Opening reads and validates every header and the index and
/// records every structural problem instead of stopping at the first; tensor data is memory
/// mapped and viewed in place. Thread-safe for reading; move-only.
class Checkpoint {
public:
    /// Opens a folder or a file. Fails only when nothing usable is there (missing path, no
    /// weights, a PyTorch pickle, which is refused with how to convert it); problems with
    /// individual shards and tensors are listed in problems().
    static Result<Checkpoint> open(const std::filesystem::path& path);

    Checkpoint();
    ~Checkpoint();
    Checkpoint(Checkpoint&&) noexcept;
    Checkpoint& operator=(Checkpoint&&) noexcept;

    [[nodiscard]] CheckpointFormat format() const { return m_format; }
    /// The folder holding the files (for a single file: its folder).
    [[nodiscard]] const std::filesystem::path& root() const { return m_root; }
    /// The weight files, relative to root(), sorted (shards named by the index, present or not).
    [[nodiscard]] const std::vector<std::string>& files() const { return m_files; }
    /// Every tensor found, sorted by name.
    [[nodiscard]] const std::vector<CheckpointTensor>& tensors() const { return m_tensors; }
    /// The tensor named `name`, nullptr if absent.
    [[nodiscard]] const CheckpointTensor* find(std::string_view name) const;
    /// Structural problems, in the order found (errors and warnings).
    [[nodiscard]] const std::vector<CheckpointProblem>& problems() const { return m_problems; }
    /// True when problems() holds an error (not only warnings).
    [[nodiscard]] bool hasErrors() const;
    /// The first error as an Error, for callers that stop at the first problem.
    [[nodiscard]] Result<void> firstError() const;
    /// The shard index, when the checkpoint has one.
    [[nodiscard]] const std::optional<ShardIndex>& index() const { return m_index; }
    /// The GGUF header, for GGUF checkpoints.
    [[nodiscard]] const GgufHeader* gguf() const;
    /// Sum of tensor bytes.
    [[nodiscard]] std::uint64_t totalTensorBytes() const;

    /// The bytes of a tensor, in place (zero copy, possibly unaligned); valid while this object
    /// lives. Fails if its file could not be opened.
    [[nodiscard]] Result<std::span<const std::byte>> data(const CheckpointTensor& tensor) const;
    /// The safetensors file `file` (relative to root) if it opened cleanly, else nullptr.
    [[nodiscard]] const SafetensorsFile* safetensorsFile(std::string_view file) const;

private:
    struct Files;

    void openSafetensorsShards();
    void checkAgainstIndex();
    /// Without an index: every shard of a "-of-N" series must be there.
    void checkShardSeries();
    /// `day0 shard` output: every piece plan.json assigns to a rank is in that rank's file,
    /// with the slice's shape and the tensor's dtype, and nothing else is.
    void checkAgainstShardPlan(const nlohmann::json& plan);

    CheckpointFormat m_format = CheckpointFormat::Safetensors;
    std::filesystem::path m_root;
    std::vector<std::string> m_files;
    std::vector<CheckpointTensor> m_tensors;
    std::vector<CheckpointProblem> m_problems;
    std::optional<ShardIndex> m_index;
    std::unique_ptr<Files> m_open;
};

/// True for file names PyTorch pickles use (.bin, .pt, .pth, .ckpt, .pkl).
bool isPickleName(const std::filesystem::path& path);

/// The refusal for a pickle file: one line saying why it is not loaded and how to convert it.
Error pickleRefusal(const std::filesystem::path& path);

} // namespace day0::checkpoint
