#include "serve/openai_responses.h"

#include "serve/openai_protocol.h"

namespace day0::serve {

namespace {

using nlohmann::json;

json usageJson(std::int64_t prompt, std::int64_t completion)
{
    return { { "prompt_tokens", prompt }, { "completion_tokens", completion },
        { "total_tokens", prompt + completion } };
}

json stopReasonJson(const StopReason& reason)
{
    if (const auto* text = std::get_if<std::string>(&reason)) {
        return *text;
    }
    if (const auto* id = std::get_if<std::int64_t>(&reason)) {
        return *id;
    }
    return nullptr;
}

/// The legacy completions `logprobs` object of some tokens: tokens, token_logprobs,
/// top_logprobs (a map of token text to log-probability), text_offset.
json completionLogprobs(const std::vector<TokenEvent>& events,
    const tokenizer::Tokenizer* tokenizer, std::int64_t offset)
{
    json tokens = json::array();
    json values = json::array();
    json tops = json::array();
    json offsets = json::array();
    for (const auto& e : events) {
        const std::string text = tokenText(tokenizer, e.token);
        tokens.push_back(text);
        values.push_back(e.logprob);
        json top = json::object();
        for (const auto& [id, lp] : e.top) {
            top[tokenText(tokenizer, id)] = lp;
        }
        tops.push_back(top);
        offsets.push_back(offset);
        offset += std::int64_t(text.size());
    }
    return { { "tokens", tokens }, { "token_logprobs", values }, { "top_logprobs", tops },
        { "text_offset", offsets } };
}

json bytesOf(const std::string& text)
{
    json bytes = json::array();
    for (const char c : text) {
        bytes.push_back(int(static_cast<unsigned char>(c)));
    }
    return bytes;
}

/// The chat `logprobs` object: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
json chatLogprobs(const std::vector<TokenEvent>& events, const tokenizer::Tokenizer* tokenizer)
{
    json content = json::array();
    for (const auto& e : events) {
        const std::string text = tokenText(tokenizer, e.token);
        json top = json::array();
        for (const auto& [id, lp] : e.top) {
            const std::string t = tokenText(tokenizer, id);
            top.push_back({ { "token", t }, { "logprob", lp }, { "bytes", bytesOf(t) } });
        }
        content.push_back({ { "token", text }, { "logprob", e.logprob }, { "bytes", bytesOf(text) },
            { "top_logprobs", top } });
    }
    return { { "content", content } };
}

json logprobsOf(
    const ResponseShape& shape, const std::vector<TokenEvent>& events, std::int64_t textOffset)
{
    if (shape.topLogprobs < 0) {
        return nullptr;
    }
    return shape.endpoint == Endpoint::Completions
        ? completionLogprobs(events, shape.tokenizer, textOffset)
        : chatLogprobs(events, shape.tokenizer);
}

json envelope(const ResponseShape& shape, bool chunk, json choices)
{
    const char* object = shape.endpoint == Endpoint::Completions
        ? "text_completion"
        : (chunk ? "chat.completion.chunk" : "chat.completion");
    return { { "id", shape.id }, { "object", object }, { "created", shape.created },
        { "model", shape.model }, { "choices", std::move(choices) } };
}

} // namespace

const char* finishReason(Finish why) { return why == Finish::Stop ? "stop" : "length"; }

json completeResponse(const ResponseShape& shape, const std::vector<TokenEvent>& events, Finish why,
    const StopReason& reason, std::int64_t promptTokens)
{
    std::string text;
    std::vector<std::int64_t> ids;
    for (const auto& e : events) {
        text += e.text;
        ids.push_back(e.token);
    }
    json choice = { { "index", 0 }, { "finish_reason", finishReason(why) },
        { "stop_reason", stopReasonJson(reason) }, { "token_ids", ids },
        { "logprobs", logprobsOf(shape, events, 0) } };
    if (shape.endpoint == Endpoint::Completions) {
        choice["text"] = text;
    } else {
        choice["message"] = { { "role", "assistant" }, { "content", text } };
    }
    json body = envelope(shape, false, json::array({ choice }));
    body["usage"] = usageJson(promptTokens, std::int64_t(events.size()));
    return body;
}

std::optional<json> openingChunk(const ResponseShape& shape)
{
    if (shape.endpoint == Endpoint::Completions) {
        return std::nullopt;
    }
    return envelope(shape, true,
        json::array({ { { "index", 0 }, { "delta", { { "role", "assistant" }, { "content", "" } } },
            { "logprobs", nullptr }, { "finish_reason", nullptr } } }));
}

json tokenChunk(const ResponseShape& shape, const TokenEvent& event,
    const std::optional<std::pair<Finish, StopReason>>& last, std::int64_t& textOffset)
{
    json choice = { { "index", 0 }, { "token_ids", { event.token } },
        { "logprobs", logprobsOf(shape, { event }, textOffset) },
        { "finish_reason", last ? json(finishReason(last->first)) : json() } };
    if (last) {
        choice["stop_reason"] = stopReasonJson(last->second);
    }
    if (shape.endpoint == Endpoint::Completions) {
        choice["text"] = event.text;
    } else {
        choice["delta"] = { { "content", event.text } };
    }
    textOffset += std::int64_t(event.text.size());
    return envelope(shape, true, json::array({ choice }));
}

json finishChunk(const ResponseShape& shape, Finish why, const StopReason& reason)
{
    json choice = { { "index", 0 }, { "token_ids", json::array() }, { "logprobs", nullptr },
        { "finish_reason", finishReason(why) }, { "stop_reason", stopReasonJson(reason) } };
    if (shape.endpoint == Endpoint::Completions) {
        choice["text"] = "";
    } else {
        choice["delta"] = json::object();
    }
    return envelope(shape, true, json::array({ choice }));
}

json usageChunk(
    const ResponseShape& shape, std::int64_t promptTokens, std::int64_t completionTokens)
{
    json chunk = envelope(shape, true, json::array());
    chunk["usage"] = usageJson(promptTokens, completionTokens);
    return chunk;
}

} // namespace day0::serve
