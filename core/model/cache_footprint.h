#pragma once

#include "base/dtype.h"
#include "model/model_spec.h"

#include <optional>
#include <string>
#include <vector>

namespace day0::model {

/// One thing a decoder layer keeps per sequence at inference, and how it grows with the context.
struct CacheTerm {
    std::string what; ///< "kv", "latent kv", "indexer keys", "compressed kv", "conv state", ...
    double elementsPerToken = 0; ///< per token of context, all heads (0 for fixed states)
    double elementsPerSequence = 0; ///< fixed per sequence, all heads (recurrent states)
    std::int64_t window = 0; ///< tokens it keeps at most (sliding window), 0: the whole context
    std::int64_t heads = 1; ///< heads it is split into under TP; 1: every TP rank holds it all
    std::optional<DType> dtype; ///< fixed dtype (fp32 states, bf16 conv states); empty: the
                                ///< KV-cache dtype chosen at run time

    bool operator==(const CacheTerm&) const = default;
};

/// What decoder layer `layer` of `spec` keeps per sequence (DESIGN: KV only where there is
/// attention, capped at the window for sliding layers; latent plus indexer keys for MLA/DSA;
/// DeepSeek-V4's compressed entries per ratio; fixed conv and recurrent states of Gated DeltaNet,
/// KDA and Mamba-2). Sources and formulas are in cache_footprint.cpp. `index` is the layer's
/// position (Gemma-4's KV-shared layers keep nothing).
std::vector<CacheTerm> layerCache(
    const ModelSpec& spec, const LayerSpec& layer, std::int64_t index);

/// Bytes one sequence of `context` tokens keeps on one of `tp` tensor-parallel ranks: terms
/// split by their heads (replicated when a rank would get less than one head), KV-dtype terms
/// at `kvBytes` per element.
double cacheBytes(const std::vector<CacheTerm>& terms, double context, int tp, double kvBytes);

/// The same for every decoder layer of the model, by the layer's mixer kind, for messages and
/// the memory panel: (kind name, layers, bytes per sequence of `context` at tp = 1).
struct CacheByKind {
    MixerKind kind = MixerKind::Attention;
    std::int64_t layers = 0;
    double bytes = 0;
    double bytesPerToken = 0; ///< growth beyond the windows
    double fixedBytes = 0; ///< what does not grow (windows, states)
};
std::vector<CacheByKind> cacheByKind(const ModelSpec& spec, double context, double kvBytes);

} // namespace day0::model
