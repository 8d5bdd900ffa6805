#include "model/config_reader.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/resources.h"
#include "model/config_sections.h"

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
constexpr std::array<NameToFamily, 19> kModelTypes { {
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
} };

// architectures[0] values, for configs whose model_type is a private name (fine-tunes, forks).
constexpr std::array<NameToFamily, 18> kArchitectures { {
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
} };

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

bool present(const json& object, const char* key)
{
    return object.is_object() && object.contains(key) && !object.at(key).is_null();
}

std::string joined(const std::vector<std::string>& items)
{
    std::string out;
    for (const auto& item : items) {
        out += (out.empty() ? "" : ", ") + item;
    }
    return out;
}

// The checkpoint prefixes of each family, as its published checkpoints name the tensors.
void setLayout(ModelSpec& spec)
{
    CheckpointLayout& layout = spec.layout;
    switch (spec.family) {
    case Family::Llama4:
        // Llama4ForConditionalGeneration keeps the text tower under `language_model`
        // (MaxText's llama4 checkpoint mapping: language_model.model.layers.N...,
        // language_model.lm_head.weight); a text-only Llama4ForCausalLM does not.
        if (spec.modelType != "llama4_text" && spec.architecture != "Llama4ForCausalLM") {
            layout.textPrefix = "language_model.model";
            layout.lmHead = "language_model.lm_head";
        }
        break;
    case Family::Qwen2Vl:
    case Family::Qwen25Vl:
        // Published before transformers 4.52; save_pretrained keeps this legacy naming
        // (checked against the Qwen2-VL-7B index in tests/data/model/indexes).
        layout.visionPrefix = "visual";
        break;
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        // Qwen3VLModel has an empty _checkpoint_conversion_mapping: checkpoints store
        // model.language_model.* and model.visual.* (transformers modeling_qwen3_vl.py).
        layout.textPrefix = "model.language_model";
        layout.visionPrefix = "model.visual";
        break;
    default:
        break;
    }
    if (spec.vision && spec.vision->kind == "moonvit") {
        // Kimi-K2.5 (KimiK25ForConditionalGeneration): language_model.model.*,
        // language_model.lm_head, vision_tower.*, mm_projector.* (tensor listing of the
        // published checkpoint, 208,550 tensors; see layer_graph tests).
        layout.textPrefix = "language_model.model";
        layout.lmHead = "language_model.lm_head";
        layout.visionPrefix = "vision_tower";
        layout.projectorPrefix = "mm_projector";
    }
}

// Biases and QK-norm as each family's attention/MLP modules declare them.
void readBiases(JsonReader& r, ModelSpec& spec)
{
    const bool attentionBias = r.boolOr("attention_bias", false);
    switch (spec.family) {
    case Family::Qwen2:
    case Family::Qwen2Moe:
    case Family::Qwen2Vl:
    case Family::Qwen25Vl:
        spec.attentionBias = true; // q/k/v with bias, o_proj without
        break;
    case Family::Qwen3:
    case Family::Qwen3Moe:
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.qkNorm = true;
        break;
    case Family::Glm4Moe:
        spec.attentionBias = attentionBias; // o_proj never has a bias in Glm4MoeAttention
        spec.qkNorm = r.boolOr("use_qk_norm", false);
        break;
    case Family::Llama4:
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.qkL2Norm = r.boolOr("use_qk_norm", true);
        // Llama4TextConfig defaults: attn_temperature_tuning true, floor_scale 8192,
        // attn_scale 0.1.
        if (r.has("attn_temperature_tuning") && !r.boolOr("attn_temperature_tuning", true)) {
            spec.attnTemperatureScale = 0.0;
        } else {
            spec.attnTemperatureScale = r.numberOr("attn_scale", 0.1);
        }
        spec.attnFloorScale = r.numberOr("floor_scale", 8192.0);
        if (r.ok() && spec.attnFloorScale <= 0.0) {
            r.fail("floor_scale", "must be positive");
        }
        break;
    case Family::Mixtral:
        break;
    default: // llama, mistral, deepseek (q_a/kv_a/o), generic
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.mlpBias = r.boolOr("mlp_bias", false);
        break;
    }
}

Result<DType> readDtype(const json& text, const json& top, const std::string& origin)
{
    for (const json* object : { &text, &top }) {
        for (const char* key : { "torch_dtype", "dtype" }) {
            if (!present(*object, key)) {
                continue;
            }
            const auto& value = object->at(key);
            if (value.is_string()) {
                if (auto dtype = parseDTypeLoose(value.get<std::string>())) {
                    return *dtype;
                }
            }
            return Error::badInput(
                fmt::format("{}: '{}' must name a dtype such as \"bfloat16\", found {}", origin,
                    key, value.dump()));
        }
    }
    return DType::BF16;
}

// Common decoder fields: widths, heads, vocabulary, norms, activations.
Result<void> readDecoder(const json& text, const std::string& origin, ModelSpec& spec)
{
    JsonReader r(text, origin);
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.numKvHeads
        = r.has("num_key_value_heads") ? r.requirePositive("num_key_value_heads") : spec.numHeads;
    spec.intermediateSize = r.requirePositive("intermediate_size");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    spec.hiddenAct = r.stringOr("hidden_act", "silu");
    if (r.has("head_dim")) {
        spec.headDim = r.requirePositive("head_dim");
    } else if (r.ok() && spec.hiddenSize % spec.numHeads != 0) {
        r.fail("num_attention_heads",
            fmt::format("({}) does not divide 'hidden_size' ({}) and 'head_dim' is not given",
                spec.numHeads, spec.hiddenSize));
    } else if (r.ok()) {
        spec.headDim = spec.hiddenSize / spec.numHeads;
    }
    if (r.ok() && spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
    }
    if (spec.family == Family::Llama4) {
        spec.intermediateSize = r.intOr("intermediate_size_mlp", spec.intermediateSize);
    }
    if (spec.family == Family::DeepseekV3 || spec.family == Family::Glm4Moe) {
        spec.numMtpLayers = r.intOr("num_nextn_predict_layers", 0);
        if (r.ok() && spec.numMtpLayers < 0) {
            r.fail("num_nextn_predict_layers", "must not be negative");
        }
    }
    readBiases(r, spec);
    if (!r.ok()) {
        return r.error();
    }
    if (spec.numKvHeads == spec.numHeads) {
        spec.attention = AttentionKind::MHA;
    } else if (spec.numKvHeads == 1) {
        spec.attention = AttentionKind::MQA;
    } else {
        spec.attention = AttentionKind::GQA;
    }
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    spec.mtpLayers.assign(std::size_t(spec.numMtpLayers), LayerSpec {});
    return success();
}

Result<Family> detectFamily(const json& text, const std::string& origin, ModelSpec& spec)
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
    std::vector<std::string> missing;
    for (const char* key : kDecoderKeys) {
        if (!present(text, key)) {
            missing.emplace_back(key);
        }
    }
    const std::string what = spec.modelType.empty()
        ? std::string("no 'model_type'")
        : fmt::format("unknown model_type '{}'", spec.modelType);
    if (!missing.empty()) {
        return Error::badInput(fmt::format("{}: {}; supported families: {}; a config with the "
                                           "standard decoder keys is read as a generic decoder, "
                                           "but this one lacks {}",
            origin, what, joined(supportedModelTypes()), joined(missing)));
    }
    spec.warnings.push_back(fmt::format("{}; read as a generic Llama-style decoder "
                                        "(model.layers.N.self_attn.{{q,k,v,o}}_proj, "
                                        "mlp.{{gate,up,down}}_proj): tensor names and counts may "
                                        "not match the checkpoint (supported families: {})",
        what, joined(supportedModelTypes())));
    return Family::GenericDecoder;
}

std::string architectureOf(const json& config)
{
    if (present(config, "architectures") && config.at("architectures").is_array()
        && !config.at("architectures").empty() && config.at("architectures")[0].is_string()) {
        return config.at("architectures")[0].get<std::string>();
    }
    return {};
}

Result<void> readFamilySections(const json& config, const json& text, const std::string& origin,
    const std::string& textOrigin, ModelSpec& spec)
{
    if (spec.family == Family::DeepseekV2 || spec.family == Family::DeepseekV3) {
        DAY0_TRY(detail::readMla(text, textOrigin, spec));
    }
    DAY0_TRY(detail::readMoe(text, textOrigin, spec));
    DAY0_TRY(detail::readRope(text, textOrigin, spec));
    DAY0_TRY(detail::readLayerPattern(text, textOrigin, spec));

    std::string visionKind;
    switch (spec.family) {
    case Family::Qwen2Vl:
        visionKind = "qwen2_vl";
        break;
    case Family::Qwen25Vl:
        visionKind = "qwen2_5_vl";
        break;
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        visionKind = "qwen3_vl";
        break;
    default:
        if (spec.modelType == "kimi_k25"
            || spec.architecture == "KimiK25ForConditionalGeneration") {
            visionKind = "moonvit";
        }
        break;
    }
    if (!visionKind.empty()) {
        if (!present(config, "vision_config")) {
            return Error::badInput(fmt::format("{}: 'vision_config' is missing ({} has a vision "
                                               "tower)",
                origin, spec.modelType));
        }
        DAY0_TRY(detail::readVision(config.at("vision_config"), origin, visionKind, spec));
    } else if (spec.family == Family::Llama4 && present(config, "vision_config")) {
        spec.warnings.emplace_back("the Llama-4 vision encoder is not modelled: counts and "
                                   "tensors cover the text tower");
    }

    for (const auto* object : { &text, &config }) {
        if (present(*object, "quantization_config")) {
            const auto& q = object->at("quantization_config");
            const std::string qOrigin = (object == &text && &text != &config)
                ? fmt::format("{} (text_config.quantization_config)", origin)
                : fmt::format("{} (quantization_config)", origin);
            if (!q.is_object()) {
                return Error::badInput(fmt::format("{}: must be an object", qOrigin));
            }
            DAY0_TRY(detail::readQuantization(q, qOrigin, spec));
            break;
        }
    }
    return success();
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
    out.reserve(kModelTypes.size());
    for (const auto& entry : kModelTypes) {
        out.emplace_back(entry.name);
    }
    return out;
}

Result<ModelSpec> readConfig(const json& config, const std::string& origin)
{
    if (!config.is_object()) {
        return Error::badInput(fmt::format("{}: expected a JSON object", origin));
    }
    ModelSpec spec;
    spec.origin = origin;
    {
        JsonReader top(config, origin);
        spec.modelType = top.stringOr("model_type", "");
        if (!top.ok()) {
            return top.error();
        }
    }
    spec.architecture = architectureOf(config);

    const json* text = &config;
    std::string textOrigin = origin;
    if (config.contains("text_config") && !config.at("text_config").is_null()) {
        if (!config.at("text_config").is_object()) {
            return Error::badInput(fmt::format("{}: 'text_config' must be an object", origin));
        }
        text = &config.at("text_config");
        textOrigin = fmt::format("{} (text_config)", origin);
    }

    auto family = detectFamily(*text, origin, spec);
    if (!family) {
        return family.error();
    }
    spec.family = *family;

    auto dtype = readDtype(*text, config, origin);
    if (!dtype) {
        return dtype.error();
    }
    spec.dtype = *dtype;
    DAY0_TRY(readDecoder(*text, textOrigin, spec));
    {
        // A multimodal wrapper's own tie_word_embeddings wins over its text_config's.
        JsonReader top(config, origin);
        JsonReader inner(*text, textOrigin);
        spec.tieEmbeddings
            = top.boolOr("tie_word_embeddings", inner.boolOr("tie_word_embeddings", false));
        if (!top.ok()) {
            return top.error();
        }
        if (!inner.ok()) {
            return inner.error();
        }
    }
    DAY0_TRY(readFamilySections(config, *text, origin, textOrigin, spec));
    setLayout(spec);
    return spec;
}

Result<ModelSpec> readConfigFile(const fs::path& path)
{
    auto config = readJsonFile(path);
    if (!config) {
        return config.error();
    }
    return readConfig(*config, displayPath(path));
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
        if (!entry.is_regular_file() || entry.path().extension() != ".json") {
            continue;
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

Result<ModelSpec> loadModel(const std::string& modelArg)
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
    auto spec = readConfigFile(configPath);
    if (!spec) {
        return spec.error();
    }
    spec->name = name;
    return spec;
}

} // namespace day0::model
