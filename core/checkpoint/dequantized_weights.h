#pragma once

// The quantised weights of a checkpoint read one at a time as the values `convert` writes for
// them, so that the reference engine runs a quantised release without a converted copy on disk.

#include "base/result.h"
#include "base/thread_pool.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "model/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// One dequantised weight: row-major F32 values under the converted graph's shape.
struct DequantizedTensor {
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

/// True when the engine reads a checkpoint quantised as `q` through DequantizedWeights: some
/// weights are in a format other than block FP8, which the engine dequantises itself.
bool readsDequantized(const model::QuantizationSpec& q);

/// The quantised weights of a checkpoint under the names of its converted (unquantised)
/// config, dequantised to F32 exactly as `convert` does (one layout, readDequantLayout; one
/// decoder per format, detail::dequantizedSource): gpt-oss `gate_up_proj` [E, H, 2I] and
/// `down_proj` [E, I, H] from their MXFP4 blocks, `<module>.weight` from NVFP4 / FP8 per-tensor
/// / packed INT4 / MXFP4 codes (that name is also the raw codes' in ModelOpt checkpoints: the
/// dequantised values are the ones served). Block-FP8 groups are left out: the engine reads
/// their codes and `weight_scale_inv` itself. Holds the checkpoint and the pool by reference;
/// both must outlive it. Reads are thread-safe.
class DequantizedWeights {
public:
    /// The groups of `checkpoint` (a folder) laid out by its config.json at `configPath` (and
    /// hf_quant_config.json beside it), checked against the stored tensors. Errors name the
    /// config, or the file and tensor of a group that does not fit its layout (a wrong scale
    /// shape, a missing global scale); a group none of whose tensors is there is skipped (an
    /// incomplete checkpoint is verify's to report). `pool`, when given, decodes in parallel.
    static Result<DequantizedWeights> open(const Checkpoint& checkpoint,
        const std::filesystem::path& configPath, ThreadPool* pool = nullptr);

    /// True if `convertedName` is a dequantised weight of the checkpoint.
    [[nodiscard]] bool has(const std::string& convertedName) const;
    /// Decodes the weight `convertedName` (a full pass over its codes); the error names the
    /// checkpoint and the tensor.
    [[nodiscard]] Result<DequantizedTensor> read(const std::string& convertedName) const;
    /// The converted names of every dequantised weight, sorted.
    [[nodiscard]] std::vector<std::string> names() const;

private:
    std::filesystem::path m_root;
    std::map<std::string, TensorSource> m_sources;
};

} // namespace day0::checkpoint
