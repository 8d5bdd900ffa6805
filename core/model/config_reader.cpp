#include "model/config_reader.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/python_json.h"
#include "base/resources.h"
#include "model/config_audit.h"
#include "model/config_families.h"
#include "model/layer_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <sstream>
#include <system_error>

namespace day0::model {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct NameToFamily {
    const char* name;
    Family family;
};

// model_type values we read. DeepSeek-V3.2, Kimi-K2 and Kimi-K2.5 declare their own model_type
// but share DeepSeek-V3's decoder structure.
constexpr NameToFamily kModelTypes[] = {
    { "llama", Family::Llama },
    { "mistral", Family::Mistral },
    { "mixtral", Family::Mixtral },
    { "qwen2", Family::Qwen2 },
    { "qwen2_moe", Family::Qwen2Moe },
    { "qwen3", Family::Qwen3 },
    { "qwen3_moe", Family::Qwen3Moe },
    { "deepseek_v2", Family::DeepseekV2 },
    { "deepseek_v3", Family::DeepseekV3 },
    { "deepseek_v32", Family::DeepseekV3 },
    { "kimi_k2", Family::DeepseekV3 },
    { "kimi_k25", Family::DeepseekV3 },
    { "llama4", Family::Llama4 },
    { "llama4_text", Family::Llama4 },
    { "glm4_moe", Family::Glm4Moe },
    { "qwen2_vl", Family::Qwen2Vl },
    { "qwen2_5_vl", Family::Qwen25Vl },
    { "qwen3_vl", Family::Qwen3Vl },
    { "qwen3_vl_moe", Family::Qwen3VlMoe },
    { "kimi_linear", Family::KimiLinear },
    { "kimi_k3", Family::KimiLinear }, // KimiK3ForConditionalGeneration around kimi_linear text
    { "gemma4", Family::Gemma4 },
    { "gemma4_text", Family::Gemma4 },
    { "hunyuan", Family::Hunyuan },
    { "gpt_oss", Family::GptOss },
    { "minimax_m2", Family::MiniMaxM2 },
    // aiconfigurator's flattened text config; the Hub's multimodal wrapper is minimax_m3_vl.
    { "minimax_m3", Family::MiniMaxM3 },
    { "minimax_m3_vl", Family::MiniMaxM3 },
    { "nemotron_h", Family::NemotronH },
    { "nemotron-nas", Family::NemotronNas },
    { "qwen3_next", Family::Qwen3Next },
    { "qwen3_5", Family::Qwen35 },
    { "qwen3_5_moe", Family::Qwen35Moe },
    { "deepseek_v4", Family::DeepseekV4 },
    { "glm_moe_dsa", Family::GlmMoeDsa },
};

// architectures[0] values, for configs whose model_type is a private name (fine-tunes, forks).
constexpr NameToFamily kArchitectures[] = {
    { "LlamaForCausalLM", Family::Llama },
    { "MistralForCausalLM", Family::Mistral },
    { "MixtralForCausalLM", Family::Mixtral },
    { "Qwen2ForCausalLM", Family::Qwen2 },
    { "Qwen2MoeForCausalLM", Family::Qwen2Moe },
    { "Qwen3ForCausalLM", Family::Qwen3 },
    { "Qwen3MoeForCausalLM", Family::Qwen3Moe },
    { "DeepseekV2ForCausalLM", Family::DeepseekV2 },
    { "DeepseekV3ForCausalLM", Family::DeepseekV3 },
    { "DeepseekV32ForCausalLM", Family::DeepseekV3 },
    { "KimiK25ForConditionalGeneration", Family::DeepseekV3 },
    { "Llama4ForConditionalGeneration", Family::Llama4 },
    { "Llama4ForCausalLM", Family::Llama4 },
    { "Glm4MoeForCausalLM", Family::Glm4Moe },
    { "Qwen2VLForConditionalGeneration", Family::Qwen2Vl },
    { "Qwen2_5_VLForConditionalGeneration", Family::Qwen25Vl },
    { "Qwen3VLForConditionalGeneration", Family::Qwen3Vl },
    { "Qwen3VLMoeForConditionalGeneration", Family::Qwen3VlMoe },
    { "KimiLinearForCausalLM", Family::KimiLinear },
    { "KimiK3ForConditionalGeneration", Family::KimiLinear },
    { "Gemma4ForConditionalGeneration", Family::Gemma4 },
    { "Gemma4ForCausalLM", Family::Gemma4 },
    { "HunYuanMoEV1ForCausalLM", Family::Hunyuan },
    { "GptOssForCausalLM", Family::GptOss },
    { "MiniMaxM2ForCausalLM", Family::MiniMaxM2 },
    { "MiniMaxM3ForCausalLM", Family::MiniMaxM3 },
    { "MiniMaxM3SparseForConditionalGeneration", Family::MiniMaxM3 },
    { "NemotronHForCausalLM", Family::NemotronH },
    { "DeciLMForCausalLM", Family::NemotronNas },
    { "Qwen3NextForCausalLM", Family::Qwen3Next },
    { "Qwen3_5ForConditionalGeneration", Family::Qwen35 },
    { "Qwen3_5MoeForConditionalGeneration", Family::Qwen35Moe },
    // sgl-project's DeepSeek-V4-*-FP8 configs say model_type "deepseek_ref".
    { "DeepseekV4ForCausalLM", Family::DeepseekV4 },
    { "GlmMoeDsaForCausalLM", Family::GlmMoeDsa },
};

constexpr std::array<const char*, 5> kDecoderKeys { "hidden_size", "num_hidden_layers",
    "num_attention_heads", "intermediate_size", "vocab_size" };

std::optional<Family> lookup(const auto& table, const std::string& name)
{
    for (const auto& entry : table) {
        if (name == entry.name) {
            return entry.family;
        }
    }
    return std::nullopt;
}

std::string joined(const std::vector<std::string>& items)
{
    std::string out;
    for (const auto& item : items) {
        out += (out.empty() ? "" : ", ") + item;
    }
    return out;
}

// The family of a config: its model_type, else its architectures[0] (a fork's private
// model_type), else the generic Llama-style decoder (whose reading the key audit then checks).
Family detectFamily(ModelSpec& spec)
{
    if (auto family = lookup(kModelTypes, spec.modelType)) {
        return *family;
    }
    if (auto family = lookup(kArchitectures, spec.architecture)) {
        spec.warnings.push_back(fmt::format("model_type '{}' is not a known family; read as {} "
                                            "from architectures[0] '{}'",
            spec.modelType, familyName(*family), spec.architecture));
        return *family;
    }
    return Family::GenericDecoder;
}

std::string architectureOf(const detail::Section& top)
{
    if (top.has("architectures") && top.at("architectures").is_array()
        && !top.at("architectures").empty() && top.at("architectures")[0].is_string()) {
        return top.at("architectures")[0].get<std::string>();
    }
    return {};
}

// The decoder keys a generic reading needs; without them an unknown model_type is not a
// decoder Day0 can read at all.
Result<void> checkGenericDecoder(const detail::Section& text, const ModelSpec& spec)
{
    std::vector<std::string> missing;
    for (const char* key : kDecoderKeys) {
        if (!text.object.contains(key) || text.object.at(key).is_null()) {
            missing.emplace_back(key);
        }
    }
    if (missing.empty()) {
        return success();
    }
    const std::string what = spec.modelType.empty()
        ? std::string("no 'model_type'")
        : fmt::format("unknown model_type '{}'", spec.modelType);
    return Error::badInput(fmt::format("{}: {}; supported families: {}; a config whose every key "
                                       "is a Llama decoder's is read as a generic decoder, but "
                                       "this one lacks {}",
        text.origin, what, joined(supportedModelTypes()), joined(missing)));
}

Result<void> readFamily(const detail::ConfigInput& input, ModelSpec& spec)
{
    switch (spec.family) {
    case Family::KimiLinear:
        return detail::readKimiLinear(input, spec);
    case Family::Gemma4:
        return detail::readGemma4(input, spec);
    case Family::Hunyuan:
        return detail::readHunyuan(input, spec);
    case Family::GptOss:
        return detail::readGptOss(input, spec);
    case Family::MiniMaxM2:
        return detail::readMiniMaxM2(input, spec);
    case Family::MiniMaxM3:
        return detail::readMiniMaxM3(input, spec);
    case Family::NemotronH:
        return detail::readNemotronH(input, spec);
    case Family::NemotronNas:
        return detail::readNemotronNas(input, spec);
    case Family::Qwen3Next:
    case Family::Qwen35:
    case Family::Qwen35Moe:
        return detail::readQwenNext(input, spec);
    case Family::DeepseekV4:
        return detail::readDeepseekV4(input, spec);
    case Family::GlmMoeDsa:
        return detail::readGlmMoeDsa(input, spec);
    default:
        return detail::readClassicFamily(input, spec);
    }
}

std::string readerName(const ModelSpec& spec)
{
    if (spec.family == Family::GenericDecoder) {
        return "the generic Llama-style decoder (model_type unknown)";
    }
    return fmt::format("Day0's {} reader", familyName(spec.family));
}

std::string lower(std::string s)
{
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// Short name → "<HF repository> (<note>)" from resources/configs/SOURCES.md's table.
std::vector<std::pair<std::string, std::string>> bundledDescriptions(const fs::path& dir)
{
    std::vector<std::pair<std::string, std::string>> out;
    auto text = readFile(dir / "SOURCES.md");
    if (!text) {
        return out;
    }
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("| ", 0) != 0) {
            continue;
        }
        std::vector<std::string> cells;
        std::string cell;
        std::istringstream parts(line.substr(1));
        while (std::getline(parts, cell, '|')) {
            const auto b = cell.find_first_not_of(' ');
            const auto e = cell.find_last_not_of(' ');
            cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        if (cells.size() >= 2 && !cells[0].empty() && cells[1].find('/') != std::string::npos) {
            std::string description = cells[1];
            if (cells.size() >= 3 && !cells[2].empty()) {
                description += " (" + cells[2] + ")";
            }
            out.emplace_back(cells[0], description);
        }
    }
    return out;
}

} // namespace

std::vector<std::string> supportedModelTypes()
{
    std::vector<std::string> out;
    out.reserve(std::size(kModelTypes));
    for (const auto& entry : kModelTypes) {
        out.emplace_back(entry.name);
    }
    return out;
}

namespace {

// Each size key is bounded as it is read (JsonReader); their product can still exceed what a
// 64-bit count holds. A bound on the weights, in doubles, well above any model (10^16 against
// 2.8·10^12 for the largest published) keeps every exact count below overflow.
Result<void> checkMagnitude(const ModelSpec& s)
{
    const double h = double(s.hiddenSize);
    const double attention = 4.0 * h * double(std::max<std::int64_t>(s.numHeads, 1))
        * double(std::max<std::int64_t>(s.headDim, 1));
    double ffn = 3.0 * h * double(s.intermediateSize);
    if (s.moe) {
        ffn = std::max(ffn,
            3.0 * h * double(s.moe->expertIntermediate) * double(s.moe->numExperts + 1)
                + 3.0 * h * double(s.moe->sharedIntermediate));
    }
    const double layers = double(s.numLayers + s.numMtpLayers);
    const double estimate = layers * (attention + ffn) + 2.0 * double(s.vocabSize) * h;
    if (!(estimate < 1e16)) {
        return Error::badInput(fmt::format("{}: its sizes make about {:.3g} parameters, more than "
                                           "the 10^16 Day0 counts exactly",
            s.origin, estimate));
    }
    return success();
}

// The estimate above covers the sizes every family has; a family's own (Mamba heads, linear-
// attention heads, per-layer lists) can still multiply past a 64-bit count. So the tensors
// themselves, their element counts summed in doubles, must stay below the same bound.
Result<void> checkGraphMagnitude(const ModelSpec& s)
{
    const LayerGraph graph = buildLayerGraph(s);
    double total = 0.0;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            double n = 1.0;
            for (const auto d : t.shape) {
                if (d < 0) {
                    return Error::badInput(fmt::format(
                        "{}: tensor {} would have a negative dimension: its sizes overflow",
                        s.origin, t.name));
                }
                n *= double(d);
            }
            total += n;
        }
    }
    if (!(total < 1e16)) {
        return Error::badInput(fmt::format("{}: its tensors hold about {:.3g} elements, more than "
                                           "the 10^16 Day0 counts exactly",
            s.origin, total));
    }
    return success();
}

} // namespace

Result<ModelSpec> readConfig(
    const json& config, const std::string& origin, const ReadOptions& options)
{
    if (!config.is_object()) {
        return Error::badInput(fmt::format("{}: expected a JSON object", origin));
    }
    detail::Accounting accounting;
    const auto top = detail::Section::root(config, origin, &accounting);
    ModelSpec spec;
    spec.origin = origin;
    {
        JsonReader r = top.reader();
        spec.modelType = r.stringOr("model_type", "");
        if (!r.ok()) {
            return r.error();
        }
    }
    spec.architecture = architectureOf(top);

    if (top.has("text_config") && !top.at("text_config").is_object()) {
        return Error::badInput(fmt::format("{}: 'text_config' must be an object", origin));
    }
    const detail::ConfigInput input { top,
        top.has("text_config") ? top.child("text_config") : top };
    spec.family = detectFamily(spec);
    if (spec.family == Family::GenericDecoder) {
        DAY0_TRY(checkGenericDecoder(input.text, spec));
    }

    auto dtype = detail::readDtype(input);
    if (!dtype) {
        return dtype.error();
    }
    spec.dtype = *dtype;
    if (auto read = readFamily(input, spec); !read) {
        if (spec.family != Family::GenericDecoder) {
            return read.error();
        }
        // Say why the generic reading was tried at all, not only where it broke.
        const std::string what = spec.modelType.empty()
            ? std::string("no 'model_type'")
            : fmt::format("model_type '{}' is not a known family", spec.modelType);
        return Error::badInput(fmt::format("{}: {}, and it cannot be read as a Llama-style "
                                           "decoder: {}; supported families: {}",
            origin, what, read.error().message, joined(supportedModelTypes())));
    }
    {
        // A multimodal wrapper's own tie_word_embeddings wins over its text_config's; absent
        // from both, the family reader's class default stands (false unless it set one).
        JsonReader outer = top.reader();
        JsonReader inner = input.text.reader();
        spec.tieEmbeddings = outer.boolOr(
            "tie_word_embeddings", inner.boolOr("tie_word_embeddings", spec.tieEmbeddings));
        if (!outer.ok()) {
            return outer.error();
        }
        if (!inner.ok()) {
            return inner.error();
        }
    }
    if (options.hfQuantConfig != nullptr) {
        const auto document
            = detail::Section::root(*options.hfQuantConfig, options.hfQuantOrigin, &accounting);
        DAY0_TRY(detail::readHfQuantConfig(document, spec));
    }
    detail::setLayout(spec);
    DAY0_TRY(detail::checkConsistency(spec));
    DAY0_TRY(checkMagnitude(spec));
    DAY0_TRY(checkGraphMagnitude(spec));
    DAY0_TRY(detail::auditKeys(
        accounting, detail::familyInertKeys(spec.family), readerName(spec), options.partial, spec));
    if (spec.family == Family::GenericDecoder) {
        spec.warnings.push_back(fmt::format("model_type '{}' is not a known family; {}, so it is "
                                            "read as a Llama-style decoder "
                                            "(model.layers.N.self_attn.{{q,k,v,o}}_proj, "
                                            "mlp.{{gate,up,down}}_proj); supported families: {}",
            spec.modelType,
            spec.partial ? "its keys a Llama-style decoder has are read and the others ignored"
                         : "every key of it is one a Llama-style decoder has",
            joined(supportedModelTypes())));
    }
    return spec;
}

Result<ModelSpec> readConfigFile(const fs::path& path, const ReadOptions& options)
{
    auto config = readPythonJsonFile(path);
    if (!config) {
        return config.error();
    }
    ReadOptions effective = options;
    // ModelOpt checkpoints describe their quantisation in hf_quant_config.json beside
    // config.json (a config copied as <name>.json keeps it as <name>.hf_quant_config.json).
    std::optional<PythonJson<json>> hfQuant;
    if (effective.hfQuantConfig == nullptr) {
        std::error_code ec;
        const fs::path beside = path.filename() == "config.json"
            ? path.parent_path() / "hf_quant_config.json"
            : path.parent_path() / (path.stem().string() + ".hf_quant_config.json");
        if (fs::is_regular_file(beside, ec)) {
            auto parsed = readPythonJsonFile(beside);
            if (!parsed) {
                return parsed.error();
            }
            hfQuant = std::move(*parsed);
            effective.hfQuantConfig = &hfQuant->value;
            effective.hfQuantOrigin = displayPath(beside);
        }
    }
    auto spec = readConfig(config->value, displayPath(path), effective);
    if (!spec) {
        return spec.error();
    }
    if (!config->nonFinite.empty()) {
        spec->notes.push_back(fmt::format("{}: non-finite numbers as Python's json writes them, "
                                          "read as IEEE values: {}",
            displayPath(path), joined(config->nonFinite)));
    }
    if (hfQuant) {
        spec->notes.push_back(fmt::format("quantisation read from {}", effective.hfQuantOrigin));
    }
    return spec;
}

std::vector<BundledModel> bundledModels()
{
    std::vector<BundledModel> out;
    const fs::path dir = resourceDir() / "configs";
    std::error_code ec;
    if (resourceDir().empty() || !fs::is_directory(dir, ec)) {
        return out;
    }
    const auto descriptions = bundledDescriptions(dir);
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (!entry.is_regular_file() || entry.path().extension() != ".json"
            || entry.path().filename().string().ends_with(".hf_quant_config.json")) {
            continue; // a ModelOpt quantisation file read with its config, not a model
        }
        BundledModel model;
        model.name = entry.path().stem().string();
        model.configPath = entry.path();
        for (const auto& [name, description] : descriptions) {
            if (name == model.name) {
                model.description = description;
            }
        }
        out.push_back(std::move(model));
    }
    std::sort(out.begin(), out.end(),
        [](const BundledModel& a, const BundledModel& b) { return a.name < b.name; });
    return out;
}

Result<ModelSpec> loadModel(const std::string& modelArg, const ReadOptions& options)
{
    if (modelArg.empty()) {
        return Error::badInput("no model given: expected a folder with config.json, a config.json "
                               "file or a bundled name");
    }
    std::error_code ec;
    const fs::path path(modelArg);
    fs::path configPath;
    std::string name;
    if (fs::is_directory(path, ec)) {
        configPath = path / "config.json";
        name = fs::weakly_canonical(path, ec).filename().string();
        if (!fs::exists(configPath, ec)) {
            return Error::badInput(fmt::format("{}: no config.json in this folder", modelArg));
        }
    } else if (fs::exists(path, ec)) {
        configPath = path;
        const auto parent = fs::weakly_canonical(path, ec).parent_path();
        name = path.filename() == "config.json" && !parent.filename().empty()
            ? parent.filename().string()
            : path.stem().string();
    } else {
        const auto models = bundledModels();
        for (const auto& model : models) {
            if (lower(model.name) == lower(modelArg)) {
                configPath = model.configPath;
                name = model.name;
            }
        }
        if (configPath.empty()) {
            std::vector<std::string> names;
            names.reserve(models.size());
            for (const auto& model : models) {
                names.push_back(model.name);
            }
            const bool looksLikePath = modelArg.find('/') != std::string::npos
                || modelArg.find(".json") != std::string::npos;
            if (looksLikePath) {
                return Error::badInput(fmt::format("{}: no such file or folder", modelArg));
            }
            return Error::badInput(fmt::format("'{}' is not a folder, a config.json file or a "
                                               "bundled model (bundled: {})",
                modelArg, names.empty() ? "none found" : joined(names)));
        }
    }
    auto spec = readConfigFile(configPath, options);
    if (!spec) {
        return spec.error();
    }
    spec->name = name;
    return spec;
}

} // namespace day0::model
