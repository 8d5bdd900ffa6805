#pragma once

// Internal to core/exec: the weights one rank of a parallel plan holds, sliced from the full
// checkpoint with the per-rank rules of core/checkpoint (sliceFor), in fp32.

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "exec/forward.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>

namespace day0::parallel::detail {

/// The fp32 slices of every forward weight rank `coord` holds under `layout` (tensors it does not
/// hold are absent); errors name the tensor that does not split. `bytes` receives their size.
/// With `presliced` the source already holds exactly these slices (a `day0 shard` rank file);
/// block-FP8 slices must then start on a scale block (else the error names the tensor).
/// `keep` (when set): only the forward weights whose names it accepts (one layer of a streamed
/// rank, rank_stream.h), sliced and converted exactly as in a whole load.
Result<exec::detail::WeightTable> loadRankWeights(const model::ModelSpec& spec,
    const exec::WeightSource& source, const checkpoint::ShardLayout& layout,
    const checkpoint::RankCoord& coord, std::int64_t& bytes, std::stop_token stop,
    bool presliced = false, const std::function<bool(const std::string&)>& keep = {});

} // namespace day0::parallel::detail
