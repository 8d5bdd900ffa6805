// The lexer of the chat-template interpreter (jinja.h): Jinja2's tags with HF's environment
// (trim_blocks, lstrip_blocks), whitespace control (- and +) and Python string literals.
#include "serve/jinja_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace day0::serve::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what)
{
    throw TemplateError(fmt::format("chat template line {}: {}", line, what));
}

bool isSpace(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

void appendUtf8(std::string& out, std::uint32_t cp)
{
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

/// Splits the source into text and tag tokens, applying whitespace control as Jinja's lexer does.
class Lexer {
public:
    explicit Lexer(std::string source)
        : m_src(std::move(source))
    {
    }

    std::vector<Token> run()
    {
        bool lineStarting = true;
        while (m_pos < m_src.size()) {
            std::size_t start = m_pos;
            char kind = 0;
            while ((start = m_src.find('{', start)) != std::string::npos) {
                const char next = start + 1 < m_src.size() ? m_src[start + 1] : 0;
                if (next == '{' || next == '%' || next == '#') {
                    kind = next;
                    break;
                }
                ++start;
            }
            if (start == std::string::npos) {
                emitText(m_src.substr(m_pos));
                break;
            }
            std::string text = m_src.substr(m_pos, start - m_pos);
            std::size_t p = start + 2;
            const char sign
                = p < m_src.size() && (m_src[p] == '-' || m_src[p] == '+') ? m_src[p] : 0;
            if (sign != 0) {
                ++p;
            }
            if (sign == '-') {
                while (!text.empty() && isSpace(text.back())) {
                    text.pop_back();
                }
            } else if (sign != '+' && kind != '{') {
                // lstrip_blocks: a block or comment tag alone on its line takes the line's
                // leading blanks with it.
                const std::size_t nl = text.rfind('\n');
                const std::size_t lpos = nl == std::string::npos ? 0 : nl + 1;
                if ((lpos > 0 || lineStarting)
                    && std::all_of(text.begin() + std::ptrdiff_t(lpos), text.end(), isSpace)) {
                    text.resize(lpos);
                }
            }
            emitText(text);
            m_line += int(std::count(m_src.begin() + std::ptrdiff_t(m_pos),
                m_src.begin() + std::ptrdiff_t(start), '\n'));
            m_pos = p;
            char endSign = 0;
            if (kind == '#') {
                const std::size_t end = m_src.find("#}", m_pos);
                if (end == std::string::npos) {
                    fail(m_line, "a comment {# is never closed");
                }
                endSign = end > m_pos && (m_src[end - 1] == '-' || m_src[end - 1] == '+')
                    ? m_src[end - 1]
                    : 0;
                m_line += int(std::count(m_src.begin() + std::ptrdiff_t(m_pos),
                    m_src.begin() + std::ptrdiff_t(end), '\n'));
                m_pos = end + 2;
            } else {
                m_tokens.push_back(
                    { kind == '{' ? Tok::VarBegin : Tok::BlockBegin, {}, {}, m_line });
                endSign = lexTag(kind == '{' ? '}' : '%');
                m_tokens.push_back({ kind == '{' ? Tok::VarEnd : Tok::BlockEnd, {}, {}, m_line });
            }
            lineStarting = false;
            if (endSign == '-') {
                while (m_pos < m_src.size() && isSpace(m_src[m_pos])) {
                    lineStarting = m_src[m_pos] == '\n';
                    m_line += m_src[m_pos] == '\n' ? 1 : 0;
                    ++m_pos;
                }
            } else if (kind != '{' && endSign != '+' && m_pos < m_src.size()
                && m_src[m_pos] == '\n') {
                // trim_blocks: the newline right after a block or comment tag goes.
                ++m_pos;
                ++m_line;
                lineStarting = true;
            }
        }
        m_tokens.push_back({ Tok::End, {}, {}, m_line });
        return std::move(m_tokens);
    }

private:
    void emitText(const std::string& text)
    {
        if (!text.empty()) {
            m_tokens.push_back({ Tok::Text, text, {}, m_line });
        }
    }

    /// Lexes the inside of a tag up to its end ("}}" or "%}", with "-" or "+"); returns the sign.
    char lexTag(char closer)
    {
        int depth = 0;
        while (true) {
            while (m_pos < m_src.size() && isSpace(m_src[m_pos])) {
                m_line += m_src[m_pos] == '\n' ? 1 : 0;
                ++m_pos;
            }
            if (m_pos >= m_src.size()) {
                fail(m_line, fmt::format("a tag is never closed with {}}}", closer));
            }
            const char c = m_src[m_pos];
            if (depth == 0) {
                for (const char sign : { '-', '+', '\0' }) {
                    std::string end = sign != 0 ? std::string(1, sign) : std::string();
                    end += closer;
                    end += '}';
                    if (m_src.compare(m_pos, end.size(), end) == 0) {
                        m_pos += end.size();
                        return sign;
                    }
                }
            }
            if (c == '\'' || c == '"') {
                lexString(c);
            } else if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
                lexNumber();
            } else if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') {
                const std::size_t s = m_pos;
                while (m_pos < m_src.size()
                    && (std::isalnum(static_cast<unsigned char>(m_src[m_pos])) != 0
                        || m_src[m_pos] == '_')) {
                    ++m_pos;
                }
                m_tokens.push_back({ Tok::Name, m_src.substr(s, m_pos - s), {}, m_line });
            } else {
                static constexpr std::array<std::string_view, 6> kTwo
                    = { "//", "**", "==", "!=", "<=", ">=" };
                std::string op;
                for (const auto two : kTwo) {
                    if (m_src.compare(m_pos, 2, two) == 0) {
                        op = two;
                    }
                }
                if (op.empty()) {
                    if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) == std::string_view::npos) {
                        fail(m_line, fmt::format("unexpected character '{}' in a tag", c));
                    }
                    op = std::string(1, c);
                }
                depth += (op == "(" || op == "[" || op == "{") ? 1 : 0;
                depth -= (op == ")" || op == "]" || op == "}") ? 1 : 0;
                m_pos += op.size();
                m_tokens.push_back({ Tok::Op, op, {}, m_line });
            }
        }
    }

    void lexString(char quote)
    {
        std::string out;
        ++m_pos;
        while (true) {
            if (m_pos >= m_src.size()) {
                fail(m_line, "a string literal is never closed");
            }
            const char c = m_src[m_pos++];
            if (c == quote) {
                break;
            }
            if (c != '\\') {
                m_line += c == '\n' ? 1 : 0;
                out += c;
                continue;
            }
            const char e = m_pos < m_src.size() ? m_src[m_pos++] : 0;
            const auto hex = [&](int digits) {
                if (m_pos + std::size_t(digits) > m_src.size()) {
                    fail(m_line, "a truncated escape in a string literal");
                }
                const auto cp = std::uint32_t(
                    std::stoul(m_src.substr(m_pos, std::size_t(digits)), nullptr, 16));
                m_pos += std::size_t(digits);
                appendUtf8(out, cp);
            };
            switch (e) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case '0':
                out += '\0';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case '\\':
                out += '\\';
                break;
            case '\'':
                out += '\'';
                break;
            case '"':
                out += '"';
                break;
            case '\n':
                break; // a line continuation
            case 'x':
                hex(2);
                break;
            case 'u':
                hex(4);
                break;
            case 'U':
                hex(8);
                break;
            default: // Python keeps an unknown escape as it is
                out += '\\';
                out += e;
            }
        }
        m_tokens.push_back({ Tok::String, {}, out, m_line });
    }

    void lexNumber()
    {
        const std::size_t s = m_pos;
        bool isFloat = false;
        while (m_pos < m_src.size()
            && (std::isdigit(static_cast<unsigned char>(m_src[m_pos])) != 0
                || m_src[m_pos] == '_')) {
            ++m_pos;
        }
        if (m_pos + 1 < m_src.size() && m_src[m_pos] == '.'
            && std::isdigit(static_cast<unsigned char>(m_src[m_pos + 1])) != 0) {
            isFloat = true;
            ++m_pos;
            while (m_pos < m_src.size()
                && std::isdigit(static_cast<unsigned char>(m_src[m_pos])) != 0) {
                ++m_pos;
            }
        }
        if (m_pos < m_src.size() && (m_src[m_pos] == 'e' || m_src[m_pos] == 'E')) {
            isFloat = true;
            ++m_pos;
            if (m_pos < m_src.size() && (m_src[m_pos] == '+' || m_src[m_pos] == '-')) {
                ++m_pos;
            }
            while (m_pos < m_src.size()
                && std::isdigit(static_cast<unsigned char>(m_src[m_pos])) != 0) {
                ++m_pos;
            }
        }
        std::string digits = m_src.substr(s, m_pos - s);
        std::erase(digits, '_');
        if (isFloat) {
            m_tokens.push_back({ Tok::Float, digits, Json(std::stod(digits)), m_line });
        } else {
            m_tokens.push_back({ Tok::Integer, digits, Json(std::stoll(digits)), m_line });
        }
    }

    std::string m_src;
    std::size_t m_pos = 0;
    int m_line = 1;
    std::vector<Token> m_tokens;
};

} // namespace

std::vector<Token> lexTemplate(std::string source) { return Lexer(std::move(source)).run(); }

} // namespace day0::serve::jinja
