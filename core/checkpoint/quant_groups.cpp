#include "checkpoint/quant_groups.h"

#include "base/file_util.h"

#include <fmt/format.h>

#include <cstring>
#include <unordered_set>

namespace day0::checkpoint {

namespace {

using model::QuantScheme;
using model::TensorSpec;
using TensorMap = std::unordered_map<std::string_view, const TensorSpec*>;

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

const TensorSpec* lookup(const TensorMap& map, const std::string& name)
{
    const auto it = map.find(name);
    return it == map.end() ? nullptr : it->second;
}

std::string stripSuffix(const std::string& name, std::string_view suffix)
{
    return name.substr(0, name.size() - suffix.size());
}

Error mismatch(const QuantGroup& g, const std::string& what)
{
    return Error::internal(fmt::format("the {} layout of '{}' does not match its dequantised "
                                       "tensor in the converted graph: {}",
        model::quantSchemeName(g.scheme), g.module, what));
}

/// Fills scheme, module and the companions of the quantised weight `w`; false when `w` is a
/// plain tensor.
bool classify(
    const TensorSpec& w, const TensorMap& src, const model::QuantizationSpec& q, QuantGroup& g)
{
    g.codes = &w;
    if (w.name.ends_with("_blocks") && w.dtype == DType::U8 && w.shape.size() == 4) {
        // gpt-oss: `<p>_blocks` [E, out, in/32, 16] with `<p>_scales` [E, out, in/32].
        g.scheme = QuantScheme::Mxfp4;
        g.module = stripSuffix(w.name, "_blocks");
        g.scale = lookup(src, g.module + "_scales");
        g.group = 32;
        g.transposed = true;
        return g.scale != nullptr;
    }
    if (w.name.ends_with(".weight_packed")) {
        g.module = stripSuffix(w.name, ".weight_packed");
        g.scale = lookup(src, g.module + ".weight_scale");
        if (w.dtype == DType::I32) {
            g.scheme = QuantScheme::PackedInt;
            g.shape = lookup(src, g.module + ".weight_shape");
            g.group = q.groupSize;
        } else {
            g.scheme = QuantScheme::PackedMxfp4;
            g.group = 32;
        }
        return g.scale != nullptr;
    }
    const bool fp8 = w.dtype == DType::F8E4M3 || w.dtype == DType::F8E5M2;
    if (!w.name.ends_with(".weight") || (!fp8 && w.dtype != DType::U8 && w.dtype != DType::I8)) {
        return false;
    }
    g.module = stripSuffix(w.name, ".weight");
    if (const auto* input = lookup(src, g.module + ".input_scale")) {
        g.unused.push_back(input);
    }
    if (w.dtype == DType::U8) {
        g.scheme = QuantScheme::Nvfp4;
        g.scale = lookup(src, g.module + ".weight_scale");
        g.globalScale = lookup(src, g.module + ".weight_scale_2");
        g.group = 16;
        return g.scale != nullptr && g.globalScale != nullptr;
    }
    if (w.dtype == DType::I8) {
        g.scheme = QuantScheme::Fp4Block;
        g.scale = lookup(src, g.module + ".scale");
        g.group = 32;
        return g.scale != nullptr;
    }
    const auto* perTensor = lookup(src, g.module + ".weight_scale");
    if (perTensor != nullptr && perTensor->shape.empty()) {
        g.scheme = QuantScheme::Fp8PerTensor;
        g.scale = perTensor;
        return true;
    }
    g.scheme = QuantScheme::BlockFp8;
    g.scale = lookup(src, g.module + "." + q.scaleSuffix);
    g.blockRows = q.blockRows;
    g.group = q.blockCols;
    return g.scale != nullptr;
}

/// Finds the dequantised tensor of `g` and its logical shape, and checks the stored shapes
/// against it.
Result<void> resolveOutput(QuantGroup& g, const TensorMap& out, const model::QuantizationSpec& q)
{
    const std::string name = g.transposed ? g.module : g.module + ".weight";
    g.output = lookup(out, name);
    if (g.output == nullptr) {
        return mismatch(g, fmt::format("the converted graph has no '{}'", name));
    }
    const auto& stored = g.codes->shape;
    const auto& logical = g.output->shape;
    std::vector<std::int64_t> expectScale;
    if (g.transposed) {
        // [E, out, in/32, 16] blocks → [E, in, out].
        if (logical.size() != 3 || stored[0] != logical[0] || stored[1] != logical[2]
            || stored[3] != 16 || stored[2] * 32 != logical[1]) {
            return mismatch(
                g, fmt::format("blocks {} against {}", formatShape(stored), formatShape(logical)));
        }
        g.experts = logical[0];
        g.rows = logical[2];
        g.cols = logical[1];
        expectScale = { g.experts, g.rows, g.cols / 32 };
    } else {
        if (logical.size() != 2 || stored.size() != 2 || stored[0] != logical[0]) {
            return mismatch(
                g, fmt::format("codes {} against {}", formatShape(stored), formatShape(logical)));
        }
        g.rows = logical[0];
        g.cols = logical[1];
        std::int64_t perElement = 1;
        if (g.scheme == QuantScheme::PackedInt) {
            if (q.bits != 4) {
                return Error::unsupported(
                    fmt::format("convert: '{}' is {}-bit pack-quantized; "
                                "dequantising INT{} is not supported (INT4 is)",
                        g.module, q.bits, q.bits));
            }
            perElement = 8;
        } else if (g.scheme != QuantScheme::BlockFp8 && g.scheme != QuantScheme::Fp8PerTensor) {
            perElement = 2;
        }
        if (stored[1] != ceilDiv(g.cols, perElement)) {
            return mismatch(
                g, fmt::format("codes {} against {}", formatShape(stored), formatShape(logical)));
        }
        if (g.scheme == QuantScheme::Fp8PerTensor) {
            g.blockRows = std::max<std::int64_t>(g.rows, 1);
            g.group = std::max<std::int64_t>(g.cols, 1);
        } else {
            expectScale = { ceilDiv(g.rows, g.blockRows), ceilDiv(g.cols, g.group) };
        }
    }
    if (g.group <= 0 || g.scale->shape != expectScale) {
        return mismatch(g,
            fmt::format("scale {} where {} groups of {} need {}", formatShape(g.scale->shape),
                formatShape(logical), g.group, formatShape(expectScale)));
    }
    return success();
}

bool dtypeFits(const CheckpointTensor& t, const TensorSpec& spec)
{
    return t.dtype && (*t.dtype == spec.dtype || t.dtype == spec.altDtype);
}

/// The role of a group's tensor in messages.
const char* roleOf(const QuantGroup& g, const TensorSpec* spec)
{
    if (spec == g.codes) {
        return "quantised values";
    }
    if (spec == g.globalScale) {
        return "global scale";
    }
    if (spec == g.shape) {
        return "logical shape";
    }
    return g.scheme == QuantScheme::Fp8PerTensor ? "per-tensor scale" : "scales";
}

Result<void> checkShapeValues(const Checkpoint& ckpt, const CheckpointTensor& t,
    const QuantGroup& g, const std::string& configName)
{
    auto data = ckpt.data(t);
    if (!data) {
        return data.error();
    }
    const auto size = std::size_t(dtypeSize(*t.dtype));
    std::int64_t v[2] = { 0, 0 };
    for (std::size_t i = 0; i < 2; ++i) {
        if (size == 4) {
            std::int32_t x = 0;
            std::memcpy(&x, data->data() + 4 * i, 4);
            v[i] = x;
        } else {
            std::memcpy(&v[i], data->data() + 8 * i, 8);
        }
    }
    if (v[0] != g.rows || v[1] != g.cols) {
        return Error::badInput(fmt::format("{}: tensor '{}' says the weight is [{}, {}] but the "
                                           "{} layout of '{}' in {} is [{}, {}]",
            displayPath(ckpt.root() / t.file), t.name, v[0], v[1], model::quantSchemeName(g.scheme),
            g.module, configName, g.rows, g.cols));
    }
    return success();
}

} // namespace

std::unordered_map<std::string_view, const model::TensorSpec*> tensorsByName(
    const model::LayerGraph& graph)
{
    TensorMap map;
    map.reserve(graph.tensorCount());
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            map.emplace(t.name, &t);
        }
    }
    return map;
}

Result<QuantLayout> findQuantGroups(
    const model::LayerGraph& source, const model::LayerGraph& converted)
{
    QuantLayout layout;
    if (!source.spec.quantization) {
        return layout;
    }
    const auto& q = *source.spec.quantization;
    const TensorMap src = tensorsByName(source);
    const TensorMap out = tensorsByName(converted);
    std::unordered_set<const TensorSpec*> claimed;
    for (const auto& block : source.blocks) {
        for (const auto& t : block.tensors) {
            if (t.kind != model::TensorKind::Weight) {
                continue;
            }
            QuantGroup g;
            if (!classify(t, src, q, g)) {
                continue;
            }
            DAY0_TRY(resolveOutput(g, out, q));
            for (const auto* member : { g.codes, g.scale, g.globalScale, g.shape }) {
                claimed.insert(member);
            }
            claimed.insert(g.unused.begin(), g.unused.end());
            layout.groups.push_back(std::move(g));
        }
    }
    for (const auto& block : source.blocks) {
        for (const auto& t : block.tensors) {
            const bool scale
                = t.kind == model::TensorKind::Scale || t.kind == model::TensorKind::Metadata;
            if (scale && claimed.count(&t) == 0 && out.count(t.name) == 0) {
                layout.dropped.push_back(&t);
            }
        }
    }
    return layout;
}

Result<std::optional<GroupTensors>> matchGroup(
    const Checkpoint& ckpt, const QuantGroup& g, const std::string& configName)
{
    GroupTensors found;
    const std::pair<const TensorSpec*, const CheckpointTensor**> members[] = {
        { g.codes, &found.codes },
        { g.scale, &found.scale },
        { g.globalScale, &found.globalScale },
        { g.shape, &found.shape },
    };
    bool any = false;
    for (const auto& [spec, slot] : members) {
        if (spec != nullptr) {
            *slot = ckpt.find(spec->name);
            any = any || *slot != nullptr;
        }
    }
    for (const auto* spec : g.unused) {
        if (const auto* t = ckpt.find(spec->name)) {
            found.unused.push_back(t);
            any = true;
        }
    }
    if (!any) {
        return std::optional<GroupTensors>();
    }
    const auto scheme = model::quantSchemeName(g.scheme);
    // Messages name the file of the weight's values when the missing tensor has none.
    const std::string home = found.codes != nullptr ? displayPath(ckpt.root() / found.codes->file)
                                                    : displayPath(ckpt.root());
    for (const auto& [spec, slot] : members) {
        if (spec == nullptr) {
            continue;
        }
        const CheckpointTensor* t = *slot;
        if (t == nullptr) {
            return Error::badInput(fmt::format("{}: tensor '{}' ({} {}), the {} of the {} weight "
                                               "'{}' that {} describes, is missing",
                home, spec->name, dtypeName(spec->dtype), formatShape(spec->shape), roleOf(g, spec),
                scheme, g.module, configName));
        }
        if (t->shape != spec->shape || !dtypeFits(*t, *spec)) {
            return Error::badInput(fmt::format("{}: tensor '{}' is {} {} but the {} layout of '{}' "
                                               "in {} stores its {} as {} {}",
                displayPath(ckpt.root() / t->file), t->name, t->dtypeName, formatShape(t->shape),
                scheme, g.module, configName, roleOf(g, spec),
                spec->altDtype && *spec->altDtype != spec->dtype
                    ? fmt::format("{} or {}", dtypeName(spec->dtype), dtypeName(*spec->altDtype))
                    : std::string(dtypeName(spec->dtype)),
                formatShape(spec->shape)));
        }
    }
    if (found.shape != nullptr) {
        DAY0_TRY(checkShapeValues(ckpt, *found.shape, g, configName));
    }
    return std::optional<GroupTensors>(std::move(found));
}

} // namespace day0::checkpoint
