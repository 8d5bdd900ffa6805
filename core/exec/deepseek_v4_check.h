#pragma once

// Internal to core/exec: pieces of DeepSeek-V4's step (deepseek_v4_block.cpp,
// deepseek_v4_forward.cpp) that `day0 opcheck` also runs on their own
// (op_check_deepseek_v4.cpp). The step calls the same functions, so a check measures the code
// that runs.

#include "exec/deepseek_v4.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::exec::detail {

/// The Lightning indexer's scores (deepseekV4Select ranks them): [n, ix.count], row t scoring
/// the entries the query at start + t may see and -inf for those it may not see yet.
template <typename T>
std::vector<double> deepseekV4IndexScores(const typename DeepseekV4Cache<T>::Compressor& ix,
    const std::string& module, const WeightTable& weights, const model::ModelSpec& spec, const T* x,
    const T* qLatent, std::int64_t n, std::int64_t start, const Rope& rope);

/// The grouped output projection of layer `layer` (each group of heads through its rank-r block
/// of wo_a, the concatenation through wo_b) of attn [n, heads · head_dim] into out [n, hidden];
/// the groups are those wo_a holds. `rounding` (null: the reference) emulates the plan.
template <typename T>
void deepseekV4GroupedOutput(const WeightTable& weights, const model::ModelSpec& spec, int layer,
    const T* attn, std::int64_t n, T* out, const DeepseekV4Rounding* rounding = nullptr);

} // namespace day0::exec::detail
