#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace day0 {

/// The deepest nesting of arrays and objects any reader accepts. HF configs, safetensors
/// headers, tokenizers and traces nest a few levels; code after the parser (dump, copy,
/// comparisons) recurses once per level, so a document nested 80,000 deep would overflow the
/// stack there. Every parse in Day0 checks it first.
inline constexpr int kMaxJsonDepth = 256;

/// Refuses `text` if its arrays and objects nest deeper than kMaxJsonDepth (one linear scan,
/// strings skipped): "<origin>: JSON nested deeper than 256 levels at byte N".
Result<void> checkJsonDepth(std::string_view text, const std::string& origin);

/// Serialises `value` (indent as nlohmann's dump; -1 compact). Strings that are not valid
/// UTF-8 (a path or a name from a file) are written with U+FFFD for the bad bytes instead of
/// throwing: every JSON Day0 writes goes through here.
std::string dumpJson(const nlohmann::json& value, int indent = -1);

/// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string jsonErrorText(const nlohmann::json::exception& e);

/// Parses a JSON file; the error names the file and the byte where parsing stopped.
Result<nlohmann::json> readJsonFile(const std::filesystem::path& path);

/// Parses JSON text; `origin` names the source in error messages.
Result<nlohmann::json> parseJson(const std::string& text, const std::string& origin);

/// Which keys of which JSON objects a reader looked at, so that it can account for every key it
/// was given: a key read is one it models; the others are inert or unknown (DESIGN.md: never
/// silently wrong). Objects are identified by address: keep the parsed document alive and
/// unchanged while the ledger is used. Not thread-safe.
class KeyLedger {
public:
    /// Records that `key` of `object` was read.
    void touch(const nlohmann::json& object, const std::string& key);
    /// True if `key` of `object` was read.
    [[nodiscard]] bool touched(const nlohmann::json& object, const std::string& key) const;
    /// The keys of `object` that were not read and whose value is not null, in key order.
    [[nodiscard]] std::vector<std::string> untouched(const nlohmann::json& object) const;

    /// An object whose every key must be accounted for, and its dotted path in the document.
    struct Section {
        const nlohmann::json* object = nullptr;
        std::string path; ///< "" for the document itself, "text_config", "quantization_config"
    };
    /// Declares `object` such a section (once; later calls for the same object are ignored).
    void openSection(const nlohmann::json& object, std::string path);
    /// The sections declared, in the order they were opened.
    [[nodiscard]] const std::vector<Section>& sections() const { return m_sections; }

private:
    std::map<const nlohmann::json*, std::set<std::string>> m_touched;
    std::vector<Section> m_sections;
};

/// Reads typed fields of a JSON object and remembers the first problem, so a parser can read many
/// fields and report one error naming the file and the field ("config.json: 'hidden_size' must be
/// a positive integer").
class JsonReader {
public:
    /// With a ledger, every key the reader looks at (present or not) is recorded in it.
    JsonReader(const nlohmann::json& object, std::string origin, KeyLedger* ledger = nullptr);

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
    /// The raw value of a present key (records it as read); call has() first.
    [[nodiscard]] const nlohmann::json& value(const std::string& key) const;
    /// The object read, and the ledger it records into (may be null).
    [[nodiscard]] const nlohmann::json& object() const { return m_object; }
    [[nodiscard]] KeyLedger* ledger() const { return m_ledger; }

    /// Records a problem with `key` (only the first is kept).
    void fail(const std::string& key, const std::string& what);
    [[nodiscard]] bool ok() const { return !m_error.has_value(); }
    /// The first problem, as an Error::badInput naming origin and key.
    [[nodiscard]] Error error() const;
    [[nodiscard]] const std::string& origin() const { return m_origin; }

private:
    void touch(const std::string& key) const;

    const nlohmann::json& m_object;
    std::string m_origin;
    KeyLedger* m_ledger = nullptr;
    std::optional<std::string> m_error;
};

} // namespace day0
