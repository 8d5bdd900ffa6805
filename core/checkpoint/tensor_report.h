#pragma once

#include "checkpoint/checkpoint.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace day0::checkpoint {

/// A tensor's standing against the model architecture.
enum class TensorStatus {
    Unchecked, ///< listed without an architecture to compare with
    Ok, ///< present with the expected shape and dtype
    Missing, ///< the architecture expects it, the checkpoint lacks it
    Unexpected, ///< in the checkpoint, unknown to the architecture
    WrongShape,
    WrongDtype,
};

/// "ok", "missing", "unexpected", "wrong shape", "wrong dtype", "" for Unchecked.
std::string_view tensorStatusName(TensorStatus status);

/// One row of a tensor listing (what the CLI prints and the GUI's checkpoint table shows).
struct TensorRow {
    std::string name;
    std::string dtype; ///< as stored; empty for Missing
    std::vector<std::int64_t> shape;
    std::string file; ///< relative to the checkpoint root; empty for Missing
    std::uint64_t bytes = 0;
    TensorStatus status = TensorStatus::Unchecked;
    std::string expectedDtype; ///< from the architecture, when checked
    std::vector<std::int64_t> expectedShape;
    std::string message; ///< one line naming the tensor when status is not Ok/Unchecked
};

/// Every tensor of a checkpoint, in natural name order, with totals.
struct TensorReport {
    std::string format;
    std::vector<TensorRow> rows;
    std::uint64_t bytes = 0;
    bool checked = false; ///< compared with an architecture

    /// Number of rows with `status`.
    [[nodiscard]] std::size_t count(TensorStatus status) const;
    /// True when checked and every row is Ok.
    [[nodiscard]] bool ok() const;
    /// {"format", "tensors": N, "bytes", "checked", "counts": {...}, "rows": [...]}.
    [[nodiscard]] nlohmann::json toJson() const;
};

/// Lists the tensors of an opened checkpoint (status Unchecked).
TensorReport listTensors(const Checkpoint& checkpoint);

} // namespace day0::checkpoint
