// Quantisation sections: config.json `quantization_config` (block FP8, gpt-oss MXFP4,
// compressed-tensors, ModelOpt) and ModelOpt's `hf_quant_config.json`. Every key is read,
// checked against what the graph models, inert, or reported as not modelled: a format Day0 does
// not know is never read as unquantised weights.

#include "model/config_sections.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace day0::model::detail {

using nlohmann::json;

namespace {

// Dtype spellings of FP8 weights in real configs: DeepSeek's "e4m3", MiniMax's
// "float8_e4m3fn".
std::optional<DType> fp8Dtype(const std::string& name)
{
    if (name == "e4m3") {
        return DType::F8E4M3;
    }
    if (name == "e5m2") {
        return DType::F8E5M2;
    }
    const auto dtype = parseDTypeLoose(name);
    if (dtype && (*dtype == DType::F8E4M3 || *dtype == DType::F8E5M2)) {
        return dtype;
    }
    return std::nullopt;
}

// ModelOpt MIXED_PRECISION `quantized_layers` (module → {quant_algo, group_size}), sorted. Day0
// models NVFP4 in groups of 16 for every entry (nvidia DeepSeek-V4-*-NVFP4: the routed experts
// of each main layer). `ignore` lists what the re-quantisation leaves in the base format; an
// entry both quantised and ignored is a contradiction.
Result<std::vector<std::string>> readQuantizedLayers(
    const Section& parent, const std::vector<std::string>& ignore)
{
    JsonReader r = parent.reader();
    if (!parent.has("quantized_layers") || !parent.at("quantized_layers").is_object()) {
        r.fail("quantized_layers",
            "must be an object naming the modules MIXED_PRECISION re-quantises");
        return r.error();
    }
    const Section layers = parent.child("quantized_layers");
    std::vector<std::string> modules;
    for (const auto& [name, value] : layers.object.items()) {
        if (!value.is_object()) {
            JsonReader l = layers.reader();
            l.fail(name, "must be an object with quant_algo and group_size");
            return l.error();
        }
        JsonReader e = layers.child(name).reader();
        const std::string algo = e.stringOr("quant_algo", "");
        const std::int64_t group = e.intOr("group_size", 16);
        if (e.ok() && (algo != "NVFP4" || group != 16)) {
            e.fail("quant_algo",
                fmt::format("is \"{}\" in groups of {}; Day0 models MIXED_PRECISION layers of "
                            "\"NVFP4\" in groups of 16",
                    algo, group));
        }
        for (const auto& pattern : ignore) {
            if (e.ok() && excludedByPattern(name, pattern, false)) {
                e.fail("quant_algo",
                    fmt::format("is given for '{}', which the ignore entry \"{}\" leaves "
                                "unconverted",
                        name, pattern));
            }
        }
        if (!e.ok()) {
            return e.error();
        }
        modules.push_back(name);
    }
    std::sort(modules.begin(), modules.end());
    return modules;
}

// ModelOpt MIXED_PRECISION over block FP8 (nvidia DeepSeek-V4-*-NVFP4's config.json): the
// modules of `quantized_layers` become NVFP4 (moe_quant_algo), the rest stays block FP8.
Result<void> readMixedPrecision(const Section& section, QuantizationSpec& q)
{
    JsonReader r = section.reader();
    (void)stringOneOf(r, "quant_algo", { "MIXED_PRECISION" }, "MIXED_PRECISION");
    (void)stringOneOf(r, "moe_quant_algo", { "NVFP4" }, "NVFP4");
    const std::int64_t group = r.intOr("group_size", 16);
    const auto ignore = stringArrayOr(r, "ignore");
    const std::string kvAlgo = r.stringOr("kv_cache_quant_algo", "");
    if (r.ok() && group != 16) {
        r.fail("group_size", fmt::format("is {}; NVFP4 scales groups of 16", group));
    }
    if (r.ok() && !kvAlgo.empty()) {
        if (kvAlgo == "FP8") {
            q.kvCacheDtype = DType::F8E4M3;
        } else {
            section.notModelled("kv_cache_quant_algo",
                fmt::format("KV cache quant algo \"{}\" is not modelled", kvAlgo));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    if (section.has("config_groups") && section.at("config_groups").is_object()) {
        // The compressed-tensors description of the NVFP4 part: 4-bit floats in groups of 16
        // for weights and (dynamic-free, calibrated) input activations.
        const Section groups = section.child("config_groups");
        for (const auto& [name, value] : groups.object.items()) {
            if (!value.is_object()) {
                continue;
            }
            const Section g = groups.child(name);
            JsonReader gr = g.reader();
            const auto targets = stringArrayOr(gr, "targets");
            if (gr.ok() && (targets.size() != 1 || targets[0] != "Linear")) {
                gr.fail("targets", "must be [\"Linear\"] (other targets are not modelled)");
            }
            if (!gr.ok()) {
                return gr.error();
            }
            for (const char* key : { "weights", "input_activations" }) {
                if (!g.has(key) || !g.at(key).is_object()) {
                    continue;
                }
                JsonReader w = g.child(key).reader();
                const auto bits = w.intOr("num_bits", 4);
                const std::string type = w.stringOr("type", "float");
                const auto size = w.intOr("group_size", 16);
                boolMustBe(w, "dynamic", false);
                if (w.ok() && (bits != 4 || type != "float" || size != 16)) {
                    w.fail("num_bits",
                        fmt::format("{}-bit {} in groups of {} is not the NVFP4 Day0 models", bits,
                            type, size));
                }
                if (!w.ok()) {
                    return w.error();
                }
            }
        }
    }
    auto modules = readQuantizedLayers(section, ignore);
    if (!modules) {
        return modules.error();
    }
    q.mixedModules = std::move(*modules);
    q.mixedScheme = QuantScheme::Nvfp4;
    q.mixedGroupSize = 16;
    return success();
}

Result<void> readBlockFp8(const Section& section, QuantizationSpec& q, ModelSpec& spec)
{
    JsonReader r = section.reader();
    q.scheme = QuantScheme::BlockFp8;
    const std::string fmtName = r.stringOr("fmt", "e4m3");
    if (auto dtype = fp8Dtype(fmtName)) {
        q.weightDtype = *dtype;
    } else if (r.ok()) {
        r.fail("fmt",
            fmt::format(R"(must be "e4m3", "e5m2" or a dtype such as )"
                        R"("float8_e4m3fn", found "{}")",
                fmtName));
    }
    // Dynamic activation scales are computed at run time; static ones would add input_scale
    // tensors to the checkpoint.
    (void)stringOneOf(r, "activation_scheme", { "dynamic" }, "dynamic");
    if (r.ok() && !r.has("weight_block_size")) {
        section.notModelled("weight_block_size",
            "FP8 without 'weight_block_size' (per-tensor scales in HF's fp8 format) is not "
            "modelled");
        return success();
    }
    const auto block = intArrayOr(r, "weight_block_size");
    if (r.ok() && (block.size() != 2 || block[0] <= 0 || block[1] <= 0)) {
        r.fail("weight_block_size", "must be two positive integers");
    }
    if (r.ok()) {
        q.blockRows = block[0];
        q.blockCols = block[1];
    }
    q.skippedModules = stringArrayOr(r, "modules_to_not_convert");
    for (auto& name : stringArrayOr(r, "ignored_layers")) {
        q.skippedModules.push_back(std::move(name));
    }
    // "ue8m0": every block scale is a power of two (DeepSeek-V3.1 and later).
    q.format = stringOneOf(r, "scale_fmt", { "ue8m0", "" }, "");
    if (!r.ok()) {
        return r.error();
    }
    (void)spec;
    if (r.has("quant_algo")) {
        return readMixedPrecision(section, q);
    }
    return success();
}

Result<void> readGptOssMxfp4(const Section& section, QuantizationSpec& q)
{
    JsonReader r = section.reader();
    q.scheme = QuantScheme::Mxfp4;
    q.weightDtype = DType::U8;
    q.scaleDtype = DType::U8;
    q.bits = 4;
    q.groupSize = 32;
    q.excludePatterns = stringArrayOr(r, "modules_to_not_convert");
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

// The one `weights` scheme of a compressed-tensors config_groups object, with its format.
struct CtGroup {
    const json* weights = nullptr;
    Section weightsSection;
    std::string format;
};

Result<void> readCtWeights(const Section& w, const std::string& format, QuantizationSpec& q)
{
    JsonReader r = w.reader();
    q.bits = static_cast<std::int32_t>(r.intOr("num_bits", 4));
    q.groupSize = r.intOr("group_size", 0);
    const std::string type = stringOneOf(r, "type", { "int", "float" }, "int");
    (void)stringOneOf(r, "strategy", { "group", "tensor_group" }, "group");
    boolMustBe(r, "symmetric", true); // asymmetric schemes add weight_zero_point tensors
    boolMustBe(r, "dynamic", false);
    // Calibration settings: they decide the values, not the tensors.
    (void)r.stringOr("observer", "");
    if (r.has("observer_kwargs")) {
        (void)r.value("observer_kwargs");
    }
    if (r.has("actorder")) {
        w.notModelled("actorder", "activation ordering adds weight_g_idx tensors");
    }
    if (r.has("block_structure")) {
        w.notModelled("block_structure", "block-wise compressed-tensors weights are not modelled");
    }
    if (r.has("zp_dtype")) {
        w.notModelled("zp_dtype", "zero points are not modelled");
    }
    const std::string scaleDtype = r.stringOr("scale_dtype", "");
    if (!r.ok()) {
        return r.error();
    }
    if (q.groupSize <= 0) {
        r.fail("group_size", "must be a positive integer for group quantisation");
        return r.error();
    }
    if (format == "pack-quantized") {
        if (type != "int" || (q.bits != 4 && q.bits != 8)) {
            r.fail("num_bits",
                fmt::format("{}-bit {} weights are not modelled in pack-quantized (int4, int8)",
                    q.bits, type));
            return r.error();
        }
        q.scheme = QuantScheme::PackedInt;
        q.weightDtype = DType::I32;
        q.scaleSuffix = "weight_scale";
        return success();
    }
    // mxfp4-pack-quantized: E2M1 values two per byte, one E8M0 scale (uint8) per 32.
    if (type != "float" || q.bits != 4 || q.groupSize != 32
        || (!scaleDtype.empty() && scaleDtype != "torch.uint8")) {
        r.fail("type",
            fmt::format("mxfp4-pack-quantized needs 4-bit float weights in groups of 32 with "
                        "uint8 scales, found {}-bit {}, group {}, scale dtype '{}'",
                q.bits, type, q.groupSize, scaleDtype));
        return r.error();
    }
    q.scheme = QuantScheme::PackedMxfp4;
    q.weightDtype = DType::U8;
    q.scaleDtype = DType::U8;
    q.scaleSuffix = "weight_scale";
    return success();
}

Result<void> readCompressedTensors(const Section& section, QuantizationSpec& q)
{
    JsonReader r = section.reader();
    const std::string topFormat = r.stringOr("format", "");
    (void)stringOneOf(r, "quantization_status", { "compressed" }, "compressed");
    (void)r.numberOr("global_compression_ratio", 0.0);
    (void)r.stringOr("version", "");
    for (const char* key : { "sparsity_config", "transform_config" }) {
        if (r.has(key)) {
            section.notModelled(key, fmt::format("compressed-tensors {} is not modelled", key));
        }
    }
    if (r.has("kv_cache_scheme")) {
        section.notModelled("kv_cache_scheme", "a quantised KV cache scheme is not modelled");
    }
    q.method = "compressed-tensors";
    for (auto& entry : stringArrayOr(r, "ignore")) {
        if (entry.rfind("re:", 0) == 0) {
            q.ignorePatterns.push_back(entry.substr(3));
        } else {
            q.skippedModules.push_back(std::move(entry));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    if (!section.has("config_groups") || !section.at("config_groups").is_object()
        || section.at("config_groups").empty()) {
        r.fail("config_groups", "must be an object with one quantisation group");
        return r.error();
    }
    const Section groups = section.child("config_groups");
    if (groups.object.size() != 1) {
        section.notModelled("config_groups",
            fmt::format("{} quantisation groups (Day0 models one)", groups.object.size()));
        return success();
    }
    const auto first = groups.object.begin();
    const std::string name = first.key();
    const nlohmann::json& value = first.value();
    if (!value.is_object()) {
        JsonReader g = groups.reader();
        g.fail(name, "must be an object");
        return g.error();
    }
    const Section group = groups.child(name);
    JsonReader g = group.reader();
    const std::string format = g.stringOr("format", topFormat);
    const auto targets = stringArrayOr(g, "targets");
    if (g.ok() && (targets.size() != 1 || targets[0] != "Linear")) {
        g.fail("targets", "must be [\"Linear\"] (other targets are not modelled)");
    }
    for (const char* key : { "input_activations", "output_activations" }) {
        if (g.has(key)) {
            group.notModelled(key, "quantised activations are not modelled");
        }
    }
    if (!g.ok()) {
        return g.error();
    }
    if (format != "pack-quantized" && format != "mxfp4-pack-quantized") {
        section.touchAll();
        group.touchAll();
        section.notModelled("format",
            fmt::format("compressed-tensors format \"{}\" is not modelled (Day0 models "
                        "\"pack-quantized\" and \"mxfp4-pack-quantized\")",
                format));
        return success();
    }
    if (!group.has("weights") || !group.at("weights").is_object()) {
        g.fail("weights", "must be an object");
        return g.error();
    }
    q.format = format;
    return readCtWeights(group.child("weights"), format, q);
}

// ModelOpt quant_algo values and what they store per quantised Linear (false: a value Day0
// does not model, recorded on `section` so that a partial reading can go on without it).
Result<bool> setModelOptAlgo(const Section& section, JsonReader& r, const std::string& algo,
    std::int64_t groupSize, QuantizationSpec& q)
{
    if (algo == "NVFP4") {
        q.scheme = QuantScheme::Nvfp4;
        q.weightDtype = DType::U8;
        q.scaleDtype = DType::F8E4M3;
        q.bits = 4;
        q.groupSize = groupSize > 0 ? groupSize : 16;
        if (q.groupSize != 16) {
            r.fail("group_size", fmt::format("is {}; NVFP4 scales groups of 16", q.groupSize));
            return r.error();
        }
        return true;
    }
    if (algo == "FP8") {
        q.scheme = QuantScheme::Fp8PerTensor;
        q.weightDtype = DType::F8E4M3;
        q.scaleDtype = DType::F32;
        q.bits = 8;
        return true;
    }
    if (algo.empty()) {
        r.fail("quant_algo", "is missing");
        return r.error();
    }
    if (algo == "MIXED_PRECISION") {
        // Each module in its own format (FP8, NVFP4, W4A16_NVFP4, ...), listed in
        // quantized_layers (Nemotron-3 Super NVFP4, Nemotron-3.5 Lightning).
        section.notModelled("quant_algo",
            fmt::format("{}: ModelOpt MIXED_PRECISION (a format per module, listed in "
                        "'quantized_layers') is not modelled",
                section.file));
        if (section.has("quantized_layers")) {
            section.notModelled("quantized_layers",
                fmt::format("{}: the per-module formats of ModelOpt MIXED_PRECISION are not "
                            "modelled",
                    section.file));
        }
        return false;
    }
    section.notModelled("quant_algo",
        fmt::format("{}: ModelOpt quant_algo \"{}\" is not modelled (Day0 models \"NVFP4\" and "
                    "\"FP8\")",
            section.file, algo));
    return false;
}

// A ModelOpt quant_algo Day0 has no layout for ("MIXED_PRECISION": a scheme per module in
// quantized_layers, NVIDIA's Qwen3.6 releases): the section is accounted for as not modelled,
// so the reading fails naming it, or with --partial goes on without the quantisation.
bool unmodelledModelOptAlgo(const Section& section, const std::string& algo)
{
    if (algo.empty() || algo == "NVFP4" || algo == "FP8") {
        return false; // a missing quant_algo is malformed: setModelOptAlgo says so
    }
    section.touchAll();
    section.notModelled("quant_algo",
        algo == "MIXED_PRECISION"
            ? fmt::format("{}: ModelOpt quant_algo \"MIXED_PRECISION\" (a format per module, "
                          "listed in 'quantized_layers') is not modelled",
                section.file)
            : fmt::format("{}: ModelOpt quant_algo \"{}\" is not modelled (Day0 models \"NVFP4\" "
                          "and \"FP8\")",
                section.file, algo));
    return true;
}

std::optional<DType> kvCacheAlgo(const std::string& algo)
{
    if (algo == "FP8") {
        return DType::F8E4M3;
    }
    return std::nullopt;
}

Result<void> readModelOpt(const Section& section, QuantizationSpec& q)
{
    JsonReader r = section.reader();
    q.method = "modelopt";
    q.source = "config.json";
    const std::string algo = r.stringOr("quant_algo", "");
    if (r.ok() && unmodelledModelOptAlgo(section, algo)) {
        return success();
    }
    if (r.has("producer")) {
        (void)r.value("producer");
    }
    q.excludePatterns = stringArrayOr(r, "ignore");
    std::int64_t groupSize = r.intOr("group_size", 0);
    if (section.has("config_groups") && section.at("config_groups").is_object()) {
        // ModelOpt writes the compressed-tensors shape of its scheme; only the group size
        // adds to quant_algo.
        const Section groups = section.child("config_groups");
        for (const auto& [name, value] : groups.object.items()) {
            if (!value.is_object()) {
                continue;
            }
            const Section group = groups.child(name);
            JsonReader g = group.reader();
            (void)stringArrayOr(g, "targets");
            for (const char* key : { "weights", "input_activations" }) {
                if (group.has(key) && group.at(key).is_object()) {
                    JsonReader w = group.child(key).reader();
                    groupSize = std::max(groupSize, w.intOr("group_size", 0));
                    (void)w.intOr("num_bits", 0);
                    (void)w.stringOr("type", "");
                    (void)w.boolOr("dynamic", false);
                    if (!w.ok()) {
                        return w.error();
                    }
                }
            }
            if (!g.ok()) {
                return g.error();
            }
        }
    }
    if (section.has("kv_cache_scheme") && section.at("kv_cache_scheme").is_string()) {
        // ModelOpt writes FP8 as an object and copies any other KV algo as its name.
        section.notModelled("kv_cache_scheme",
            fmt::format("KV cache scheme \"{}\" is not modelled",
                section.at("kv_cache_scheme").get<std::string>()));
    } else if (section.has("kv_cache_scheme") && section.at("kv_cache_scheme").is_object()) {
        JsonReader kv = section.child("kv_cache_scheme").reader();
        const auto bits = kv.intOr("num_bits", 8);
        const std::string type = kv.stringOr("type", "float");
        (void)kv.boolOr("dynamic", false);
        if (kv.ok() && (bits != 8 || type != "float")) {
            kv.fail("num_bits", fmt::format("a {}-bit {} KV cache is not modelled", bits, type));
        }
        if (!kv.ok()) {
            return kv.error();
        }
        q.kvCacheDtype = DType::F8E4M3;
    }
    if (!r.ok()) {
        return r.error();
    }
    auto modelled = setModelOptAlgo(section, r, algo, groupSize, q);
    if (!modelled) {
        return modelled.error();
    }
    return success();
}

} // namespace

Result<void> readQuantization(const Section& section, ModelSpec& spec)
{
    JsonReader r = section.reader();
    const std::string method = r.stringOr("quant_method", "");
    if (!r.ok()) {
        return r.error();
    }
    QuantizationSpec q;
    q.method = method;
    q.source = "config.json";
    if (method == "fp8") {
        DAY0_TRY(readBlockFp8(section, q, spec));
    } else if (method == "mxfp4") {
        DAY0_TRY(readGptOssMxfp4(section, q));
    } else if (method == "compressed-tensors") {
        DAY0_TRY(readCompressedTensors(section, q));
    } else if (method == "modelopt") {
        DAY0_TRY(readModelOpt(section, q));
    } else {
        section.touchAll();
        section.notModelled("quant_method",
            fmt::format("quant_method \"{}\" is not modelled (Day0 models \"fp8\", \"mxfp4\", "
                        "\"compressed-tensors\" and \"modelopt\")",
                method));
        return success();
    }
    if (section.accounting != nullptr) {
        // A scheme with a part Day0 does not model is not applied at all: its tensors would be
        // listed wrong.
        for (const auto& u : section.accounting->unmodelled) {
            if (u.path.rfind(section.path, 0) == 0) {
                return success();
            }
        }
    }
    spec.quantization = std::move(q);
    return success();
}

Result<void> readHfQuantConfig(const Section& document, ModelSpec& spec)
{
    JsonReader top = document.reader();
    if (top.has("producer")) {
        (void)top.value("producer");
    }
    if (!document.has("quantization") || !document.at("quantization").is_object()) {
        top.fail("quantization", "must be an object");
        return top.error();
    }
    const Section section = document.child("quantization");
    JsonReader r = section.reader();
    const std::string algo = r.stringOr("quant_algo", "");
    // MIXED_PRECISION is modelled where config.json describes its base format (DeepSeek-V4's
    // NVFP4 releases); elsewhere (Qwen3.6, Nemotron-3 Super NVFP4) it is not.
    const bool mixedOverBase = algo == "MIXED_PRECISION" && spec.quantization
        && spec.quantization->mixedScheme.has_value();
    if (r.ok() && !mixedOverBase && unmodelledModelOptAlgo(section, algo)) {
        return success();
    }
    const std::int64_t groupSize = r.intOr("group_size", 0);
    auto excluded = stringArrayOr(r, "exclude_modules");
    const std::string kvAlgo = r.stringOr("kv_cache_quant_algo", "");
    for (const char* key : { "has_zero_point", "pre_quant_scale", "awq_block_size" }) {
        if (r.has(key)) {
            section.notModelled(key, fmt::format("ModelOpt '{}' is not modelled", key));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    const bool trimmed = !top.has("producer") && !r.has("exclude_modules");
    std::optional<DType> kvDtype;
    if (!kvAlgo.empty()) {
        kvDtype = kvCacheAlgo(kvAlgo);
        if (!kvDtype) {
            section.notModelled("kv_cache_quant_algo",
                fmt::format("KV cache quant algo \"{}\" is not modelled", kvAlgo));
        }
    }
    if (algo == "MIXED_PRECISION") {
        // The same description as config.json's quantization_config (nvidia DeepSeek-V4-NVFP4
        // ships both); without it the base format is unknown.
        if (!spec.quantization || !spec.quantization->mixedScheme) {
            section.touchAll();
            section.notModelled("quant_algo",
                "MIXED_PRECISION without a config.json quantization_config describing the "
                "base format is not modelled");
            return success();
        }
        auto modules = readQuantizedLayers(section, excluded);
        if (!modules) {
            return modules.error();
        }
        if (*modules != spec.quantization->mixedModules || groupSize != 16) {
            r.fail("quantized_layers",
                fmt::format("lists {} modules in groups of {} but config.json's "
                            "quantization_config lists {} in groups of 16",
                    modules->size(), groupSize, spec.quantization->mixedModules.size()));
            return r.error();
        }
        if (kvDtype && !spec.quantization->kvCacheDtype) {
            spec.quantization->kvCacheDtype = kvDtype;
        }
        return success();
    }
    if (spec.quantization) {
        // config.json already says how the weights are stored; the two must agree.
        const auto& q = *spec.quantization;
        const bool agrees = (algo == "NVFP4" && q.scheme == QuantScheme::Nvfp4)
            || (algo == "FP8" && q.scheme == QuantScheme::Fp8PerTensor);
        if (!agrees) {
            r.fail("quant_algo",
                fmt::format("is \"{}\" but config.json's quantization_config says {} ({})", algo,
                    q.method, quantSchemeName(q.scheme)));
            return r.error();
        }
        // ModelOpt writes the same module list twice (config.json `ignore`, here
        // `exclude_modules`: identical in every NVIDIA release read here, e.g. the 124 entries of
        // Kimi-K2.6-NVFP4); two lists that disagree leave it open which modules are quantised.
        if (q.method == "modelopt") {
            std::vector<std::string> a = q.excludePatterns;
            std::vector<std::string> b = excluded;
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            if (a != b) {
                std::vector<std::string> onlyHere;
                std::set_difference(
                    b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(onlyHere));
                std::vector<std::string> onlyThere;
                std::set_difference(
                    a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(onlyThere));
                r.fail("exclude_modules",
                    fmt::format("differs from config.json's quantization_config.ignore ({} "
                                "entries only here, first \"{}\"; {} only there, first \"{}\")",
                        onlyHere.size(), onlyHere.empty() ? "" : onlyHere.front(), onlyThere.size(),
                        onlyThere.empty() ? "" : onlyThere.front()));
                return r.error();
            }
        }
        if (kvDtype && !spec.quantization->kvCacheDtype) {
            spec.quantization->kvCacheDtype = kvDtype;
        }
        return success();
    }
    QuantizationSpec q;
    q.method = "modelopt";
    q.source = "hf_quant_config.json";
    q.excludePatterns = std::move(excluded);
    q.kvCacheDtype = kvDtype;
    auto modelled = setModelOptAlgo(section, r, algo, groupSize, q);
    if (!modelled) {
        return modelled.error();
    }
    if (!*modelled) {
        return success(); // not modelled: recorded, and the weights are not read as quantised
    }
    if (trimmed) {
        // ModelOpt always writes its producer, and with a single quant_algo the list of the
        // modules it left unquantised; without both the file is a shortened copy.
        spec.warnings.push_back(fmt::format("{}: no 'producer' and no 'exclude_modules', which "
                                            "ModelOpt's own hf_quant_config.json always has "
                                            "(this copy looks shortened): every Linear the "
                                            "family's ModelOpt checkpoints quantise is read as "
                                            "{}; the published checkpoint may leave more "
                                            "modules unquantised",
            document.origin, quantSchemeName(q.scheme)));
    }
    spec.quantization = std::move(q);
    return success();
}

} // namespace day0::model::detail
