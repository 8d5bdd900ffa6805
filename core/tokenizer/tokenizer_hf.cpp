// Reading an HF `tokenizers` tokenizer.json into a TokenizerVocab.
#include "base/json_util.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

namespace day0::tokenizer {

namespace {

const char* const kByteLevelRegex
    = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Escapes a literal string for use in an ICU regex.
std::string quoteRegex(const std::string& s) { return "\\Q" + s + "\\E"; }

Result<void> readPreTokenizer(const nlohmann::json& p, TokenizerVocab& v, const std::string& origin)
{
    if (p.is_null()) {
        return success();
    }
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
        for (const auto& item : p.value("pretokenizers", nlohmann::json::array())) {
            DAY0_TRY(readPreTokenizer(item, v, origin));
        }
        return success();
    }
    if (type == "ByteLevel") {
        v.byteLevel = true;
        if (p.value("use_regex", true)) {
            v.preRegexes.emplace_back(kByteLevelRegex);
        }
        if (p.value("add_prefix_space", false)) {
            v.addSpacePrefix = true;
        }
        return success();
    }
    if (type == "Split") {
        const auto& pattern = p.value("pattern", nlohmann::json::object());
        std::string regex;
        if (pattern.contains("Regex")) {
            regex = pattern["Regex"].get<std::string>();
        } else if (pattern.contains("String")) {
            regex = quoteRegex(pattern["String"].get<std::string>());
        }
        if (regex.empty() || p.value("behavior", "Isolated") != "Isolated"
            || p.value("invert", false)) {
            return Error::unsupported(
                fmt::format("{}: Split pre-tokenizer with behavior '{}' (only non-inverted "
                            "Isolated splits are implemented)",
                    origin, p.value("behavior", "")));
        }
        v.preRegexes.push_back(regex);
        return success();
    }
    if (type == "Digits") {
        v.preRegexes.emplace_back(p.value("individual_digits", false) ? "\\p{Nd}" : "\\p{Nd}+");
        return success();
    }
    if (type == "Metaspace") {
        v.escapeSpaces = true;
        v.addSpacePrefix
            = p.value("prepend_scheme", "always") != "never" && p.value("add_prefix_space", true);
        return success();
    }
    return Error::unsupported(
        fmt::format("{}: pre-tokenizer '{}' is not implemented", origin, type));
}

Result<void> readNormalizer(const nlohmann::json& n, TokenizerVocab& v, const std::string& origin)
{
    if (n.is_null()) {
        return success();
    }
    const std::string type = n.value("type", "");
    if (type == "Sequence") {
        for (const auto& item : n.value("normalizers", nlohmann::json::array())) {
            DAY0_TRY(readNormalizer(item, v, origin));
        }
        return success();
    }
    if (type == "Prepend" && n.value("prepend", "") == "\xE2\x96\x81") {
        v.addSpacePrefix = true;
        return success();
    }
    if (type == "Replace" && n.value("content", "") == "\xE2\x96\x81") {
        v.escapeSpaces = true;
        return success();
    }
    if (type == "NFC") {
        return success(); // inputs are taken as already NFC (UTF-8 text from a terminal)
    }
    return Error::unsupported(fmt::format("{}: normalizer '{}' is not implemented", origin, type));
}

/// BOS/EOS from a TemplateProcessing post-processor: special tokens before / after "$A".
void readPostProcessor(
    const nlohmann::json& p, TokenizerVocab& v, const std::map<std::string, std::int64_t>& ids)
{
    if (!p.is_object() || p.value("type", "") != "TemplateProcessing" || !p.contains("single")) {
        return;
    }
    bool seenSequence = false;
    for (const auto& item : p["single"]) {
        if (item.contains("Sequence")) {
            seenSequence = true;
            continue;
        }
        if (!item.contains("SpecialToken")) {
            continue;
        }
        const auto it = ids.find(item["SpecialToken"].value("id", ""));
        if (it == ids.end()) {
            continue;
        }
        if (!seenSequence) {
            v.bos = it->second;
            v.addBos = true;
        } else {
            v.eos = it->second;
            v.addEos = true;
        }
    }
}

Result<TokenizerVocab> readTokenizer(const std::filesystem::path& tokenizerJson)
{
    const std::string origin = tokenizerJson.string();
    auto json = readJsonFile(tokenizerJson);
    if (!json) {
        return json.error();
    }
    const auto& j = *json;
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
        return Error::badInput(origin + ": not a tokenizers JSON (no 'model' object)");
    }
    const auto& model = j["model"];
    const std::string type = model.value("type", "BPE");
    if (type != "BPE") {
        return Error::unsupported(
            fmt::format("{}: tokenizer model '{}' is not implemented (BPE)", origin, type));
    }
    TokenizerVocab v;
    v.model = TokenizerVocab::Model::Bpe;
    v.byteLevel = false;
    v.byteFallback = model.value("byte_fallback", false);
    v.ignoreMerges = model.value("ignore_merges", false);
    std::map<std::string, std::int64_t> ids;
    if (!model.contains("vocab") || !model["vocab"].is_object()) {
        return Error::badInput(origin + ": model.vocab must be an object of token -> id");
    }
    const auto place = [&](const std::string& token, std::int64_t id) -> Result<void> {
        if (id < 0 || id > (1 << 24)) {
            return Error::badInput(fmt::format("{}: token '{}' has id {}", origin, token, id));
        }
        if (std::size_t(id) >= v.tokens.size()) {
            v.tokens.resize(std::size_t(id) + 1);
        }
        v.tokens[std::size_t(id)] = token;
        ids[token] = id;
        return success();
    };
    for (const auto& [token, id] : model["vocab"].items()) {
        // An id is an integer: a float such as 1.4e67 has no int64 value to convert to.
        if (!id.is_number_integer()) {
            return Error::badInput(
                fmt::format("{}: token '{}' has id {}, not an integer", origin, token, id.dump()));
        }
        DAY0_TRY(place(token, id.get<std::int64_t>()));
    }
    for (const auto& m : model.value("merges", nlohmann::json::array())) {
        if (m.is_string()) {
            const std::string s = m.get<std::string>();
            const auto space = s.find(' ', 1);
            if (space == std::string::npos) {
                return Error::badInput(fmt::format(
                    "{}: merge '{}' is not two tokens separated by a space", origin, s));
            }
            v.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else if (m.is_array() && m.size() == 2) {
            v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
            return Error::badInput(
                origin + ": model.merges entries must be \"a b\" or [\"a\", \"b\"]");
        }
    }
    for (const auto& added : j.value("added_tokens", nlohmann::json::array())) {
        const std::string content = added.value("content", "");
        const auto id = added.value("id", std::int64_t(-1));
        DAY0_TRY(place(content, id));
        v.specialIds.push_back(id);
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
        const auto it = ids.find(model["unk_token"].get<std::string>());
        v.unk = it != ids.end() ? it->second : -1;
    }
    DAY0_TRY(readNormalizer(j.value("normalizer", nlohmann::json()), v, origin));
    DAY0_TRY(readPreTokenizer(j.value("pre_tokenizer", nlohmann::json()), v, origin));
    readPostProcessor(j.value("post_processor", nlohmann::json()), v, ids);
    // tokenizer_config.json next to it may ask for BOS/EOS (Llama-2 style tokenizers).
    const auto config = tokenizerJson.parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (std::filesystem::exists(config, ec)) {
        auto c = readJsonFile(config);
        if (!c) {
            return c.error();
        }
        if (c->is_object()) {
            const auto tokenId = [&](const char* key) -> std::int64_t {
                if (!c->contains(key)) {
                    return -1;
                }
                const auto& t = (*c)[key];
                const std::string text
                    = t.is_string() ? t.get<std::string>() : t.value("content", "");
                const auto it = ids.find(text);
                return it == ids.end() ? -1 : it->second;
            };
            if (c->value("add_bos_token", false) && tokenId("bos_token") >= 0) {
                v.bos = tokenId("bos_token");
                v.addBos = true;
            }
            if (c->value("add_eos_token", false) && tokenId("eos_token") >= 0) {
                v.eos = tokenId("eos_token");
                v.addEos = true;
            }
            if (v.eos < 0) {
                v.eos = tokenId("eos_token");
            }
        }
    }
    return v;
}

} // namespace

Result<TokenizerVocab> readHfTokenizer(const std::filesystem::path& tokenizerJson)
{
    // A value of the wrong type anywhere (an id that is a string, a pattern that is a number)
    // is the file's fault: one line naming it, never an internal error.
    try {
        return readTokenizer(tokenizerJson);
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: {}", tokenizerJson.string(), jsonErrorText(e)));
    }
}

} // namespace day0::tokenizer
