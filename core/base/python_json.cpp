#include "base/python_json.h"

#include "base/file_util.h"
#include "base/json_util.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <string_view>

namespace day0 {

namespace {

constexpr std::string_view kTokens[] = { "-Infinity", "Infinity", "NaN" };

bool delimiter(char c)
{
    return c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' || c == ' '
        || c == '\t' || c == '\n' || c == '\r';
}

// A marker that does not occur in `text`, so no string of the document can equal a
// replacement made from it.
std::string markerFor(const std::string& text)
{
    std::mt19937_64 rng(0x6461793020u);
    for (;;) {
        std::string marker = fmt::format("day0-nonfinite-{:016x}:", rng());
        if (text.find(marker) == std::string::npos) {
            return marker;
        }
    }
}

// Replaces bare NaN / Infinity / -Infinity tokens outside strings by quoted markers.
std::string quoteNonFinite(const std::string& text, const std::string& marker,
    std::vector<std::pair<std::size_t, std::size_t>>& shifts)
{
    std::string out;
    out.reserve(text.size());
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            out += c;
            if (c == '\\' && i + 1 < text.size()) {
                out += text[++i];
            } else if (c == '"') {
                inString = false;
            }
            continue;
        }
        if (c == '"') {
            inString = true;
            out += c;
            continue;
        }
        bool replaced = false;
        if (i == 0 || delimiter(text[i - 1])) {
            for (const auto token : kTokens) {
                const std::size_t end = i + token.size();
                if (text.compare(i, token.size(), token) == 0
                    && (end == text.size() || delimiter(text[end]))) {
                    out += '"';
                    out += marker;
                    out += token;
                    out += '"';
                    i = end - 1;
                    replaced = true;
                    shifts.emplace_back(out.size(), marker.size() + 2);
                    break;
                }
            }
        }
        if (!replaced) {
            out += c;
        }
    }
    return out;
}

template <typename Json>
void restore(Json& value, const std::string& marker, const std::string& path,
    std::vector<std::string>& found)
{
    if (value.is_object()) {
        for (auto it = value.begin(); it != value.end(); ++it) {
            restore(it.value(), marker, path.empty() ? it.key() : path + "." + it.key(), found);
        }
    } else if (value.is_array()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
            restore(value[i], marker, fmt::format("{}[{}]", path, i), found);
        }
    } else if (value.is_string()) {
        const auto& s = value.template get_ref<const std::string&>();
        if (s.size() > marker.size() && s.compare(0, marker.size(), marker) == 0) {
            const std::string token = s.substr(marker.size());
            found.push_back(fmt::format("{} = {}", path.empty() ? "(document)" : path, token));
            if (token == "NaN") {
                value = std::numeric_limits<double>::quiet_NaN();
            } else {
                const double inf = std::numeric_limits<double>::infinity();
                value = token == "Infinity" ? inf : -inf;
            }
        }
    }
}

// Where a byte of the quoted text came from in the original (replacements are recorded as
// (end of the replacement in the quoted text, bytes it added)).
std::size_t originalOffset(
    std::size_t quotedOffset, const std::vector<std::pair<std::size_t, std::size_t>>& shifts)
{
    std::size_t added = 0;
    for (const auto& [end, extra] : shifts) {
        if (end <= quotedOffset) {
            added += extra;
        }
    }
    return quotedOffset - added;
}

template <typename Json>
Result<PythonJson<Json>> parseAs(const std::string& text, const std::string& origin)
{
    DAY0_TRY(checkJsonDepth(text, origin));
    const std::string marker = markerFor(text);
    std::vector<std::pair<std::size_t, std::size_t>> shifts;
    const std::string quoted = quoteNonFinite(text, marker, shifts);
    PythonJson<Json> out;
    if (shifts.empty()) {
        // Nothing non-standard: the strict parser's result and messages.
        try {
            out.value = Json::parse(text);
        } catch (const nlohmann::json::exception&) {
            return parseJson(text, origin).error();
        }
        return out;
    }
    try {
        out.value = Json::parse(quoted);
    } catch (const nlohmann::json::parse_error& e) {
        const std::size_t at = originalOffset(e.byte > 0 ? e.byte - 1 : 0, shifts);
        std::size_t line = 1;
        std::size_t column = 1;
        for (std::size_t i = 0; i < at && i < text.size(); ++i) {
            column = text[i] == '\n' ? 1 : column + 1;
            line += text[i] == '\n' ? 1 : 0;
        }
        std::string what = e.what();
        const auto colon = what.find(": ");
        what = colon == std::string::npos ? what : what.substr(colon + 2);
        return Error::badInput(
            fmt::format("{}: malformed JSON: parse error at line {}, column {}: {}", origin, line,
                column, what));
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: malformed JSON: {}", origin, jsonErrorText(e)));
    }
    restore(out.value, marker, std::string(), out.nonFinite);
    return out;
}

template <typename Json> void quoteNumbers(Json& value, const std::string& marker)
{
    if (value.is_structured()) {
        for (auto& item : value) {
            quoteNumbers(item, marker);
        }
    } else if (value.is_number_float()) {
        const double v = value.template get<double>();
        if (std::isnan(v)) {
            value = marker + "NaN";
        } else if (std::isinf(v)) {
            value = marker + (v > 0 ? "Infinity" : "-Infinity");
        }
    }
}

} // namespace

Result<PythonJson<nlohmann::json>> parsePythonJson(
    const std::string& text, const std::string& origin)
{
    return parseAs<nlohmann::json>(text, origin);
}

Result<PythonJson<nlohmann::ordered_json>> parsePythonJsonOrdered(
    const std::string& text, const std::string& origin)
{
    return parseAs<nlohmann::ordered_json>(text, origin);
}

Result<PythonJson<nlohmann::json>> readPythonJsonFile(const std::filesystem::path& path)
{
    auto text = readFile(path);
    if (!text) {
        return text.error();
    }
    return parsePythonJson(*text, displayPath(path));
}

std::string dumpPythonJson(const nlohmann::ordered_json& value, int indent)
{
    nlohmann::ordered_json copy = value;
    const std::string plain = copy.dump(indent);
    const std::string marker = markerFor(plain);
    quoteNumbers(copy, marker);
    std::string text = copy.dump(indent);
    const std::string quoted = '"' + marker;
    for (std::size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at)) {
        const std::size_t close = text.find('"', at + quoted.size());
        const std::string token = text.substr(at + quoted.size(), close - at - quoted.size());
        text.replace(at, close + 1 - at, token);
        at += token.size();
    }
    return text;
}

} // namespace day0
