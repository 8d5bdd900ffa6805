// day0 memory <model> --plan …: per-rank memory of one parallel layout, itemised, for training
// or inference, with Megatron-LM's theoretical figure beside ours for training.

#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/megatron_memory.h"
#include "plan/memory_estimator.h"
#include "plan/plan_json.h"
#include "plan/plan_record.h"
#include "plan/rank_layout.h"
#include "table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace day0::cli {

namespace {

using namespace day0::plan;

struct MemoryArgs {
    std::string model;
    std::string plan;
    std::string mode = "train";
    std::string cluster;
    std::string device = "h200";
    int seq = 4096;
    int globalBatch = 1024;
    int microBatch = 0;
    int batch = 1;
    int context = 8192;
    int prompt = 0;
    int output = 1024;
    int prefillChunk = 8192;
    std::string dtype;
    std::string kvDtype;
    double reserveGiB = 0.75;
    double ncclGiB = 0.25;
    double fragmentation = 0.05;
    double expertLoad = 1.0;
    bool noFlash = false;
    bool dropout = false;
    bool noMtp = false;
    bool allRanks = false;
    bool groups = false;
    bool explain = false;
};

/// "0-7", "0, 8, 16, 24" or "0, 8, …, 248 (32 ranks)".
std::string rankList(const std::vector<int>& ranks)
{
    if (ranks.size() == 1) {
        return std::to_string(ranks.front());
    }
    const int stride = ranks[1] - ranks[0];
    bool progression = true;
    for (std::size_t i = 1; i < ranks.size(); ++i) {
        progression = progression && ranks[i] - ranks[i - 1] == stride;
    }
    if (progression && stride == 1) {
        return fmt::format("{}-{}", ranks.front(), ranks.back());
    }
    if (ranks.size() <= 6) {
        std::string out;
        for (const int r : ranks) {
            out += (out.empty() ? "" : ", ") + std::to_string(r);
        }
        return out;
    }
    return fmt::format("{}, {}, …, {} ({} ranks{})", ranks[0], ranks[1], ranks.back(), ranks.size(),
        progression ? fmt::format(", stride {}", stride) : "");
}

std::vector<GroupKind> groupKinds(bool experts)
{
    std::vector<GroupKind> kinds { GroupKind::Tensor, GroupKind::Context, GroupKind::Data,
        GroupKind::Pipeline };
    if (experts) {
        kinds.insert(
            kinds.end(), { GroupKind::ExpertTensor, GroupKind::Expert, GroupKind::ExpertData });
    }
    return kinds;
}

/// {"weights": {"bytes", "formula", "arithmetic", "terms": [{"what", "value", "inputs": [{"name",
/// "value", "unit", "source", "divides"}]}]}, ...}: how each figure of a rank was computed.
nlohmann::json derivationsJson(const std::vector<Derivation>& derivations)
{
    nlohmann::json out = nlohmann::json::object();
    for (const auto& d : derivations) {
        nlohmann::json terms = nlohmann::json::array();
        for (const auto& t : d.terms) {
            nlohmann::json inputs = nlohmann::json::array();
            for (const auto& i : t.inputs) {
                inputs.push_back({ { "name", i.name }, { "value", i.value }, { "unit", i.unit },
                    { "source", i.source }, { "divides", i.divides } });
            }
            terms.push_back({ { "what", t.what }, { "value", t.value() },
                { "arithmetic", t.arithmetic() }, { "inputs", inputs } });
        }
        out[d.figure] = { { "bytes", d.bytes.value }, { "formula", d.formula },
            { "arithmetic", d.arithmetic() }, { "terms", terms } };
    }
    return out;
}

/// Each figure of a stage with its formula, arithmetic and inputs (--explain).
void printDerivations(const RankMemory& r)
{
    fmt::print("\nHow the figures of stage {} (ranks {}-{}) are computed:\n", r.ppStage, r.rank,
        r.rank + r.ranks - 1);
    for (const auto& d : r.derivations) {
        if (d.terms.empty() && d.bytes.value == 0) {
            fmt::print("{} = 0 (nothing of this kind on the stage)\n", d.figure);
            continue;
        }
        fmt::print("{}", d.text());
    }
}

/// {"tp": {"size", "stride", "groups": [[ranks], ...]}, ...}: what the topology view colours by.
nlohmann::json groupsJson(const RankLayout& ranks, bool experts)
{
    nlohmann::json j = nlohmann::json::object();
    for (const auto kind : groupKinds(experts)) {
        j[groupKindName(kind)] = { { "size", ranks.groupSize(kind) },
            { "stride", ranks.stride(kind) }, { "groups", ranks.groups(kind) } };
    }
    return j;
}

void printGroups(const RankLayout& ranks, const hardware::Cluster& cluster, bool experts)
{
    Table table({ "group", "size", "groups", "rank 0 is with", "spans" },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Left,
            Table::Align::Left });
    for (const auto kind : groupKinds(experts)) {
        const auto members = ranks.group(kind, 0);
        const int nodes = cluster.nodeOf(members.back()) - cluster.nodeOf(members.front()) + 1;
        const bool oneDomain
            = cluster.domainOf(members.front()) == cluster.domainOf(members.back());
        table.addRow({ groupKindName(kind), std::to_string(ranks.groupSize(kind)),
            std::to_string(ranks.numGroups(kind)), rankList(members),
            oneDomain ? "one NVLink domain"
                      : fmt::format("{} nodes", std::min(nodes, int(members.size()))) });
    }
    fmt::print("Process groups (Megatron order tp-cp-ep-dp-pp; rank r runs on GPU r of node r / "
               "{}):\n{}\n",
        cluster.gpusPerNode, table.render());
}

std::string gib(Bytes b) { return formatBytes(b); }

std::string stageContents(const RankMemory& r)
{
    std::string s = fmt::format("{} layer{}", r.layers, r.layers == 1 ? "" : "s");
    if (r.embedding) {
        s += " + embedding";
    }
    if (r.head) {
        s += " + head";
    }
    if (r.mtpLayers > 0) {
        s += fmt::format(" + {} MTP", r.mtpLayers);
    }
    return s;
}

/// Every rank of the stage as its own entry (ranks of a stage share the figures).
std::vector<RankMemory> expandRanks(const MemoryReport& report)
{
    std::vector<RankMemory> out;
    for (const auto& r : report.perRank) {
        for (int i = 0; i < r.ranks; ++i) {
            RankMemory copy = r;
            copy.rank = r.rank + i;
            copy.ranks = 1;
            out.push_back(copy);
        }
    }
    return out;
}

Result<hardware::Cluster> clusterFor(const MemoryArgs& a, const ParallelPlan& plan)
{
    if (!a.cluster.empty()) {
        return hardware::parseCluster(a.cluster);
    }
    // Without a cluster: as many devices as the plan asks for, in nodes of the profile's size.
    auto device = hardware::findDeviceProfile(a.device);
    if (!device) {
        return device.error();
    }
    const int world = plan.tp * plan.pp * plan.cp * std::max(1, plan.dp);
    const int perNode = std::min(world, device->defaultGpusPerNode);
    return hardware::makeCluster(*device, (world + perNode - 1) / perNode, perNode);
}

Result<DType> dtypeOption(const std::string& flag, const std::string& value)
{
    const auto d = parseDTypeLoose(value);
    if (!d || !isFloat(*d)) {
        return Error::badInput(
            fmt::format("{} '{}': expected bf16, fp16, fp32 or fp8", flag, value));
    }
    return *d;
}

int runMemory(const MemoryArgs& a, const GlobalOptions& global)
{
    const auto mode = parseMode(a.mode);
    if (!mode) {
        return reportError(
            Error::badInput(fmt::format("--mode '{}': expected train or infer", a.mode)));
    }
    auto plan = parsePlan(a.plan);
    if (!plan) {
        return reportError(plan.error());
    }
    if (*mode == Mode::Infer
        && (plan->recompute != Recompute::None || plan->vpp > 1 || plan->globalBatch > 0
            || plan->numMicroBatches > 0 || plan->microBatch > 1)) {
        printWarning("recompute, vpp, mb, gbs and m apply to training; ignored with --mode infer "
                     "(the batch is --batch)");
    }
    if (a.cluster.empty() && plan->dp == 0) {
        plan->dp = 1;
    }
    if (a.microBatch > 0) {
        plan->microBatch = a.microBatch;
    }
    if (!a.dtype.empty()) {
        auto d = dtypeOption("--dtype", a.dtype);
        if (!d) {
            return reportError(d.error());
        }
        plan->weights = *d;
    }
    if (!a.kvDtype.empty()) {
        auto d = dtypeOption("--kv-dtype", a.kvDtype);
        if (!d) {
            return reportError(d.error());
        }
        plan->kv = *d;
    }
    if (a.seq <= 0 || a.globalBatch <= 0 || a.batch <= 0 || a.context <= 0 || a.prefillChunk <= 0
        || a.fragmentation < 0 || a.reserveGiB < 0 || a.ncclGiB < 0 || a.expertLoad < 1.0) {
        return reportError(Error::badInput("--seq, --global-batch, --batch, --context and "
                                           "--prefill-chunk must be positive, reserves >= 0, "
                                           "--expert-load >= 1"));
    }
    auto cluster = clusterFor(a, *plan);
    if (!cluster) {
        return reportError(cluster.error());
    }
    auto spec = model::loadModel(a.model, readOptions(global));
    if (!spec) {
        return reportError(spec.error());
    }
    for (const auto& warning : spec->warnings) {
        printWarning(warning);
    }
    Workload wl;
    wl.mode = *mode;
    wl.seqLength = a.seq;
    wl.globalBatch = a.globalBatch;
    wl.batch = a.batch;
    wl.context = a.context;
    wl.promptLength = a.prompt;
    wl.outputLength = a.output;
    wl.prefillChunk = a.prefillChunk;
    wl.includeMtp = !a.noMtp;
    MemoryOptions o;
    o.cudaContext = a.reserveGiB * 1073741824.0;
    o.ncclPerGroup = a.ncclGiB * 1073741824.0;
    o.fragmentation = a.fragmentation;
    o.flashAttention = !a.noFlash;
    o.dropout = a.dropout;
    o.expertLoadFactor = a.expertLoad;

    const auto graph = model::buildLayerGraph(*spec);
    const auto summary = summarizeModel(graph);
    auto layout = resolveLayout(*plan, summary, wl, *cluster);
    if (!layout) {
        return reportError(layout.error());
    }
    // The derivations are text for a reader: only --explain and --json print them.
    MemoryReport report = estimateMemory(summary, *layout, wl, *cluster, o,
        a.explain || global.json ? Derive::WithDerivations : Derive::BytesOnly);
    std::optional<MegatronMemory> megatron;
    if (*mode == Mode::Train) {
        megatron = megatronTheoreticalMemory(megatronArgsFor(summary, *layout, wl));
    }
    const int exit = report.fits ? 0 : 1;
    const auto runId = recordResult(memoryRunRecord(summary, *cluster, wl, report));

    if (global.json) {
        if (a.allRanks) {
            report.perRank = expandRanks(report);
        }
        auto j = memoryReportJson(report, megatron ? &*megatron : nullptr);
        for (std::size_t i = 0; i < report.perRank.size(); ++i) {
            j["per_rank"][i]["derivations"] = derivationsJson(report.perRank[i].derivations);
        }
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        j["model"] = spec->name;
        j["cluster"] = cluster->name;
        addPartialJson(j, *spec);
        if (a.groups) {
            j["groups"] = groupsJson(RankLayout(*layout), summary.hasMoe());
        }
        fmt::print("{}\n", dumpJson(j, 2));
        return exit;
    }

    const Layout& l = *layout;
    fmt::print("{}", partialBanner(*spec));
    fmt::print("Model    {} ({})\n", spec->name, spec->origin);
    fmt::print("Cluster  {}: {}\n", cluster->name, cluster->describe());
    fmt::print("Plan     {} → {} GPUs: tp {} × cp {} × dp {} × pp {}", formatPlan(l.toPlan()),
        l.world, l.tp, l.cp, l.dp, l.pp);
    if (summary.hasMoe()) {
        fmt::print("; experts etp {} × ep {} × edp {}", l.etp, l.ep, l.expertDp());
    }
    fmt::print("\n");
    if (*mode == Mode::Train) {
        fmt::print("Workload training, micro-batch {} × {} tokens, {} micro-batches per step "
                   "(global batch {})\n\n",
            l.microBatch, a.seq, l.numMicroBatches, l.globalBatch);
    } else {
        fmt::print("Workload serving {} sequence{} × {} tokens of context per replica\n\n",
            l.microBatch, l.microBatch == 1 ? "" : "s", a.context);
    }

    const auto rows = a.allRanks ? expandRanks(report) : report.perRank;
    Table table({ "stage", "ranks", "holds", "weights", "gradients", "optimizer", "activations",
                    "KV cache", "buffers", "total", "of device" },
        { Table::Align::Right, Table::Align::Right, Table::Align::Left, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right });
    for (const auto& r : rows) {
        const std::string ranks = r.ranks == 1 ? std::to_string(r.rank)
                                               : fmt::format("{}-{}", r.rank, r.rank + r.ranks - 1);
        table.addRow(
            { std::to_string(r.ppStage), ranks, stageContents(r), gib(r.weights), gib(r.gradients),
                gib(r.optimizer), gib(r.activations), gib(r.kvCache), gib(r.buffers), gib(r.total),
                fmt::format("{:.0f}%",
                    100.0 * double(r.total.value) / double(report.deviceMemory.value)) });
    }
    fmt::print("Memory per GPU, most loaded first{}:\n{}\n",
        a.allRanks ? "" : " (one row per pipeline stage; its ranks hold the same amounts)",
        table.render());
    if (a.explain) {
        // Per stage, not per rank: every rank of a stage has the same figures.
        for (const auto& r : report.perRank) {
            printDerivations(r);
        }
        fmt::print("\n");
    }

    const auto& top = report.perRank.front();
    if (!top.kvByKind.empty()) {
        std::string kinds;
        for (const auto& k : top.kvByKind) {
            kinds += fmt::format("{}{} {} ({} layers)", kinds.empty() ? "" : ", ",
                model::mixerKindName(k.kind), gib(k.bytes), k.layers);
        }
        fmt::print("KV cache and state of rank {} by layer kind: {}.\n", top.rank, kinds);
    }
    fmt::print(
        "Buffers of rank {}: runtime reserve {} (CUDA context {:.2f} GiB + NCCL {:.2f} GiB per "
        "communicator), pipeline/ring buffers {}, MoE dispatch {}, ZeRO {}, fragmentation {}.\n",
        top.rank, gib(top.runtimeReserve), a.reserveGiB, a.ncclGiB, gib(top.commBuffers),
        gib(top.moeDispatch), gib(top.zeroBuffers), gib(top.fragmentation));
    if (*mode == Mode::Train && top.inFlightMicroBatches > 0) {
        fmt::print("Activations of rank {} hold {:.2f} micro-batches in flight ({}).\n", top.rank,
            top.inFlightMicroBatches,
            l.vpp > 1 ? fmt::format("interleaved 1F1B, vpp={}", l.vpp) : "1F1B");
    }
    if (megatron) {
        const RankMemory* first = nullptr;
        for (const auto& r : report.perRank) {
            if (r.ppStage == 0) {
                first = &r;
            }
        }
        fmt::print(
            "Megatron-LM's theoretical memory (first stage): weights+optimizer {}, activations {}, "
            "total {}; ours for stage 0: {}, {}, {} (see the notes for what differs).\n",
            gib(Bytes(std::int64_t(megatron->weightAndOptimizer))),
            gib(Bytes(std::int64_t(megatron->activations))),
            gib(Bytes(std::int64_t(megatron->total))),
            gib(first->weights + first->gradients + first->optimizer), gib(first->activations),
            gib(first->total));
    }
    if (a.groups) {
        fmt::print("\n");
        printGroups(RankLayout(l), *cluster, summary.hasMoe());
    }
    const Bytes free = report.deviceMemory - report.maxTotal;
    fmt::print("\n{}: the most loaded GPU needs {} of {} ({} {}).\n",
        report.fits ? "Fits" : "Does not fit", gib(report.maxTotal), gib(report.deviceMemory),
        gib(Bytes(std::abs(free.value))), report.fits ? "free" : "short");
    fmt::print("\nNotes:\n");
    for (const auto& note : report.notes) {
        fmt::print("  - {}\n", note);
    }
    return exit;
}

const bool kRegistered = registerCommand({
    "memory",
    "per-GPU memory of a parallel layout (training or inference), itemised",
    20,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<MemoryArgs>();
        app.add_option("model", a->model,
               "a folder with config.json, a config.json file, or a bundled name")
            ->required();
        app.add_option("--plan", a->plan, "layout, e.g. tp=8,pp=4,ep=16,zero=1,recompute=selective")
            ->required();
        app.add_option("--mode", a->mode, "train or infer")->capture_default_str();
        app.add_option(
            "--cluster", a->cluster, "device:nodesxGPUs (h200:32x8) or a cluster JSON file");
        app.add_option("--device", a->device, "device profile when no --cluster is given")
            ->capture_default_str();
        app.add_option("--seq", a->seq, "training sequence length")->capture_default_str();
        app.add_option("--global-batch", a->globalBatch, "training sequences per step")
            ->capture_default_str();
        app.add_option(
            "--micro-batch", a->microBatch, "training sequences per micro-batch (overrides mb=)");
        app.add_option("--batch", a->batch, "inference: concurrent sequences per replica")
            ->capture_default_str();
        app.add_option("--context", a->context, "inference: tokens per sequence in the KV cache")
            ->capture_default_str();
        app.add_option(
            "--prompt", a->prompt, "inference: prompt tokens (default context - output)");
        app.add_option("--output", a->output, "inference: generated tokens per request")
            ->capture_default_str();
        app.add_option("--prefill-chunk", a->prefillChunk, "inference: tokens per prefill step")
            ->capture_default_str();
        app.add_option("--dtype", a->dtype, "weight dtype (bf16, fp8, ...; overrides weights=)");
        app.add_option("--kv-dtype", a->kvDtype, "KV-cache dtype (overrides kv=)");
        app.add_option("--reserve", a->reserveGiB, "CUDA context and workspaces per GPU, GiB")
            ->capture_default_str();
        app.add_option("--nccl", a->ncclGiB, "NCCL buffers per communicator, GiB")
            ->capture_default_str();
        app.add_option(
               "--fragmentation", a->fragmentation, "allocator headroom, fraction of allocations")
            ->capture_default_str();
        app.add_option(
               "--expert-load", a->expertLoad, "busiest rank's routed tokens over the average")
            ->capture_default_str();
        app.add_flag("--no-flash", a->noFlash, "unfused attention: keep the s×s softmax");
        app.add_flag(
            "--dropout", a->dropout, "keep dropout masks (Megatron's formula assumes them)");
        app.add_flag("--no-mtp", a->noMtp, "leave the model's MTP layers out");
        app.add_flag(
            "--all-ranks", a->allRanks, "one entry per rank instead of per pipeline stage");
        app.add_flag("--groups", a->groups, "list the TP/CP/DP/PP (and expert) process groups");
        app.add_flag("--explain", a->explain,
            "under the table, each figure of each stage with its formula and inputs (the JSON "
            "always carries them under per_rank[].derivations)");
        app.footer("Exit status: 0 when it fits, 1 when it does not, 2 on bad input.");
        return [a, &global] { return runMemory(*a, global); };
    },
});

} // namespace

} // namespace day0::cli
