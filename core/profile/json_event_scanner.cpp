#include "profile/json_event_scanner.h"

#include "profile/json_simd.h"

#include <fmt/format.h>

#include <cstring>

namespace day0::profile {

using detail::BlockMasks;
using detail::classifyBlock;
using detail::findStringStop;
using detail::findStructStop;
using detail::prefixXor;

namespace {

constexpr std::size_t kReadBlock = 1 << 20;
constexpr std::size_t kPadding = 64;
constexpr std::size_t kMaxEventBytes = std::size_t(256) << 20;

bool isHex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

void appendEscapedControl(std::string* out, unsigned char c)
{
    if (out == nullptr) {
        return;
    }
    switch (c) {
    case '\n':
        out->append("\\n");
        return;
    case '\t':
        out->append("\\t");
        return;
    case '\r':
        out->append("\\r");
        return;
    default:
        out->append(fmt::format("\\u{:04x}", unsigned(c)));
    }
}

} // namespace

JsonEventScanner::JsonEventScanner(ByteSource& source, JsonEventSink& sink, std::size_t batchBytes)
    : m_source(source)
    , m_sink(sink)
    , m_batchBytes(batchBytes)
{
    m_buf.resize(kReadBlock);
}

bool JsonEventScanner::fill()
{
    if (m_eof) {
        return false;
    }
    m_bufferOffset += m_pos;
    const std::size_t keep = m_len - m_pos;
    std::memmove(m_buf.data(), m_buf.data() + m_pos, keep);
    m_pos = 0;
    m_len = keep;
    auto n = m_source.read(m_buf.data() + m_len, m_buf.size() - m_len);
    if (!n.ok()) {
        m_readError = n.error();
    }
    if (!n.ok() || *n == 0) {
        m_eof = true;
        return m_len > 0;
    }
    m_len += *n;
    if (m_progress != nullptr) {
        m_progress->setDone(std::int64_t(m_source.fileBytesRead()));
    }
    return true;
}

int JsonEventScanner::peek()
{
    if (m_pos == m_len && !fill()) {
        return -1;
    }
    return static_cast<unsigned char>(m_buf[m_pos]);
}

void JsonEventScanner::skipWhitespace()
{
    while (true) {
        const int c = peek();
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            ++m_pos;
            continue;
        }
        return;
    }
}

Error JsonEventScanner::syntaxError(std::string_view what) const
{
    return Error::badInput(fmt::format("{}: not a valid trace: {} at byte {}",
        m_source.displayName(), what, m_bufferOffset + m_pos));
}

Result<JsonEventScanner::Copy> JsonEventScanner::copyString(std::string* out, bool resume)
{
    // At the opening quote, or (resume) inside the string after it.
    if (!resume) {
        if (out != nullptr) {
            out->push_back('"');
        }
        ++m_pos;
    }
    int escape = 0; // 0 none, 1 after '\', 2..5 inside \u with escape-2 hex digits read
    char hex[4];
    while (true) {
        if (m_pos == m_len && !fill()) {
            return Copy::EndOfData;
        }
        const char* p = m_buf.data() + m_pos;
        const char* const end = m_buf.data() + m_len;
        if (escape == 0) {
            const char* run = p;
            p = findStringStop(p, end);
            if (out != nullptr) {
                out->append(run, std::size_t(p - run));
            }
            m_pos = std::size_t(p - m_buf.data());
            if (p == end) {
                continue;
            }
            const auto c = static_cast<unsigned char>(*p);
            ++m_pos;
            if (c == '"') {
                if (out != nullptr) {
                    out->push_back('"');
                }
                return Copy::Done;
            }
            if (c == '\\') {
                escape = 1;
                continue;
            }
            ++m_report.controlCharsEscaped;
            appendEscapedControl(out, c);
            continue;
        }
        const auto c = static_cast<unsigned char>(*p);
        if (escape == 1) {
            if (std::strchr("\"\\/bfnrt", c) != nullptr && c != 0) {
                if (out != nullptr) {
                    out->push_back('\\');
                    out->push_back(char(c));
                }
                ++m_pos;
                escape = 0;
            } else if (c == 'u') {
                ++m_pos;
                escape = 2;
            } else {
                // Not an escape: keep the backslash as a literal character and look at c again.
                ++m_report.badEscapesRepaired;
                if (out != nullptr) {
                    out->append("\\\\");
                }
                escape = 0;
            }
            continue;
        }
        if (isHex(c)) {
            hex[escape - 2] = char(c);
            ++m_pos;
            if (++escape == 6) {
                if (out != nullptr) {
                    out->append("\\u");
                    out->append(hex, 4);
                }
                escape = 0;
            }
            continue;
        }
        ++m_report.badEscapesRepaired;
        if (out != nullptr) {
            out->append("\\\\u");
            out->append(hex, std::size_t(escape - 2));
        }
        escape = 0;
    }
}

Result<JsonEventScanner::Copy> JsonEventScanner::copyBalanced(std::string* out)
{
    // At '{' or '['. Whole 64-byte blocks without backslashes or raw control characters in
    // strings are classified with bit masks and copied at once; the rest goes byte by byte.
    int depth = 0;
    bool inString = false;
    while (true) {
        if (m_pos == m_len && !fill()) {
            return Copy::EndOfData;
        }
        const char* const base = m_buf.data();
        const char* p = base + m_pos;
        const char* const end = base + m_len;
        while (end - p >= 64) {
            const BlockMasks m = classifyBlock(p);
            if (m.backslash != 0) {
                break;
            }
            const std::uint64_t inside = prefixXor(m.quote) ^ (inString ? ~0ull : 0ull);
            if ((m.control & inside) != 0) {
                break;
            }
            std::uint64_t structural = (m.open | m.close) & ~inside;
            while (structural != 0) {
                const int i = __builtin_ctzll(structural);
                if (((m.open >> i) & 1) != 0) {
                    ++depth;
                } else if (--depth == 0) {
                    if (out != nullptr) {
                        out->append(p, std::size_t(i) + 1);
                    }
                    m_pos = std::size_t(p - base) + std::size_t(i) + 1;
                    return Copy::Done;
                }
                structural &= structural - 1;
            }
            inString = inString != ((__builtin_popcountll(m.quote) & 1) != 0);
            if (out != nullptr) {
                out->append(p, 64);
            }
            p += 64;
        }
        m_pos = std::size_t(p - base);
        // Stop by stop for at least one block, then try whole blocks again. Positions are
        // absolute because fill() moves the buffer.
        const std::uint64_t slowUntil = m_bufferOffset + m_pos + 64;
        while (m_bufferOffset + m_pos < slowUntil) {
            if (inString) {
                auto r = copyString(out, true);
                if (!r.ok() || *r == Copy::EndOfData) {
                    return r;
                }
                inString = false;
                continue;
            }
            if (m_pos == m_len && !fill()) {
                return Copy::EndOfData;
            }
            const char* q = m_buf.data() + m_pos;
            const char* const qend = m_buf.data() + m_len;
            const char* run = q;
            q = findStructStop(q, qend);
            if (out != nullptr) {
                out->append(run, std::size_t(q - run));
            }
            m_pos = std::size_t(q - m_buf.data());
            if (q == qend) {
                continue;
            }
            const char c = *q;
            if (c == '"') {
                auto r = copyString(out, false);
                if (!r.ok() || *r == Copy::EndOfData) {
                    return r;
                }
                continue;
            }
            if (out != nullptr) {
                out->push_back(c);
            }
            ++m_pos;
            if (c == '{' || c == '[') {
                ++depth;
            } else if (--depth == 0) {
                return Copy::Done;
            }
        }
    }
}

Result<JsonEventScanner::Copy> JsonEventScanner::copyValue(std::string* out)
{
    skipWhitespace();
    const int c = peek();
    if (c < 0) {
        return Copy::EndOfData;
    }
    if (c == '{' || c == '[') {
        return copyBalanced(out);
    }
    if (c == '"') {
        return copyString(out);
    }
    // A number or literal: up to the next delimiter.
    while (true) {
        const int d = peek();
        if (d < 0) {
            return Copy::EndOfData;
        }
        if (d == ',' || d == '}' || d == ']' || d == ' ' || d == '\n' || d == '\r' || d == '\t') {
            return Copy::Done;
        }
        if (d == '{' || d == '[' || d == '"' || d == ':') {
            return syntaxError(fmt::format("unexpected '{}' in a value", char(d)));
        }
        if (out != nullptr) {
            out->push_back(char(d));
        }
        ++m_pos;
    }
}

Result<void> JsonEventScanner::flush()
{
    if (m_starts.empty()) {
        m_batch.clear();
        m_batch.push_back('[');
        return success();
    }
    m_batch.push_back(']');
    m_batch.reserve(m_batch.size() + kPadding);
    m_report.events += m_starts.size();
    auto r = m_sink.onEvents(m_batch, m_starts);
    m_batch.clear();
    m_batch.reserve(m_batchBytes + (1 << 16));
    m_batch.push_back('[');
    m_starts.clear();
    return r;
}

Result<void> JsonEventScanner::scanEventArray(Progress& progress, std::stop_token stop)
{
    // Just after '['.
    m_batch.reserve(m_batchBytes + (1 << 16));
    m_batch.clear();
    m_batch.push_back('[');
    while (true) {
        skipWhitespace();
        const int c = peek();
        if (c < 0) {
            m_report.endedEarly = true;
            return flush();
        }
        if (c == ']') {
            ++m_pos;
            return flush();
        }
        if (c == ',') {
            ++m_pos;
            continue;
        }
        if (c != '{') {
            ++m_report.nonObjectEntries;
            const std::uint64_t at = m_bufferOffset + m_pos;
            auto r = copyValue(nullptr);
            if (!r.ok()) {
                return r.error();
            }
            if (*r == Copy::EndOfData) {
                m_report.endedEarly = true;
                return flush();
            }
            if (m_bufferOffset + m_pos == at) {
                ++m_pos; // a stray '}' or ':' is no value at all: step over it
            }
            continue;
        }
        const std::size_t before = m_batch.size();
        if (!m_starts.empty()) {
            m_batch.push_back(',');
        }
        m_starts.push_back(std::uint32_t(m_batch.size()));
        auto r = copyBalanced(&m_batch);
        if (!r.ok()) {
            return r.error();
        }
        if (*r == Copy::EndOfData) {
            m_batch.resize(before);
            m_starts.pop_back();
            m_report.endedEarly = true;
            m_report.lastEventCut = true;
            return flush();
        }
        // Offsets into a batch are 32-bit and no real event comes near this size.
        if (m_batch.size() - before > kMaxEventBytes) {
            m_batch.resize(before);
            m_starts.pop_back();
            ++m_report.oversizedEvents;
            continue;
        }
        if (m_batch.size() >= m_batchBytes) {
            DAY0_TRY(flush());
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
            (void)progress;
        }
    }
}

Result<void> JsonEventScanner::run(Progress& progress, std::stop_token stop)
{
    auto r = scan(progress, stop);
    // A read error (corrupt gzip data) ends the data early; it wins over what the scan saw.
    if (m_readError) {
        return *m_readError;
    }
    return r;
}

Result<void> JsonEventScanner::scan(Progress& progress, std::stop_token stop)
{
    m_progress = &progress;
    progress.setTotal(std::int64_t(m_source.fileSize()));
    skipWhitespace();
    // A UTF-8 byte order mark is tolerated.
    if (peek() == 0xEF) {
        m_pos += 3;
        skipWhitespace();
    }
    const int first = peek();
    if (first == '[') {
        ++m_pos;
        return scanEventArray(progress, stop);
    }
    if (first != '{') {
        if (first < 0) {
            return Error::badInput(
                fmt::format("{}: empty file, expected a JSON trace", m_source.displayName()));
        }
        return Error::badInput(fmt::format(
            "{}: not a JSON trace (expected '{{' or '[' but the data starts with byte 0x{:02x})",
            m_source.displayName(), first));
    }
    ++m_pos;
    bool sawEvents = false;
    std::string key;
    std::string value;
    while (true) {
        skipWhitespace();
        int c = peek();
        if (c < 0) {
            m_report.endedEarly = true;
            break;
        }
        if (c == '}') {
            ++m_pos;
            break;
        }
        if (c == ',') {
            ++m_pos;
            continue;
        }
        if (c != '"') {
            return syntaxError("expected a key string");
        }
        key.clear();
        auto k = copyString(&key);
        if (!k.ok()) {
            return k.error();
        }
        if (*k == Copy::EndOfData) {
            m_report.endedEarly = true;
            break;
        }
        key = key.substr(1, key.size() - 2);
        skipWhitespace();
        if (peek() != ':') {
            return syntaxError(fmt::format("expected ':' after key \"{}\"", key));
        }
        ++m_pos;
        skipWhitespace();
        c = peek();
        if (key == "traceEvents" && c == '[') {
            ++m_pos;
            sawEvents = true;
            DAY0_TRY(scanEventArray(progress, stop));
            if (m_report.endedEarly) {
                break;
            }
            continue;
        }
        const bool wanted = m_sink.wantsKey(key);
        value.clear();
        auto v = copyValue(wanted ? &value : nullptr);
        if (!v.ok()) {
            return v.error();
        }
        if (*v == Copy::EndOfData) {
            m_report.endedEarly = true;
            break;
        }
        if (wanted) {
            m_sink.onTopLevel(key, value);
        }
    }
    m_report.noEventArray = !sawEvents;
    return success();
}

} // namespace day0::profile
