#pragma once

#include "base/result.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace day0 {

/// Parses a JSON file; the error names the file and the byte where parsing stopped.
Result<nlohmann::json> readJsonFile(const std::filesystem::path& path);

/// Parses JSON text; `origin` names the source in error messages.
Result<nlohmann::json> parseJson(const std::string& text, const std::string& origin);

/// Reads typed fields of a JSON object and remembers the first problem, so a parser can read many
/// fields and report one error naming the file and the field ("config.json: 'hidden_size' must be
/// a positive integer").
class JsonReader {
public:
    JsonReader(const nlohmann::json& object, std::string origin);

    /// True if the key exists and is not null.
    [[nodiscard]] bool has(const std::string& key) const;
    /// A required integer; records an error when missing or of another type.
    std::int64_t requireInt(const std::string& key);
    /// A required integer > 0.
    std::int64_t requirePositive(const std::string& key);
    /// An optional integer with a default.
    std::int64_t intOr(const std::string& key, std::int64_t fallback);
    /// An optional number with a default.
    double numberOr(const std::string& key, double fallback);
    /// An optional boolean with a default.
    bool boolOr(const std::string& key, bool fallback);
    /// An optional string with a default.
    std::string stringOr(const std::string& key, const std::string& fallback);
    /// The integer if present.
    std::optional<std::int64_t> optionalInt(const std::string& key);

    /// Records a problem with `key` (only the first is kept).
    void fail(const std::string& key, const std::string& what);
    [[nodiscard]] bool ok() const { return !m_error.has_value(); }
    /// The first problem, as an Error::badInput naming origin and key.
    [[nodiscard]] Error error() const;
    [[nodiscard]] const std::string& origin() const { return m_origin; }

private:
    const nlohmann::json& m_object;
    std::string m_origin;
    std::optional<std::string> m_error;
};

} // namespace day0
