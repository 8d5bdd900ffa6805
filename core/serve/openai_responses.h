#pragma once

#include "serve/scheduler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::tokenizer {
class Tokenizer;
}

namespace day0::serve {

/// Which OpenAI API a response follows.
enum class Endpoint {
    Completions, ///< /v1/completions: "text_completion", choices[].text, legacy logprobs
    ChatCompletions, ///< /v1/chat/completions: "chat.completion(.chunk)", message / delta
};

/// What shapes the JSON of one request's response.
struct ResponseShape {
    Endpoint endpoint = Endpoint::Completions;
    std::string id; ///< "cmpl-day0-N" / "chatcmpl-day0-N"
    std::int64_t created = 0; ///< Unix seconds
    std::string model;
    const tokenizer::Tokenizer* tokenizer = nullptr; ///< for the logprobs' token texts
    int topLogprobs = -1; ///< -1: no logprobs; else as GenerationRequest::topLogprobs
};

/// "stop" or "length" (what the OpenAI API calls finish_reason).
const char* finishReason(Finish why);

/// The whole (not streamed) response: one choice with every token's text, finish_reason,
/// vLLM's stop_reason, the token ids (a day0/vLLM extension) and the usage.
nlohmann::json completeResponse(const ResponseShape& shape, const std::vector<TokenEvent>& events,
    Finish why, const StopReason& reason, std::int64_t promptTokens);

/// The chunk that opens a chat stream (delta {"role": "assistant", "content": ""}); none for
/// completions.
std::optional<nlohmann::json> openingChunk(const ResponseShape& shape);

/// The chunk of one generated token; with `last`, also the finish_reason and stop_reason.
/// `textOffset` (completions logprobs' text_offset) advances by the token's text.
nlohmann::json tokenChunk(const ResponseShape& shape, const TokenEvent& event,
    const std::optional<std::pair<Finish, StopReason>>& last, std::int64_t& textOffset);

/// A chunk that only ends the choice (when the end arrives after the last token).
nlohmann::json finishChunk(const ResponseShape& shape, Finish why, const StopReason& reason);

/// The stream's last data chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usageChunk(
    const ResponseShape& shape, std::int64_t promptTokens, std::int64_t completionTokens);

} // namespace day0::serve
