#include "base/json_util.h"

#include "base/file_util.h"

#include <fmt/format.h>

namespace day0 {

Result<nlohmann::json> parseJson(const std::string& text, const std::string& origin)
{
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
        std::string what = e.what();
        const auto pos = what.find("] ");
        return Error::badInput(fmt::format("{}: malformed JSON: {}", origin,
            pos == std::string::npos ? what : what.substr(pos + 2)));
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

std::int64_t JsonReader::requireInt(const std::string& key)
{
    if (!has(key)) {
        fail(key, "is missing");
        return 0;
    }
    const auto& v = m_object.at(key);
    if (v.is_number_integer()) {
        return v.get<std::int64_t>();
    }
    if (v.is_number_float() && v.get<double>() == double(std::int64_t(v.get<double>()))) {
        return std::int64_t(v.get<double>());
    }
    fail(key, fmt::format("must be an integer, found {}", v.dump()));
    return 0;
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
        fail(key, fmt::format("must be a number, found {}", v.dump()));
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
        fail(key, fmt::format("must be true or false, found {}", v.dump()));
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
        fail(key, fmt::format("must be a string, found {}", v.dump()));
        return fallback;
    }
    return v.get<std::string>();
}

} // namespace day0
