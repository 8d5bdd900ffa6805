#include "serve/openai_server.h"

#include "serve/chat_protocol.h"
#include "serve/openai_responses.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <ctime>
#include <thread>

namespace day0::serve {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(200);

void reply(httplib::Response& res, const ApiError& error)
{
    res.status = error.status;
    res.set_content(dumpJsonSafe(error.body()), "application/json");
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

ApiError draining()
{
    ApiError e;
    e.status = 503;
    e.type = "service_unavailable";
    e.code = "draining";
    e.message = "the server is shutting down and accepts no new requests";
    return e;
}

ApiError requestFailed(const RequestStream::Batch& batch)
{
    ApiError e;
    e.status = 500;
    e.type = "internal_server_error";
    e.message = batch.error.empty() ? "the request was cancelled" : batch.error;
    return e;
}

} // namespace

struct OpenAiServer::Impl {
    Scheduler& scheduler;
    ServedModel model;
    ServerOptions options;
    httplib::Server http;
    std::atomic<std::int64_t> nextId { 0 };
    // serve() and stop() on two threads: httplib's stop() does nothing until listen has begun
    // (is_running), so a stop between serve()'s call and then would be lost and serve() would
    // accept for ever (seen as a hang in a test stopping a server just started).
    std::atomic<bool> entered { false }; ///< serve() was called
    std::atomic<bool> returned { false }; ///< serve() returned
    std::atomic<bool> stopRequested { false };

    Impl(Scheduler& s, ServedModel m, ServerOptions o)
        : scheduler(s)
        , model(std::move(m))
        , options(std::move(o))
    {
    }

    void completions(const httplib::Request& req, httplib::Response& res);
    void chat(const httplib::Request& req, httplib::Response& res);
    /// Submits a sequence per choice of `params` and answers with their tokens as `shape`
    /// says, streamed or not.
    void generate(httplib::Response& res, const CompletionParams& params, ResponseShape shape);
    void streamResponse(httplib::Response& res, std::vector<std::shared_ptr<RequestStream>> streams,
        ResponseShape shape, std::int64_t promptTokens, bool includeUsage);
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
    // Each SSE event is a small write right after the previous one: without TCP_NODELAY, Nagle's
    // algorithm holds it until the client ACKs the last, which the client may delay.
    http.set_tcp_nodelay(true);
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
        // Label values are plan strings and plugin names: no quote, backslash or newline.
        const std::string info = fmt::format("# HELP day0_serving_info Where requests run: the "
                                             "plan's sharded ranks and the backend.\n"
                                             "# TYPE day0_serving_info gauge\n"
                                             "day0_serving_info{{plan=\"{}\",backend=\"{}\"}} 1\n",
            impl->options.plan.empty() ? "tp=1" : impl->options.plan, impl->options.backend);
        res.set_content(
            renderPrometheus(impl->scheduler.metrics()) + info, "text/plain; version=0.0.4");
    });
    http.Post("/v1/completions", [this, impl](const httplib::Request& req, httplib::Response& res) {
        if (m_refusing) {
            reply(res, draining());
            return;
        }
        impl->completions(req, res);
    });
    http.Post(
        "/v1/chat/completions", [this, impl](const httplib::Request& req, httplib::Response& res) {
            if (m_refusing) {
                reply(res, draining());
                return;
            }
            if (impl->model.chatTemplate == nullptr) {
                ApiError e;
                e.param = "messages";
                e.code = "chat_template_unavailable";
                e.message = impl->options.chatRefusal;
                reply(res, e);
                return;
            }
            impl->chat(req, res);
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

void OpenAiServer::serve()
{
    m_impl->entered = true;
    // Either this sees a stop already asked for, or stop() sees `entered` and waits for the
    // listen it then ends (both atomics sequentially consistent).
    if (!m_impl->stopRequested) {
        m_impl->http.listen_after_bind();
    }
    m_impl->returned = true;
}

void OpenAiServer::stop()
{
    m_impl->stopRequested = true;
    while (m_impl->entered && !m_impl->returned) {
        m_impl->http.stop(); // a no-op until the listen has begun: asked again until it returns
        if (!m_impl->returned) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
}

void OpenAiServer::Impl::completions(const httplib::Request& req, httplib::Response& res)
{
    auto parsed = parseCompletionRequest(req.body, model);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
        reply(res, *e);
        return;
    }
    const auto params = std::get<CompletionParams>(std::move(parsed));
    ResponseShape shape;
    shape.endpoint = Endpoint::Completions;
    shape.id = fmt::format("cmpl-day0-{}", nextId++);
    generate(res, params, std::move(shape));
}

void OpenAiServer::Impl::chat(const httplib::Request& req, httplib::Response& res)
{
    auto parsed = parseChatRequest(req.body, model, *model.chatTemplate);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
        reply(res, *e);
        return;
    }
    const auto params = std::get<CompletionParams>(std::move(parsed));
    ResponseShape shape;
    shape.endpoint = Endpoint::ChatCompletions;
    shape.id = fmt::format("chatcmpl-day0-{}", nextId++);
    generate(res, params, std::move(shape));
}

void OpenAiServer::Impl::generate(
    httplib::Response& res, const CompletionParams& params, ResponseShape shape)
{
    // One sequence per choice; a choice that is not admitted takes the others back.
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < params.n; ++i) {
        GenerationRequest generation = params.generation;
        if (generation.sampling.seed) {
            generation.sampling.seed = *generation.sampling.seed + std::uint64_t(i);
        }
        auto submitted = scheduler.submit(std::move(generation));
        if (submitted.admission != Scheduler::Admission::Accepted) {
            for (auto& stream : streams) {
                stream->cancel();
            }
            reply(res, admissionError(submitted));
            return;
        }
        streams.push_back(std::move(submitted.stream));
    }
    shape.created = std::int64_t(std::time(nullptr));
    shape.model = model.name;
    shape.tokenizer = model.tokenizer;
    shape.topLogprobs = params.generation.topLogprobs;
    const auto promptTokens = std::int64_t(params.generation.prompt.size());
    if (params.stream) {
        streamResponse(
            res, std::move(streams), std::move(shape), promptTokens, params.includeUsage);
        return;
    }
    // Not streamed: wait for the end. (cpp-httplib 0.11 cannot tell that such a client has
    // gone, so its request runs to max_tokens; a streaming client's departure is seen.)
    nlohmann::json body;
    std::int64_t completion = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) {
        std::vector<TokenEvent> events;
        RequestStream::Batch batch;
        do {
            batch = streams[i]->take(kPoll);
            events.insert(events.end(), batch.tokens.begin(), batch.tokens.end());
        } while (!batch.finish);
        if (*batch.finish == Finish::Failed || *batch.finish == Finish::Cancelled) {
            for (auto& stream : streams) {
                stream->cancel();
            }
            reply(res, requestFailed(batch));
            return;
        }
        completion += std::int64_t(events.size());
        auto one = completeResponse(shape, events, *batch.finish, batch.stopReason, promptTokens);
        if (i == 0) {
            body = std::move(one);
        } else {
            one["choices"][0]["index"] = i;
            body["choices"].push_back(std::move(one["choices"][0]));
        }
    }
    body["usage"] = { { "prompt_tokens", promptTokens }, { "completion_tokens", completion },
        { "total_tokens", promptTokens + completion } };
    res.set_content(dumpJsonSafe(body), "application/json");
}

void OpenAiServer::Impl::streamResponse(httplib::Response& res,
    std::vector<std::shared_ptr<RequestStream>> streams, ResponseShape shape,
    std::int64_t promptTokens, bool includeUsage)
{
    struct Choice {
        std::shared_ptr<RequestStream> stream;
        std::int64_t textOffset = 0;
        bool finished = false;
    };
    struct State {
        std::vector<Choice> choices;
        ResponseShape shape;
        std::int64_t generated = 0;
        bool opened = false;
        bool ended = false;
        std::optional<RequestStream::Batch> failure; ///< a choice that failed
        void cancel()
        {
            for (auto& c : choices) {
                c.stream->cancel();
            }
        }
    };
    auto state = std::make_shared<State>();
    for (auto& stream : streams) {
        state->choices.push_back({ std::move(stream) });
    }
    state->shape = std::move(shape);
    const auto send = [](httplib::DataSink& sink, const nlohmann::json& j) {
        const std::string event = "data: " + dumpJsonSafe(j) + "\n\n";
        return sink.write(event.data(), event.size());
    };
    const auto indexed = [](nlohmann::json chunk, std::size_t i) {
        if (i > 0) {
            chunk["choices"][0]["index"] = i;
        }
        return chunk;
    };
    // One choice waits the whole poll for its tokens; several share it, so that none waits
    // behind another.
    const auto wait = state->choices.size() == 1 ? kPoll : std::chrono::milliseconds(5);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state, send, indexed, wait, promptTokens, includeUsage](
            std::size_t, httplib::DataSink& sink) {
            if (state->ended) {
                sink.done();
                return true;
            }
            if (!state->opened) {
                state->opened = true;
                for (std::size_t i = 0; i < state->choices.size(); ++i) {
                    if (auto opening = openingChunk(state->shape);
                        opening && !send(sink, indexed(*opening, i))) {
                        state->cancel();
                        return false;
                    }
                }
            }
            bool allFinished = true;
            for (std::size_t c = 0; c < state->choices.size(); ++c) {
                auto& choice = state->choices[c];
                if (choice.finished) {
                    continue;
                }
                auto batch = choice.stream->take(wait);
                if (!sink.is_writable()) {
                    state->cancel();
                    return false;
                }
                const bool ok = batch.finish.has_value() && *batch.finish != Finish::Failed
                    && *batch.finish != Finish::Cancelled;
                for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
                    ++state->generated;
                    std::optional<std::pair<Finish, StopReason>> last;
                    if (ok && i + 1 == batch.tokens.size()) {
                        last.emplace(*batch.finish, batch.stopReason);
                    }
                    if (!send(sink,
                            indexed(
                                tokenChunk(state->shape, batch.tokens[i], last, choice.textOffset),
                                c))) {
                        state->cancel();
                        return false;
                    }
                }
                if (!batch.finish) {
                    allFinished = false;
                    continue;
                }
                choice.finished = true;
                if (!ok) {
                    // One choice failing ends the response with its error.
                    state->failure = batch;
                    state->cancel();
                    break;
                }
                if (batch.tokens.empty()
                    && !send(sink,
                        indexed(finishChunk(state->shape, *batch.finish, batch.stopReason), c))) {
                    state->cancel();
                    return false;
                }
            }
            if (!allFinished && !state->failure) {
                return true;
            }
            bool sent = true;
            if (state->failure) {
                sent = send(sink, requestFailed(*state->failure).body());
            }
            if (sent && includeUsage) {
                sent = send(sink, usageChunk(state->shape, promptTokens, state->generated));
            }
            static constexpr std::string_view kDone = "data: [DONE]\n\n";
            sent = sent && sink.write(kDone.data(), kDone.size());
            state->ended = true;
            sink.done();
            return sent;
        },
        [state](bool success) {
            if (!success) {
                state->cancel(); // the client went away mid-stream
            }
        });
}

} // namespace day0::serve
