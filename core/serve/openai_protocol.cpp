#include "serve/openai_protocol.h"

#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace day0::serve {

ApiError invalidRequest(std::string param, std::string message, std::string code)
{
    ApiError e;
    e.param = std::move(param);
    e.message = std::move(message);
    e.code = std::move(code);
    return e;
}

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

const char* typeName(const nlohmann::json& v) { return v.type_name(); }

/// An integer field (JSON booleans and floats are not integers).
std::variant<std::int64_t, ApiError> integerField(const nlohmann::json& v, const std::string& name)
{
    if (!v.is_number_integer()) {
        return invalidRequest(
            name, fmt::format("'{}' must be an integer, got {}", name, typeName(v)));
    }
    return v.get<std::int64_t>();
}

std::variant<std::vector<std::int64_t>, ApiError> promptIds(
    const nlohmann::json& prompt, const ServedModel& model)
{
    std::vector<std::int64_t> ids;
    if (prompt.is_string()) {
        if (model.tokenizer == nullptr) {
            return invalidRequest("prompt",
                fmt::format("model '{}' has no tokenizer (tokenizer.json); send the prompt as an "
                            "array of token ids",
                    model.name));
        }
        auto encoded = model.tokenizer->encode(prompt.get<std::string>(), true);
        if (!encoded) {
            return invalidRequest(
                "prompt", "the prompt cannot be tokenized: " + encoded.error().message);
        }
        ids = std::move(*encoded);
    } else if (prompt.is_array()) {
        for (std::size_t i = 0; i < prompt.size(); ++i) {
            const auto& item = prompt[i];
            if (item.is_string() || item.is_array()) {
                return invalidRequest("prompt",
                    "a batch of prompts in one request is not supported; send one request per "
                    "prompt");
            }
            if (!item.is_number_integer()) {
                return invalidRequest("prompt",
                    fmt::format(
                        "prompt[{}] must be an integer token id, got {}", i, typeName(item)));
            }
            const auto id = item.get<std::int64_t>();
            if (id < 0 || id >= model.vocabSize) {
                return invalidRequest("prompt",
                    fmt::format("prompt[{}] = {} is not a token id of model '{}' (0..{})", i, id,
                        model.name, model.vocabSize - 1));
            }
            ids.push_back(id);
        }
    } else {
        return invalidRequest("prompt",
            fmt::format(
                "'prompt' must be a string or an array of token ids, got {}", typeName(prompt)));
    }
    if (ids.empty()) {
        return invalidRequest("prompt", "the prompt is empty");
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
    return invalidRequest(name, fmt::format("'{}' = {} is not supported: {}", name, v.dump(), why),
        "unsupported_parameter");
}

/// A number field in [lo, hi] (hi inclusive; lo inclusive unless `loOpen`).
std::variant<double, ApiError> numberIn(
    const nlohmann::json& v, const std::string& name, double lo, double hi, bool loOpen)
{
    if (!v.is_number()) {
        return invalidRequest(
            name, fmt::format("'{}' must be a number, got {}", name, typeName(v)));
    }
    const double x = v.get<double>();
    if (!std::isfinite(x) || x > hi || x < lo || (loOpen && x == lo)) {
        return invalidRequest(name,
            fmt::format(
                "'{}' must be in {}{}, {}], got {}", name, loOpen ? "(" : "[", lo, hi, v.dump()));
    }
    return x;
}

/// OpenAI's logit_bias: {"token id": bias in [-100, 100], ...}.
std::optional<ApiError> parseLogitBias(
    const nlohmann::json& json, const ServedModel& model, SamplingParams& out)
{
    if (!json.contains("logit_bias") || json["logit_bias"].is_null()) {
        return std::nullopt;
    }
    const auto& v = json["logit_bias"];
    if (!v.is_object()) {
        return invalidRequest("logit_bias",
            fmt::format("'logit_bias' must be an object of token id -> bias, got {}", typeName(v)));
    }
    for (const auto& [key, value] : v.items()) {
        std::int64_t id = -1;
        std::size_t used = 0;
        try {
            id = std::stoll(key, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != key.size() || id < 0 || id >= model.vocabSize) {
            return invalidRequest("logit_bias",
                fmt::format("logit_bias key '{}' is not a token id of model '{}' (0..{})", key,
                    model.name, model.vocabSize - 1));
        }
        auto bias = numberIn(value, "logit_bias", -100.0, 100.0, false);
        if (auto* e = std::get_if<ApiError>(&bias)) {
            return *e;
        }
        out.logitBias[id] = std::get<double>(bias);
    }
    return std::nullopt;
}

} // namespace

std::optional<ApiError> parseSampling(const nlohmann::json& json, SamplingParams& out)
{
    const auto present
        = [&](const char* key) { return json.contains(key) && !json[key].is_null(); };
    if (present("temperature")) {
        auto t = numberIn(json["temperature"], "temperature", 0.0, 2.0, false);
        if (auto* e = std::get_if<ApiError>(&t)) {
            return *e;
        }
        out.temperature = std::get<double>(t);
    }
    if (present("top_p")) {
        auto p = numberIn(json["top_p"], "top_p", 0.0, 1.0, true);
        if (auto* e = std::get_if<ApiError>(&p)) {
            return *e;
        }
        out.topP = std::get<double>(p);
    }
    if (present("top_k")) {
        auto k = integerField(json["top_k"], "top_k");
        if (auto* e = std::get_if<ApiError>(&k)) {
            return *e;
        }
        const std::int64_t v = std::get<std::int64_t>(k);
        if (v < -1) {
            return invalidRequest("top_k",
                fmt::format("'top_k' must be -1 or 0 (off) or a positive count, got {}", v));
        }
        out.topK = std::max<std::int64_t>(v, 0);
    }
    for (const char* key : { "presence_penalty", "frequency_penalty" }) {
        if (!present(key)) {
            continue;
        }
        auto v = numberIn(json[key], key, -2.0, 2.0, false);
        if (auto* e = std::get_if<ApiError>(&v)) {
            return *e;
        }
        (key[0] == 'p' ? out.presencePenalty : out.frequencyPenalty) = std::get<double>(v);
    }
    if (present("seed")) {
        if (!json["seed"].is_number_integer()) {
            return invalidRequest(
                "seed", fmt::format("'seed' must be an integer, got {}", typeName(json["seed"])));
        }
        // Any 64-bit integer; a negative one seeds with its two's complement bits.
        out.seed = json["seed"].is_number_unsigned()
            ? json["seed"].get<std::uint64_t>()
            : std::uint64_t(json["seed"].get<std::int64_t>());
    }
    return std::nullopt;
}

std::optional<ApiError> parseStops(
    const nlohmann::json& json, const ServedModel& model, GenerationRequest& out)
{
    out.tokenizer = model.tokenizer;
    if (json.contains("stop") && !json["stop"].is_null()) {
        const auto& v = json["stop"];
        std::vector<std::string> stops;
        if (v.is_string()) {
            stops.push_back(v.get<std::string>());
        } else if (v.is_array()) {
            for (std::size_t i = 0; i < v.size(); ++i) {
                if (!v[i].is_string()) {
                    return invalidRequest("stop",
                        fmt::format("stop[{}] must be a string, got {}", i, typeName(v[i])));
                }
                stops.push_back(v[i].get<std::string>());
            }
        } else {
            return invalidRequest("stop",
                fmt::format("'stop' must be a string or an array of strings, got {}", typeName(v)));
        }
        if (stops.size() > 4) {
            return invalidRequest(
                "stop", fmt::format("'stop' holds {} strings; at most 4", stops.size()));
        }
        for (const auto& stop : stops) {
            if (stop.empty()) {
                return invalidRequest("stop", "a stop string must not be empty");
            }
        }
        if (!stops.empty() && model.tokenizer == nullptr) {
            return invalidRequest("stop",
                fmt::format("model '{}' has no tokenizer (tokenizer.json), so its output has no "
                            "text to match stop strings in; use 'stop_token_ids'",
                    model.name));
        }
        out.stop = std::move(stops);
    }
    if (json.contains("stop_token_ids") && !json["stop_token_ids"].is_null()) {
        const auto& v = json["stop_token_ids"];
        if (!v.is_array()) {
            return invalidRequest("stop_token_ids",
                fmt::format("'stop_token_ids' must be an array of token ids, got {}", typeName(v)));
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 0
                || v[i].get<std::int64_t>() >= model.vocabSize) {
                return invalidRequest("stop_token_ids",
                    fmt::format("stop_token_ids[{}] = {} is not a token id of model '{}' (0..{})",
                        i, v[i].dump(), model.name, model.vocabSize - 1));
            }
            out.stopTokenIds.insert(v[i].get<std::int64_t>());
        }
    }
    return std::nullopt;
}

std::variant<nlohmann::json, ApiError> parseEnvelope(const std::string& body,
    const ServedModel& model, std::span<const std::string_view> known,
    std::span<const Refusal> refusals)
{
    auto json = nlohmann::json::parse(body, nullptr, false);
    if (json.is_discarded()) {
        return invalidRequest({}, "the request body is not valid JSON", "invalid_json");
    }
    if (!json.is_object()) {
        return invalidRequest(
            {}, fmt::format("the request body must be a JSON object, got {}", typeName(json)));
    }
    for (const auto& [key, value] : json.items()) {
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            return invalidRequest(
                key, fmt::format("unsupported parameter '{}'", key), "unsupported_parameter");
        }
    }
    if (!json.contains("model") || !json["model"].is_string()) {
        return invalidRequest("model", "'model' is required and must be a string");
    }
    if (json["model"].get<std::string>() != model.name) {
        ApiError e = invalidRequest("model",
            fmt::format("the model '{}' does not exist; this server serves '{}'",
                json["model"].get<std::string>(), model.name),
            "model_not_found");
        e.status = 404;
        e.type = "NotFoundError";
        return e;
    }
    for (const auto& r : refusals) {
        if (auto refused = onlyDefault(json, r.field, r.neutral, r.why)) {
            return *refused;
        }
    }
    // `user` is accepted: it is only a tag.
    if (json.contains("user") && !json["user"].is_null() && !json["user"].is_string()) {
        return invalidRequest(
            "user", fmt::format("'user' must be a string, got {}", typeName(json["user"])));
    }
    return json;
}

std::optional<ApiError> parseGenerationFields(const nlohmann::json& json, const ServedModel& model,
    std::span<const char* const> maxKeys, std::int64_t defaultMax, CompletionParams& p)
{
    if (auto e = parseSampling(json, p.generation.sampling)) {
        return *e;
    }
    const auto promptLength = std::int64_t(p.generation.prompt.size());
    if (promptLength >= model.contextLimit) {
        return invalidRequest("prompt",
            fmt::format("the prompt has {} tokens; model '{}' fits {} tokens per request, "
                        "prompt and completion together",
                promptLength, model.name, model.contextLimit),
            "context_length_exceeded");
    }
    // The default, cut to what fits.
    p.generation.maxTokens = std::min<std::int64_t>(defaultMax, model.contextLimit - promptLength);
    for (const char* key : maxKeys) {
        if (!json.contains(key) || json[key].is_null()) {
            continue;
        }
        auto max = integerField(json[key], key);
        if (auto* e = std::get_if<ApiError>(&max)) {
            return *e;
        }
        p.generation.maxTokens = std::get<0>(max);
        if (p.generation.maxTokens < 1) {
            return invalidRequest(
                key, fmt::format("'{}' must be at least 1, got {}", key, p.generation.maxTokens));
        }
        if (promptLength + p.generation.maxTokens > model.contextLimit) {
            return invalidRequest(key,
                fmt::format("the prompt ({} tokens) plus {} ({}) exceed the {} tokens model '{}' "
                            "fits per request",
                    promptLength, key, p.generation.maxTokens, model.contextLimit, model.name),
                "context_length_exceeded");
        }
    }
    if (json.contains("stream") && !json["stream"].is_null()) {
        if (!json["stream"].is_boolean()) {
            return invalidRequest("stream",
                fmt::format("'stream' must be a boolean, got {}", typeName(json["stream"])));
        }
        p.stream = json["stream"].get<bool>();
    }
    if (json.contains("stream_options") && !json["stream_options"].is_null()) {
        const auto& o = json["stream_options"];
        if (!p.stream) {
            return invalidRequest(
                "stream_options", "'stream_options' is only allowed with \"stream\": true");
        }
        if (!o.is_object()) {
            return invalidRequest("stream_options",
                fmt::format("'stream_options' must be an object, got {}", typeName(o)));
        }
        for (const auto& [key, value] : o.items()) {
            if (key != "include_usage") {
                return invalidRequest("stream_options." + key,
                    fmt::format("unsupported stream option '{}'", key), "unsupported_parameter");
            }
            if (!value.is_boolean()) {
                return invalidRequest("stream_options.include_usage",
                    fmt::format("'include_usage' must be a boolean, got {}", typeName(value)));
            }
            p.includeUsage = value.get<bool>();
        }
    }
    if (auto e = parseStops(json, model, p.generation)) {
        return *e;
    }
    if (auto e = parseLogitBias(json, model, p.generation.sampling)) {
        return *e;
    }
    if (json.contains("n") && !json["n"].is_null()) {
        auto n = integerField(json["n"], "n");
        if (auto* e = std::get_if<ApiError>(&n)) {
            return *e;
        }
        if (std::get<0>(n) < 1 || std::get<0>(n) > kMaxChoices) {
            return invalidRequest(
                "n", fmt::format("'n' must be 1..{}, got {}", kMaxChoices, std::get<0>(n)));
        }
        p.n = int(std::get<0>(n));
    }
    if (json.contains("ignore_eos") && !json["ignore_eos"].is_null()) {
        if (!json["ignore_eos"].is_boolean()) {
            return invalidRequest("ignore_eos",
                fmt::format(
                    "'ignore_eos' must be a boolean, got {}", typeName(json["ignore_eos"])));
        }
        p.generation.ignoreEos = json["ignore_eos"].get<bool>();
    }
    return std::nullopt;
}

std::variant<CompletionParams, ApiError> parseCompletionRequest(
    const std::string& body, const ServedModel& model)
{
    static constexpr std::array<std::string_view, 20> kKnown
        = { "model", "prompt", "max_tokens", "stream", "stream_options", "logprobs", "temperature",
              "top_p", "top_k", "n", "best_of", "presence_penalty", "frequency_penalty", "seed",
              "echo", "ignore_eos", "user", "stop", "stop_token_ids", "logit_bias" };
    static const std::array<Refusal, 1> kRefused = { {
        { "echo", false, "the prompt is not echoed" },
    } };
    auto envelope = parseEnvelope(body, model, kKnown, kRefused);
    if (auto* e = std::get_if<ApiError>(&envelope)) {
        return *e;
    }
    const auto& json = std::get<nlohmann::json>(envelope);
    if (!json.contains("prompt")) {
        return invalidRequest("prompt", "'prompt' is required");
    }
    auto ids = promptIds(json["prompt"], model);
    if (auto* e = std::get_if<ApiError>(&ids)) {
        return *e;
    }
    CompletionParams p;
    p.generation.prompt = std::move(std::get<0>(ids));
    static constexpr std::array<const char*, 1> kMax = { "max_tokens" };
    // 16: the OpenAI completions default.
    if (auto e = parseGenerationFields(json, model, kMax, 16, p)) {
        return *e;
    }
    // best_of (generate best_of, return the n likeliest) is only accepted where it changes
    // nothing: equal to n.
    if (json.contains("best_of") && !json["best_of"].is_null()
        && !(json["best_of"].is_number_integer() && json["best_of"].get<std::int64_t>() == p.n)) {
        return invalidRequest("best_of",
            fmt::format("'best_of' = {} is not supported: each of the n choices is returned, "
                        "none is ranked out (send best_of equal to n, or leave it out)",
                json["best_of"].dump()),
            "unsupported_parameter");
    }
    if (json.contains("logprobs") && !json["logprobs"].is_null()) {
        auto k = integerField(json["logprobs"], "logprobs");
        if (auto* e = std::get_if<ApiError>(&k)) {
            return *e;
        }
        const std::int64_t n = std::get<0>(k);
        if (n < 0 || n > 20) {
            return invalidRequest("logprobs", fmt::format("'logprobs' must be 0..20, got {}", n));
        }
        p.generation.topLogprobs = int(n);
    }
    return p;
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
