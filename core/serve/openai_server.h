#pragma once

#include "base/result.h"
#include "serve/openai_protocol.h"
#include "serve/scheduler.h"

#include <atomic>
#include <memory>
#include <string>

namespace day0::serve {

/// How the HTTP side is set up.
struct ServerOptions {
    std::string host = "127.0.0.1"; ///< loopback unless asked otherwise
    int port = 8000; ///< 0: any free port (OpenAiServer::bind returns it)
    /// HTTP worker threads: one per connection in flight (running + queued + a few for /health
    /// and /metrics).
    std::size_t threads = 96;
    /// Why /v1/chat/completions is refused for a checkpoint without a usable chat template
    /// (ServedModel::chatTemplate null): said in the 400's message.
    std::string chatRefusal;
    /// Where requests run, as /metrics names it (day0_serving_info{plan, backend} 1): the plan
    /// string of sharded ranks ("" for one rank) and the backend ("cpu" for the reference).
    std::string plan;
    std::string backend = "cpu";
};

/// The OpenAI-compatible HTTP front of a Scheduler, on cpp-httplib (Debian's
/// libcpp-httplib-dev): GET /health, /v1/models, /metrics; POST /v1/completions and
/// /v1/chat/completions (the checkpoint's chat template; refused with the reason without one),
/// JSON or SSE with stream_options.include_usage, logprobs, sampling and stop conditions. Every
/// error answers with the OpenAI error body. A streaming client that goes away cancels its request
/// at the next token, freeing its slot.
class OpenAiServer {
public:
    OpenAiServer(Scheduler& scheduler, ServedModel model, ServerOptions options);
    ~OpenAiServer();

    /// Binds the socket; returns the port (the chosen one with port 0).
    Result<int> bind();
    /// Serves until stop(); blocking.
    void serve();
    /// Refuses new requests with 503 from now on (a drain is under way).
    void refuseNew() { m_refusing = true; }
    /// Ends serve(); in-flight handlers finish first.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> m_impl;
    std::atomic<bool> m_refusing { false };
};

} // namespace day0::serve
