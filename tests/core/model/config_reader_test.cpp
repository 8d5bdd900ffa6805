// Reading Hugging Face config.json files: every family's fields, nested configs, quantisation,
// per-layer patterns, and the errors for unknown or malformed input.

#include "base/file_util.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {


std::string withField(const std::string& file, const std::string& key, const std::string& value)
{
    auto json = readJsonFile(std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / file);
    EXPECT_TRUE(json.ok());
    (*json)[key] = nlohmann::json::parse(value);
    return json->dump();
}

} // namespace

TEST(ConfigReader, KimiK2IsDeepseekV3WithMla)
{
    const ModelSpec s = bundled("kimi-k2");
    EXPECT_EQ(s.name, "kimi-k2");
    EXPECT_EQ(s.modelType, "kimi_k2");
    EXPECT_EQ(s.family, Family::DeepseekV3);
    EXPECT_EQ(s.attention, AttentionKind::MLA);
    EXPECT_EQ(s.hiddenSize, 7168);
    EXPECT_EQ(s.numLayers, 61);
    EXPECT_EQ(s.numHeads, 64);
    EXPECT_EQ(s.vocabSize, 163840);
    EXPECT_EQ(s.mla.qLoraRank, 1536);
    EXPECT_EQ(s.mla.kvLoraRank, 512);
    EXPECT_EQ(s.mla.qkNopeHeadDim, 128);
    EXPECT_EQ(s.mla.qkRopeHeadDim, 64);
    EXPECT_EQ(s.mla.vHeadDim, 128);
    EXPECT_EQ(s.headDim, 192);
    EXPECT_EQ(s.qHeadWidth(), 64 * 192);
    ASSERT_TRUE(s.moe.has_value());
    EXPECT_EQ(s.moe->numExperts, 384);
    EXPECT_EQ(s.moe->topK, 8);
    EXPECT_EQ(s.moe->numSharedExperts, 1);
    EXPECT_EQ(s.moe->sharedIntermediate, 2048);
    EXPECT_EQ(s.moe->scoring, RouterScoring::Sigmoid);
    EXPECT_TRUE(s.moe->expertScoreBias);
    EXPECT_DOUBLE_EQ(s.moe->routedScalingFactor, 2.827);
    EXPECT_FALSE(s.layers[0].moe());
    EXPECT_TRUE(s.layers[1].moe());
    EXPECT_EQ(s.numMoeLayers(), 60);
    EXPECT_EQ(s.numMtpLayers, 0);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::BlockFp8);
    EXPECT_EQ(s.quantization->weightDtype, DType::F8E4M3);
    EXPECT_EQ(s.quantization->blockRows, 128);
    EXPECT_EQ(s.quantization->blockCols, 128);
    EXPECT_EQ(s.ropeScaling.type, "yarn");
    EXPECT_DOUBLE_EQ(s.ropeScaling.factor, 32.0);
    EXPECT_DOUBLE_EQ(s.ropeScaling.betaFast, 1.0);
    EXPECT_EQ(s.ropeScaling.originalMaxPositions, 4096);
    EXPECT_DOUBLE_EQ(s.ropeTheta, 50000.0);
    EXPECT_EQ(s.dtype, DType::BF16);
    EXPECT_FALSE(s.tieEmbeddings);
    EXPECT_TRUE(s.warnings.empty());
}

TEST(ConfigReader, DeepseekV3HasMtpAndFirstDenseLayers)
{
    const ModelSpec s = bundled("deepseek-v3");
    EXPECT_EQ(s.numMtpLayers, 1);
    ASSERT_EQ(s.mtpLayers.size(), 1u);
    EXPECT_TRUE(s.mtpLayers[0].moe());
    EXPECT_FALSE(s.layers[2].moe());
    EXPECT_TRUE(s.layers[3].moe());
    EXPECT_EQ(s.moe->numGroups, 8);
    EXPECT_EQ(s.moe->topkGroup, 4);

    // moe_layer_freq 2: layer i ≥ first_k_dense_replace is MoE when i % 2 == 0.
    auto freq = readText(withField("deepseek-v3.json", "moe_layer_freq", "2"));
    ASSERT_TRUE(freq.ok()) << freq.error().message;
    EXPECT_FALSE(freq->layers[3].moe());
    EXPECT_TRUE(freq->layers[4].moe());
    EXPECT_EQ(freq->numMoeLayers(), 29);
}

TEST(ConfigReader, DeepseekV32AndR1ReadAsDeepseekV3)
{
    const ModelSpec v32 = bundled("deepseek-v3.2");
    EXPECT_EQ(v32.family, Family::DeepseekV3);
    EXPECT_EQ(v32.modelType, "deepseek_v32");
    EXPECT_EQ(v32.mla.indexerHeads, 64);
    EXPECT_EQ(v32.mla.indexerHeadDim, 128);
    EXPECT_EQ(v32.mla.indexerTopK, 2048);
    EXPECT_EQ(v32.quantization->format, "ue8m0");
    EXPECT_EQ(bundled("deepseek-r1").family, Family::DeepseekV3);
}

TEST(ConfigReader, Llama31RopeScalingAndGqa)
{
    const ModelSpec s = bundled("llama-3.1-8b");
    EXPECT_EQ(s.family, Family::Llama);
    EXPECT_EQ(s.attention, AttentionKind::GQA);
    EXPECT_EQ(s.numKvHeads, 8);
    EXPECT_EQ(s.headDim, 128);
    EXPECT_EQ(s.ropeScaling.type, "llama3");
    EXPECT_DOUBLE_EQ(s.ropeScaling.factor, 8.0);
    EXPECT_DOUBLE_EQ(s.ropeScaling.lowFreqFactor, 1.0);
    EXPECT_DOUBLE_EQ(s.ropeScaling.highFreqFactor, 4.0);
    EXPECT_EQ(s.ropeScaling.originalMaxPositions, 8192);
    EXPECT_DOUBLE_EQ(s.ropeTheta, 500000.0);
    EXPECT_DOUBLE_EQ(s.normEps, 1e-5);
    EXPECT_FALSE(s.attentionBias);
    EXPECT_FALSE(s.mlpBias);
    EXPECT_FALSE(s.moe.has_value());
    EXPECT_EQ(s.layout.textPrefix, "model");
    EXPECT_EQ(s.layout.lmHead, "lm_head");
}

TEST(ConfigReader, Qwen3ExplicitHeadDimQkNormAndTiedEmbeddings)
{
    const ModelSpec s = bundled("qwen3-0.6b");
    EXPECT_EQ(s.family, Family::Qwen3);
    // head_dim 128 is given explicitly although hidden_size / heads = 64.
    EXPECT_EQ(s.headDim, 128);
    EXPECT_EQ(s.qHeadWidth(), 16 * 128);
    EXPECT_TRUE(s.qkNorm);
    EXPECT_TRUE(s.tieEmbeddings);
    EXPECT_FALSE(s.attentionBias);
}

TEST(ConfigReader, QwenMoeLayerPatterns)
{
    const ModelSpec s = bundled("qwen3-235b-a22b");
    EXPECT_EQ(s.family, Family::Qwen3Moe);
    EXPECT_EQ(s.numMoeLayers(), 94);
    EXPECT_EQ(s.moe->numExperts, 128);
    EXPECT_EQ(s.moe->expertIntermediate, 1536);
    EXPECT_TRUE(s.moe->normTopkProb);
    EXPECT_EQ(s.moe->numSharedExperts, 0);

    // decoder_sparse_step 2: layers 1, 3, 5, ... are MoE, minus those in mlp_only_layers.
    auto json
        = readJsonFile(std::filesystem::path(DAY0_RESOURCE_DIR) / "configs/qwen3-30b-a3b.json");
    ASSERT_TRUE(json.ok());
    (*json)["decoder_sparse_step"] = 2;
    (*json)["mlp_only_layers"] = { 3, 7 };
    auto sparse = readConfig(*json, "inline.json");
    ASSERT_TRUE(sparse.ok()) << sparse.error().message;
    EXPECT_FALSE(sparse->layers[0].moe());
    EXPECT_TRUE(sparse->layers[1].moe());
    EXPECT_FALSE(sparse->layers[3].moe());
    EXPECT_TRUE(sparse->layers[5].moe());
    EXPECT_FALSE(sparse->layers[7].moe());
    EXPECT_EQ(sparse->numMoeLayers(), 22);

    const ModelSpec qwen2moe = fromData("configs/qwen1.5-moe-a2.7b.json");
    EXPECT_EQ(qwen2moe.family, Family::Qwen2Moe);
    EXPECT_TRUE(qwen2moe.attentionBias);
    EXPECT_FALSE(qwen2moe.attentionOutputBias);
    EXPECT_EQ(qwen2moe.moe->sharedIntermediate, 5632);
    EXPECT_TRUE(qwen2moe.moe->sharedExpertGate);
    EXPECT_FALSE(qwen2moe.moe->normTopkProb);
}

TEST(ConfigReader, Fp8QuantizationSkipsListedModules)
{
    const ModelSpec s = bundled("qwen3-235b-a22b-fp8");
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->method, "fp8");
    EXPECT_EQ(s.quantization->skippedModules.size(), 1u + 94u * 3u);
    EXPECT_EQ(s.quantization->skippedModules.front(), "lm_head");
}

TEST(ConfigReader, Llama4TextTowerInterleavedMoeAndNope)
{
    const ModelSpec m = bundled("llama-4-maverick");
    EXPECT_EQ(m.family, Family::Llama4);
    EXPECT_EQ(m.layout.textPrefix, "language_model.model");
    EXPECT_EQ(m.layout.lmHead, "language_model.lm_head");
    EXPECT_EQ(m.intermediateSize, 16384); // intermediate_size_mlp for dense layers
    EXPECT_EQ(m.moe->expertIntermediate, 8192);
    EXPECT_EQ(m.moe->numExperts, 128);
    EXPECT_EQ(m.moe->topK, 1);
    EXPECT_EQ(m.moe->sharedIntermediate, 8192);
    EXPECT_TRUE(m.moe->packedExperts);
    EXPECT_FALSE(m.layers[0].moe());
    EXPECT_TRUE(m.layers[1].moe());
    EXPECT_EQ(m.numMoeLayers(), 24);
    EXPECT_FALSE(m.qkL2Norm);
    // Every 4th layer is NoPE with full attention; the others use RoPE with chunked attention.
    EXPECT_TRUE(m.layers[0].rope);
    EXPECT_EQ(m.layers[0].attentionChunk, 8192);
    EXPECT_FALSE(m.layers[3].rope);
    EXPECT_EQ(m.layers[3].attentionChunk, 0);

    const ModelSpec s = bundled("llama-4-scout");
    EXPECT_EQ(s.numMoeLayers(), 48);
    EXPECT_TRUE(s.qkL2Norm);
    EXPECT_EQ(s.ropeScaling.type, "llama3");
    EXPECT_DOUBLE_EQ(s.ropeScaling.factor, 16.0);
}

TEST(ConfigReader, KimiK25NestsTextConfigAndMoonVit)
{
    const ModelSpec s = bundled("kimi-k2.5");
    EXPECT_EQ(s.family, Family::DeepseekV3);
    EXPECT_EQ(s.modelType, "kimi_k25");
    EXPECT_EQ(s.numHeads, 64);
    EXPECT_EQ(s.moe->numExperts, 384);
    EXPECT_DOUBLE_EQ(s.normEps, 1e-5);
    EXPECT_EQ(s.ropeScaling.type, "yarn");
    EXPECT_DOUBLE_EQ(s.ropeScaling.factor, 64.0);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::PackedInt);
    EXPECT_EQ(s.quantization->bits, 4);
    EXPECT_EQ(s.quantization->groupSize, 32);
    EXPECT_EQ(s.quantization->ignorePatterns.size(), 3u);
    ASSERT_TRUE(s.vision.has_value());
    EXPECT_EQ(s.vision->kind, "moonvit");
    EXPECT_EQ(s.vision->depth, 27);
    EXPECT_EQ(s.vision->hiddenSize, 1152);
    EXPECT_EQ(s.vision->intermediateSize, 4304);
    EXPECT_EQ(s.vision->outHiddenSize, 7168);
    EXPECT_EQ(s.layout.textPrefix, "language_model.model");
    EXPECT_EQ(s.layout.visionPrefix, "vision_tower");
    EXPECT_EQ(s.layout.projectorPrefix, "mm_projector");
}

TEST(ConfigReader, QwenVlVisionTowers)
{
    const ModelSpec s = bundled("qwen3-vl-235b-a22b");
    EXPECT_EQ(s.family, Family::Qwen3VlMoe);
    EXPECT_EQ(s.numLayers, 94);
    EXPECT_DOUBLE_EQ(s.ropeTheta, 5000000.0);
    EXPECT_TRUE(s.moe->packedExperts);
    ASSERT_TRUE(s.vision.has_value());
    EXPECT_EQ(s.vision->kind, "qwen3_vl");
    EXPECT_EQ(s.vision->depth, 27);
    EXPECT_EQ(s.vision->patchSize, 16);
    EXPECT_EQ(s.vision->numPositionEmbeddings, 2304);
    EXPECT_EQ(s.vision->deepstackIndexes, (std::vector<std::int64_t> { 8, 16, 24 }));
    EXPECT_EQ(s.layout.textPrefix, "model.language_model");
    EXPECT_EQ(s.layout.visionPrefix, "model.visual");

    const ModelSpec q2 = fromData("indexes/qwen2-vl-7b-olmocr/config.json");
    EXPECT_EQ(q2.family, Family::Qwen2Vl);
    EXPECT_EQ(q2.vision->hiddenSize, 1280);
    EXPECT_EQ(q2.vision->intermediateSize, 5120);
    EXPECT_EQ(q2.vision->outHiddenSize, 3584);
    EXPECT_EQ(q2.ropeScaling.type, "mrope");
    EXPECT_EQ(q2.ropeScaling.mropeSection, (std::vector<std::int64_t> { 16, 24, 24 }));
    EXPECT_EQ(q2.layout.visionPrefix, "visual");

    const ModelSpec q25 = fromData("configs/qwen2.5-vl-7b.json");
    EXPECT_EQ(q25.vision->fullAttentionBlocks, (std::vector<std::int64_t> { 7, 15, 23, 31 }));
    EXPECT_EQ(q25.vision->windowSize, 112);
}

TEST(ConfigReader, SlidingWindowsAndGlm)
{
    auto mistral = readText(R"({"model_type": "mistral", "hidden_size": 4096,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096})");
    ASSERT_TRUE(mistral.ok()) << mistral.error().message;
    EXPECT_EQ(mistral->family, Family::Mistral);
    EXPECT_EQ(mistral->layers[31].slidingWindow, 4096);
    EXPECT_EQ(bundled("mixtral-8x7b").layers[0].slidingWindow, 0);

    const ModelSpec glm = fromData("configs/glm-4.5.json");
    EXPECT_EQ(glm.family, Family::Glm4Moe);
    EXPECT_DOUBLE_EQ(glm.partialRotaryFactor, 0.5);
    EXPECT_TRUE(glm.qkNorm);
    EXPECT_TRUE(glm.attentionBias);
    EXPECT_FALSE(glm.attentionOutputBias);
    EXPECT_EQ(glm.numMtpLayers, 1);
    EXPECT_EQ(glm.numMoeLayers(), 89);
    EXPECT_TRUE(glm.moe->expertScoreBias);
}

TEST(ConfigReaderErrors, UnknownModelTypeListsFamilies)
{
    auto r = readText(R"({"model_type": "foo", "hidden_size": 64})");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    const auto& m = r.error().message;
    EXPECT_TRUE(contains(m, "inline.json: unknown model_type 'foo'")) << m;
    EXPECT_TRUE(contains(m, "deepseek_v3")) << m;
    EXPECT_TRUE(contains(m, "qwen3_vl_moe")) << m;
    EXPECT_TRUE(contains(m, "num_hidden_layers")) << m;
}

TEST(ConfigReaderErrors, GenericDecoderWithWarning)
{
    auto r = readText(R"({"model_type": "brand_new", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
        "vocab_size": 1000})");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->family, Family::GenericDecoder);
    ASSERT_EQ(r->warnings.size(), 1u);
    EXPECT_TRUE(contains(r->warnings[0], "brand_new")) << r->warnings[0];
    const LayerGraph g = buildLayerGraph(*r);
    EXPECT_NE(g.findTensor("model.layers.1.self_attn.k_proj.weight"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.1.self_attn.k_proj.weight")->shape,
        (std::vector<std::int64_t> { 128, 256 }));
}

TEST(ConfigReaderErrors, PrivateModelTypeWithKnownArchitecture)
{
    auto r = readText(withField("kimi-k2.json", "model_type", "\"kimi_k2_private\""));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->family, Family::DeepseekV3);
    ASSERT_EQ(r->warnings.size(), 1u);
    EXPECT_TRUE(contains(r->warnings[0], "DeepseekV3ForCausalLM"));
}

TEST(ConfigReaderErrors, MalformedValuesNameFileAndField)
{
    struct Case {
        const char* key;
        const char* value;
        const char* expected;
    };
    const Case cases[] = {
        { "hidden_size", "\"big\"", "inline.json: 'hidden_size' must be an integer" },
        { "num_hidden_layers", "-3", "inline.json: 'num_hidden_layers' must be a positive" },
        { "num_key_value_heads", "7", "'num_key_value_heads' (7) must divide" },
        { "num_experts_per_tok", "500", "'num_experts_per_tok' (500) exceeds" },
        { "first_k_dense_replace", "99", "'first_k_dense_replace' (99) must be between" },
        { "rope_scaling", "3", "'rope_scaling' must be an object or null" },
        { "torch_dtype", "\"float13\"", "'torch_dtype' must name a dtype" },
        { "quantization_config", "{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}",
            "'weight_block_size' must be two positive integers" },
        { "kv_lora_rank", "null", "'kv_lora_rank' is missing" },
        { "n_group", "5", "'n_group' (5) must divide" },
    };
    for (const auto& c : cases) {
        auto r = readText(withField("kimi-k2.json", c.key, c.value));
        ASSERT_FALSE(r.ok()) << c.key;
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_TRUE(contains(r.error().message, c.expected)) << c.key << ": " << r.error().message;
    }
    auto mlpOnly = readText(withField("qwen3-30b-a3b.json", "mlp_only_layers", "[48]"));
    ASSERT_FALSE(mlpOnly.ok());
    EXPECT_TRUE(contains(mlpOnly.error().message, "'mlp_only_layers' holds layer 48"));

    auto notObject = readText("[1, 2]");
    ASSERT_FALSE(notObject.ok());
    EXPECT_TRUE(contains(notObject.error().message, "inline.json: expected a JSON object"));
}

TEST(ConfigReaderErrors, NestedErrorsNameTheTextConfig)
{
    auto json
        = readJsonFile(std::filesystem::path(DAY0_RESOURCE_DIR) / "configs/llama-4-scout.json");
    ASSERT_TRUE(json.ok());
    (*json)["text_config"]["num_attention_heads"] = "forty";
    auto r = readConfig(*json, "scout/config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message,
        "scout/config.json (text_config): 'num_attention_heads' must be an integer"))
        << r.error().message;
}

TEST(ConfigReaderErrors, UnknownQuantizationIsRefusedOrPartial)
{
    // An unknown quant_method is never read as unquantised weights: exit 2 naming the file, the
    // key and the value; with --partial the reading goes on and says what it left out.
    const std::string text = withField(
        "llama-3.1-8b.json", "quantization_config", R"({"quant_method": "gptq", "bits": 4})");
    auto refused = readText(text);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::BadInput);
    EXPECT_TRUE(contains(refused.error().message, "inline.json"));
    EXPECT_TRUE(contains(refused.error().message, "quantization_config.quant_method"))
        << refused.error().message;
    EXPECT_TRUE(contains(refused.error().message, "\"gptq\"")) << refused.error().message;

    auto json = parseJson(text, "inline.json");
    ASSERT_TRUE(json.ok());
    ReadOptions partial;
    partial.partial = true;
    auto r = readConfig(*json, "inline.json", partial);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->partial);
    EXPECT_FALSE(r->quantization.has_value());
    ASSERT_EQ(r->ignored.size(), 1u);
    EXPECT_EQ(r->ignored[0].path, "quantization_config.quant_method");
    EXPECT_TRUE(contains(r->ignored[0].reason, "\"gptq\" is not modelled"));
}

TEST(ConfigReaderErrors, FilesMissingOrMalformed)
{
    const auto dir = std::filesystem::temp_directory_path() / "day0_model_test";
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(writeFileAtomic(dir / "broken.json", "{\"model_type\": \"llama\",").ok());
    auto broken = readConfigFile(dir / "broken.json");
    ASSERT_FALSE(broken.ok());
    EXPECT_TRUE(contains(broken.error().message, "broken.json: malformed JSON"))
        << broken.error().message;

    auto missing = readConfigFile(dir / "absent.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::BadInput);
    EXPECT_TRUE(contains(missing.error().message, "absent.json")) << missing.error().message;
}

TEST(LoadModel, ResolvesFoldersFilesAndBundledNames)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto byName = loadModel("Kimi-K2");
    ASSERT_TRUE(byName.ok()) << byName.error().message;
    EXPECT_EQ(byName->name, "kimi-k2");

    const auto folder = dataDir() / "indexes" / "llama3.2-3b";
    auto byFolder = loadModel(folder.string());
    ASSERT_TRUE(byFolder.ok()) << byFolder.error().message;
    EXPECT_EQ(byFolder->name, "llama3.2-3b");
    EXPECT_TRUE(byFolder->tieEmbeddings);

    auto byFile = loadModel((folder / "config.json").string());
    ASSERT_TRUE(byFile.ok());
    EXPECT_EQ(byFile->name, "llama3.2-3b");

    auto unknown = loadModel("no-such-model");
    ASSERT_FALSE(unknown.ok());
    EXPECT_TRUE(contains(unknown.error().message, "'no-such-model' is not a folder"));
    EXPECT_TRUE(contains(unknown.error().message, "kimi-k2")) << unknown.error().message;

    auto noPath = loadModel("nowhere/config.json");
    ASSERT_FALSE(noPath.ok());
    EXPECT_TRUE(contains(noPath.error().message, "nowhere/config.json: no such file or folder"));

    auto noConfig = loadModel(dataDir().string());
    ASSERT_FALSE(noConfig.ok());
    EXPECT_TRUE(contains(noConfig.error().message, "no config.json in this folder"));
}

TEST(LoadModel, BundledModelsAreListedWithDescriptions)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto models = bundledModels();
    ASSERT_GE(models.size(), 21u);
    EXPECT_TRUE(std::is_sorted(models.begin(), models.end(),
        [](const auto& a, const auto& b) { return a.name < b.name; }));
    const auto kimi = std::find_if(
        models.begin(), models.end(), [](const auto& m) { return m.name == "kimi-k2"; });
    ASSERT_NE(kimi, models.end());
    EXPECT_EQ(kimi->description, "moonshotai/Kimi-K2-Instruct");
    for (const auto& model : models) {
        auto spec = readConfigFile(model.configPath);
        EXPECT_TRUE(spec.ok()) << model.name << ": " << spec.error().message;
        EXPECT_FALSE(model.description.empty()) << model.name;
    }
    const auto types = supportedModelTypes();
    for (const char* type : { "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
             "qwen3_moe", "deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "kimi_k25",
             "llama4", "glm4_moe", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe" }) {
        EXPECT_NE(std::find(types.begin(), types.end(), type), types.end()) << type;
    }
}
