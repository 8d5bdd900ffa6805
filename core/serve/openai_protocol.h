#pragma once

#include "serve/scheduler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace day0::tokenizer {
class Tokenizer;
}

namespace day0::serve {

class ChatTemplate;

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

/// A 400 invalid_request_error about request field `param` (empty: none), with its code.
ApiError invalidRequest(std::string param, std::string message, std::string code = {});

/// What the server serves, for request validation.
struct ServedModel {
    std::string name; ///< the model id clients send (`--served-model-name`, else the folder name)
    std::int64_t vocabSize = 0;
    std::int64_t contextLimit = 0; ///< prompt + max_tokens of one request, at most
    const tokenizer::Tokenizer* tokenizer = nullptr; ///< null: token-id prompts only
    /// The chat template (chat_template.h); null: /v1/chat/completions is refused with
    /// ServerOptions::chatRefusal.
    const ChatTemplate* chatTemplate = nullptr;
};

/// A validated /v1/completions or /v1/chat/completions request.
struct CompletionParams {
    GenerationRequest generation;
    /// OpenAI's n: choices generated for the prompt, each its own sequence. Choice i's sampler
    /// is seeded with seed + i (mod 2^64) when the request has a seed, else from
    /// std::random_device; greedy choices are all the same.
    int n = 1;
    bool stream = false;
    bool includeUsage = false; ///< stream_options.include_usage: a last chunk with the usage
};

/// The most choices (`n`) one request may ask.
inline constexpr std::int64_t kMaxChoices = 16;

/// Reads temperature (a number in [0, 2]; absent: 1, the OpenAI default), top_p (in (0, 1]),
/// top_k (an integer; -1 and 0 are off), presence_penalty and frequency_penalty (in [-2, 2])
/// and seed (any integer) of a request into `out`.
std::optional<ApiError> parseSampling(const nlohmann::json& json, SamplingParams& out);

/// Reads `stop` (a string or up to 4 non-empty strings; needs the model's tokenizer) and
/// `stop_token_ids` (vLLM's extension) into `out`, and points `out` at the model's tokenizer.
std::optional<ApiError> parseStops(
    const nlohmann::json& json, const ServedModel& model, GenerationRequest& out);

/// A field accepted only at the value that means "off"; any other is refused by name.
struct Refusal {
    const char* field;
    nlohmann::json neutral;
    const char* why;
};

/// Parses a request body as a JSON object and checks what every endpoint checks: each key is in
/// `known` (else a 400 naming it), `model` names the served model (else a 404), each of
/// `refusals` is off, `user` is a string.
std::variant<nlohmann::json, ApiError> parseEnvelope(const std::string& body,
    const ServedModel& model, std::span<const std::string_view> known,
    std::span<const Refusal> refusals);

/// Reads what both endpoints share once `p.generation.prompt` is set: the sampling fields,
/// max_tokens under any of `maxKeys` (absent: `defaultMax`, cut to what fits), stream,
/// stream_options, stop, stop_token_ids, ignore_eos, logit_bias, n.
std::optional<ApiError> parseGenerationFields(const nlohmann::json& json, const ServedModel& model,
    std::span<const char* const> maxKeys, std::int64_t defaultMax, CompletionParams& p);

/// Validates a /v1/completions body against the OpenAI completions API and what day0 serve
/// honours: every field it does not honour (best_of other than n, echo, unknown fields) is refused
/// by name rather than ignored. A text prompt goes through the model's tokenizer (with its BOS, as
/// `day0 run --prompt`); a token-id prompt is used as given.
std::variant<CompletionParams, ApiError> parseCompletionRequest(
    const std::string& body, const ServedModel& model);

/// The token's text for logprobs: its decoded text, or "token_id:N" without a tokenizer (vLLM's
/// spelling with --return-tokens-as-token-ids).
std::string tokenText(const tokenizer::Tokenizer* tokenizer, std::int64_t token);

/// JSON that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dumpJsonSafe(const nlohmann::json& j);

} // namespace day0::serve
