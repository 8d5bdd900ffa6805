#include "serve/openai_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <ctime>

namespace day0::serve {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(200);

void reply(httplib::Response& res, const ApiError& error)
{
    res.status = error.status;
    res.set_content(dumpJsonSafe(error.body()), "application/json");
}

const char* finishName(Finish why) { return why == Finish::Stop ? "stop" : "length"; }

nlohmann::json usageJson(std::int64_t prompt, std::int64_t completion)
{
    return { { "prompt_tokens", prompt }, { "completion_tokens", completion },
        { "total_tokens", prompt + completion } };
}

/// The legacy completions `logprobs` object of some tokens: tokens, token_logprobs,
/// top_logprobs (a map of token text to log-probability), text_offset.
nlohmann::json logprobsJson(const std::vector<TokenEvent>& events,
    const tokenizer::Tokenizer* tokenizer, std::int64_t offset)
{
    nlohmann::json tokens = nlohmann::json::array();
    nlohmann::json values = nlohmann::json::array();
    nlohmann::json tops = nlohmann::json::array();
    nlohmann::json offsets = nlohmann::json::array();
    for (const auto& e : events) {
        const std::string text = tokenText(tokenizer, e.token);
        tokens.push_back(text);
        values.push_back(e.logprob);
        nlohmann::json top = nlohmann::json::object();
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

ApiError admissionError(const Scheduler::Submitted& s)
{
    ApiError e;
    e.message = s.reason;
    switch (s.admission) {
    case Scheduler::Admission::QueueFull:
        e.status = 429;
        e.type = "rate_limit_exceeded";
        e.code = "queue_full";
        break;
    case Scheduler::Admission::Draining:
        e.status = 503;
        e.type = "service_unavailable";
        e.code = "draining";
        break;
    default:
        e.status = 400;
        e.param = "max_tokens";
        e.code = "context_length_exceeded";
        break;
    }
    return e;
}

} // namespace

struct OpenAiServer::Impl {
    Scheduler& scheduler;
    ServedModel model;
    ServerOptions options;
    httplib::Server http;
    std::atomic<std::int64_t> nextId { 0 };

    Impl(Scheduler& s, ServedModel m, ServerOptions o)
        : scheduler(s)
        , model(std::move(m))
        , options(std::move(o))
    {
    }

    void completions(const httplib::Request& req, httplib::Response& res);
    void streamCompletion(httplib::Response& res, std::shared_ptr<RequestStream> stream,
        const CompletionParams& params, const std::string& id, std::int64_t created);
};

OpenAiServer::OpenAiServer(Scheduler& scheduler, ServedModel model, ServerOptions options)
    : m_impl(std::make_unique<Impl>(scheduler, std::move(model), std::move(options)))
{
    auto& http = m_impl->http;
    Impl* impl = m_impl.get();
    // A thread per connection in flight: enough for every running and queued request plus a few
    // for /health and /metrics, so the 429 comes from the scheduler's queue, not from requests
    // waiting unseen in the HTTP pool.
    const std::size_t threads = std::max<std::size_t>(impl->options.threads, 4);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(std::size_t(64) << 20);
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (m_refusing) {
            res.status = 503;
            res.set_content(R"({"status":"draining"})", "application/json");
            return;
        }
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [impl](const httplib::Request&, httplib::Response& res) {
        const nlohmann::json card = { { "id", impl->model.name }, { "object", "model" },
            { "created", std::int64_t(std::time(nullptr)) }, { "owned_by", "day0" },
            { "root", impl->model.name }, { "max_model_len", impl->model.contextLimit },
            { "vocab_size", impl->model.vocabSize } };
        res.set_content(
            dumpJsonSafe({ { "object", "list" }, { "data", { card } } }), "application/json");
    });
    http.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
        res.set_content(renderPrometheus(impl->scheduler.metrics()), "text/plain; version=0.0.4");
    });
    http.Post("/v1/completions", [this, impl](const httplib::Request& req, httplib::Response& res) {
        if (m_refusing) {
            ApiError e;
            e.status = 503;
            e.type = "service_unavailable";
            e.code = "draining";
            e.message = "the server is shutting down and accepts no new requests";
            reply(res, e);
            return;
        }
        impl->completions(req, res);
    });
    http.Post("/v1/chat/completions", [impl](const httplib::Request&, httplib::Response& res) {
        ApiError e;
        e.param = "messages";
        e.code = "chat_template_unavailable";
        e.message = impl->options.chatRefusal;
        reply(res, e);
    });
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) {
                return httplib::Server::HandlerResponse::Unhandled; // already an OpenAI error
            }
            ApiError e;
            e.status = res.status;
            e.type = res.status == 404 ? "NotFoundError" : "invalid_request_error";
            e.message = res.status == 404
                ? fmt::format("no route {} {}", req.method, req.path)
                : fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
            reply(res, e);
            return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            ApiError e;
            e.status = 500;
            e.type = "internal_server_error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& ex) {
                e.message = ex.what();
            } catch (...) {
                e.message = "unknown exception";
            }
            reply(res, e);
        });
}

OpenAiServer::~OpenAiServer() = default;

Result<int> OpenAiServer::bind()
{
    auto& o = m_impl->options;
    if (o.port == 0) {
        const int port = m_impl->http.bind_to_any_port(o.host);
        if (port <= 0) {
            return Error::badInput(fmt::format("cannot bind {} on any port", o.host));
        }
        return port;
    }
    if (!m_impl->http.bind_to_port(o.host, o.port)) {
        return Error::badInput(fmt::format("cannot bind {}:{} (in use, or not an address of "
                                           "this machine)",
            o.host, o.port));
    }
    return o.port;
}

void OpenAiServer::serve() { m_impl->http.listen_after_bind(); }

void OpenAiServer::stop() { m_impl->http.stop(); }

void OpenAiServer::Impl::completions(const httplib::Request& req, httplib::Response& res)
{
    auto parsed = parseCompletionRequest(req.body, model);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
        reply(res, *e);
        return;
    }
    const auto params = std::get<CompletionParams>(std::move(parsed));
    auto submitted = scheduler.submit(params.generation);
    if (submitted.admission != Scheduler::Admission::Accepted) {
        reply(res, admissionError(submitted));
        return;
    }
    const std::string id = fmt::format("cmpl-day0-{}", nextId++);
    const auto created = std::int64_t(std::time(nullptr));
    if (params.stream) {
        streamCompletion(res, submitted.stream, params, id, created);
        return;
    }
    // Not streamed: wait for the end. (cpp-httplib 0.11 cannot tell that such a client has
    // gone, so its request runs to max_tokens; a streaming client's departure is seen.)
    std::vector<TokenEvent> events;
    RequestStream::Batch batch;
    do {
        batch = submitted.stream->take(kPoll);
        events.insert(events.end(), batch.tokens.begin(), batch.tokens.end());
    } while (!batch.finish);
    if (*batch.finish == Finish::Failed || *batch.finish == Finish::Cancelled) {
        ApiError e;
        e.status = 500;
        e.type = "internal_server_error";
        e.message = batch.error.empty() ? "the request was cancelled" : batch.error;
        reply(res, e);
        return;
    }
    TextStreamer text(model.tokenizer);
    std::string all;
    std::vector<std::int64_t> ids;
    for (const auto& e : events) {
        all += text.add(e.token);
        ids.push_back(e.token);
    }
    all += text.flush();
    nlohmann::json choice
        = { { "index", 0 }, { "text", all }, { "finish_reason", finishName(*batch.finish) },
              { "token_ids", ids }, { "logprobs", nullptr } };
    if (params.generation.topLogprobs >= 0) {
        choice["logprobs"] = logprobsJson(events, model.tokenizer, 0);
    }
    const nlohmann::json body = { { "id", id }, { "object", "text_completion" },
        { "created", created }, { "model", model.name }, { "choices", { choice } },
        { "usage",
            usageJson(
                std::int64_t(params.generation.prompt.size()), std::int64_t(events.size())) } };
    res.set_content(dumpJsonSafe(body), "application/json");
}

void OpenAiServer::Impl::streamCompletion(httplib::Response& res,
    std::shared_ptr<RequestStream> stream, const CompletionParams& params, const std::string& id,
    std::int64_t created)
{
    struct State {
        std::shared_ptr<RequestStream> stream;
        TextStreamer text;
        std::int64_t generated = 0;
        std::int64_t textOffset = 0;
        bool ended = false;
    };
    auto state
        = std::make_shared<State>(State { std::move(stream), TextStreamer(model.tokenizer) });
    const auto chunk = [this, id, created](const nlohmann::json& choices) {
        return nlohmann::json { { "id", id }, { "object", "text_completion" },
            { "created", created }, { "model", model.name }, { "choices", choices } };
    };
    const auto send = [](httplib::DataSink& sink, const nlohmann::json& j) {
        const std::string event = "data: " + dumpJsonSafe(j) + "\n\n";
        return sink.write(event.data(), event.size());
    };
    const auto prompt = std::int64_t(params.generation.prompt.size());
    const bool wantLogprobs = params.generation.topLogprobs >= 0;
    const bool includeUsage = params.includeUsage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state, chunk, send, prompt, wantLogprobs, includeUsage](
            std::size_t, httplib::DataSink& sink) {
            if (state->ended) {
                sink.done();
                return true;
            }
            auto batch = state->stream->take(kPoll);
            if (!sink.is_writable()) {
                state->stream->cancel();
                return false;
            }
            for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
                const auto& e = batch.tokens[i];
                ++state->generated;
                const bool last = batch.finish && i + 1 == batch.tokens.size()
                    && *batch.finish != Finish::Failed;
                std::string piece = state->text.add(e.token);
                if (last) {
                    piece += state->text.flush();
                }
                nlohmann::json choice = { { "index", 0 }, { "text", piece },
                    { "token_ids", { e.token } }, { "logprobs", nullptr },
                    { "finish_reason",
                        last ? nlohmann::json(finishName(*batch.finish)) : nlohmann::json() } };
                if (wantLogprobs) {
                    choice["logprobs"] = logprobsJson({ e }, model.tokenizer, state->textOffset);
                }
                state->textOffset += std::int64_t(piece.size());
                if (!send(sink, chunk(nlohmann::json::array({ choice })))) {
                    state->stream->cancel();
                    return false;
                }
            }
            if (!batch.finish) {
                return true;
            }
            bool ok = true;
            if (*batch.finish == Finish::Failed || *batch.finish == Finish::Cancelled) {
                ApiError e;
                e.status = 500;
                e.type = "internal_server_error";
                e.message = batch.error.empty() ? "the request was cancelled" : batch.error;
                ok = send(sink, e.body());
            } else if (batch.tokens.empty()) {
                ok = send(sink,
                    chunk({ { { "index", 0 }, { "text", state->text.flush() },
                        { "logprobs", nullptr },
                        { "finish_reason", finishName(*batch.finish) } } }));
            }
            if (ok && includeUsage) {
                auto usage = chunk(nlohmann::json::array());
                usage["usage"] = usageJson(prompt, state->generated);
                ok = send(sink, usage);
            }
            static constexpr std::string_view kDone = "data: [DONE]\n\n";
            ok = ok && sink.write(kDone.data(), kDone.size());
            state->ended = true;
            sink.done();
            return ok;
        },
        [state](bool success) {
            if (!success) {
                state->stream->cancel(); // the client went away mid-stream
            }
        });
}

} // namespace day0::serve
