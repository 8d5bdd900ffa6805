#include "checkpoint/sharding.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/resident_pages.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/output_file.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/sharding_heads.h"
#include "model/config_reader.h"
#include "plan/layout.h"
#include "plan/rank_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>

namespace day0::checkpoint {

namespace fs = std::filesystem;
using model::ParallelRole;
using Range = std::pair<std::int64_t, std::int64_t>;

namespace {

constexpr std::string_view kBlockScaleSuffix = "weight_scale_inv";

bool endsWithAny(const std::string& s, std::initializer_list<const char*> suffixes)
{
    return std::any_of(
        suffixes.begin(), suffixes.end(), [&](const char* x) { return s.ends_with(x); });
}

/// Splits [0, n) in `parts` equal ranges and returns range `index`; fails when n does not divide.
Result<Range> evenPart(std::int64_t n, int parts, int index, const std::string& name, int dim)
{
    if (n % parts != 0) {
        return Error::badInput(
            fmt::format("tensor '{}': dimension {} of size {} does not split into {} equal parts",
                name, dim, n, parts));
    }
    const std::int64_t per = n / parts;
    return Range { per * index, per * (index + 1) };
}

/// Which pipeline stage holds a tensor.
int stageOf(const model::LayerGraph& g, const model::TensorSpec& t, const ShardLayout& layout)
{
    using model::Component;
    const int pp = layout.pp;
    if (pp <= 1) {
        return 0;
    }
    if (t.component == Component::Vision || t.component == Component::Embedding) {
        return 0;
    }
    if (t.component == Component::Mtp || t.component == Component::LmHead || t.layer < 0) {
        return pp - 1;
    }
    for (int s = 0; s < pp; ++s) {
        const auto [first, last] = stageLayers(layout, g.spec.numLayers, s);
        if (t.layer >= first && t.layer < last) {
            return s;
        }
    }
    return pp - 1;
}

/// Blocks of `size` covering a slice, merged where they touch.
std::vector<Range> coveringBlocks(const std::vector<Range>& ranges, std::int64_t block)
{
    std::vector<Range> out;
    for (const auto& [a, b] : ranges) {
        const Range r { a / block, (b + block - 1) / block };
        if (!out.empty() && r.first <= out.back().second) {
            out.back().second = std::max(out.back().second, r.second);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

/// Visits a slice of a row-major tensor as contiguous runs: fn(wholeOffset, pieceOffset, count)
/// in elements.
void forEachRun(const std::vector<std::int64_t>& shape, const TensorSlice& slice,
    const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& fn)
{
    const auto rank = shape.size();
    std::vector<std::vector<Range>> ranges(rank);
    for (std::size_t d = 0; d < rank; ++d) {
        ranges[d] = { { 0, shape[d] } };
    }
    for (const auto& ds : slice.dims) {
        ranges[std::size_t(ds.dim)] = ds.ranges;
    }
    if (rank == 0) {
        fn(0, 0, 1);
        return;
    }
    std::vector<std::int64_t> stride(rank, 1);
    for (std::size_t d = rank - 1; d > 0; --d) {
        stride[d - 1] = stride[d] * shape[d];
    }
    std::int64_t piece = 0;
    std::function<void(std::size_t, std::int64_t)> walk = [&](std::size_t d, std::int64_t base) {
        for (const auto& [a, b] : ranges[d]) {
            if (d + 1 == rank) {
                if (b > a) {
                    fn(base + a, piece, b - a);
                    piece += b - a;
                }
                continue;
            }
            for (std::int64_t i = a; i < b; ++i) {
                walk(d + 1, base + i * stride[d]);
            }
        }
    };
    walk(0, 0);
}

} // namespace

Result<ShardLayout> shardLayoutFromPlan(const plan::ParallelPlan& p, plan::Mode mode)
{
    ShardLayout layout;
    layout.tp = p.tp;
    layout.pp = p.pp;
    layout.ep = p.ep;
    layout.dp = p.dp > 0 ? p.dp : 1;
    layout.cp = p.cp;
    layout.etpGiven
        = p.etp > 0 || mode == plan::Mode::Infer ? p.etp : plan::defaultExpertTp(mode, p.tp, p.ep);
    layout.split = p.split;
    layout.sp = p.sp.value_or(false);
    for (const int n : p.stageLayers) {
        layout.stageLayerCounts.push_back(n);
    }
    if (layout.tp <= 0 || layout.pp <= 0 || layout.ep <= 0 || layout.dp <= 0 || layout.cp <= 0
        || layout.etpGiven < 0) {
        return Error::badInput("--plan: tp, pp, ep, dp, cp and etp must be positive");
    }
    const int ranks = layout.dp * layout.tp;
    if (ranks % layout.ep != 0 || ranks % (layout.ep * layout.etp()) != 0) {
        return Error::badInput(fmt::format(
            "--plan: ep={} × etp={} must divide dp × tp = {}", layout.ep, layout.etp(), ranks));
    }
    if (!layout.stageLayerCounts.empty() && int(layout.stageLayerCounts.size()) != layout.pp) {
        return Error::badInput(fmt::format("--plan: layers= lists {} stages but pp={}",
            layout.stageLayerCounts.size(), layout.pp));
    }
    return layout;
}

Result<ShardLayout> parseShardLayout(const std::string& text)
{
    auto p = plan::parsePlan(text);
    if (!p) {
        return p.error();
    }
    return shardLayoutFromPlan(*p);
}

RankCoord rankCoord(const ShardLayout& l, int rank)
{
    // One rank order in Day0: the planner's. CP ranks are not separate weight holders.
    const plan::RankLayout ranks(l.tp, 1, l.dp, l.pp, l.ep, l.etp());
    const auto at = ranks.coordinates(rank);
    RankCoord c;
    c.rank = rank;
    c.tpRank = at.tp;
    c.dpRank = at.dp;
    c.stage = at.pp;
    c.etpRank = at.etp;
    c.epRank = at.ep;
    c.edpRank = at.edp;
    return c;
}

std::pair<std::int64_t, std::int64_t> stageLayers(
    const ShardLayout& layout, std::int64_t layers, int stage)
{
    std::vector<std::int64_t> counts = layout.stageLayerCounts;
    if (counts.empty()) {
        for (const int n : plan::splitStages(int(layers), layout.pp, layout.split)) {
            counts.push_back(n);
        }
    }
    if (counts.size()
        != std::size_t(layout.pp)) { // fewer layers than stages: checked by the caller
        return { 0, 0 };
    }
    std::int64_t first = 0;
    for (int s = 0; s < stage; ++s) {
        first += counts[std::size_t(s)];
    }
    return { first, first + counts[std::size_t(stage)] };
}

std::pair<std::int64_t, std::int64_t> expertRange(std::int64_t experts, int ep, int epRank)
{
    // Contiguous ranges; when ep does not divide the experts the first ranks take one more.
    const std::int64_t base = experts / ep;
    const std::int64_t extra = experts % ep;
    const std::int64_t first = epRank * base + std::min<std::int64_t>(epRank, extra);
    return { first, first + base + (epRank < extra ? 1 : 0) };
}

Result<std::optional<TensorSlice>> sliceFor(const model::LayerGraph& graph,
    const model::TensorSpec& t, const ShardLayout& layout, const RankCoord& rc)
{
    using Opt = std::optional<TensorSlice>;
    const auto& spec = graph.spec;
    const bool tiedEmbedding
        = spec.tieEmbeddings && t.component == model::Component::Embedding && layout.pp > 1;
    const int stage = stageOf(graph, t, layout);
    // With tied embeddings the last stage needs the embedding for its output head too.
    if (stage != rc.stage && !(tiedEmbedding && rc.stage == layout.pp - 1)) {
        return Opt();
    }
    if (t.kind == model::TensorKind::Scale && t.name.ends_with(kBlockScaleSuffix)
        && spec.quantization) {
        const auto weightName
            = t.name.substr(0, t.name.size() - kBlockScaleSuffix.size()) + "weight";
        const auto* weight = graph.findTensor(weightName);
        if (weight == nullptr) {
            return Error::badInput(fmt::format(
                "tensor '{}': its weight '{}' is not in the architecture", t.name, weightName));
        }
        auto ws = sliceFor(graph, *weight, layout, rc);
        if (!ws || !ws->has_value()) {
            return ws;
        }
        TensorSlice out;
        for (const auto& d : (*ws)->dims) {
            const auto block = d.dim == int(weight->shape.size()) - 2
                ? spec.quantization->blockRows
                : spec.quantization->blockCols;
            out.dims.push_back({ d.dim, coveringBlocks(d.ranges, block) });
        }
        return Opt(out);
    }
    // DeepSeek-V4's `<module>.scale` (F8_E8M0) beside FP8 and FP4 weights: sliced with the
    // weight's blocks, the stored format kept (sharding_heads.cpp).
    if (t.kind == model::TensorKind::Scale && spec.family == model::Family::DeepseekV4
        && spec.quantization && t.name.ends_with("." + spec.quantization->scaleSuffix)) {
        const auto weightName
            = t.name.substr(0, t.name.size() - spec.quantization->scaleSuffix.size()) + "weight";
        const auto* weight = graph.findTensor(weightName);
        if (weight == nullptr) {
            return Error::badInput(fmt::format(
                "tensor '{}': its weight '{}' is not in the architecture", t.name, weightName));
        }
        auto ws = sliceFor(graph, *weight, layout, rc);
        if (!ws || !ws->has_value()) {
            return ws;
        }
        auto scale = detail::deepseekV4ScaleSlice(spec, *weight, t, **ws);
        if (!scale) {
            return scale.error();
        }
        return Opt(std::move(*scale));
    }
    if (t.name.ends_with(".weight_shape")) {
        return Opt(TensorSlice {});
    }
    TensorSlice slice;
    const int tp = layout.tp;
    const int r = rc.tpRank;
    if (t.isExpert()) {
        const std::int64_t experts
            = spec.moe ? spec.moe->numExperts : std::max<std::int64_t>(t.packedExperts, 1);
        const auto [first, last] = expertRange(experts, layout.ep, rc.epRank);
        const int etp = layout.etp();
        if (t.packedExperts > 0) {
            slice.dims.push_back({ 0, { { first, last } } });
            if (etp > 1
                && t.role == ParallelRole::ColumnParallel) { // [E, H, 2w]: gate and up halves
                const auto w2 = t.shape.back();
                const auto half = w2 / 2;
                auto part = evenPart(half, etp, rc.etpRank, t.name, int(t.shape.size()) - 1);
                if (!part) {
                    return part.error();
                }
                slice.dims.push_back({ int(t.shape.size()) - 1,
                    { *part, { half + part->first, half + part->second } } });
            } else if (etp > 1 && t.role == ParallelRole::RowParallel) { // [E, w, H]
                auto part = evenPart(t.shape[1], etp, rc.etpRank, t.name, 1);
                if (!part) {
                    return part.error();
                }
                slice.dims.push_back({ 1, { *part } });
            }
            return Opt(slice);
        }
        if (t.expert < first || t.expert >= last) {
            return Opt();
        }
        if (etp > 1 && t.role == ParallelRole::ColumnParallel) {
            auto part = evenPart(t.shape[0], etp, rc.etpRank, t.name, 0);
            if (!part) {
                return part.error();
            }
            slice.dims.push_back({ 0, { *part } });
        } else if (etp > 1 && t.role == ParallelRole::RowParallel && t.shape.size() == 2) {
            auto part = evenPart(t.shape[1], etp, rc.etpRank, t.name, 1);
            if (!part) {
                return part.error();
            }
            slice.dims.push_back({ 1, { *part } });
        }
        return Opt(slice);
    }
    if (tp == 1 || t.shape.empty()) {
        return Opt(slice);
    }
    DAY0_TRY(detail::deepseekV4Split(spec, t, tp));
    auto kda = detail::kdaSlice(spec, t, tp, r);
    if (!kda) {
        return kda.error();
    }
    if (kda->has_value()) {
        return kda;
    }
    switch (t.role) {
    case ParallelRole::Replicated:
        return Opt(slice);
    case ParallelRole::VocabParallel: {
        const std::int64_t v = t.shape[0];
        const std::int64_t per = (v + tp - 1) / tp;
        slice.dims.push_back({ 0, { { std::min(v, per * r), std::min(v, per * (r + 1)) } } });
        return Opt(slice);
    }
    case ParallelRole::RowParallel: {
        if (t.shape.size() < 2 || t.kind == model::TensorKind::Bias) {
            return Opt(slice); // a row-parallel bias is added once, after the reduction
        }
        auto part = evenPart(t.shape[1], tp, r, t.name, 1);
        if (!part) {
            return part.error();
        }
        slice.dims.push_back({ 1, { *part } });
        return Opt(slice);
    }
    case ParallelRole::ColumnParallel: {
        const std::int64_t n = t.shape[0];
        auto parts = detail::recurrentParts(spec, t.name, tp);
        if (!parts) {
            return parts.error();
        }
        if (!parts->empty()) {
            DimSlice rows { 0, {} };
            std::int64_t offset = 0;
            for (const std::int64_t width : *parts) {
                auto part = evenPart(width, tp, r, t.name, 0);
                if (!part) {
                    return part.error();
                }
                rows.ranges.push_back({ offset + part->first, offset + part->second });
                offset += width;
            }
            if (offset != n) {
                return Error::internal(fmt::format(
                    "tensor '{}': its parts cover {} of its {} rows", t.name, offset, n));
            }
            slice.dims.push_back(std::move(rows));
            return Opt(slice);
        }
        if (endsWithAny(t.name, { ".qkv.weight", ".qkv.bias", ".wqkv.weight", ".wqkv.bias" })) {
            const std::int64_t third = n / 3;
            auto part = evenPart(third, tp, r, t.name, 0);
            if (!part) {
                return part.error();
            }
            slice.dims.push_back({ 0,
                { *part, { third + part->first, third + part->second },
                    { 2 * third + part->first, 2 * third + part->second } } });
            return Opt(slice);
        }
        // Nemotron-H names its attention "mixer" (NemotronHAttention).
        const bool kv = t.name.find("self_attn.k_proj.") != std::string::npos
            || t.name.find("self_attn.v_proj.") != std::string::npos
            || (spec.family == model::Family::NemotronH
                && (t.name.find(".mixer.k_proj.") != std::string::npos
                    || t.name.find(".mixer.v_proj.") != std::string::npos));
        // Per layer: Gemma-4's full layers have their own (num_global_key_value_heads).
        const bool inLayer = t.layer >= 0 && std::size_t(t.layer) < spec.layers.size();
        const std::int64_t kvHeads
            = inLayer ? spec.kvHeadsOf(spec.layers[std::size_t(t.layer)]) : spec.numKvHeads;
        if (kv && kvHeads > 0 && kvHeads < tp) {
            if (tp % kvHeads != 0) {
                return Error::badInput(fmt::format(
                    "tensor '{}': tp={} is neither a divisor nor a multiple of the {} KV heads",
                    t.name, tp, kvHeads));
            }
            const std::int64_t headDim = n / kvHeads;
            const std::int64_t head = r / (tp / kvHeads);
            slice.dims.push_back({ 0, { { head * headDim, (head + 1) * headDim } } });
            return Opt(slice);
        }
        auto part = evenPart(n, tp, r, t.name, 0);
        if (!part) {
            return part.error();
        }
        slice.dims.push_back({ 0, { *part } });
        return Opt(slice);
    }
    }
    return Opt(slice);
}

std::vector<std::int64_t> sliceShape(
    const std::vector<std::int64_t>& shape, const TensorSlice& slice)
{
    auto out = shape;
    for (const auto& d : slice.dims) {
        std::int64_t n = 0;
        for (const auto& [a, b] : d.ranges) {
            n += b - a;
        }
        out[std::size_t(d.dim)] = n;
    }
    return out;
}

void extractSlice(std::span<const std::byte> src, const std::vector<std::int64_t>& shape,
    std::size_t elemSize, const TensorSlice& slice, std::span<std::byte> out)
{
    forEachRun(shape, slice, [&](std::int64_t whole, std::int64_t piece, std::int64_t count) {
        std::memcpy(out.data() + std::size_t(piece) * elemSize,
            src.data() + std::size_t(whole) * elemSize, std::size_t(count) * elemSize);
    });
}

void scatterSlice(std::span<const std::byte> piece, const std::vector<std::int64_t>& shape,
    std::size_t elemSize, const TensorSlice& slice, std::span<std::byte> whole)
{
    forEachRun(shape, slice, [&](std::int64_t w, std::int64_t p, std::int64_t count) {
        std::memcpy(whole.data() + std::size_t(w) * elemSize,
            piece.data() + std::size_t(p) * elemSize, std::size_t(count) * elemSize);
    });
}

namespace {

nlohmann::json sliceJson(const TensorSlice& s)
{
    auto dims = nlohmann::json::array();
    for (const auto& d : s.dims) {
        auto ranges = nlohmann::json::array();
        for (const auto& [a, b] : d.ranges) {
            ranges.push_back({ a, b });
        }
        dims.push_back({ { "dim", d.dim }, { "ranges", ranges } });
    }
    return dims;
}

TensorSlice sliceFromJson(const nlohmann::json& j)
{
    TensorSlice s;
    for (const auto& d : j) {
        DimSlice ds { d.at("dim").get<int>(), {} };
        for (const auto& r : d.at("ranges")) {
            ds.ranges.emplace_back(r.at(0).get<std::int64_t>(), r.at(1).get<std::int64_t>());
        }
        s.dims.push_back(std::move(ds));
    }
    return s;
}

std::string rankFileName(int rank) { return fmt::format("rank-{:05d}.safetensors", rank); }

} // namespace

Result<ShardSummary> shardCheckpoint(const fs::path& src, const fs::path& dst,
    const ShardLayout& layout, const HashOptions& hash, bool replace, Progress& progress,
    std::stop_token stop)
{
    auto ckpt = Checkpoint::open(src);
    if (!ckpt) {
        return ckpt.error();
    }
    if (ckpt->format() == CheckpointFormat::Gguf) {
        return Error::unsupported(
            fmt::format("{}: sharding GGUF files is not supported", displayPath(src)));
    }
    DAY0_TRY(ckpt->firstError());
    const auto configPath = ckpt->root() / "config.json";
    if (!fs::exists(configPath)) {
        return Error::badInput(fmt::format(
            "{}: sharding needs config.json to know each tensor's split", displayPath(configPath)));
    }
    auto spec = model::readConfigFile(configPath);
    if (!spec) {
        return spec.error();
    }
    const auto graph = model::buildLayerGraph(*spec);
    if (spec->moe && layout.ep > spec->moe->numExperts) {
        return Error::badInput(
            fmt::format("--plan: ep={} exceeds the {} experts", layout.ep, spec->moe->numExperts));
    }
    if (layout.pp > spec->numLayers) {
        return Error::badInput(
            fmt::format("--plan: pp={} exceeds the {} layers", layout.pp, spec->numLayers));
    }

    ShardSummary summary;
    summary.layout = layout;
    summary.ranks = layout.worldSize();
    summary.tensors = ckpt->tensors().size();
    std::vector<std::vector<TensorSource>> perRank(std::size_t(summary.ranks));
    nlohmann::ordered_json tensorsJson = nlohmann::ordered_json::object();
    for (const auto& t : ckpt->tensors()) {
        const auto* ts = graph.findTensor(t.name);
        if (ts == nullptr) {
            return Error::badInput(
                fmt::format("{}: tensor '{}' is not part of the {} architecture, so its split is "
                            "unknown (run day0 verify)",
                    displayPath(ckpt->root() / t.file), t.name, spec->modelType));
        }
        if (!t.dtype) {
            return Error::unsupported(fmt::format("tensor '{}' has type {}", t.name, t.dtypeName));
        }
        auto data = ckpt->data(t);
        if (!data) {
            return data.error();
        }
        const std::span<const std::byte> bytes = *data;
        auto pieces = nlohmann::ordered_json::array();
        for (int rank = 0; rank < summary.ranks; ++rank) {
            auto slice = sliceFor(graph, *ts, layout, rankCoord(layout, rank));
            if (!slice) {
                return slice.error().withContext(displayPath(ckpt->root() / t.file));
            }
            if (!slice->has_value()) {
                continue;
            }
            const TensorSlice s = **slice;
            pieces.push_back({ { "rank", rank }, { "slice", sliceJson(s) } });
            const auto shape = t.shape;
            const auto elem = std::size_t(dtypeSize(*t.dtype));
            perRank[std::size_t(rank)].push_back({ t.name, *t.dtype, sliceShape(shape, s),
                [bytes, shape, elem, s](std::span<std::byte> out) -> Result<void> {
                    extractSlice(bytes, shape, elem, s, out);
                    // Read: the source's pages leave the process (a tensor at a time resident).
                    releaseResidentPages(bytes);
                    return success();
                } });
        }
        tensorsJson[t.name] = { { "shape", t.shape }, { "dtype", t.dtypeName },
            { "role", model::parallelRoleName(ts->role) }, { "pieces", pieces } };
    }

    auto out = OutputDir::create(dst, replace);
    if (!out) {
        return out.error();
    }
    std::int64_t total = 0;
    for (const auto& r : perRank) {
        for (const auto& s : r) {
            total += std::int64_t(s.bytes());
        }
    }
    progress.setDone(0);
    progress.setTotal(total);
    auto ranks = nlohmann::ordered_json::array();
    for (int rank = 0; rank < summary.ranks; ++rank) {
        const auto c = rankCoord(layout, rank);
        const auto name = rankFileName(rank);
        progress.setStage(fmt::format("writing {}", name));
        auto written
            = writeSafetensors(out->tempPath() / name, std::move(perRank[std::size_t(rank)]),
                { { "format", "pt" }, { "day0_rank", std::to_string(rank) } }, &progress, stop);
        if (!written) {
            return written.error();
        }
        summary.bytes += *written;
        summary.files.push_back(name);
        const auto [lf, ll] = stageLayers(layout, spec->numLayers, c.stage);
        nlohmann::ordered_json r { { "rank", rank }, { "file", name }, { "stage", c.stage },
            { "dp_rank", c.dpRank }, { "tp_rank", c.tpRank }, { "ep_rank", c.epRank },
            { "etp_rank", c.etpRank }, { "edp_rank", c.edpRank }, { "layers", { lf, ll } } };
        if (spec->moe) {
            const auto [ef, el] = expertRange(spec->moe->numExperts, layout.ep, c.epRank);
            r["experts"] = { ef, el };
        }
        ranks.push_back(std::move(r));
    }
    nlohmann::ordered_json planJson { { "format", "day0-shard-plan" }, { "version", 1 },
        { "source", src.string() }, { "model_type", spec->modelType },
        { "layout",
            { { "tp", layout.tp }, { "pp", layout.pp }, { "ep", layout.ep }, { "dp", layout.dp },
                { "etp", layout.etp() }, { "edp", layout.edp() } } },
        { "ranks", ranks }, { "tensors", tensorsJson } };
    DAY0_TRY(writeFileAtomic(out->tempPath() / "plan.json", dumpJson(planJson, 1) + "\n"));
    DAY0_TRY(copyAuxiliaryFiles(ckpt->root(), out->tempPath(), {}));
    auto manifest = finishOutput(*out, hash, progress, stop);
    if (!manifest) {
        return manifest.error();
    }
    summary.files.push_back("plan.json");
    return summary;
}

Result<nlohmann::json> readShardPlan(const fs::path& dir)
{
    return readJsonFile(dir / "plan.json");
}

Result<std::vector<std::byte>> reassembleTensor(
    const fs::path& dir, const nlohmann::json& plan, const std::string& name)
{
    try {
        const auto& entry = plan.at("tensors").at(name);
        const auto shape = entry.at("shape").get<std::vector<std::int64_t>>();
        const auto dtype = parseDType(entry.at("dtype").get<std::string>());
        if (!dtype) {
            return Error::badInput(
                fmt::format("plan.json: tensor '{}' has an unknown dtype", name));
        }
        const auto elem = std::size_t(dtypeSize(*dtype));
        std::int64_t numel = 1;
        for (const auto d : shape) {
            numel *= d;
        }
        std::vector<std::byte> whole(std::size_t(numel) * elem);
        std::vector<std::uint8_t> covered(std::size_t(numel), 0);
        for (const auto& piece : entry.at("pieces")) {
            const int rank = piece.at("rank").get<int>();
            auto file = SafetensorsFile::open(dir / rankFileName(rank));
            if (!file) {
                return file.error();
            }
            const auto* t = file->find(name);
            if (t == nullptr) {
                return Error::checkFailed(
                    fmt::format("{}: tensor '{}' is missing", rankFileName(rank), name));
            }
            const auto data = file->data(*t);
            const auto slice = sliceFromJson(piece.at("slice"));
            bool agree = true;
            forEachRun(shape, slice, [&](std::int64_t w, std::int64_t p, std::int64_t count) {
                for (std::int64_t i = 0; i < count; ++i) {
                    auto* dst = whole.data() + std::size_t(w + i) * elem;
                    const auto* srcp = data.data() + std::size_t(p + i) * elem;
                    if (covered[std::size_t(w + i)] != 0 && std::memcmp(dst, srcp, elem) != 0) {
                        agree = false;
                    }
                    std::memcpy(dst, srcp, elem);
                    covered[std::size_t(w + i)] = 1;
                }
            });
            if (!agree) {
                return Error::checkFailed(fmt::format(
                    "tensor '{}': rank {} disagrees with another rank on shared elements", name,
                    rank));
            }
        }
        if (std::find(covered.begin(), covered.end(), 0) != covered.end()) {
            return Error::checkFailed(
                fmt::format("tensor '{}': the ranks' pieces do not cover it", name));
        }
        return whole;
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: {}", displayPath(dir / "plan.json"), e.what()));
    }
}

} // namespace day0::checkpoint
