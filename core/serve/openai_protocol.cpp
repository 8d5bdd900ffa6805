#include "serve/openai_protocol.h"

#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace day0::serve {

nlohmann::json ApiError::body() const
{
    const auto orNull = [](const std::string& s) {
        return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
    };
    return { { "error",
        { { "message", message }, { "type", type }, { "param", orNull(param) },
            { "code", orNull(code) } } } };
}

std::string dumpJsonSafe(const nlohmann::json& j)
{
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

ApiError bad(std::string param, std::string message, std::string code = {})
{
    ApiError e;
    e.param = std::move(param);
    e.message = std::move(message);
    e.code = std::move(code);
    return e;
}

const char* typeName(const nlohmann::json& v) { return v.type_name(); }

/// An integer field (JSON booleans and floats are not integers).
std::variant<std::int64_t, ApiError> integerField(const nlohmann::json& v, const std::string& name)
{
    if (!v.is_number_integer()) {
        return bad(name, fmt::format("'{}' must be an integer, got {}", name, typeName(v)));
    }
    return v.get<std::int64_t>();
}

std::variant<std::vector<std::int64_t>, ApiError> promptIds(
    const nlohmann::json& prompt, const ServedModel& model)
{
    std::vector<std::int64_t> ids;
    if (prompt.is_string()) {
        if (model.tokenizer == nullptr) {
            return bad("prompt",
                fmt::format("model '{}' has no tokenizer (tokenizer.json); send the prompt as an "
                            "array of token ids",
                    model.name));
        }
        auto encoded = model.tokenizer->encode(prompt.get<std::string>(), true);
        if (!encoded) {
            return bad("prompt", "the prompt cannot be tokenized: " + encoded.error().message);
        }
        ids = std::move(*encoded);
    } else if (prompt.is_array()) {
        for (std::size_t i = 0; i < prompt.size(); ++i) {
            const auto& item = prompt[i];
            if (item.is_string() || item.is_array()) {
                return bad("prompt",
                    "a batch of prompts in one request is not supported; send one request per "
                    "prompt");
            }
            if (!item.is_number_integer()) {
                return bad("prompt",
                    fmt::format(
                        "prompt[{}] must be an integer token id, got {}", i, typeName(item)));
            }
            const auto id = item.get<std::int64_t>();
            if (id < 0 || id >= model.vocabSize) {
                return bad("prompt",
                    fmt::format("prompt[{}] = {} is not a token id of model '{}' (0..{})", i, id,
                        model.name, model.vocabSize - 1));
            }
            ids.push_back(id);
        }
    } else {
        return bad("prompt",
            fmt::format(
                "'prompt' must be a string or an array of token ids, got {}", typeName(prompt)));
    }
    if (ids.empty()) {
        return bad("prompt", "the prompt is empty");
    }
    return ids;
}

/// A field day0 serve accepts only at the value that means "off"; anything else is refused by
/// name (never silently ignored).
std::optional<ApiError> onlyDefault(const nlohmann::json& body, const std::string& name,
    const nlohmann::json& neutral, const std::string& why)
{
    if (!body.contains(name) || body[name].is_null()) {
        return std::nullopt;
    }
    const auto& v = body[name];
    const bool same = v.is_number() && neutral.is_number()
        ? v.get<double>() == neutral.get<double>()
        : v == neutral;
    if (same) {
        return std::nullopt;
    }
    return bad(name, fmt::format("'{}' = {} is not supported: {}", name, v.dump(), why),
        "unsupported_parameter");
}

} // namespace

std::variant<CompletionParams, ApiError> parseCompletionRequest(
    const std::string& body, const ServedModel& model)
{
    const auto json = nlohmann::json::parse(body, nullptr, false);
    if (json.is_discarded()) {
        return bad({}, "the request body is not valid JSON", "invalid_json");
    }
    if (!json.is_object()) {
        return bad(
            {}, fmt::format("the request body must be a JSON object, got {}", typeName(json)));
    }
    static constexpr std::array<std::string_view, 17> kKnown = { "model", "prompt", "max_tokens",
        "stream", "stream_options", "logprobs", "temperature", "top_p", "n", "best_of",
        "presence_penalty", "frequency_penalty", "seed", "echo", "ignore_eos", "user", "stop" };
    for (const auto& [key, value] : json.items()) {
        if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
            return bad(
                key, fmt::format("unsupported parameter '{}'", key), "unsupported_parameter");
        }
    }
    if (!json.contains("model") || !json["model"].is_string()) {
        return bad("model", "'model' is required and must be a string");
    }
    if (json["model"].get<std::string>() != model.name) {
        ApiError e = bad("model",
            fmt::format("the model '{}' does not exist; this server serves '{}'",
                json["model"].get<std::string>(), model.name),
            "model_not_found");
        e.status = 404;
        e.type = "NotFoundError";
        return e;
    }
    for (const auto& [name, neutral, why] :
        std::array<std::tuple<const char*, nlohmann::json, const char*>, 8> {
            { { "temperature", 0, "day0 serve decodes greedily (temperature 0)" },
                { "top_p", 1, "day0 serve decodes greedily" },
                { "n", 1, "one completion per request" },
                { "best_of", 1, "one completion per request" },
                { "presence_penalty", 0, "no penalties are applied" },
                { "frequency_penalty", 0, "no penalties are applied" },
                { "echo", false, "the prompt is not echoed" },
                { "stop", nlohmann::json::array(),
                    "stop strings are not supported yet (#23)" } } }) {
        if (auto refused = onlyDefault(json, name, neutral, why)) {
            return *refused;
        }
    }
    // `seed` and `user` are accepted: greedy decoding needs no seed, and the user is only a tag.
    if (json.contains("seed") && !json["seed"].is_null() && !json["seed"].is_number_integer()) {
        return bad(
            "seed", fmt::format("'seed' must be an integer, got {}", typeName(json["seed"])));
    }
    if (json.contains("user") && !json["user"].is_string()) {
        return bad("user", fmt::format("'user' must be a string, got {}", typeName(json["user"])));
    }
    if (!json.contains("prompt")) {
        return bad("prompt", "'prompt' is required");
    }
    auto ids = promptIds(json["prompt"], model);
    if (auto* e = std::get_if<ApiError>(&ids)) {
        return *e;
    }
    CompletionParams p;
    p.generation.prompt = std::move(std::get<0>(ids));
    const auto promptLength = std::int64_t(p.generation.prompt.size());
    if (promptLength >= model.contextLimit) {
        return bad("prompt",
            fmt::format("the prompt has {} tokens; model '{}' fits {} tokens per request, "
                        "prompt and completion together",
                promptLength, model.name, model.contextLimit),
            "context_length_exceeded");
    }
    if (json.contains("max_tokens") && !json["max_tokens"].is_null()) {
        auto max = integerField(json["max_tokens"], "max_tokens");
        if (auto* e = std::get_if<ApiError>(&max)) {
            return *e;
        }
        p.generation.maxTokens = std::get<0>(max);
        if (p.generation.maxTokens < 1) {
            return bad("max_tokens",
                fmt::format("'max_tokens' must be at least 1, got {}", p.generation.maxTokens));
        }
        if (promptLength + p.generation.maxTokens > model.contextLimit) {
            return bad("max_tokens",
                fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceed the {} tokens "
                            "model '{}' fits per request",
                    promptLength, p.generation.maxTokens, model.contextLimit, model.name),
                "context_length_exceeded");
        }
    } else {
        // The OpenAI completions default, cut to what fits.
        p.generation.maxTokens = std::min<std::int64_t>(16, model.contextLimit - promptLength);
    }
    if (json.contains("stream") && !json["stream"].is_null()) {
        if (!json["stream"].is_boolean()) {
            return bad("stream",
                fmt::format("'stream' must be a boolean, got {}", typeName(json["stream"])));
        }
        p.stream = json["stream"].get<bool>();
    }
    if (json.contains("stream_options") && !json["stream_options"].is_null()) {
        const auto& o = json["stream_options"];
        if (!p.stream) {
            return bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
        }
        if (!o.is_object()) {
            return bad("stream_options",
                fmt::format("'stream_options' must be an object, got {}", typeName(o)));
        }
        for (const auto& [key, value] : o.items()) {
            if (key != "include_usage") {
                return bad("stream_options." + key,
                    fmt::format("unsupported stream option '{}'", key), "unsupported_parameter");
            }
            if (!value.is_boolean()) {
                return bad("stream_options.include_usage",
                    fmt::format("'include_usage' must be a boolean, got {}", typeName(value)));
            }
            p.includeUsage = value.get<bool>();
        }
    }
    if (json.contains("logprobs") && !json["logprobs"].is_null()) {
        auto k = integerField(json["logprobs"], "logprobs");
        if (auto* e = std::get_if<ApiError>(&k)) {
            return *e;
        }
        const std::int64_t n = std::get<0>(k);
        if (n < 0 || n > 20) {
            return bad("logprobs", fmt::format("'logprobs' must be 0..20, got {}", n));
        }
        p.generation.topLogprobs = int(n);
    }
    if (json.contains("ignore_eos") && !json["ignore_eos"].is_null()) {
        if (!json["ignore_eos"].is_boolean()) {
            return bad("ignore_eos",
                fmt::format(
                    "'ignore_eos' must be a boolean, got {}", typeName(json["ignore_eos"])));
        }
        p.generation.ignoreEos = json["ignore_eos"].get<bool>();
    }
    return p;
}

namespace {

/// Length of the longest prefix of `s` that does not end inside a UTF-8 character.
std::size_t completeUtf8Prefix(const std::string& s)
{
    std::size_t end = s.size();
    // Walk back over at most three continuation bytes to the lead byte of the last character.
    std::size_t i = end;
    int continuation = 0;
    while (i > 0 && continuation < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
        --i;
        ++continuation;
    }
    if (i == 0) {
        return continuation > 0 ? 0 : end;
    }
    const auto lead = static_cast<unsigned char>(s[i - 1]);
    int need = 0;
    if ((lead & 0x80) == 0) {
        need = 0;
    } else if ((lead & 0xE0) == 0xC0) {
        need = 1;
    } else if ((lead & 0xF0) == 0xE0) {
        need = 2;
    } else if ((lead & 0xF8) == 0xF0) {
        need = 3;
    } else {
        return end; // not UTF-8 at all: nothing to wait for
    }
    return continuation < need ? i - 1 : end;
}

} // namespace

std::string TextStreamer::add(std::int64_t token)
{
    if (m_tokenizer == nullptr) {
        return {};
    }
    m_ids.push_back(token);
    const std::string all = m_tokenizer->decode(m_ids);
    const std::size_t ready = completeUtf8Prefix(all);
    if (ready <= m_emitted) {
        return {};
    }
    std::string piece = all.substr(m_emitted, ready - m_emitted);
    m_emitted = ready;
    return piece;
}

std::string TextStreamer::flush()
{
    if (m_tokenizer == nullptr) {
        return {};
    }
    const std::string all = m_tokenizer->decode(m_ids);
    std::string rest = all.size() > m_emitted ? all.substr(m_emitted) : std::string();
    m_emitted = all.size();
    return rest;
}

std::string tokenText(const tokenizer::Tokenizer* tokenizer, std::int64_t token)
{
    if (tokenizer == nullptr) {
        return fmt::format("token_id:{}", token);
    }
    const std::int64_t one[] = { token };
    return tokenizer->decode(one);
}

} // namespace day0::serve
