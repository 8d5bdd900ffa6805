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

Result<nlohmann::json> parseStrictJson(std::string_view text, const std::string& origin)
{
    if (const auto bad = findInvalidUtf8(text); bad != std::string_view::npos) {
        return Error::badInput(fmt::format("{}: not valid UTF-8 at byte {}", origin, bad));
    }
    DAY0_TRY(checkJsonDepth(text, origin));
    // One set of keys per open object; arrays push nothing, so the stack mirrors object nesting.
    std::vector<std::unordered_set<std::string>> keys;
    std::vector<std::string> path;
    std::optional<std::string> duplicate;
    const auto callback
        = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
              using E = nlohmann::json::parse_event_t;
              switch (event) {
              case E::object_start:
                  keys.emplace_back();
                  path.emplace_back();
                  break;
              case E::object_end:
                  if (!keys.empty()) {
                      keys.pop_back();
                      path.pop_back();
                  }
                  break;
              case E::key: {
                  const auto& key = parsed.get_ref<const std::string&>();
                  if (!keys.empty()) {
                      if (!keys.back().insert(key).second && !duplicate) {
                          std::string where;
                          for (std::size_t i = 0; i + 1 < path.size(); ++i) {
                              where += fmt::format("'{}' > ", path[i]);
                          }
                          duplicate = fmt::format("{}'{}'", where, key);
                      }
                      path.back() = key;
                  }
                  break;
              }
              default:
                  break;
              }
              return true;
          };
    nlohmann::json value;
    try {
        value = nlohmann::json::parse(text.begin(), text.end(), callback);
    } catch (const nlohmann::json::parse_error& e) {
        return Error::badInput(fmt::format("{}: invalid JSON at byte {}: {}", origin, e.byte,
            std::string_view(e.what()).substr(std::string_view(e.what()).find(':') + 2)));
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: invalid JSON: {}", origin, e.what()));
    }
    if (duplicate) {
        return Error::badInput(fmt::format("{}: duplicate key {}", origin, *duplicate));
    }
    return value;
}

} // namespace day0::checkpoint
