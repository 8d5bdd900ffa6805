// A checkpoint served over HTTP in this process (actions/local_server.h): the one set-up of
// `day0 serve`, the Serving panel's server and validate's serving step.
#include "actions/local_server.h"

#include "checkpoint/sharding.h"
#include "exec/forward.h"
#include "exec/precision.h"
#include "exec/sequence_decoder.h"
#include "extend/plugin_registry.h"
#include "parallel/served_ranks.h"
#include "serve/openai_server.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

namespace day0::actions {

namespace {

/// One sequence on a plan's served ranks; its caches are freed with it.
class ShardedSequence final : public serve::SteppedSequence {
public:
    ShardedSequence(
        std::shared_ptr<parallel::ServedRanks> ranks, std::int64_t id, std::int64_t capacity)
        : m_ranks(std::move(ranks))
        , m_id(id)
        , m_capacity(capacity)
    {
    }
    ~ShardedSequence() override { m_ranks->close(m_id); }
    ShardedSequence(const ShardedSequence&) = delete;
    ShardedSequence& operator=(const ShardedSequence&) = delete;

    Result<std::vector<double>> feed(
        std::span<const std::int64_t> ids, std::stop_token stop) override
    {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        if (m_position + std::int64_t(ids.size()) > m_capacity) {
            return Error::badInput(fmt::format("{} more token(s) after {} overflow the "
                                               "sequence's capacity of {}",
                ids.size(), m_position, m_capacity));
        }
        auto logits = m_ranks->feed(m_id, ids, m_position);
        if (logits) {
            m_position += std::int64_t(ids.size());
        }
        return logits;
    }
    [[nodiscard]] std::int64_t position() const override { return m_position; }

private:
    std::shared_ptr<parallel::ServedRanks> m_ranks;
    std::int64_t m_id = 0;
    std::int64_t m_capacity = 0;
    std::int64_t m_position = 0;
};

/// The scheduler's sequences on a plan's served ranks.
class ShardedSource final : public serve::SequenceSource {
public:
    explicit ShardedSource(std::shared_ptr<parallel::ServedRanks> ranks)
        : m_ranks(std::move(ranks))
    {
    }
    Result<std::unique_ptr<serve::SteppedSequence>> open(std::int64_t capacity) override
    {
        auto id = m_ranks->open(capacity);
        if (!id) {
            return id.error();
        }
        return std::unique_ptr<serve::SteppedSequence>(
            std::make_unique<ShardedSequence>(m_ranks, *id, capacity));
    }
    [[nodiscard]] std::string sequentialReason() const override
    {
        return fmt::format("batched decode is off for sharded serving: plan {}, one sequence "
                           "per step over its {} ranks",
            m_ranks->plan(), m_ranks->worldSize());
    }

private:
    std::shared_ptr<parallel::ServedRanks> m_ranks;
};

/// `options.plan` parsed, with what the served ranks refuse without the model.
Result<checkpoint::ShardLayout> servedLayout(
    const LocalServerOptions& options, const exec::PrecisionPlan& precision)
{
    auto layout = checkpoint::parseShardLayout(options.plan);
    if (!layout) {
        const Error& e = layout.error();
        return e.message.starts_with("--plan") ? e : e.withContext("--plan");
    }
    if (precision.isF64() || options.precision != "fp32") {
        return Error::unsupported(fmt::format("--plan {} with --precision {}: the sharded "
                                              "forward runs in fp32 only",
            options.plan, options.precision));
    }
    if (auto fits = parallel::ServedRanks::checkLayout(*layout); !fits) {
        const Error& e = fits.error();
        return e.message.starts_with("--plan") ? e : e.withContext("--plan " + options.plan);
    }
    return layout;
}

/// The plan's ranks of `options`, or null without a plan. Refuses what they cannot run.
Result<std::shared_ptr<parallel::ServedRanks>> servedRanks(const LocalServerOptions& options,
    const exec::PrecisionPlan& precision, Progress& progress, std::stop_token stop)
{
    if (options.plan.empty()) {
        return std::shared_ptr<parallel::ServedRanks>();
    }
    auto layout = servedLayout(options, precision);
    if (!layout) {
        return layout.error();
    }
    auto ranks = parallel::ServedRanks::start(options.checkpoint, *layout, progress, stop);
    if (!ranks) {
        // The executor's own refusals already begin with "--plan: tp=…".
        const Error& e = ranks.error();
        return e.message.starts_with("--plan") ? e : e.withContext("--plan " + options.plan);
    }
    return std::shared_ptr<parallel::ServedRanks>(std::move(*ranks));
}

} // namespace

Result<void> checkLocalServerOptions(const LocalServerOptions& options)
{
    auto plan = exec::parsePrecisionPlan(options.precision);
    if (!plan) {
        return plan.error().withContext("precision");
    }
    const bool onBackend = !options.backend.empty() && options.backend != "cpu";
    if (onBackend && !options.plan.empty()) {
        return Error::unsupported(fmt::format("--plan {} with --backend {}: sharded serving "
                                              "runs on the CPU reference only",
            options.plan, options.backend));
    }
    if (!options.plan.empty()) {
        auto layout = servedLayout(options, *plan);
        if (!layout) {
            return layout.error();
        }
    }
    return success();
}

struct LocalServer::Impl {
    LocalServerOptions options;
    /// The plugins loaded; before the backend and the scheduler, which run the plugin's code.
    std::unique_ptr<extend::PluginRegistry> registry;
    std::string backend = "cpu";
    serve::LoadedModel loaded; ///< the tokenizer and chat template the server points into
    std::optional<serve::Scheduler> scheduler;
    serve::ServedModel model;
    std::optional<serve::OpenAiServer> server;
    std::thread http;
    std::atomic<bool> ended { false };
    bool drained = false;
    std::string url;
    int port = 0;
    std::string plan; ///< the ranks' layout; empty: one rank
    std::int64_t weightBytes = 0;
};

LocalServer::LocalServer(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

LocalServer::~LocalServer()
{
    if (m_impl->server) {
        if (!m_impl->drained) {
            drain(std::chrono::milliseconds(std::int64_t(m_impl->options.drainSeconds * 1000)));
        }
        m_impl->server->stop();
    }
    if (m_impl->http.joinable()) {
        m_impl->http.join();
    }
}

const std::string& LocalServer::url() const { return m_impl->url; }

int LocalServer::port() const { return m_impl->port; }

const std::string& LocalServer::modelName() const { return m_impl->model.name; }

std::int64_t LocalServer::contextLimit() const { return m_impl->model.contextLimit; }

std::string LocalServer::decodePath() const { return m_impl->scheduler->decodePath(); }

const std::string& LocalServer::plan() const { return m_impl->plan; }

std::int64_t LocalServer::weightBytes() const { return m_impl->weightBytes; }

const std::string& LocalServer::backend() const { return m_impl->backend; }

const std::string& LocalServer::chatRefusal() const { return m_impl->loaded.chatRefusal; }

bool LocalServer::chatTemplateUnusable() const { return m_impl->loaded.chatTemplateUnusable; }

serve::SchedulerMetrics LocalServer::metrics() const { return m_impl->scheduler->metrics(); }

bool LocalServer::ended() const { return m_impl->ended; }

bool LocalServer::drain(std::chrono::milliseconds timeout)
{
    m_impl->server->refuseNew();
    m_impl->drained = true;
    return m_impl->scheduler->drain(timeout);
}

Result<std::unique_ptr<LocalServer>> LocalServer::start(
    const LocalServerOptions& options, Progress& progress, std::stop_token stop)
{
    DAY0_TRY(checkLocalServerOptions(options));
    auto plan = exec::parsePrecisionPlan(options.precision);
    if (!plan) {
        return plan.error().withContext("precision");
    }
    const bool onBackend = !options.backend.empty() && options.backend != "cpu";
    auto ranks = servedRanks(options, *plan, progress, stop);
    if (!ranks) {
        return ranks.error();
    }
    auto registry = std::make_unique<extend::PluginRegistry>();
    std::shared_ptr<exec::Backend> backend;
    if (onBackend) {
        if (plan->isF64()) {
            return Error::badInput(fmt::format("--backend {}: the fp64 reference runs on "
                                               "day0-cpu only; serve fp32 or a lower precision",
                options.backend));
        }
        auto opened = extend::openRunBackend(*registry, options.backend, options.device);
        if (!opened) {
            return opened.error();
        }
        backend = std::move(*opened);
    }
    progress.setStage("loading " + options.checkpoint);
    // A plan's ranks hold the weights (each its slices): the server reads only the spec,
    // tokenizer and templates, so the checkpoint is not loaded a second time.
    auto loaded = serve::loadServedModel(options.checkpoint, plan->isF64(), progress, stop,
        *ranks ? serve::ServedWeights::SpecOnly : serve::ServedWeights::Load);
    if (!loaded) {
        return loaded.error();
    }
    if (backend) {
        // What the plugin's sequences cannot run is refused now, not at every request.
        auto probe = exec::SequenceDecoder::open(
            *loaded->engine, *plan, 1, options.deltaChunk, backend.get());
        if (!probe) {
            return probe.error().withContext("--backend " + options.backend);
        }
    }
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->registry = std::move(registry);
    impl->loaded = std::move(*loaded);
    serve::SchedulerOptions so;
    so.maxRunning = options.maxRunning;
    so.maxQueued = options.maxQueued;
    so.kvTokenBudget = options.kvTokens;
    so.plan = *plan;
    so.deltaChunk = options.deltaChunk;
    so.eosIds = impl->loaded.eosIds;
    so.batchDecode = options.batchDecode;
    so.batchPrefill = options.batchPrefill;
    if (backend) {
        impl->backend = backend->name();
        so.backend = backend;
    }
    if (*ranks) {
        impl->plan = (*ranks)->plan();
        impl->weightBytes = (*ranks)->weightBytes();
        so.source = std::make_shared<ShardedSource>(*ranks);
        impl->scheduler.emplace(impl->loaded.spec, so);
    } else {
        for (const auto& [name, tensor] : impl->loaded.engine->weightTable().tensors) {
            impl->weightBytes += tensor.byteSize();
        }
        impl->scheduler.emplace(std::move(*impl->loaded.engine), so);
    }
    auto& model = impl->model;
    model.name = options.servedName.empty() ? impl->loaded.name : options.servedName;
    model.vocabSize = impl->scheduler->spec().vocabSize;
    model.contextLimit = impl->scheduler->contextLimit();
    model.tokenizer = impl->loaded.tokenizer.get();
    model.chatTemplate = impl->loaded.chat ? &*impl->loaded.chat : nullptr;
    serve::ServerOptions o;
    o.host = options.host;
    o.port = options.port;
    o.chatRefusal = impl->loaded.chatRefusal;
    o.plan = impl->plan;
    o.backend = impl->backend;
    o.threads = std::size_t(so.maxRunning + so.maxQueued + 8);
    impl->server.emplace(*impl->scheduler, model, o);
    auto port = impl->server->bind();
    if (!port) {
        return port.error();
    }
    impl->port = *port;
    impl->url = fmt::format("http://{}:{}", o.host, *port);
    auto* server = &*impl->server;
    auto* ended = &impl->ended;
    impl->http = std::thread([server, ended] {
        server->serve();
        *ended = true;
    });
    return std::unique_ptr<LocalServer>(new LocalServer(std::move(impl)));
}

Result<std::unique_ptr<LocalServer>> LocalServer::start(const std::string& checkpoint,
    const std::string& precision, int maxRequests, Progress& progress, std::stop_token stop)
{
    LocalServerOptions o;
    o.checkpoint = checkpoint;
    o.precision = precision;
    o.maxRunning = std::clamp(maxRequests, 1, 64);
    o.maxQueued = std::max(maxRequests, 1);
    return start(o, progress, stop);
}

} // namespace day0::actions
