#include "base/utf8.h"

namespace day0 {

std::size_t utf8SequenceLength(std::string_view text)
{
    if (text.empty()) {
        return 0;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const unsigned char c = p[0];
    std::size_t n = 0;
    if (c < 0x80) {
        return 1;
    }
    if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
        n = 2;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
        n = 4;
    } else {
        return 0;
    }
    if (n > text.size()) {
        return 0;
    }
    for (std::size_t i = 1; i < n; ++i) {
        if ((p[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    // Overlong three- and four-byte forms, UTF-16 surrogates, code points past U+10FFFF.
    if (n == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))) {
        return 0;
    }
    if (n == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))) {
        return 0;
    }
    return n;
}

std::string replaceInvalidUtf8(std::string_view text, std::size_t* replaced)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t len = utf8SequenceLength(text.substr(i));
        if (len == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            if (replaced != nullptr) {
                ++*replaced;
            }
        } else {
            out.append(text.substr(i, len));
            i += len;
        }
    }
    return out;
}

} // namespace day0
