// A config under a model_type and architecture Day0 does not know (a fork's private names) is
// either read exactly as the original family would read it, or refused with exit 2 naming what
// the generic decoder does not model: never a plausible reading with other counts.

#include "base/python_json.h"
#include "base/resources.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace fs = std::filesystem;

namespace {

struct Reading {
    ParameterCounts counts;
    std::set<std::string> names;
    std::int64_t bytes = 0;
};

Reading readingOf(const ModelSpec& spec)
{
    const LayerGraph g = buildLayerGraph(spec);
    return { g.countParameters(), tensorNames(g), totalBytes(g) };
}

void rename(nlohmann::json& object)
{
    if (object.contains("model_type")) {
        object["model_type"] = "private_fork_lm";
    }
    if (object.contains("architectures") && object["architectures"].is_array()) {
        object["architectures"] = { "PrivateForkForCausalLM" };
    }
}

// Every config of a folder (not the ModelOpt hf_quant_config.json files beside them).
std::vector<fs::path> configsIn(const fs::path& dir)
{
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (entry.path().extension() == ".json" && !name.ends_with(".hf_quant_config.json")) {
            out.push_back(entry.path());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

struct Outcome {
    int exact = 0;
    int refused = 0;
};

void checkRenamed(const fs::path& path, Outcome& outcome)
{
    SCOPED_TRACE(path.filename().string());
    const auto original = readConfigFile(path);
    auto parsed = readPythonJsonFile(path);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    nlohmann::json renamed = parsed->value;
    rename(renamed);
    for (const char* nested : { "text_config", "vision_config" }) {
        if (renamed.contains(nested) && renamed[nested].is_object()) {
            rename(renamed[nested]);
        }
    }
    ReadOptions options;
    std::optional<PythonJson<nlohmann::json>> hfQuant;
    const fs::path beside = path.parent_path() / (path.stem().string() + ".hf_quant_config.json");
    if (fs::exists(beside)) {
        hfQuant = *readPythonJsonFile(beside);
        options.hfQuantConfig = &hfQuant->value;
        options.hfQuantOrigin = beside.filename().string();
    }
    const auto fork = readConfig(renamed, "renamed.json", options);
    if (!fork) {
        // Refused: exit 2 with the reason, never an internal error.
        EXPECT_EQ(fork.error().code, ErrorCode::BadInput) << fork.error().message;
        EXPECT_NE(fork.error().message.find("private_fork_lm"), std::string::npos)
            << fork.error().message;
        ++outcome.refused;
        return;
    }
    // Read: only as the original reads, with every tensor, count and byte the same.
    ASSERT_TRUE(original.ok()) << "the renamed config reads but the original does not: "
                               << original.error().message;
    EXPECT_FALSE(fork->partial);
    const Reading a = readingOf(*original);
    const Reading b = readingOf(*fork);
    EXPECT_EQ(b.counts.total, a.counts.total);
    EXPECT_EQ(b.counts.active, a.counts.active);
    EXPECT_EQ(b.counts.tensors, a.counts.tensors);
    EXPECT_EQ(b.bytes, a.bytes);
    EXPECT_EQ(b.names, a.names);
    ++outcome.exact;
}

} // namespace

TEST(UnknownFamily, RenamedBundledAndFrontierConfigsReadExactlyOrAreRefused)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    Outcome outcome;
    std::vector<fs::path> configs = configsIn(fs::path(DAY0_RESOURCE_DIR) / "configs");
    for (const char* dir : { "configs", "configs/frontier", "configs/frontier-sizes" }) {
        for (auto& p : configsIn(dataDir() / dir)) {
            configs.push_back(std::move(p));
        }
    }
    ASSERT_GE(configs.size(), 60u);
    for (const auto& path : configs) {
        checkRenamed(path, outcome);
    }
    // The Llama-style dense configs read as the generic decoder, exactly; everything with
    // structure of its own (MLA, experts, windows, new layer kinds, vision towers) is refused.
    EXPECT_GE(outcome.exact, 3);
    EXPECT_GE(outcome.refused, 50);
}

TEST(UnknownFamily, KimiK2UnderAPrivateNameIsRefusedNamingItsKeys)
{
    // The bug this guards: Kimi-K2's config under a fork's model_type read as a 39B dense
    // decoder instead of the 1.03T MoE.
    setResourceDir(DAY0_RESOURCE_DIR);
    auto json = readJsonFile(fs::path(DAY0_RESOURCE_DIR) / "configs/kimi-k2.json");
    ASSERT_TRUE(json.ok());
    rename(*json);
    const auto r = readConfig(*json, "kimi-fork/config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    for (const char* key : { "kimi-fork/config.json", "private_fork_lm", "kv_lora_rank",
             "n_routed_experts", "q_lora_rank" }) {
        EXPECT_NE(r.error().message.find(key), std::string::npos)
            << key << ": " << r.error().message;
    }

    // With the original architectures[0] the family is recognised and read exactly.
    json = readJsonFile(fs::path(DAY0_RESOURCE_DIR) / "configs/kimi-k2.json");
    (*json)["model_type"] = "private_fork_lm";
    const auto byArchitecture = readConfig(*json, "kimi-fork/config.json");
    ASSERT_TRUE(byArchitecture.ok()) << byArchitecture.error().message;
    EXPECT_EQ(byArchitecture->family, Family::DeepseekV3);
    EXPECT_EQ(buildLayerGraph(*byArchitecture).countParameters().total,
        buildLayerGraph(bundled("kimi-k2")).countParameters().total);
}

TEST(UnknownFamily, PartialReadingListsWhatTheGenericDecoderLeavesOut)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto json = readJsonFile(dataDir() / "configs/frontier/openai--gpt-oss-120b.json");
    ASSERT_TRUE(json.ok());
    rename(*json);
    const auto strict = readConfig(*json, "oss-fork.json");
    ASSERT_FALSE(strict.ok());
    for (const char* key : { "layer_types", "num_local_experts", "sliding_window" }) {
        EXPECT_NE(strict.error().message.find(key), std::string::npos) << key;
    }
    ReadOptions partial;
    partial.partial = true;
    const auto r = readConfig(*json, "oss-fork.json", partial);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->partial);
    EXPECT_EQ(r->family, Family::GenericDecoder);
    std::set<std::string> ignored;
    for (const auto& k : r->ignored) {
        ignored.insert(k.path);
        EXPECT_FALSE(k.reason.empty()) << k.path;
    }
    for (const char* key :
        { "layer_types", "num_local_experts", "sliding_window", "swiglu_limit" }) {
        EXPECT_EQ(ignored.count(key), 1u) << key;
    }
    // Every key is accounted for, and the ignored ones are the unknown ones.
    std::size_t unknown = 0;
    for (const auto& k : r->keys) {
        unknown += k.status == KeyStatus::Unknown ? 1 : 0;
    }
    EXPECT_EQ(unknown, r->ignored.size());
    // The warning every output carries names them too.
    EXPECT_TRUE(std::any_of(r->warnings.begin(), r->warnings.end(),
        [](const std::string& w) { return w.find("PARTIAL") != std::string::npos; }));
}

TEST(UnknownFamily, PartialMlaConfigKeepsTheDecodersOwnHeadWidth)
{
    // Found by fuzz.config_json: DeepSeek-V3's config with its model_type key misspelled, read
    // with --partial as the generic decoder, left kv_lora_rank unread but still took the head
    // width from it (0: "head_dim 0", tensors with a zero dimension). The generic decoder never
    // reads MLA, so its head width is hidden_size / num_attention_heads.
    setResourceDir(DAY0_RESOURCE_DIR);
    auto json = readJsonFile(fs::path(DAY0_RESOURCE_DIR) / "configs/deepseek-v3.json");
    ASSERT_TRUE(json.ok());
    rename(*json);
    ReadOptions partial;
    partial.partial = true;
    const auto r = readConfig(*json, "v3-fork/config.json", partial);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->family, Family::GenericDecoder);
    EXPECT_EQ(r->headDim, r->hiddenSize / r->numHeads);
    for (const auto& block : buildLayerGraph(*r).blocks) {
        for (const auto& tensor : block.tensors) {
            for (const std::int64_t dim : tensor.shape) {
                ASSERT_GT(dim, 0) << tensor.name;
            }
        }
    }
}
