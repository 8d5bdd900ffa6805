#include "tokenizer/tokenizer_wpm.h"

#include <fmt/format.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <unordered_map>

namespace day0::tokenizer::detail {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81"; // U+2581 "▁"
constexpr std::size_t kMaxWordChars = 100; // HF BertTokenizer's max_input_chars_per_word

bool isCjk(UChar32 c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF)
        || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F)
        || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF)
        || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool isBertWhitespace(UChar32 c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_charType(c) == U_SPACE_SEPARATOR;
}

bool isBertControl(UChar32 c)
{
    if (c == '\t' || c == '\n' || c == '\r') {
        return false;
    }
    const auto t = u_charType(c);
    return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED
        || t == U_PRIVATE_USE_CHAR;
}

bool isBertPunctuation(UChar32 c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96)
        || (c >= 123 && c <= 126)) {
        return true;
    }
    switch (u_charType(c)) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
        return true;
    default:
        return false;
    }
}

std::string toUtf8(const icu::UnicodeString& s)
{
    std::string out;
    s.toUTF8String(out);
    return out;
}

class WordPieceTokenizer final : public Tokenizer {
public:
    WordPieceTokenizer(TokenizerVocab vocab, std::string origin)
        : m_vocab(std::move(vocab))
        , m_origin(std::move(origin))
    {
    }

    Result<void> init()
    {
        bool spaceMarked = false;
        for (const auto& t : m_vocab.tokens) {
            if (t.starts_with(kWordStart)) {
                spaceMarked = true;
                break;
            }
        }
        for (std::size_t i = 0; i < m_vocab.tokens.size(); ++i) {
            const std::string& t = m_vocab.tokens[i];
            const auto id = std::int64_t(i);
            if (spaceMarked) {
                if (t.starts_with(kWordStart)) {
                    m_initial.try_emplace(t.substr(kWordStart.size()), id);
                } else {
                    m_continuation.try_emplace(t, id);
                }
            } else if (t.starts_with("##")) {
                m_continuation.try_emplace(t.substr(2), id);
            } else {
                m_initial.try_emplace(t, id);
            }
        }
        if (m_vocab.unk < 0) {
            for (std::size_t i = 0; i < m_vocab.tokens.size(); ++i) {
                if (m_vocab.tokens[i] == "[UNK]") {
                    m_vocab.unk = std::int64_t(i);
                }
            }
        }
        if (m_vocab.unk < 0) {
            return Error::badInput(
                m_origin + ": a WordPiece vocabulary needs an unknown token ([UNK])");
        }
        UErrorCode status = U_ZERO_ERROR;
        m_nfd = icu::Normalizer2::getNFDInstance(status);
        if (U_FAILURE(status)) {
            return Error::internal(fmt::format("ICU NFD normaliser: {}", u_errorName(status)));
        }
        return success();
    }

    Result<std::vector<std::int64_t>> encode(
        std::string_view text, bool addSpecial, bool /*parseSpecial*/) const override
    {
        std::vector<std::int64_t> ids;
        if (addSpecial && m_vocab.addBos && m_vocab.bos >= 0) {
            ids.push_back(m_vocab.bos);
        }
        for (const auto& word : words(text)) {
            pieces(word, ids);
        }
        if (addSpecial && m_vocab.addEos && m_vocab.eos >= 0) {
            ids.push_back(m_vocab.eos);
        }
        return ids;
    }

    [[nodiscard]] std::string decode(std::span<const std::int64_t> ids) const override
    {
        std::string out;
        for (const auto id : ids) {
            if (id < 0 || std::size_t(id) >= m_vocab.tokens.size()) {
                continue;
            }
            std::string t = m_vocab.tokens[std::size_t(id)];
            if (t.starts_with(kWordStart)) {
                t = (out.empty() ? "" : " ") + t.substr(kWordStart.size());
            } else if (t.starts_with("##")) {
                t = t.substr(2);
            } else if (!out.empty() && !m_continuation.contains(t)) {
                t = " " + t;
            }
            out += t;
        }
        return out;
    }

    [[nodiscard]] std::string describe() const override { return "WordPiece (bert)"; }
    [[nodiscard]] std::size_t vocabSize() const override { return m_vocab.tokens.size(); }

private:
    /// BERT's normaliser (clean text, CJK spacing, accents stripped, lower case) and
    /// pre-tokeniser (whitespace split, punctuation isolated): the words WordPiece sees.
    [[nodiscard]] std::vector<std::string> words(std::string_view text) const
    {
        const auto input
            = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size())));
        icu::UnicodeString cleaned;
        for (int32_t i = 0; i < input.length();) {
            const UChar32 c = input.char32At(i);
            i += U16_LENGTH(c);
            if (c == 0 || c == 0xFFFD || isBertControl(c)) {
                continue;
            }
            if (isBertWhitespace(c)) {
                cleaned.append(UChar32(' '));
            } else if (isCjk(c)) {
                cleaned.append(UChar32(' ')).append(c).append(UChar32(' '));
            } else {
                cleaned.append(c);
            }
        }
        UErrorCode status = U_ZERO_ERROR;
        const icu::UnicodeString decomposed = m_nfd->normalize(cleaned, status);
        icu::UnicodeString stripped;
        for (int32_t i = 0; i < decomposed.length();) {
            const UChar32 c = decomposed.char32At(i);
            i += U16_LENGTH(c);
            if (u_charType(c) != U_NON_SPACING_MARK) {
                stripped.append(c);
            }
        }
        stripped.toLower(icu::Locale::getRoot());

        std::vector<std::string> out;
        icu::UnicodeString current;
        const auto flush = [&] {
            if (!current.isEmpty()) {
                out.push_back(toUtf8(current));
                current.remove();
            }
        };
        for (int32_t i = 0; i < stripped.length();) {
            const UChar32 c = stripped.char32At(i);
            i += U16_LENGTH(c);
            if (isBertWhitespace(c)) {
                flush();
            } else if (isBertPunctuation(c)) {
                flush();
                current.append(c);
                flush();
            } else {
                current.append(c);
            }
        }
        flush();
        return out;
    }

    /// Greedy longest-match-first pieces of one word; the whole word is [UNK] when any part
    /// has no piece or the word is longer than 100 characters.
    void pieces(const std::string& word, std::vector<std::int64_t>& ids) const
    {
        const auto chars = icu::UnicodeString::fromUTF8(word).countChar32();
        if (std::size_t(chars) > kMaxWordChars) {
            ids.push_back(m_vocab.unk);
            return;
        }
        std::vector<std::int64_t> found;
        std::size_t start = 0;
        while (start < word.size()) {
            const auto& table = start == 0 ? m_initial : m_continuation;
            std::size_t end = word.size();
            std::int64_t match = -1;
            while (end > start) {
                const auto it = table.find(word.substr(start, end - start));
                if (it != table.end()) {
                    match = it->second;
                    break;
                }
                // step back one whole UTF-8 character
                do {
                    --end;
                } while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
            }
            if (match < 0) {
                ids.push_back(m_vocab.unk);
                return;
            }
            found.push_back(match);
            start = end;
        }
        ids.insert(ids.end(), found.begin(), found.end());
    }

    TokenizerVocab m_vocab;
    std::string m_origin;
    std::unordered_map<std::string, std::int64_t> m_initial;
    std::unordered_map<std::string, std::int64_t> m_continuation;
    const icu::Normalizer2* m_nfd = nullptr;
};

} // namespace

Result<std::unique_ptr<Tokenizer>> makeWordPieceTokenizer(TokenizerVocab vocab, std::string origin)
{
    auto t = std::make_unique<WordPieceTokenizer>(std::move(vocab), std::move(origin));
    DAY0_TRY(t->init());
    return std::unique_ptr<Tokenizer>(std::move(t));
}

} // namespace day0::tokenizer::detail
