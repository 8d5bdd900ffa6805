#pragma once

#include "base/result.h"
#include "train/trainable_model.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace day0::train {

/// Training data read from a text file of token ids (`day0 train CKPT --data FILE`): one
/// sequence per line, ids as non-negative decimal integers separated by spaces, tabs or commas;
/// blank lines and lines starting with '#' are skipped. Sequence k of the run (k = step ·
/// globalBatch + index) is line k mod lines, cut to the run's sequence length: the file is read
/// in order, epoch after epoch. Thread-safe (read-only once loaded).
class TokenFileData final : public TrainingData {
public:
    /// Reads `path`; every sequence needs 2+ ids (one predicted position) and every id must be
    /// below `vocab`. Errors name the file, the line and the problem.
    static Result<TokenFileData> load(
        const std::filesystem::path& path, std::int64_t vocab, int globalBatch);

    [[nodiscard]] Batch batch(
        std::int64_t step, std::int64_t first, int count, int length) const override;
    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] std::size_t sequenceCount() const { return m_sequences.size(); }

private:
    std::string m_path;
    int m_globalBatch = 1;
    std::vector<std::vector<std::int32_t>> m_sequences;
};

} // namespace day0::train
