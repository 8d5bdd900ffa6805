// One rank of a sharded run: agreement check, weights, groups, the pipelined schedule over
// micro-batches and decode steps, and the gathering of results on world rank 0.
#include "parallel/run.h"

#include "exec/engine.h"
#include "exec/forward.h"
#include "numerics/metrics.h"
#include "parallel/forward.h"
#include "parallel/stage_link.h"
#include "parallel/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace day0::parallel {

namespace {

// Tags 1, 4 and 5 are the stage link's (parallel/stage_link.h).
constexpr int kTagToken = 2;
constexpr int kTagGather = 3;
constexpr std::size_t kFieldBytes = 256;

std::int64_t steadyNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// Every rank must run the same plan, model and checkpoint; the error names the first field
/// where a rank differs from rank 0.
Result<void> checkAgreement(comm::Communicator& world, const std::vector<std::string>& fields,
    const std::vector<std::string>& labels)
{
    std::vector<char> mine(fields.size() * kFieldBytes, '\0');
    for (std::size_t f = 0; f < fields.size(); ++f) {
        std::copy_n(fields[f].begin(), std::min(fields[f].size(), kFieldBytes - 1),
            mine.begin() + std::int64_t(f * kFieldBytes));
    }
    std::vector<char> all(mine.size() * std::size_t(world.size()));
    DAY0_TRY(world.allGather(mine.data(), all.data(), mine.size(), DType::U8));
    const auto field = [&](int rank, std::size_t f) {
        return std::string(all.data() + std::size_t(rank) * mine.size() + f * kFieldBytes);
    };
    for (int r = 1; r < world.size(); ++r) {
        for (std::size_t f = 0; f < fields.size(); ++f) {
            if (field(r, f) != field(0, f)) {
                return Error::badInput(
                    fmt::format("ranks disagree at start: rank {} was started with {} '{}' but "
                                "rank 0 with '{}'",
                        r, labels[f], field(r, f), field(0, f)));
            }
        }
    }
    return success();
}

std::int64_t argmaxLast(const std::vector<float>& logits, std::int64_t vocab)
{
    const std::vector<double> last(logits.end() - vocab, logits.end());
    return numerics::topKIndices(last, 1).front();
}

/// Ping-pong between world ranks 0 and 1: latency from 8-byte, bandwidth from 4 MiB messages.
Result<MachineFigures> calibrate(comm::Communicator& world)
{
    MachineFigures m;
    if (world.size() < 2 || world.rank() > 1) {
        return m;
    }
    const int peer = 1 - world.rank();
    const auto pingPong = [&](std::size_t bytes, int reps) -> Result<double> {
        std::vector<std::byte> buf(bytes);
        const std::int64_t t0 = steadyNs();
        for (int i = 0; i < reps; ++i) {
            if (world.rank() == 0) {
                DAY0_TRY(world.send(buf.data(), bytes, DType::U8, peer, 10));
                DAY0_TRY(world.recv(buf.data(), bytes, DType::U8, peer, 11));
            } else {
                DAY0_TRY(world.recv(buf.data(), bytes, DType::U8, peer, 10));
                DAY0_TRY(world.send(buf.data(), bytes, DType::U8, peer, 11));
            }
        }
        return double(steadyNs() - t0) * 1e-9 / (2.0 * reps);
    };
    auto small = pingPong(8, 50);
    if (!small) {
        return small.error();
    }
    constexpr std::size_t kLarge = std::size_t(4) << 20;
    auto large = pingPong(kLarge, 4);
    if (!large) {
        return large.error();
    }
    m.measured = true;
    m.latency = *small;
    m.bandwidth = double(kLarge) / std::max(*large - *small, 1e-9);
    m.method = "ping-pong between ranks 0 and 1 of this run: 50 x 8 B, 4 x 4 MiB";
    return m;
}

struct RankState {
    std::vector<SequenceResult> sequences;
    double seconds = 0.0;
};

/// The stage schedule: for each decode step, every micro-batch flows through the stages; the
/// last stage sends each new token back to the first.
Result<RankState> runSchedule(comm::Communicator& world, detail::ParallelForward& forward,
    const model::ModelSpec& spec, const ParallelRunOptions& o, const checkpoint::RankCoord& c,
    Progress& progress, std::stop_token stop)
{
    const auto& l = o.layout;
    const bool first = c.stage == 0;
    const bool last = c.stage == l.pp - 1;
    const int stride = l.tp * l.dp;
    const int lastPeer = (l.pp - 1) * stride + c.dpRank * l.tp + c.tpRank;
    const int firstPeer = c.dpRank * l.tp + c.tpRank;
    RankState state;
    std::vector<detail::ShardCache> caches;
    std::vector<std::int64_t> lastToken(std::size_t(o.microBatches), 0);
    for (int i = 0; i < o.microBatches; ++i) {
        const auto& prompt = o.prompts[std::size_t(c.dpRank * o.microBatches + i)];
        caches.push_back(forward.newCache(std::int64_t(prompt.size()) + o.newTokens - 1));
        state.sequences.push_back({ prompt, {}, {} });
    }
    const std::int64_t t0 = steadyNs();
    for (std::int64_t s = 0; s < o.newTokens; ++s) {
        for (int i = 0; i < o.microBatches; ++i) {
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
            SequenceResult& seq = state.sequences[std::size_t(i)];
            const auto promptLen = std::int64_t(seq.prompt.size());
            const std::int64_t n = s == 0 ? promptLen : 1;
            const std::int64_t start = s == 0 ? 0 : promptLen + s - 1;
            std::vector<float> hidden;
            if (first) {
                std::vector<std::int64_t> ids = seq.prompt;
                if (s > 0) {
                    if (l.pp > 1) {
                        DAY0_TRY(world.recv(
                            &lastToken[std::size_t(i)], 1, DType::I64, lastPeer, kTagToken));
                    }
                    ids = { lastToken[std::size_t(i)] };
                }
                auto e = forward.embed(ids);
                if (!e) {
                    return e.error();
                }
                hidden = std::move(*e);
            } else {
                DAY0_TRY(detail::receiveStageInput(
                    forward, world, n, world.rank() - stride, hidden, detail::StepIds::Send));
            }
            DAY0_TRY(forward.layers(caches[std::size_t(i)], hidden, n, start, stop));
            if (!last) {
                DAY0_TRY(detail::sendStageOutput(
                    forward, world, n, world.rank() + stride, hidden, detail::StepIds::Send));
            } else {
                auto logits = forward.head(hidden, n);
                if (!logits) {
                    return logits.error();
                }
                const std::int64_t token = argmaxLast(*logits, spec.vocabSize);
                seq.generated.push_back(token);
                if (c.tpRank == 0) {
                    seq.logits.insert(seq.logits.end(), logits->begin(), logits->end());
                }
                lastToken[std::size_t(i)] = token;
                if (s + 1 < o.newTokens && l.pp > 1) {
                    DAY0_TRY(world.send(&token, 1, DType::I64, firstPeer, kTagToken));
                }
            }
            progress.advance();
            if (o.sharedProgress != nullptr) {
                o.sharedProgress->advance();
            }
        }
    }
    state.seconds = double(steadyNs() - t0) * 1e-9;
    return state;
}

/// Sends this rank's summary, events and (if it holds them) sequences to rank 0, or receives
/// everyone's there, in one fixed order.
Result<void> gather(comm::Communicator& world, const ParallelRunOptions& o, const RankState& state,
    std::vector<CommEvent> events, const RankSummary& mine, ParallelRunResult& out)
{
    const auto& l = o.layout;
    const auto holds = [&](int rank) {
        const auto c = checkpoint::rankCoord(l, rank);
        return c.stage == l.pp - 1 && c.tpRank == 0;
    };
    const auto sendSequences = [&](const std::vector<SequenceResult>& seqs) -> Result<void> {
        for (const auto& q : seqs) {
            const std::int64_t head[3] = { std::int64_t(q.prompt.size()),
                std::int64_t(q.generated.size()), std::int64_t(q.logits.size()) };
            DAY0_TRY(world.send(head, 3, DType::I64, 0, kTagGather));
            DAY0_TRY(world.send(q.prompt.data(), q.prompt.size(), DType::I64, 0, kTagGather));
            DAY0_TRY(world.send(q.generated.data(), q.generated.size(), DType::I64, 0, kTagGather));
            DAY0_TRY(world.send(q.logits.data(), q.logits.size(), DType::F32, 0, kTagGather));
        }
        return success();
    };
    const int me = world.rank();
    if (me != 0) {
        const std::int64_t summary[6] = { me, mine.weightBytes, std::int64_t(state.seconds * 1e9),
            mine.nativeCalls, mine.fallbackCalls, mine.streamBytesRead };
        DAY0_TRY(world.send(summary, 6, DType::I64, 0, kTagGather));
        std::vector<std::int64_t> flat;
        for (const auto& e : events) {
            flat.insert(flat.end(),
                { std::int64_t(e.kind), e.bytes, e.startNs, e.endNs, std::int64_t(e.groupSize),
                    std::int64_t(e.group) });
        }
        const std::int64_t count = std::int64_t(events.size());
        DAY0_TRY(world.send(&count, 1, DType::I64, 0, kTagGather));
        DAY0_TRY(world.send(flat.data(), flat.size(), DType::I64, 0, kTagGather));
        if (holds(me)) {
            DAY0_TRY(sendSequences(state.sequences));
        }
        return success();
    }
    std::vector<std::vector<SequenceResult>> byReplica(std::size_t(l.dp));
    out.ranks.push_back(mine);
    out.events = std::move(events);
    if (holds(0)) {
        byReplica[0] = state.sequences;
    }
    for (int r = 1; r < world.size(); ++r) {
        std::int64_t summary[6] = {};
        DAY0_TRY(world.recv(summary, 6, DType::I64, r, kTagGather));
        out.ranks.push_back({ r, checkpoint::rankCoord(l, r), summary[1], summary[5],
            double(summary[2]) * 1e-9, summary[3], summary[4] });
        std::int64_t count = 0;
        DAY0_TRY(world.recv(&count, 1, DType::I64, r, kTagGather));
        std::vector<std::int64_t> flat(std::size_t(count) * 6);
        DAY0_TRY(world.recv(flat.data(), flat.size(), DType::I64, r, kTagGather));
        for (std::int64_t i = 0; i < count; ++i) {
            const auto* f = flat.data() + i * 6;
            out.events.push_back(
                { r, comm::CollectiveKind(f[0]), f[1], f[2], f[3], int(f[4]), CommGroup(f[5]) });
        }
        if (!holds(r)) {
            continue;
        }
        auto& seqs = byReplica[std::size_t(checkpoint::rankCoord(l, r).dpRank)];
        for (int i = 0; i < o.microBatches; ++i) {
            std::int64_t head[3] = {};
            DAY0_TRY(world.recv(head, 3, DType::I64, r, kTagGather));
            SequenceResult q;
            q.prompt.resize(std::size_t(head[0]));
            q.generated.resize(std::size_t(head[1]));
            q.logits.resize(std::size_t(head[2]));
            DAY0_TRY(world.recv(q.prompt.data(), q.prompt.size(), DType::I64, r, kTagGather));
            DAY0_TRY(world.recv(q.generated.data(), q.generated.size(), DType::I64, r, kTagGather));
            DAY0_TRY(world.recv(q.logits.data(), q.logits.size(), DType::F32, r, kTagGather));
            seqs.push_back(std::move(q));
        }
    }
    for (auto& seqs : byReplica) {
        for (auto& q : seqs) {
            out.sequences.push_back(std::move(q));
        }
    }
    out.seconds = state.seconds;
    return success();
}

} // namespace

std::int64_t ParallelRunResult::nativeCalls() const
{
    std::int64_t n = 0;
    for (const RankSummary& r : ranks) {
        n += r.nativeCalls;
    }
    return n;
}

std::int64_t ParallelRunResult::fallbackCalls() const
{
    std::int64_t n = 0;
    for (const RankSummary& r : ranks) {
        n += r.fallbackCalls;
    }
    return n;
}

std::string layoutString(const checkpoint::ShardLayout& l, int microBatches)
{
    return fmt::format("tp={},pp={},ep={},dp={},etp={},mb={}{}", l.tp, l.pp, l.ep, l.dp, l.etp(),
        microBatches, l.sp && l.tp > 1 ? ",sp=on" : "");
}

Result<void> checkExecutorCovers(const model::ModelSpec& spec, bool onBackend)
{
    auto missing = exec::unsupportedFeatures(spec);
    // DeepSeek-V4's sinks and trailing RoPE lanes run in its own block (deepseek_v4.cpp).
    const bool v4 = spec.family == model::Family::DeepseekV4;
    // The sharded executor covers decoder text models with per-expert tensors.
    // Qwen3.5's tower is not computed by the single-rank engine either (requiredWeights leaves
    // it out, Engine::run refuses an image by name), nor Gemma-4's towers; a sharded run takes
    // token prompts only.
    if (spec.vision && !exec::detail::isQwenNext(spec) && spec.family != model::Family::Gemma4) {
        missing.push_back(fmt::format("sharded runs of the vision tower of {}", spec.modelType));
    }
    // Nemotron-H's layers are one block each (no mixer in its MLP layers, no MLP in its mixer
    // layers): hybrid.cpp runs them.
    // Gemma-4's per-layer head widths and MLP widths run in gemma4.cpp.
    const bool ownLayers
        = spec.family == model::Family::NemotronH || spec.family == model::Family::Gemma4;
    for (const auto& layer : spec.layers) {
        if (ownLayers) {
            continue;
        }
        if (layer.mixer == model::MixerKind::None || layer.mixer == model::MixerKind::Linear
            || layer.ffn == model::FfnKind::None || layer.ffn == model::FfnKind::Linear
            || layer.numKvHeads != 0 || layer.ffnWidth != 0) {
            missing.push_back(fmt::format("sharded runs of the per-layer blocks of {} (no-op and "
                                          "linear blocks, per-layer KV heads and MLP widths)",
                spec.modelType));
            break;
        }
    }
    if (spec.family == model::Family::Hunyuan) {
        missing.push_back("sharded runs of hunyuan (its router mlp.gate.wg, shared_mlp and q/k "
                          "norms after RoPE)");
    }
    if (spec.qkNormAcrossHeads) {
        missing.push_back(
            fmt::format("sharded runs of the q/k norms across heads of {}", spec.modelType));
    }
    // Gemma-4's proportional RoPE is built per layer type by gemma4.cpp; MiniMax-M3's partial
    // RoPE (rotary_dim lanes, rotate-half) as the single-rank engine builds it (init).
    if (spec.partialRotaryFactor != 1.0 && spec.attention != model::AttentionKind::MLA
        && !exec::detail::isQwenNext(spec) && spec.family != model::Family::Gemma4
        && spec.family != model::Family::MiniMaxM3 && !v4) {
        missing.push_back(
            fmt::format("sharded runs of the partial rotary embedding of {}", spec.modelType));
    }
    if (spec.attentionSinks && !v4) {
        missing.push_back(fmt::format("sharded runs of the attention sinks of {}", spec.modelType));
    }
    if (spec.mla.indexerHeads > 0) {
        missing.push_back(
            fmt::format("sharded runs of the DSA sparse-attention indexer of {}", spec.modelType));
    }
    // MiniMax-M3's MSA runs in minimax_m3.cpp when the index heads are its KV heads (the one
    // layout the single-rank engine accepts).
    if (spec.blockSparse && spec.family != model::Family::MiniMaxM3) {
        missing.push_back(fmt::format(
            "sharded runs of the MiniMax-M3 sparse attention (MSA block selection) of {}",
            spec.modelType));
    }
    // Qwen3-Next's and MiniMax-M3's (1 + w) norms are applied at load (weights.cpp).
    if (spec.normOffset && !exec::detail::isQwenNext(spec)
        && spec.family != model::Family::MiniMaxM3) {
        missing.push_back(
            fmt::format("sharded runs of the (1 + w) RMSNorms of {}", spec.modelType));
    }
    if ((spec.hiddenAct == "swiglu_oai" || spec.hiddenAct == "swigluoai")
        && spec.family != model::Family::MiniMaxM3) {
        missing.push_back(
            fmt::format("sharded runs of the clamped SwiGLU (swiglu_oai) of {}", spec.modelType));
    }
    // Qwen3.5's and Gemma-4's fused experts (one layout) are split per expert from the full
    // checkpoint (weights.cpp).
    if (spec.moe && spec.moe->packedExperts && !exec::detail::isQwenNext(spec)
        && spec.family != model::Family::Gemma4) {
        missing.push_back(
            fmt::format("sharded runs of the fused 3-D experts of {}", spec.modelType));
    }
    // DeepSeek-V4's block runs in deepseek_v4.cpp on the CPU reference loops of the single-rank
    // engine, which no backend computes.
    if (spec.family == model::Family::DeepseekV4 && onBackend) {
        missing.push_back(fmt::format("sharded runs of {} on a backend (its block runs on the "
                                      "CPU reference only)",
            spec.modelType));
    }
    if (spec.linearAttention && !exec::detail::isQwenNext(spec)
        && spec.family != model::Family::KimiLinear) {
        missing.push_back(
            fmt::format("sharded runs of the linear-attention (Kimi Delta Attention) layers of {}",
                spec.modelType));
    }
    // Kimi-K3's additions run on the single-rank engine only (ffn_block.cpp, kimi_attn_res.cpp).
    if (spec.hiddenAct == "situ") {
        missing.push_back(
            fmt::format("sharded runs of the SiTU-GLU activation of {}", spec.modelType));
    }
    if (spec.attnResBlockSize > 0) {
        missing.push_back(fmt::format("sharded runs of the Block Attention Residuals of {} "
                                      "(attn_res_block_size {})",
            spec.modelType, spec.attnResBlockSize));
    }
    if (!missing.empty()) {
        return Error::unsupported(
            fmt::format("the parallel executor lacks: {}", fmt::join(missing, "; ")));
    }
    return success();
}

Result<ParallelRunResult> runParallelRank(comm::Communicator& world, const model::ModelSpec& spec,
    const exec::WeightSource& weights, const ParallelRunOptions& o, CommRecorder& recorder,
    Progress& progress, std::stop_token stop)
{
    const auto& l = o.layout;
    // Agreement first: a rank started with another plan may also expect another world size.
    DAY0_TRY(checkAgreement(world,
        { layoutString(l, o.microBatches), exec::modelFingerprint(spec), o.checkpointId,
            fmt::format("{} new tokens, {} prompts", o.newTokens, o.prompts.size()) },
        { "plan", "model", "checkpoint", "inputs" }));
    if (world.size() != l.worldSize()) {
        return Error::badInput(
            fmt::format("--plan {} needs {} ranks (pp × dp × tp) but {} were started",
                layoutString(l, o.microBatches), l.worldSize(), world.size()));
    }
    if (o.microBatches < 1 || o.prompts.size() != std::size_t(l.dp * o.microBatches)
        || o.newTokens < 1) {
        return Error::badInput(fmt::format(
            "a parallel run needs dp × micro-batches = {} prompts and at least one new token; "
            "got {} prompts",
            l.dp * o.microBatches, o.prompts.size()));
    }
    for (const auto& p : o.prompts) {
        if (p.empty()) {
            return Error::badInput("a parallel run got an empty prompt");
        }
    }
    DAY0_TRY(checkExecutorCovers(spec, bool(o.backendFor)));
    DAY0_TRY(checkPlanFits(spec, l));
    const checkpoint::RankCoord c = checkpoint::rankCoord(l, world.rank());
    recorder.setLayout(l);
    progress.setTotal(o.newTokens * o.microBatches);
    progress.setStage("loading weights");
    std::int64_t weightBytes = 0;
    exec::detail::WeightTable whole;
    std::unique_ptr<detail::RankStream> stream;
    if (o.stream.on()) {
        if (o.backendFor) {
            return Error::unsupported("--stream: streamed ranks compute on the CPU reference; "
                                      "run the plan on a backend without --stream");
        }
        auto opened = detail::RankStream::open(spec, o.stream.file(world.rank()), l, c, o.stream);
        if (!opened) {
            return opened.error().withContext(fmt::format("rank {}", world.rank()));
        }
        stream = std::move(*opened);
    } else {
        const exec::WeightSource* own = o.rankSource ? o.rankSource(world.rank()) : nullptr;
        if (o.rankSource && own == nullptr) {
            return Error::internal(
                fmt::format("rank {}: its shard file is not open", world.rank()));
        }
        auto table = own != nullptr
            ? detail::loadRankWeights(spec, *own, l, c, weightBytes, stop, true)
            : detail::loadRankWeights(spec, weights, l, c, weightBytes, stop);
        if (!table) {
            return table.error().withContext(fmt::format("rank {}", world.rank()));
        }
        whole = std::move(*table);
    }
    auto groups = detail::splitRankGroups(world, l, c);
    if (!groups) {
        return groups.error();
    }
    // Declared before the forward pass, which releases the backend's weights when it ends.
    std::shared_ptr<exec::Backend> backend;
    detail::ParallelForward forward(spec, stream ? stream->table() : whole, l, c, groups->view());
    DAY0_TRY(forward.init());
    if (stream) {
        forward.setPhaseHook([&](int phase) { return stream->enter(phase, stop); });
    }
    if (o.backendFor) {
        auto made = o.backendFor(world.rank());
        if (!made) {
            return made.error().withContext(fmt::format("rank {}: backend", world.rank()));
        }
        backend = std::move(*made);
        forward.setBackend(backend.get());
    }
    progress.setStage("prefill and decode");
    auto state = runSchedule(world, forward, spec, o, c, progress, stop);
    if (!state) {
        return state.error().withContext(fmt::format("rank {}", world.rank()));
    }
    std::int64_t streamBytesRead = 0;
    if (stream) {
        stream->release();
        weightBytes = stream->stats().largestPhaseBytes;
        streamBytesRead = stream->stats().bytesRead;
    }
    recorder.setEnabled(world.rank(), false);
    ParallelRunResult out;
    auto machine = calibrate(world);
    if (!machine) {
        return machine.error();
    }
    out.machine = *machine;
    out.dispatch = forward.dispatchReport();
    const RankSummary mine { world.rank(), c, weightBytes, streamBytesRead, state->seconds,
        out.dispatch.nativeCalls(), out.dispatch.fallbackCalls() };
    DAY0_TRY(gather(world, o, *state, recorder.eventsOf(world.rank()), mine, out));
    if (world.rank() != 0) {
        out.ranks = { mine };
        out.events = recorder.eventsOf(world.rank());
    }
    return out;
}

Result<ParallelRunResult> runParallelInProcess(const model::ModelSpec& spec,
    const exec::WeightSource& weights, const ParallelRunOptions& options, Progress& progress,
    std::stop_token stop, RankProgress* rankProgress, std::vector<profile::CpuTracer*> tracers,
    comm::InProcessOptions commOptions)
{
    const int world = options.layout.worldSize();
    CommRecorder recorder(std::move(tracers));
    recorder.setLayout(options.layout);
    RankProgress local;
    RankProgress& perRank = rankProgress != nullptr ? *rankProgress : local;
    if (perRank.ranks.size() != std::size_t(world)) {
        perRank.ranks.clear();
        for (int r = 0; r < world; ++r) {
            perRank.ranks.push_back(std::make_unique<Progress>());
        }
    }
    for (auto& p : perRank.ranks) {
        p->setDone(0);
    }
    ParallelRunOptions o = options;
    o.sharedProgress = &progress;
    progress.setTotal(std::int64_t(world) * options.newTokens * options.microBatches);
    progress.setStage(fmt::format("{} in-process ranks", world));
    ParallelRunResult result;
    auto outcome = comm::runInProcess(
        world,
        [&](comm::Communicator& c) -> Result<void> {
            auto r = runParallelRank(
                c, spec, weights, o, recorder, *perRank.ranks[std::size_t(c.rank())], stop);
            if (!r) {
                return r.error();
            }
            if (c.rank() == 0) {
                result = std::move(*r);
            }
            return success();
        },
        commOptions, recorder.observer());
    if (!outcome) {
        return outcome.error();
    }
    return result;
}

} // namespace day0::parallel
