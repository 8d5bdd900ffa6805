#include "serve/chat_protocol.h"

#include "serve/chat_template.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <limits>

namespace day0::serve {

namespace {

/// The messages as the template sees them, read from the body again with its keys in order
/// (tojson of a tool call's arguments keeps them as the client sent them).
std::variant<jinja::Json, ApiError> templateMessages(const std::string& body)
{
    const auto ordered = jinja::Json::parse(body, nullptr, false);
    if (!ordered.contains("messages")) {
        return invalidRequest("messages", "'messages' is required");
    }
    jinja::Json messages = ordered["messages"];
    if (!messages.is_array() || messages.empty()) {
        return invalidRequest("messages", "'messages' must be a non-empty array of messages");
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
        auto& m = messages[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) {
            return invalidRequest(
                "messages", fmt::format("{} must be an object, got {}", where, m.type_name()));
        }
        if (!m.contains("role") || !m["role"].is_string()) {
            return invalidRequest("messages", fmt::format("{} needs a string 'role'", where));
        }
        if (!m.contains("content")) {
            continue;
        }
        auto& content = m["content"];
        if (content.is_string() || content.is_null()) {
            continue;
        }
        if (!content.is_array()) {
            return invalidRequest("messages",
                fmt::format("{}.content must be a string, null or a list of parts, got {}", where,
                    content.type_name()));
        }
        std::string text;
        for (std::size_t k = 0; k < content.size(); ++k) {
            const auto& part = content[k];
            const std::string type
                = part.is_object() && part.contains("type") && part["type"].is_string()
                ? part["type"].get<std::string>()
                : std::string();
            if (type != "text" || !part.contains("text") || !part["text"].is_string()) {
                return invalidRequest("messages",
                    fmt::format("{}.content[{}]: only {{\"type\": \"text\", \"text\": ...}} parts "
                                "are supported, got type '{}'",
                        where, k, type));
            }
            text += (k > 0 ? "\n" : "") + part["text"].get<std::string>();
        }
        content = text;
    }
    return messages;
}

} // namespace

std::variant<CompletionParams, ApiError> parseChatRequest(
    const std::string& body, const ServedModel& model, const ChatTemplate& chat)
{
    static constexpr std::array<std::string_view, 21> kKnown = { "model", "messages", "max_tokens",
        "max_completion_tokens", "stream", "stream_options", "temperature", "top_p", "top_k", "n",
        "presence_penalty", "frequency_penalty", "seed", "stop", "stop_token_ids", "ignore_eos",
        "user", "logprobs", "top_logprobs", "add_generation_prompt", "logit_bias" };
    auto envelope = parseEnvelope(body, model, kKnown, {});
    if (auto* e = std::get_if<ApiError>(&envelope)) {
        return *e;
    }
    const auto& json = std::get<nlohmann::json>(envelope);
    if (model.tokenizer == nullptr) {
        return invalidRequest("messages",
            fmt::format("model '{}' has no tokenizer (tokenizer.json) to turn the rendered chat "
                        "into tokens",
                model.name));
    }
    auto messages = templateMessages(body);
    if (auto* e = std::get_if<ApiError>(&messages)) {
        return *e;
    }
    bool addGenerationPrompt = true;
    if (json.contains("add_generation_prompt") && !json["add_generation_prompt"].is_null()) {
        if (!json["add_generation_prompt"].is_boolean()) {
            return invalidRequest(
                "add_generation_prompt", "'add_generation_prompt' must be a boolean");
        }
        addGenerationPrompt = json["add_generation_prompt"].get<bool>();
    }
    auto prompt = chat.render(std::get<jinja::Json>(messages), addGenerationPrompt);
    if (!prompt) {
        return invalidRequest("messages",
            fmt::format("the chat template of model '{}' cannot render these messages: {}",
                model.name, prompt.error().message),
            "chat_template_error");
    }
    auto ids = model.tokenizer->encode(*prompt, false, true);
    if (!ids) {
        return invalidRequest(
            "messages", "the rendered chat cannot be tokenized: " + ids.error().message);
    }
    if (ids->empty()) {
        return invalidRequest("messages", "the chat template rendered an empty prompt");
    }
    CompletionParams p;
    p.generation.prompt = std::move(*ids);
    static constexpr std::array<const char*, 2> kMax = { "max_tokens", "max_completion_tokens" };
    if (auto e
        = parseGenerationFields(json, model, kMax, std::numeric_limits<std::int64_t>::max(), p)) {
        return *e;
    }
    bool logprobs = false;
    if (json.contains("logprobs") && !json["logprobs"].is_null()) {
        if (!json["logprobs"].is_boolean()) {
            return invalidRequest("logprobs", "'logprobs' must be a boolean in chat completions");
        }
        logprobs = json["logprobs"].get<bool>();
    }
    if (json.contains("top_logprobs") && !json["top_logprobs"].is_null()) {
        const auto& k = json["top_logprobs"];
        if (!k.is_number_integer() || k.get<std::int64_t>() < 0 || k.get<std::int64_t>() > 20) {
            return invalidRequest(
                "top_logprobs", fmt::format("'top_logprobs' must be 0..20, got {}", k.dump()));
        }
        if (!logprobs) {
            return invalidRequest("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
        }
        p.generation.topLogprobs = int(k.get<std::int64_t>());
    } else if (logprobs) {
        p.generation.topLogprobs = 0;
    }
    return p;
}

} // namespace day0::serve
