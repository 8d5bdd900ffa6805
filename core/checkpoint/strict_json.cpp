#include "checkpoint/strict_json.h"

#include "base/json_util.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_set>
#include <vector>

namespace day0::checkpoint {

std::size_t findInvalidUtf8(std::string_view text)
{
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        std::uint32_t cp = 0;
        std::uint32_t minimum = 0;
        if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, minimum = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, minimum = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, minimum = 0x10000;
        } else {
            return i;
        }
        if (i + len > n) {
            return i;
        }
        for (std::size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return i;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return i;
        }
        i += len;
    }
    return std::string_view::npos;
}

namespace {

// Tracks the keys of every open object and stops at the first one seen twice, naming its path
// ("'a' > 'b'"); records a syntax error's byte and message. Linear in the text.
struct DuplicateKeyFinder {
    using json = nlohmann::json;
    // One set of keys per open object; arrays push nothing, so the stack mirrors object nesting.
    std::vector<std::unordered_set<std::string>> keys;
    std::vector<std::string> path;
    std::optional<std::string> duplicate;
    std::optional<std::string> parseError;
    std::size_t errorByte = 0;

    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const json::string_t&) { return true; }
    bool string(json::string_t&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t)
    {
        keys.emplace_back();
        path.emplace_back();
        return true;
    }
    bool end_object()
    {
        keys.pop_back();
        path.pop_back();
        return true;
    }
    bool start_array(std::size_t) { return true; }
    bool end_array() { return true; }
    bool key(json::string_t& key)
    {
        if (!keys.back().insert(key).second) {
            std::string where;
            for (std::size_t i = 0; i + 1 < path.size(); ++i) {
                where += fmt::format("'{}' > ", path[i]);
            }
            duplicate = fmt::format("{}'{}'", where, key);
            return false; // stop here
        }
        path.back() = key;
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e)
    {
        errorByte = position;
        const std::string_view what(e.what());
        const auto colon = what.find(':');
        parseError = std::string(colon == std::string_view::npos ? what : what.substr(colon + 2));
        return false;
    }
};

} // namespace

Result<nlohmann::json> parseStrictJson(std::string_view text, const std::string& origin)
{
    if (const auto bad = findInvalidUtf8(text); bad != std::string_view::npos) {
        return Error::badInput(fmt::format("{}: not valid UTF-8 at byte {}", origin, bad));
    }
    DAY0_TRY(checkJsonDepth(text, origin));
    // Duplicate keys first, by a SAX pass that builds nothing: nlohmann's callback parser
    // rescans the parent object at every object's end, quadratic in a header of 40,000 tensors.
    DuplicateKeyFinder finder;
    const bool parsed = nlohmann::json::sax_parse(
        text.begin(), text.end(), &finder, nlohmann::json::input_format_t::json, true);
    if (!parsed && finder.parseError) {
        return Error::badInput(fmt::format(
            "{}: invalid JSON at byte {}: {}", origin, finder.errorByte, *finder.parseError));
    }
    if (finder.duplicate) {
        return Error::badInput(fmt::format("{}: duplicate key {}", origin, *finder.duplicate));
    }
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        return Error::badInput(fmt::format("{}: invalid JSON at byte {}: {}", origin, e.byte,
            std::string_view(e.what()).substr(std::string_view(e.what()).find(':') + 2)));
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: invalid JSON: {}", origin, jsonErrorText(e)));
    }
}

} // namespace day0::checkpoint
