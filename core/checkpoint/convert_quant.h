#pragma once

// Internal to convert: the tensor sources that dequantise one quantised weight, and the chunked
// parallel loop they and the plain conversions run on.

#include "base/dtype.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/quant_groups.h"
#include "checkpoint/safetensors_writer.h"

#include <cstddef>
#include <functional>

namespace day0::checkpoint::detail {

/// Runs fn(begin, end) over [0, count) in chunks of `grain` on the pool (and the caller); the
/// first error wins.
Result<void> parallelChunks(ThreadPool* pool, std::size_t count, std::size_t grain,
    const std::function<Result<void>(std::size_t, std::size_t)>& fn);

/// The tensor that replaces `group` (stored as `tensors` in `checkpoint`, already checked by
/// matchGroup): its dequantised values in `to` (F32, BF16, F16), under the converted graph's
/// name and shape. The checkpoint and the pool must outlive the write.
Result<TensorSource> dequantizedSource(const Checkpoint& checkpoint, const QuantGroup& group,
    const GroupTensors& tensors, DType to, ThreadPool* pool);

} // namespace day0::checkpoint::detail
