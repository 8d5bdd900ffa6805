#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace day0::tokenizer {
class Tokenizer;
}

namespace day0::serve {

/// Why a stop condition ended a sequence, as vLLM's `stop_reason`: none (an end-of-sequence
/// token), the stop string matched, or the stop token id drawn.
using StopReason = std::variant<std::monostate, std::string, std::int64_t>;

/// The text of one sequence's generated tokens, released piece by piece, and its stop
/// conditions (OpenAI's `stop` strings, vLLM's `stop_token_ids`, the model's end-of-sequence
/// ids):
/// - a token in the stop ids or the end-of-sequence ids ends the sequence; its own text is not
///   part of the output (vLLM's default), its id is;
/// - a stop string is looked for in the detokenised text of all generated tokens, so it is
///   found across token boundaries; the output is cut just before it;
/// - text is released only up to complete UTF-8 characters and never including a tail that
///   might be the start of a stop string, until the next tokens settle it;
/// - at the end by length, flush() releases what was held back.
/// Detokenising decodes all the sequence's ids each time (a byte-level token may end inside a
/// character, and a stop string may span tokens), which costs O(n) per token. Thread-compatible.
class StopChecker {
public:
    /// `tokenizer` may be null: then no text is produced and `stops` must be empty.
    StopChecker(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops,
        std::set<std::int64_t> stopIds);

    struct Step {
        std::string text; ///< what this token releases (possibly empty)
        bool stopped = false;
        StopReason reason;
    };
    /// Takes the next generated token.
    Step add(std::int64_t token);
    /// What is left at the end without a stop (held-back text, an incomplete character as is).
    std::string flush();

private:
    const tokenizer::Tokenizer* m_tokenizer;
    std::vector<std::string> m_stops;
    std::set<std::int64_t> m_stopIds;
    std::vector<std::int64_t> m_ids; ///< the tokens whose text is output
    std::string m_text; ///< their detokenised text
    std::size_t m_released = 0; ///< bytes of m_text released
};

/// Length of the longest prefix of `s` that does not end inside a UTF-8 character.
std::size_t completeUtf8Prefix(const std::string& s);

} // namespace day0::serve
