#include "parallel/weights.h"

#include "checkpoint/dequantize.h"
#include "exec/layout_weights.h"
#include "model/layer_graph.h"
#include "parallel/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <vector>

namespace day0::parallel::detail {

namespace {

/// A rank file's piece of a DeepSeek-V4 FP4 expert (I8 codes [out, in/2] and its F8_E8M0
/// `.scale` [out, in/32], both sliced on whole groups by day0 shard) in fp32, decoded as the
/// full checkpoint's reader decodes them; nullopt when the piece is not stored so.
Result<std::optional<numerics::Tensor>> deepseekV4Fp4Piece(const model::ModelSpec& spec,
    const exec::WeightSource& source, const exec::detail::WeightRequirement& piece)
{
    using Opt = std::optional<numerics::Tensor>;
    if (spec.family != model::Family::DeepseekV4 || !spec.quantization
        || !piece.name.ends_with(".weight") || piece.shape.size() != 2) {
        return Opt();
    }
    const std::string scaleName
        = piece.name.substr(0, piece.name.size() - 6) + spec.quantization->scaleSuffix;
    if (!source.has(scaleName)) {
        return Opt();
    }
    auto codes = source.read(piece.name);
    if (!codes) {
        return codes.error();
    }
    if (codes->dtype() != DType::I8) {
        return Opt();
    }
    auto scale = source.read(scaleName);
    if (!scale) {
        return scale.error();
    }
    const std::int64_t rows = piece.shape[0];
    const std::int64_t cols = piece.shape[1];
    const std::int64_t group
        = spec.quantization->expertGroupSize > 0 ? spec.quantization->expertGroupSize : 32;
    const numerics::Shape wantCodes { rows, (cols + 1) / 2 };
    const numerics::Shape wantScale { rows, (cols + group - 1) / group };
    if (codes->shape() != wantCodes || scale->shape() != wantScale
        || scale->dtype() != DType::F8E8M0) {
        return Error::badInput(fmt::format("{}: FP4 tensor '{}' {} with scale '{}' {} {}; a "
                                           "[{}, {}] piece needs I8 {} and F8_E8M0 {}",
            source.describe(), piece.name, numerics::shapeString(codes->shape()), scaleName,
            dtypeName(scale->dtype()), numerics::shapeString(scale->shape()), rows, cols,
            numerics::shapeString(wantCodes), numerics::shapeString(wantScale)));
    }
    auto out = numerics::Tensor::zeros(piece.shape, DType::F32);
    DAY0_TRY(checkpoint::dequantizeFp4(codes->bytes(), scale->bytes(), checkpoint::Fp4Scale::E8M0,
        1.0F, rows, cols, group,
        { reinterpret_cast<std::byte*>(out.data<float>()),
            std::size_t(out.numel()) * sizeof(float) },
        DType::F32));
    return Opt(std::move(out));
}

/// A rank file's piece in fp32. Block-FP8 pieces are dequantised with the covering scale blocks
/// the shard wrote, which is exact only when the piece starts on a block boundary (or lies in a
/// single block), so anything else is refused by name.
Result<numerics::Tensor> loadPresliced(const model::ModelSpec& spec,
    const exec::WeightSource& source, const exec::detail::WeightRequirement& req,
    const checkpoint::TensorSlice& slice)
{
    exec::detail::WeightRequirement piece = req;
    piece.shape = checkpoint::sliceShape(req.shape, slice);
    if (source.has(req.name + "_scale_inv") && !slice.whole()) {
        const std::int64_t br = spec.quantization ? spec.quantization->blockRows : 128;
        const std::int64_t bc = spec.quantization ? spec.quantization->blockCols : 128;
        for (const auto& d : slice.dims) {
            const std::int64_t block = d.dim == 0 ? br : bc;
            const bool single = d.ranges.size() == 1
                && d.ranges[0].first / block == (d.ranges[0].second - 1) / block;
            const bool aligned = std::all_of(d.ranges.begin(), d.ranges.end(),
                [&](const auto& r) { return r.first % block == 0; });
            if (!single && !aligned) {
                return Error::unsupported(fmt::format(
                    "{}: tensor '{}': the rank's slice starts inside a {}-element FP8 scale "
                    "block; run from the full checkpoint (sliced in memory) instead",
                    source.describe(), req.name, block));
            }
        }
    }
    auto fp4 = deepseekV4Fp4Piece(spec, source, piece);
    if (!fp4) {
        return fp4.error();
    }
    if (fp4->has_value()) {
        return std::move(**fp4);
    }
    bool exact = false;
    return exec::detail::loadForwardWeight(source, piece, spec, DType::F32, exact);
}

/// Fused 3-D experts (Qwen3.5's BF16 `experts.gate_up_proj` [E, 2I, H] and `experts.down_proj`
/// [E, H, I]) reach the forward as per-expert [out, in] weights through LayoutWeights. Each such
/// weight is split as the per-expert tensor it stands for: held by its expert's EP rank, split
/// over ETP by rows (gate, up) or columns (down), the same ranges sliceFor gives the fused
/// tensor's halves. Nullopt when `name` is not one.
std::optional<model::TensorSpec> unpackedExpert(const model::ModelSpec& spec,
    const model::LayerGraph& graph, const exec::detail::LayoutWeights& names,
    const exec::detail::WeightRequirement& req)
{
    if (!spec.moe || !spec.moe->packedExperts) {
        return std::nullopt;
    }
    const std::string& name = req.name;
    const auto at = name.find(".experts.");
    if (at == std::string::npos) {
        return std::nullopt;
    }
    const std::string rest = name.substr(at + 9);
    const auto dot = rest.find('.');
    std::int32_t expert = -1;
    if (dot == std::string::npos
        || std::from_chars(rest.data(), rest.data() + dot, expert).ec != std::errc {}) {
        return std::nullopt;
    }
    const std::string leaf = rest.substr(dot + 1);
    const bool down = leaf == "down_proj.weight";
    if (!down && leaf != "gate_proj.weight" && leaf != "up_proj.weight") {
        return std::nullopt;
    }
    const auto* fused = graph.findTensor(names.checkpointName(name.substr(0, at))
        + (down ? ".experts.down_proj" : ".experts.gate_up_proj"));
    if (fused == nullptr) {
        return std::nullopt;
    }
    model::TensorSpec t = *fused;
    t.name = name;
    t.shape = req.shape;
    t.packedExperts = 0;
    t.expert = expert;
    return t;
}

} // namespace

Result<exec::detail::WeightTable> loadRankWeights(const model::ModelSpec& spec,
    const exec::WeightSource& rawSource, const checkpoint::ShardLayout& layout,
    const checkpoint::RankCoord& coord, std::int64_t& bytes, std::stop_token stop, bool presliced,
    const std::function<bool(const std::string&)>& keep)
{
    const model::LayerGraph graph = model::buildLayerGraph(spec);
    // The forward asks for canonical names ("model.layers.…"); the graph and the checkpoint use
    // the layout's (Qwen3.5's "model.language_model.layers.…"), as for the single-rank engine.
    const exec::detail::LayoutWeights mapped(rawSource, spec);
    const bool mapping = exec::detail::needsLayoutMapping(spec);
    const exec::WeightSource& source
        = mapping ? static_cast<const exec::WeightSource&>(mapped) : rawSource;
    // A rank file's pieces of DeepSeek-V4's released format keep it (FP8 blocks with `.scale`,
    // FP4 experts packed two per byte), sliced on whole blocks by day0 shard: each is decoded
    // as the full checkpoint's (loadPresliced).
    exec::detail::WeightTable table;
    bytes = 0;
    for (const auto& req : exec::detail::requiredWeights(spec)) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        if (keep && !keep(req.name)) {
            continue;
        }
        // Tied heads read the embedding, which the last stage holds too (sliceFor's rule).
        const bool tiedHead = req.optional && !source.has(req.name);
        if (tiedHead) {
            continue;
        }
        const model::TensorSpec* t
            = graph.findTensor(mapping ? mapped.checkpointName(req.name) : req.name);
        const auto unpacked
            = t == nullptr ? unpackedExpert(spec, graph, mapped, req) : std::nullopt;
        if (unpacked) {
            if (presliced) {
                // A rank file holds the fused tensor's EP range, which the per-expert reads
                // (indexed by global expert) would not find.
                return Error::unsupported(fmt::format(
                    "{}: runs from day0 shard rank files of the fused 3-D experts of {} (for "
                    "'{}'); run from the full checkpoint (sliced in memory) instead",
                    source.describe(), spec.modelType, req.name));
            }
            t = &*unpacked;
        }
        if (t == nullptr) {
            return Error::internal(
                fmt::format("tensor '{}' needed by the forward is not in the {} layer graph",
                    req.name, spec.modelType));
        }
        // DeepSeek-V4's FP4 experts are stored packed ([out, in/2] codes); the forward reads
        // them dequantised [out, in], which is what this rank slices.
        model::TensorSpec logical;
        if (spec.family == model::Family::DeepseekV4 && t->dtype == DType::I8
            && t->shape.size() == 2 && req.shape.size() == 2 && t->shape[0] == req.shape[0]
            && (req.shape[1] + 1) / 2 == t->shape[1]) {
            logical = *t;
            logical.shape = req.shape;
            t = &logical;
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
        if (presliced) {
            auto piece = loadPresliced(spec, source, req, **slice);
            if (!piece) {
                return piece.error();
            }
            bytes += piece->numel() * std::int64_t(sizeof(float));
            table.tensors[req.name] = std::move(*piece);
            continue;
        }
        auto full = exec::detail::loadForwardWeight(source, req, spec, DType::F32, exact);
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
    // Qwen3NextRMSNorm (and MiniMax-M3's norms) scale by 1 + w: applied at load, as the
    // single-rank engine does (engine.cpp), on whole replicated norm weights.
    for (auto& [name, tensor] : table.tensors) {
        if (exec::detail::zeroCentredNorm(spec, name)) {
            float* w = tensor.data<float>();
            for (std::int64_t i = 0; i < tensor.numel(); ++i) {
                w[i] += 1.0F;
            }
        }
    }
    return table;
}

} // namespace day0::parallel::detail

namespace day0::parallel {

Result<void> checkRunnable(const checkpoint::ShardLayout& layout)
{
    // A plan field the executor cannot run is refused, never dropped on the way.
    if (layout.cp > 1) {
        return Error::unsupported(fmt::format(
            "--plan: cp={}: the executor does not run context parallelism yet; run the plan "
            "without cp (day0 memory and plan estimate it, and shard writes its ranks' weights, "
            "which are their TP peers')",
            layout.cp));
    }
    return success();
}

Result<void> checkPlanFits(const model::ModelSpec& spec, const checkpoint::ShardLayout& layout)
{
    DAY0_TRY(checkRunnable(layout));
    if (spec.numLayers < layout.pp) {
        return Error::badInput(
            fmt::format("--plan: pp={} needs at least {} decoder layers, {} has {}", layout.pp,
                layout.pp, spec.name, spec.numLayers));
    }
    if (spec.numHeads % layout.tp != 0) {
        return Error::badInput(
            fmt::format("--plan: tp={} does not divide the {} attention heads of {}", layout.tp,
                spec.numHeads, spec.name));
    }
    const model::LayerGraph graph = model::buildLayerGraph(spec);
    const auto required = exec::detail::requiredWeights(spec);
    const exec::MemoryWeights none({});
    const exec::detail::LayoutWeights names(none, spec); // only its name mapping is used
    for (int rank = 0; rank < layout.worldSize(); ++rank) {
        const auto coord = checkpoint::rankCoord(layout, rank);
        for (const auto& req : required) {
            if (const auto* t = graph.findTensor(names.checkpointName(req.name))) {
                auto slice = checkpoint::sliceFor(graph, *t, layout, coord);
                if (!slice) {
                    return slice.error();
                }
            }
        }
    }
    return success();
}

} // namespace day0::parallel
