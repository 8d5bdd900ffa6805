#include "exec/checkpoint_weights.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/dequantized_weights.h"
#include "exec/gguf_model.h"
#include "model/config_reader.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

namespace day0::exec {

namespace {

std::int64_t metadataInt(
    const checkpoint::GgufHeader& header, std::string_view key, std::int64_t fallback)
{
    const auto* kv = header.find(key);
    return kv != nullptr && kv->value.is_number_integer() ? kv->value.get<std::int64_t>()
                                                          : fallback;
}

class CheckpointWeights final : public WeightSource {
public:
    explicit CheckpointWeights(checkpoint::Checkpoint ckpt)
        : m_ckpt(std::move(ckpt))
    {
        index();
    }

    /// Reads the quantised weights of a folder whose config declares a format other than
    /// block FP8 dequantised, under the converted config's names (before the raw tensors: an
    /// NVFP4 `<module>.weight` names both its codes and the weight they stand for). Nothing
    /// when the config is absent or unreadable: the model cannot be loaded then either, and
    /// that error says why.
    Result<void> dequantizeQuantised()
    {
        const auto format = m_ckpt.format();
        const auto configPath = m_ckpt.root() / "config.json";
        std::error_code ec;
        if ((format != checkpoint::CheckpointFormat::ShardedSafetensors
                && format != checkpoint::CheckpointFormat::SafetensorsFolder)
            || !std::filesystem::exists(configPath, ec)) {
            return success();
        }
        const auto spec = model::readConfigFile(configPath);
        if (!spec || !spec->quantization || !checkpoint::readsDequantized(*spec->quantization)) {
            return success();
        }
        auto dequantized = checkpoint::DequantizedWeights::open(m_ckpt, configPath);
        if (!dequantized) {
            return dequantized.error();
        }
        m_dequantized.emplace(std::move(*dequantized));
        return success();
    }

    [[nodiscard]] bool has(const std::string& name) const override
    {
        return (m_dequantized && m_dequantized->has(name)) || m_byName.contains(name);
    }

    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override
    {
        if (m_dequantized && m_dequantized->has(name)) {
            auto t = m_dequantized->read(name);
            if (!t) {
                return t.error();
            }
            return numerics::Tensor::fromFloats(t->shape, t->values);
        }
        return readStored(name);
    }

    [[nodiscard]] std::vector<std::string> names() const override
    {
        std::set<std::string> out;
        for (const auto& [name, t] : m_byName) {
            out.insert(name);
        }
        if (m_dequantized) {
            for (auto& name : m_dequantized->names()) {
                out.insert(std::move(name));
            }
        }
        return { out.begin(), out.end() };
    }

    [[nodiscard]] std::string describe() const override { return m_ckpt.root().string(); }

private:
    void index()
    {
        const auto* gguf = m_ckpt.gguf();
        if (gguf != nullptr) {
            m_heads = metadataInt(*gguf, "llama.attention.head_count", 0);
            m_kvHeads = metadataInt(*gguf, "llama.attention.head_count_kv", m_heads);
        }
        for (const auto& t : m_ckpt.tensors()) {
            if (gguf == nullptr) {
                m_byName[t.name] = &t;
            } else if (const auto hf = hfNameForGguf(t.name)) {
                m_byName[*hf] = &t;
            }
        }
    }

    [[nodiscard]] Result<numerics::Tensor> readStored(const std::string& name) const
    {
        const auto it = m_byName.find(name);
        if (it == m_byName.end()) {
            return Error::badInput(fmt::format("{}: no tensor '{}'", describe(), name));
        }
        const checkpoint::CheckpointTensor& t = *it->second;
        if (!t.dtype) {
            return Error::unsupported(
                fmt::format("{}: tensor '{}' is {}, a block-quantised type the engine does "
                            "not read (convert to F16/BF16/F32 first)",
                    describe(), t.name, t.dtypeName));
        }
        auto bytes = m_ckpt.data(t);
        if (!bytes) {
            return bytes.error();
        }
        numerics::Tensor tensor = numerics::Tensor::fromBytes(t.shape, *t.dtype, *bytes);
        if (m_ckpt.gguf() != nullptr) {
            if (name.ends_with("self_attn.q_proj.weight") && m_heads > 0) {
                tensor = unpermuteRotary(tensor, m_heads);
            } else if (name.ends_with("self_attn.k_proj.weight") && m_kvHeads > 0) {
                tensor = unpermuteRotary(tensor, m_kvHeads);
            }
        }
        return tensor;
    }

    checkpoint::Checkpoint m_ckpt;
    std::optional<checkpoint::DequantizedWeights> m_dequantized;
    std::map<std::string, const checkpoint::CheckpointTensor*> m_byName;
    std::int64_t m_heads = 0;
    std::int64_t m_kvHeads = 0;
};

bool isGgufPath(const std::filesystem::path& path)
{
    std::error_code ec;
    if (path.extension() == ".gguf") {
        return true;
    }
    if (!std::filesystem::is_directory(path, ec)
        || std::filesystem::exists(path / "config.json", ec)) {
        return false;
    }
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
        if (e.path().extension() == ".gguf") {
            return true;
        }
    }
    return false;
}

} // namespace

bool holdsWeights(const std::filesystem::path& path)
{
    const auto weightFile = [](const std::filesystem::path& p) {
        const auto ext = p.extension();
        return ext == ".safetensors" || ext == ".gguf";
    };
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
        return weightFile(path);
    }
    if (!std::filesystem::is_directory(path, ec)) {
        return false;
    }
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        if (entry.is_regular_file(ec) && weightFile(entry.path())) {
            return true;
        }
    }
    return false;
}

Result<std::unique_ptr<WeightSource>> openCheckpointWeights(const std::filesystem::path& path)
{
    auto ckpt = checkpoint::Checkpoint::open(path);
    if (!ckpt) {
        return ckpt.error();
    }
    DAY0_TRY(ckpt->firstError());
    // The dequantising reader points into the checkpoint, so it is made where that stays.
    auto weights = std::make_unique<CheckpointWeights>(std::move(*ckpt));
    DAY0_TRY(weights->dequantizeQuantised());
    return std::unique_ptr<WeightSource>(std::move(weights));
}

Result<model::ModelSpec> loadCheckpointModel(const std::filesystem::path& path)
{
    if (!isGgufPath(path)) {
        return model::loadModel(path.string());
    }
    auto ckpt = checkpoint::Checkpoint::open(path);
    if (!ckpt) {
        return ckpt.error();
    }
    const checkpoint::GgufHeader* header = ckpt->gguf();
    if (header == nullptr) {
        return Error::badInput(path.string() + ": not a GGUF checkpoint");
    }
    const auto lookup = [header](std::string_view key) -> const nlohmann::json* {
        const auto* kv = header->find(key);
        return kv != nullptr ? &kv->value : nullptr;
    };
    const auto* tokens = header->find("tokenizer.ggml.tokens");
    const std::int64_t vocab
        = tokens != nullptr && tokens->value.is_array() ? std::int64_t(tokens->value.size()) : 0;
    auto spec = specFromGguf(lookup, vocab, path.string());
    if (!spec) {
        return spec.error();
    }
    spec->name = path.stem().string();
    spec->tieEmbeddings = ckpt->find("output.weight") == nullptr;
    return spec;
}

Result<OpenedCheckpoint> openCheckpoint(const std::filesystem::path& path)
{
    auto spec = loadCheckpointModel(path);
    if (!spec) {
        return spec.error();
    }
    auto weights = openCheckpointWeights(path);
    if (!weights) {
        return weights.error().withContext("weights");
    }
    return OpenedCheckpoint { std::move(*spec), std::move(*weights) };
}

} // namespace day0::exec
