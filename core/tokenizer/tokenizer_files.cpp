// Reading tokenizer vocabularies from HF tokenizer.json and from GGUF metadata.
#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/gguf.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>

namespace day0::tokenizer {

namespace {

// Pre-tokenizer regexes, as the published tokenizers define them (GPT-2's ByteLevel, and the
// Split sequences of DeepSeek and Llama-3 / Qwen2 tokenizer.json files). Non-ASCII ranges are
// written as \x{...} escapes: several of their end points (U+1FD3, U+212A KELVIN SIGN, ...) have
// canonical equivalents that editors and NFC normalisation would silently substitute.
const char* const kGpt2Regex
    = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex
    = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex
    = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::vector<std::string> kDeepseekLlm {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}"
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}"
    "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}-\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}-\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
};
const std::vector<std::string> kDeepseekCoder {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}",
};
const std::vector<std::string> kDeepseekV3 {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

Result<std::vector<std::string>> regexesForPre(const std::string& pre, const std::string& origin)
{
    if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") {
        return std::vector<std::string> { kGpt2Regex };
    }
    if (pre == "deepseek-llm") {
        return kDeepseekLlm;
    }
    if (pre == "deepseek-coder") {
        return kDeepseekCoder;
    }
    if (pre == "deepseek-v3") {
        return kDeepseekV3;
    }
    if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") {
        return std::vector<std::string> { kLlama3Regex };
    }
    if (pre == "qwen2") {
        return std::vector<std::string> { kQwen2Regex };
    }
    return Error::unsupported(
        fmt::format("{}: pre-tokenizer '{}' is not implemented (gpt2, deepseek-llm, "
                    "deepseek-coder, deepseek-v3, llama3, qwen2)",
            origin, pre));
}

/// Typed access to the metadata of a GGUF header (core/checkpoint's parser).
class GgufKeys {
public:
    explicit GgufKeys(const checkpoint::GgufHeader& header)
        : m_header(header)
    {
    }
    [[nodiscard]] const nlohmann::json* find(const std::string& key) const
    {
        const auto* kv = m_header.find(key);
        return kv != nullptr ? &kv->value : nullptr;
    }
    /// An array of strings (token texts, merges), nullopt when absent or of another type.
    [[nodiscard]] std::optional<std::vector<std::string>> strings(const std::string& key) const
    {
        const auto* kv = m_header.find(key);
        if (kv == nullptr || kv->type != checkpoint::GgufValueType::Array
            || kv->arrayType != checkpoint::GgufValueType::String) {
            return std::nullopt;
        }
        std::vector<std::string> out;
        out.reserve(kv->value.size());
        for (const auto& v : kv->value) {
            out.push_back(v.get<std::string>());
        }
        return out;
    }

private:
    const checkpoint::GgufHeader& m_header;
};

std::int64_t intOr(const GgufKeys& keys, const std::string& key, std::int64_t fallback)
{
    const auto* v = keys.find(key);
    // Integers only: a float key has no int64 value to convert to.
    return v != nullptr && v->is_number_integer() ? v->get<std::int64_t>() : fallback;
}

bool boolOr(const GgufKeys& keys, const std::string& key, bool fallback)
{
    const auto* v = keys.find(key);
    return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

} // namespace

Result<TokenizerVocab> readGgufTokenizer(const std::filesystem::path& gguf)
{
    auto file = checkpoint::GgufFile::open(gguf);
    if (!file) {
        return file.error();
    }
    const std::optional<GgufKeys> keys(std::in_place, file->header());
    const std::string origin = gguf.string();
    TokenizerVocab v;
    const auto* model = keys->find("tokenizer.ggml.model");
    const std::string kind
        = model != nullptr && model->is_string() ? model->get<std::string>() : "";
    const auto tokens = keys->strings("tokenizer.ggml.tokens");
    if (!tokens) {
        return Error::badInput(origin + ": no tokenizer.ggml.tokens in the metadata");
    }
    v.tokens = *tokens;
    if (const auto* types = keys->find("tokenizer.ggml.token_type");
        types != nullptr && types->is_array()) {
        for (const auto& t : *types) {
            v.types.push_back(t.get<std::int32_t>());
        }
    }
    for (std::size_t i = 0; i < v.types.size(); ++i) {
        if (v.types[i] == 3 || v.types[i] == 4) {
            v.specialIds.push_back(std::int64_t(i));
        }
    }
    v.bos = intOr(*keys, "tokenizer.ggml.bos_token_id", -1);
    v.eos = intOr(*keys, "tokenizer.ggml.eos_token_id", -1);
    v.unk = intOr(*keys, "tokenizer.ggml.unknown_token_id", -1);
    if (kind == "llama") {
        v.model = TokenizerVocab::Model::Spm;
        v.byteLevel = false;
        v.byteFallback = true;
        v.escapeSpaces = true;
        v.addSpacePrefix = boolOr(*keys, "tokenizer.ggml.add_space_prefix", true);
        v.addBos = boolOr(*keys, "tokenizer.ggml.add_bos_token", true);
        v.addEos = boolOr(*keys, "tokenizer.ggml.add_eos_token", false);
        if (const auto* scores = keys->find("tokenizer.ggml.scores");
            scores != nullptr && scores->is_array()) {
            for (const auto& s : *scores) {
                v.scores.push_back(s.get<float>());
            }
        }
        if (v.unk < 0) {
            v.unk = 0;
        }
        return v;
    }
    if (kind == "bert") {
        v.model = TokenizerVocab::Model::Wpm;
        v.byteLevel = false;
        // HF's BERT adds [CLS] ... [SEP]; llama.cpp stores them as BOS / separator.
        v.addBos = boolOr(*keys, "tokenizer.ggml.add_bos_token", true);
        v.addEos = boolOr(*keys, "tokenizer.ggml.add_eos_token", false);
        if (const auto cls = intOr(*keys, "tokenizer.ggml.cls_token_id", -1); cls >= 0) {
            v.bos = cls;
        }
        if (const auto sep = intOr(*keys, "tokenizer.ggml.seperator_token_id", -1); sep >= 0) {
            v.eos = sep;
            v.addEos = true;
        }
        return v;
    }
    if (kind == "gpt2") {
        v.model = TokenizerVocab::Model::Bpe;
        v.byteLevel = true;
        const auto merges = keys->strings("tokenizer.ggml.merges");
        if (!merges) {
            return Error::badInput(origin + ": a gpt2 tokenizer needs tokenizer.ggml.merges");
        }
        for (const auto& m : *merges) {
            const auto space = m.find(' ', 1);
            if (space == std::string::npos) {
                return Error::badInput(fmt::format(
                    "{}: merge '{}' is not two tokens separated by a space", origin, m));
            }
            v.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
        }
        const auto* pre = keys->find("tokenizer.ggml.pre");
        auto regexes = regexesForPre(
            pre != nullptr && pre->is_string() ? pre->get<std::string>() : "", origin);
        if (!regexes) {
            return regexes.error();
        }
        v.preRegexes = std::move(*regexes);
        v.ignoreMerges
            = pre != nullptr && pre->is_string() && pre->get<std::string>().rfind("llama", 0) == 0;
        v.addBos = boolOr(*keys, "tokenizer.ggml.add_bos_token", false);
        v.addEos = boolOr(*keys, "tokenizer.ggml.add_eos_token", false);
        return v;
    }
    return Error::unsupported(fmt::format("{}: tokenizer model '{}' is not implemented (llama = "
                                          "SentencePiece, gpt2 = BPE, bert = WordPiece)",
        origin, kind));
}

Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::filesystem::path& path)
{
    std::error_code ec;
    std::filesystem::path file = path;
    if (std::filesystem::is_directory(path, ec)) {
        file = path / "tokenizer.json";
        for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
            if (!std::filesystem::exists(file, ec) && e.path().extension() == ".gguf") {
                file = e.path();
            }
        }
        if (!std::filesystem::exists(file, ec)) {
            return Error::badInput(
                fmt::format("{}: no tokenizer.json or .gguf in this folder (give --ids instead)",
                    path.string()));
        }
    }
    auto vocab = file.extension() == ".gguf" ? readGgufTokenizer(file) : readHfTokenizer(file);
    if (!vocab) {
        return vocab.error();
    }
    return makeTokenizer(std::move(*vocab), file.string());
}

} // namespace day0::tokenizer
