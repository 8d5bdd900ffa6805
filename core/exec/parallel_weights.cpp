#include "exec/parallel_weights.h"

#include "model/layer_graph.h"

#include <fmt/format.h>

#include <vector>

namespace day0::exec::detail {

Result<WeightTable> loadRankWeights(const model::ModelSpec& spec, const WeightSource& source,
    const checkpoint::ShardLayout& layout, const checkpoint::RankCoord& coord, std::int64_t& bytes,
    std::stop_token stop)
{
    const model::LayerGraph graph = model::buildLayerGraph(spec);
    WeightTable table;
    bytes = 0;
    for (const auto& req : requiredWeights(spec)) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        // Tied heads read the embedding, which the last stage holds too (sliceFor's rule).
        const bool tiedHead = req.optional && !source.has(req.name);
        if (tiedHead) {
            continue;
        }
        const model::TensorSpec* t = graph.findTensor(req.name);
        if (t == nullptr) {
            return Error::internal(
                fmt::format("tensor '{}' needed by the forward is not in the {} layer graph",
                    req.name, spec.modelType));
        }
        auto slice = checkpoint::sliceFor(graph, *t, layout, coord);
        if (!slice) {
            return slice.error().withContext(source.describe());
        }
        if (!slice->has_value()) {
            continue; // another stage's or another expert range's tensor
        }
        if (!source.has(req.name)) {
            return Error::badInput(fmt::format("{}: missing tensor '{}' needed by the {} forward",
                source.describe(), req.name, spec.modelType));
        }
        bool exact = false;
        auto full = loadForwardWeight(source, req, spec, DType::F32, exact);
        if (!full) {
            return full.error();
        }
        numerics::Tensor piece;
        if ((*slice)->whole()) {
            piece = std::move(*full);
        } else {
            const auto shape = checkpoint::sliceShape(req.shape, **slice);
            piece = numerics::Tensor::zeros(shape, DType::F32);
            checkpoint::extractSlice(full->bytes(), req.shape, sizeof(float), **slice,
                { reinterpret_cast<std::byte*>(piece.data<float>()),
                    std::size_t(piece.numel()) * sizeof(float) });
        }
        bytes += piece.numel() * std::int64_t(sizeof(float));
        table.tensors[req.name] = std::move(piece);
    }
    return table;
}

} // namespace day0::exec::detail
