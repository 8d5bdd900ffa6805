#include "base/json_util.h"

#include "base/file_util.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <cstdint>

namespace day0 {

std::string dumpJson(const nlohmann::json& value, int indent)
{
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string jsonErrorText(const nlohmann::json::exception& e)
{
    const std::string what = e.what();
    const auto pos = what.find("] ");
    return pos == std::string::npos ? what : what.substr(pos + 2);
}

Result<void> checkJsonDepth(std::string_view text, const std::string& origin)
{
    int depth = 0;
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                inString = false;
            }
            continue;
        }
        if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) {
                return Error::badInput(fmt::format(
                    "{}: JSON nested deeper than {} levels at byte {}", origin, kMaxJsonDepth, i));
            }
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return success();
}

Result<nlohmann::json> parseJson(const std::string& text, const std::string& origin)
{
    DAY0_TRY(checkJsonDepth(text, origin));
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        // e.what() carries nlohmann's own prefix; keep only the part after "parse error".
        std::string what = e.what();
        const auto pos = what.find("parse error");
        if (pos != std::string::npos) {
            what = what.substr(pos);
        }
        return Error::badInput(fmt::format("{}: malformed JSON: {}", origin, what));
    } catch (const nlohmann::json::exception& e) {
        // A number out of range (1e999) is not a parse error to nlohmann but is to a reader.
        return Error::badInput(fmt::format("{}: malformed JSON: {}", origin, jsonErrorText(e)));
    }
}

Result<nlohmann::json> readJsonFile(const std::filesystem::path& path)
{
    auto text = readFile(path);
    if (!text) {
        return text.error();
    }
    return parseJson(*text, displayPath(path));
}

void KeyLedger::touch(const nlohmann::json& object, const std::string& key)
{
    m_touched[&object].insert(key);
}

bool KeyLedger::touched(const nlohmann::json& object, const std::string& key) const
{
    const auto it = m_touched.find(&object);
    return it != m_touched.end() && it->second.count(key) != 0;
}

std::vector<std::string> KeyLedger::untouched(const nlohmann::json& object) const
{
    std::vector<std::string> out;
    if (!object.is_object()) {
        return out;
    }
    for (const auto& [key, value] : object.items()) {
        if (!value.is_null() && !touched(object, key)) {
            out.push_back(key);
        }
    }
    return out;
}

void KeyLedger::openSection(const nlohmann::json& object, std::string path)
{
    for (const auto& section : m_sections) {
        if (section.object == &object) {
            return;
        }
    }
    m_sections.push_back({ &object, std::move(path) });
}

JsonReader::JsonReader(const nlohmann::json& object, std::string origin, KeyLedger* ledger)
    : m_object(object)
    , m_origin(std::move(origin))
    , m_ledger(ledger)
{
    if (!m_object.is_object()) {
        m_error = "expected a JSON object";
    }
}

void JsonReader::touch(const std::string& key) const
{
    if (m_ledger != nullptr && m_object.is_object()) {
        m_ledger->touch(m_object, key);
    }
}

const nlohmann::json& JsonReader::value(const std::string& key) const
{
    touch(key);
    return m_object.at(key);
}

bool JsonReader::has(const std::string& key) const
{
    touch(key);
    return m_object.is_object() && m_object.contains(key) && !m_object.at(key).is_null();
}

void JsonReader::fail(const std::string& key, const std::string& what)
{
    if (!m_error) {
        m_error = fmt::format("'{}' {}", key, what);
    }
}

Error JsonReader::error() const
{
    return Error::badInput(fmt::format("{}: {}", m_origin, m_error.value_or("unknown problem")));
}

namespace {

// The largest value a model config's size keys may take, far beyond every published model
// (126 layers, hidden 18,432, vocabulary 262,144, 512 experts): a config past them is hostile
// or broken, and reading it would take the machine's memory (10^6 layers) or overflow the
// parameter counts (hidden 2^40). One table for every family reader.
std::int64_t maximumFor(std::string_view key)
{
    struct Limit {
        std::string_view key;
        std::int64_t max;
    };
    static constexpr Limit kLimits[] = {
        { "num_hidden_layers", 4096 },
        { "num_layers", 4096 },
        { "n_layer", 4096 },
        { "hidden_size", 1 << 20 },
        { "intermediate_size", 1 << 22 },
        { "moe_intermediate_size", 1 << 22 },
        { "vocab_size", 1 << 24 },
        { "num_attention_heads", 1 << 14 },
        { "num_key_value_heads", 1 << 14 },
        { "head_dim", 1 << 14 },
        { "n_routed_experts", 1 << 16 },
        { "num_experts", 1 << 16 },
        { "num_local_experts", 1 << 16 },
        { "n_shared_experts", 1 << 16 },
        { "num_experts_per_tok", 1 << 16 },
        { "max_position_embeddings", std::int64_t(1) << 32 },
        { "original_max_position_embeddings", std::int64_t(1) << 32 },
        // Byte counts (manifests, run records), not model sizes.
        { "bytes", std::int64_t(1) << 62 },
        { "size", std::int64_t(1) << 62 },
        { "total_size", std::int64_t(1) << 62 },
    };
    for (const auto& l : kLimits) {
        if (l.key == key) {
            return l.max;
        }
    }
    // Any other integer: 2^30, so that the product of two of them (a width times a head
    // count) and a sum of a few such products stay far inside 64 bits.
    return std::int64_t(1) << 30;
}

} // namespace

std::int64_t JsonReader::requireInt(const std::string& key)
{
    if (!has(key)) {
        fail(key, "is missing");
        return 0;
    }
    const auto& v = m_object.at(key);
    std::optional<std::int64_t> value;
    if (v.is_number_unsigned()) {
        if (v.get<std::uint64_t>() <= std::uint64_t(INT64_MAX)) {
            value = std::int64_t(v.get<std::uint64_t>());
        }
    } else if (v.is_number_integer()) {
        value = v.get<std::int64_t>();
    } else if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::fabs(d) < 9.0e18 && d == std::trunc(d)) {
            value = std::int64_t(d);
        }
    }
    if (!value) {
        fail(key, fmt::format("must be an integer, found {}", dumpJson(v)));
        return 0;
    }
    if (const auto max = maximumFor(key); *value > max) {
        fail(key, fmt::format("is {}, more than the {} Day0 reads", *value, max));
        return 0;
    }
    return *value;
}

std::int64_t JsonReader::requirePositive(const std::string& key)
{
    const auto v = requireInt(key);
    if (ok() && v <= 0) {
        fail(key, fmt::format("must be a positive integer, found {}", v));
    }
    return v;
}

std::optional<std::int64_t> JsonReader::optionalInt(const std::string& key)
{
    if (!has(key)) {
        return std::nullopt;
    }
    return requireInt(key);
}

std::int64_t JsonReader::intOr(const std::string& key, std::int64_t fallback)
{
    return has(key) ? requireInt(key) : fallback;
}

double JsonReader::numberOr(const std::string& key, double fallback)
{
    if (!has(key)) {
        return fallback;
    }
    const auto& v = m_object.at(key);
    if (!v.is_number()) {
        fail(key, fmt::format("must be a number, found {}", dumpJson(v)));
        return fallback;
    }
    return v.get<double>();
}

bool JsonReader::boolOr(const std::string& key, bool fallback)
{
    if (!has(key)) {
        return fallback;
    }
    const auto& v = m_object.at(key);
    if (!v.is_boolean()) {
        fail(key, fmt::format("must be true or false, found {}", dumpJson(v)));
        return fallback;
    }
    return v.get<bool>();
}

std::string JsonReader::stringOr(const std::string& key, const std::string& fallback)
{
    if (!has(key)) {
        return fallback;
    }
    const auto& v = m_object.at(key);
    if (!v.is_string()) {
        fail(key, fmt::format("must be a string, found {}", dumpJson(v)));
        return fallback;
    }
    return v.get<std::string>();
}

} // namespace day0
