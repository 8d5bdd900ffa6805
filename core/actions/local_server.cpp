// A checkpoint served over HTTP in this process (actions/local_server.h): the one set-up of
// `day0 serve`, the Serving panel's server and validate's serving step.
#include "actions/local_server.h"

#include "actions/serve_sharded.h"
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
#include <functional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <optional>
#include <thread>

namespace day0::actions {

namespace {

/// Makes glibc give blocks of kLargeBlock bytes or more their own mapping, returned to the
/// system when freed, for the rest of the process. Loading the weights frees a multi-MB
/// transient per tensor (its stored copy, its fp32 conversion, on a plan's ranks the full tensor
/// a slice is cut from); with glibc's default, the first such block freed raises the mapping
/// threshold to its size, after which those transients come from the heaps (one per loading
/// thread) and stay resident once freed. Measured on llama-3.1-8b shrunk to 6x768 (197 MB of
/// fp32 weights), RssAnon after the load: over tp=2 337 MB, on one rank 248 MB; with a fixed
/// threshold 208 MB and 200 MB. Only while loading: see reuseLargeBlocks.
void keepLargeBlocksReturnable()
{
#if defined(__GLIBC__)
    constexpr int kLargeBlock = 1 << 20;
    mallopt(M_MMAP_THRESHOLD, kLargeBlock);
#endif
}

/// After the load: blocks up to glibc's largest dynamic threshold (32 MiB on 64-bit) come from
/// the heaps again, so the steps' activations reuse freed memory instead of mapping and
/// faulting in fresh pages each step. With the load's 1 MiB threshold kept, a 128-token
/// prompt's TTFT through `day0 serve` was 1.68-1.86x `day0 run`'s prefill (serve_client_bench,
/// goal <= 1.1x); with these, 0.92x.
void reuseLargeBlocks()
{
#if defined(__GLIBC__)
    // A set threshold also stops glibc raising the trim threshold with it (to twice the mapping
    // one), which would give the freed top of a heap back after every step: raised here by hand.
    constexpr int kServingThreshold = 32 << 20;
    mallopt(M_MMAP_THRESHOLD, kServingThreshold);
    mallopt(M_TRIM_THRESHOLD, 2 * kServingThreshold);
#endif
}

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

/// The plan's ranks of `options`, or null without a plan, each on its own backend instance
/// from `backendFor` when set. Refuses what they cannot run.
Result<std::shared_ptr<parallel::ServedRanks>> servedRanks(const LocalServerOptions& options,
    const exec::PrecisionPlan& precision, Progress& progress, std::stop_token stop,
    std::function<Result<std::shared_ptr<exec::Backend>>(int)> backendFor)
{
    if (options.plan.empty()) {
        return std::shared_ptr<parallel::ServedRanks>();
    }
    auto layout = servedLayout(options, precision);
    if (!layout) {
        return layout.error();
    }
    auto ranks = parallel::ServedRanks::start(
        options.checkpoint, *layout, progress, stop, std::move(backendFor));
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
    keepLargeBlocksReturnable();
    // Before the ranks, which run the plugin's code, and destroyed after them.
    auto registry = std::make_unique<extend::PluginRegistry>();
    std::shared_ptr<exec::Backend> backend;
    std::function<Result<std::shared_ptr<exec::Backend>>(int)> backendFor;
    if (onBackend) {
        if (plan->isF64()) {
            return Error::badInput(fmt::format("--backend {}: the fp64 reference runs on "
                                               "day0-cpu only; serve fp32 or a lower precision",
                options.backend));
        }
        // One backend opened first, so a missing plugin or device is one clear line; on a
        // plan each rank then opens its own instance (as day0 run --plan --backend).
        auto opened = extend::openRunBackend(*registry, options.backend, options.device);
        if (!opened) {
            return opened.error();
        }
        backend = std::move(*opened);
        backendFor = [plugins = registry.get(), name = options.backend, device = options.device](
                         int) { return extend::openRunBackend(*plugins, name, device); };
    }
    auto ranks = servedRanks(options, *plan, progress, stop, backendFor);
    if (!ranks) {
        return ranks.error();
    }
    progress.setStage("loading " + options.checkpoint);
    // A plan's ranks hold the weights (each its slices): the server reads only the spec,
    // tokenizer and templates, so the checkpoint is not loaded a second time.
    auto loaded = serve::loadServedModel(options.checkpoint, plan->isF64(), progress, stop,
        *ranks ? serve::ServedWeights::SpecOnly : serve::ServedWeights::Load);
    if (!loaded) {
        return loaded.error();
    }
    if (backend && !*ranks) {
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
        // On a plan the ranks' own instances compute; this one only named the plugin.
        if (!*ranks) {
            so.backend = backend;
        }
    }
    if (*ranks) {
        impl->plan = (*ranks)->plan();
        impl->weightBytes = (*ranks)->weightBytes();
        so.source = shardedSource(*ranks);
        impl->scheduler.emplace(impl->loaded.spec, so);
    } else {
        for (const auto& [name, tensor] : impl->loaded.engine->weightTable().tensors) {
            impl->weightBytes += tensor.byteSize();
        }
        impl->scheduler.emplace(std::move(*impl->loaded.engine), so);
    }
    reuseLargeBlocks();
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
