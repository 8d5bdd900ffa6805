#include "profile/privacy.h"

#include <array>

namespace day0::profile {

namespace {

constexpr std::array<std::string_view, 3> kHomes = { "/home/", "/Users/", "\\Users\\" };

} // namespace

bool containsUserPath(std::string_view text)
{
    if (text.size() < 7) {
        return false;
    }
    for (const auto home : kHomes) {
        std::size_t at = text.find(home);
        while (at != std::string_view::npos) {
            const std::size_t name = at + home.size();
            if (name < text.size() && text[name] != '<' && text[name] != '/'
                && text[name] != '\\') {
                return true;
            }
            at = text.find(home, at + 1);
        }
    }
    return false;
}

std::string redactUserPaths(std::string_view text)
{
    std::string out(text);
    for (const auto home : kHomes) {
        const char sep = home.back();
        std::size_t at = out.find(home);
        while (at != std::string::npos) {
            const std::size_t name = at + home.size();
            std::size_t end = name;
            while (end < out.size() && out[end] != sep && out[end] != '"' && out[end] != ' '
                && out[end] != ';' && out[end] != ':') {
                ++end;
            }
            if (end > name && out[name] != '<') {
                out.replace(name, end - name, "<user>");
            }
            at = out.find(home, name);
        }
    }
    return out;
}

std::string_view baseName(std::string_view path)
{
    const std::size_t slash = path.find_last_of("/\\");
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

} // namespace day0::profile
