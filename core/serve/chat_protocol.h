#pragma once

#include "serve/openai_protocol.h"

#include <string>
#include <variant>

namespace day0::serve {

class ChatTemplate;

/// Validates a /v1/chat/completions body and makes its prompt: `messages` (each with a string
/// `role`; `content` a string, null, or a list of {"type": "text", "text"} parts, joined with
/// "\n" as vLLM does; other keys passed to the template as they are) rendered through `chat`
/// with `add_generation_prompt` (vLLM's extension, default true), then tokenized without added
/// special tokens (the template writes them), as vLLM does. The sampling, stop and stream
/// fields are those of /v1/completions; max_tokens or max_completion_tokens default to what
/// fits in the context; logprobs is a boolean with top_logprobs 0..20. Fields not honoured
/// (tools, tool_choice, response_format, ...) are refused by name.
std::variant<CompletionParams, ApiError> parseChatRequest(
    const std::string& body, const ServedModel& model, const ChatTemplate& chat);

} // namespace day0::serve
