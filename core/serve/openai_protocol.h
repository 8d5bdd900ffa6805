#pragma once

#include "serve/scheduler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>

namespace day0::tokenizer {
class Tokenizer;
}

namespace day0::serve {

/// An error as the OpenAI API returns it: an HTTP status and the body
/// {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param; ///< the offending request field; empty: null
    std::string code; ///< empty: null

    [[nodiscard]] nlohmann::json body() const;
};

/// What the server serves, for request validation.
struct ServedModel {
    std::string name; ///< the model id clients send (`--served-model-name`, else the folder name)
    std::int64_t vocabSize = 0;
    std::int64_t contextLimit = 0; ///< prompt + max_tokens of one request, at most
    const tokenizer::Tokenizer* tokenizer = nullptr; ///< null: token-id prompts only
};

/// A validated /v1/completions request.
struct CompletionParams {
    GenerationRequest generation;
    bool stream = false;
    bool includeUsage = false; ///< stream_options.include_usage: a last chunk with the usage
};

/// Validates a /v1/completions body against the OpenAI completions API and what day0 serve
/// decodes (greedy only): every field it does not honour is refused by name rather than
/// ignored. A text prompt goes through the model's tokenizer (with its BOS, as `day0 run
/// --prompt`); a token-id prompt is used as given.
std::variant<CompletionParams, ApiError> parseCompletionRequest(
    const std::string& body, const ServedModel& model);

/// Text pieces of a stream of generated tokens, emitted only up to complete UTF-8 characters
/// (a byte-level token may end inside one).
class TextStreamer {
public:
    explicit TextStreamer(const tokenizer::Tokenizer* tokenizer)
        : m_tokenizer(tokenizer)
    {
    }
    /// The text the tokens added so far add; empty without a tokenizer.
    std::string add(std::int64_t token);
    /// Whatever is left at the end (an incomplete character, kept as is).
    std::string flush();

private:
    const tokenizer::Tokenizer* m_tokenizer;
    std::vector<std::int64_t> m_ids;
    std::size_t m_emitted = 0;
};

/// The token's text for logprobs: its decoded text, or "token_id:N" without a tokenizer (vLLM's
/// spelling with --return-tokens-as-token-ids).
std::string tokenText(const tokenizer::Tokenizer* tokenizer, std::int64_t token);

/// JSON that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dumpJsonSafe(const nlohmann::json& j);

} // namespace day0::serve
