#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_wpm.h"

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <map>
#include <queue>
#include <unordered_map>

namespace day0::tokenizer {

namespace {

// ICU's match-time limit, in steps of its engine (of the order of a millisecond each): a
// published pre-tokenizer splits a prompt in microseconds, one that backtracks without bound
// stops after a few seconds.
constexpr std::int32_t kRegexStepLimit = 3000;

std::string toUtf8(const icu::UnicodeString& s)
{
    std::string out;
    s.toUTF8String(out);
    return out;
}

/// GPT-2's reversible byte -> code point table: printable Latin-1 bytes map to themselves, the
/// others to U+0100 upwards.
std::array<char32_t, 256> bytesToUnicode()
{
    std::array<char32_t, 256> table {};
    std::array<bool, 256> direct {};
    for (int b = 0; b < 256; ++b) {
        direct[std::size_t(b)]
            = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    }
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        table[std::size_t(b)] = direct[std::size_t(b)] ? char32_t(b) : next++;
    }
    return table;
}

std::string utf8(char32_t c)
{
    std::string out;
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
    return out;
}

/// Length of the UTF-8 sequence starting with `lead` (1 for invalid lead bytes).
std::size_t utf8Length(unsigned char lead)
{
    if (lead < 0x80) {
        return 1;
    }
    if ((lead >> 5) == 0x6) {
        return 2;
    }
    if ((lead >> 4) == 0xE) {
        return 3;
    }
    if ((lead >> 3) == 0x1E) {
        return 4;
    }
    return 1;
}

/// Splits UTF-8 text into characters (a truncated sequence at the end stays one piece).
std::vector<std::string> utf8Chars(std::string_view s)
{
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = std::min(utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
        out.emplace_back(s.substr(i, n));
        i += n;
    }
    return out;
}

const std::string kSpaceMark = "\xE2\x96\x81"; // U+2581 "▁"

class VocabTokenizer final : public Tokenizer {
public:
    VocabTokenizer(TokenizerVocab vocab, std::string origin)
        : m_vocab(std::move(vocab))
        , m_origin(std::move(origin))
    {
    }

    Result<void> init()
    {
        for (std::size_t i = 0; i < m_vocab.tokens.size(); ++i) {
            m_ids.emplace(m_vocab.tokens[i], std::int64_t(i));
        }
        for (std::size_t r = 0; r < m_vocab.merges.size(); ++r) {
            m_ranks.emplace(m_vocab.merges[r].first + '\x01' + m_vocab.merges[r].second, int(r));
        }
        const auto table = bytesToUnicode();
        for (int b = 0; b < 256; ++b) {
            m_byteChar[std::size_t(b)] = utf8(table[std::size_t(b)]);
            m_charByte[m_byteChar[std::size_t(b)]] = std::uint8_t(b);
        }
        for (const auto& source : m_vocab.preRegexes) {
            UErrorCode status = U_ZERO_ERROR;
            UParseError parse {};
            std::unique_ptr<icu::RegexPattern> pattern(
                icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(source), 0, parse, status));
            if (U_FAILURE(status)) {
                return Error::badInput(
                    fmt::format("{}: pre-tokenizer regex '{}' does not compile ({})", m_origin,
                        source, u_errorName(status)));
            }
            m_patterns.push_back(std::move(pattern));
        }
        for (const auto id : m_vocab.specialIds) {
            if (id >= 0 && std::size_t(id) < m_vocab.tokens.size()
                && !m_vocab.tokens[std::size_t(id)].empty()) {
                m_specials.emplace_back(m_vocab.tokens[std::size_t(id)], id);
            }
        }
        // Longest special tokens first, so that "<|im_start|>" wins over "<|im".
        std::sort(m_specials.begin(), m_specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
        return success();
    }

    Result<std::vector<std::int64_t>> encode(
        std::string_view text, bool addSpecial, bool parseSpecial) const override
    {
        std::vector<std::int64_t> out;
        if (addSpecial && m_vocab.addBos && m_vocab.bos >= 0) {
            out.push_back(m_vocab.bos);
        }
        bool atStart = true;
        std::size_t pos = 0;
        while (pos < text.size()) {
            std::size_t next = text.size();
            const std::pair<std::string, std::int64_t>* special = nullptr;
            if (parseSpecial) {
                for (const auto& s : m_specials) {
                    const auto at = text.find(s.first, pos);
                    if (at != std::string_view::npos
                        && (at < next || (at == next && special == nullptr))) {
                        next = at;
                        special = &s;
                    }
                }
            }
            if (next > pos) {
                DAY0_TRY(encodeText(text.substr(pos, next - pos), atStart, out));
                atStart = false;
            }
            if (special == nullptr) {
                break;
            }
            out.push_back(special->second);
            atStart = true;
            pos = next + special->first.size();
        }
        if (addSpecial && m_vocab.addEos && m_vocab.eos >= 0) {
            out.push_back(m_vocab.eos);
        }
        return out;
    }

    std::string decode(std::span<const std::int64_t> ids) const override
    {
        std::string out;
        for (const auto id : ids) {
            if (id < 0 || std::size_t(id) >= m_vocab.tokens.size()) {
                continue;
            }
            const std::string& t = m_vocab.tokens[std::size_t(id)];
            if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') {
                out += char(std::stoi(t.substr(3, 2), nullptr, 16));
                continue;
            }
            if (m_vocab.model == TokenizerVocab::Model::Bpe && m_vocab.byteLevel) {
                for (const auto& c : utf8Chars(t)) {
                    const auto it = m_charByte.find(c);
                    out += it != m_charByte.end() ? std::string(1, char(it->second)) : c;
                }
                continue;
            }
            std::string piece = t;
            for (std::size_t at = piece.find(kSpaceMark); at != std::string::npos;
                 at = piece.find(kSpaceMark, at + 1)) {
                piece.replace(at, kSpaceMark.size(), " ");
            }
            out += piece;
        }
        return out;
    }

    std::string describe() const override
    {
        if (m_vocab.model == TokenizerVocab::Model::Spm) {
            return fmt::format("SentencePiece ({} tokens)", m_vocab.tokens.size());
        }
        return fmt::format("{} BPE ({} tokens, {} merges)",
            m_vocab.byteLevel ? "byte-level" : "character", m_vocab.tokens.size(),
            m_vocab.merges.size());
    }

    std::size_t vocabSize() const override { return m_vocab.tokens.size(); }

private:
    Result<void> encodeText(
        std::string_view text, bool atStart, std::vector<std::int64_t>& out) const
    {
        std::string s(text);
        if (m_vocab.addSpacePrefix && atStart && !s.empty()) {
            s.insert(0, " ");
        }
        if (m_vocab.escapeSpaces) {
            std::string escaped;
            for (const char c : s) {
                escaped += c == ' ' ? kSpaceMark : std::string(1, c);
            }
            s = std::move(escaped);
        }
        if (m_vocab.model == TokenizerVocab::Model::Spm) {
            spm(s, out);
            return success();
        }
        auto pieces = preTokenize(s);
        if (!pieces) {
            return pieces.error();
        }
        for (const auto& piece : *pieces) {
            bpe(piece, out);
        }
        return success();
    }

    /// Applies every pre-tokenizer regex in turn: matches and the gaps between them become pieces.
    /// A pattern that backtracks catastrophically on the text (a hostile tokenizer.json) stops
    /// at ICU's match-time limit and is an error, never a silently shorter split.
    Result<std::vector<std::string>> preTokenize(const std::string& text) const
    {
        std::vector<icu::UnicodeString> pieces { icu::UnicodeString::fromUTF8(text) };
        for (const auto& pattern : m_patterns) {
            std::vector<icu::UnicodeString> next;
            for (const auto& piece : pieces) {
                UErrorCode status = U_ZERO_ERROR;
                std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(piece, status));
                if (U_SUCCESS(status)) {
                    m->setTimeLimit(kRegexStepLimit, status);
                }
                std::int32_t last = 0;
                while (U_SUCCESS(status) && m->find(status)) {
                    const std::int32_t start = m->start(status);
                    const std::int32_t end = m->end(status);
                    if (end == start) {
                        continue;
                    }
                    if (start > last) {
                        next.emplace_back(piece, last, start - last);
                    }
                    next.emplace_back(piece, start, end - start);
                    last = end;
                }
                if (U_FAILURE(status)) {
                    return Error::badInput(fmt::format(
                        "{}: pre-tokenizer regex '{}' failed on a piece of {} characters ({}{})",
                        m_origin, toUtf8(pattern->pattern()), piece.length(), u_errorName(status),
                        status == U_REGEX_TIME_OUT ? ": it backtracks without bound" : ""));
                }
                if (last < piece.length()) {
                    next.emplace_back(piece, last);
                }
            }
            pieces = std::move(next);
        }
        std::vector<std::string> out;
        out.reserve(pieces.size());
        for (const auto& p : pieces) {
            std::string s;
            p.toUTF8String(s);
            out.push_back(std::move(s));
        }
        return out;
    }

    std::int64_t idOf(const std::string& token) const
    {
        const auto it = m_ids.find(token);
        return it == m_ids.end() ? -1 : it->second;
    }

    void pushBytes(const std::string& text, std::vector<std::int64_t>& out) const
    {
        for (const unsigned char b : text) {
            std::int64_t id = idOf(fmt::format("<0x{:02X}>", b));
            if (id < 0 && m_vocab.byteLevel) {
                id = idOf(m_byteChar[b]);
            }
            out.push_back(id >= 0 ? id : m_vocab.unk);
        }
    }

    /// BPE of one pre-token: merge the adjacent pair of lowest rank, leftmost first, until none.
    void bpe(const std::string& piece, std::vector<std::int64_t>& out) const
    {
        if (piece.empty()) {
            return;
        }
        std::string word;
        if (m_vocab.byteLevel) {
            for (const unsigned char b : piece) {
                word += m_byteChar[b];
            }
        } else {
            word = piece;
        }
        if (m_vocab.ignoreMerges) {
            if (const auto id = idOf(word); id >= 0) {
                out.push_back(id);
                return;
            }
        }
        std::vector<std::string> symbols = utf8Chars(word);
        while (symbols.size() > 1) {
            int bestRank = -1;
            std::size_t best = 0;
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
                const auto it = m_ranks.find(symbols[i] + '\x01' + symbols[i + 1]);
                if (it != m_ranks.end() && (bestRank < 0 || it->second < bestRank)) {
                    bestRank = it->second;
                    best = i;
                }
            }
            if (bestRank < 0) {
                break;
            }
            symbols[best] += symbols[best + 1];
            symbols.erase(symbols.begin() + std::ptrdiff_t(best) + 1);
        }
        for (const auto& s : symbols) {
            const auto id = idOf(s);
            if (id >= 0) {
                out.push_back(id);
            } else if (m_vocab.byteLevel) {
                for (const auto& c : utf8Chars(s)) {
                    const auto b = m_charByte.find(c);
                    const auto cid = b != m_charByte.end() ? idOf(c) : -1;
                    out.push_back(cid >= 0 ? cid : m_vocab.unk);
                }
            } else if (m_vocab.byteFallback) {
                pushBytes(s, out);
            } else {
                out.push_back(m_vocab.unk);
            }
        }
    }

    /// SentencePiece by scores (llama.cpp's SPM): repeatedly merge the adjacent pair whose
    /// concatenation is the best-scoring token (leftmost on ties); leftovers fall back to bytes.
    void spm(const std::string& text, std::vector<std::int64_t>& out) const
    {
        struct Symbol {
            int prev;
            int next;
            std::size_t start;
            std::size_t length;
        };
        struct Bigram {
            int left;
            int right;
            float score;
            std::size_t length;
        };
        const auto worse = [](const Bigram& a, const Bigram& b) {
            return a.score < b.score || (a.score == b.score && a.left > b.left);
        };
        std::vector<Symbol> symbols;
        for (std::size_t i = 0; i < text.size();) {
            const std::size_t n
                = std::min(utf8Length(static_cast<unsigned char>(text[i])), text.size() - i);
            symbols.push_back({ int(symbols.size()) - 1, int(symbols.size()) + 1, i, n });
            i += n;
        }
        if (symbols.empty()) {
            return;
        }
        symbols.back().next = -1;
        std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
        const auto tryAdd = [&](int left, int right) {
            if (left < 0 || right < 0) {
                return;
            }
            const auto& l = symbols[std::size_t(left)];
            const std::string joined
                = text.substr(l.start, l.length + symbols[std::size_t(right)].length);
            const auto id = idOf(joined);
            if (id < 0) {
                return;
            }
            const float score
                = std::size_t(id) < m_vocab.scores.size() ? m_vocab.scores[std::size_t(id)] : 0.0f;
            queue.push({ left, right, score, joined.size() });
        };
        for (std::size_t i = 1; i < symbols.size(); ++i) {
            tryAdd(int(i) - 1, int(i));
        }
        while (!queue.empty()) {
            const Bigram b = queue.top();
            queue.pop();
            auto& l = symbols[std::size_t(b.left)];
            auto& r = symbols[std::size_t(b.right)];
            if (l.length == 0 || r.length == 0 || l.length + r.length != b.length) {
                continue; // outdated: one side was merged elsewhere
            }
            l.length += r.length;
            r.length = 0;
            l.next = r.next;
            if (r.next >= 0) {
                symbols[std::size_t(r.next)].prev = b.left;
            }
            tryAdd(l.prev, b.left);
            tryAdd(b.left, l.next);
        }
        for (int i = 0; i != -1; i = symbols[std::size_t(i)].next) {
            const auto& s = symbols[std::size_t(i)];
            const std::string piece = text.substr(s.start, s.length);
            const auto id = idOf(piece);
            if (id >= 0) {
                out.push_back(id);
            } else {
                pushBytes(piece, out);
            }
        }
    }

    TokenizerVocab m_vocab;
    std::string m_origin;
    std::unordered_map<std::string, std::int64_t> m_ids;
    std::unordered_map<std::string, int> m_ranks;
    std::array<std::string, 256> m_byteChar;
    std::unordered_map<std::string, std::uint8_t> m_charByte;
    std::vector<std::unique_ptr<icu::RegexPattern>> m_patterns;
    std::vector<std::pair<std::string, std::int64_t>> m_specials;
};

} // namespace

Result<std::unique_ptr<Tokenizer>> makeTokenizer(TokenizerVocab vocab, std::string origin)
{
    if (vocab.tokens.empty()) {
        return Error::badInput(origin + ": the vocabulary is empty");
    }
    if (vocab.model == TokenizerVocab::Model::Wpm) {
        return detail::makeWordPieceTokenizer(std::move(vocab), std::move(origin));
    }
    auto t = std::make_unique<VocabTokenizer>(std::move(vocab), std::move(origin));
    DAY0_TRY(t->init());
    return std::unique_ptr<Tokenizer>(std::move(t));
}

} // namespace day0::tokenizer
