// day0 shard <checkpoint> --plan tp=4,pp=2,ep=4 --out DIR: one safetensors file per rank +
// plan.json.
#include "actions/records.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/sharding.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace day0::cli {

namespace {

namespace ck = day0::checkpoint;

struct ShardArgs {
    std::string path;
    std::string plan;
    std::string out;
    int jobs = 0;
    bool force = false;
};

int runShard(const ShardArgs& args, const GlobalOptions& global)
{
    if (auto refused = refusePartial("shard", args.path, global)) {
        return *refused;
    }
    auto layout = ck::parseShardLayout(args.plan);
    if (!layout) {
        return reportError(layout.error());
    }
    ck::HashOptions hash;
    hash.threads = args.jobs;
    const auto started = std::chrono::steady_clock::now();
    Progress progress;
    ck::ShardSummary summary;
    {
        ProgressBar bar(progress, "sharding", !global.quiet);
        auto r = ck::shardCheckpoint(
            args.path, args.out, *layout, hash, args.force, progress, interruptToken());
        if (!r) {
            return reportError(r.error());
        }
        summary = std::move(*r);
    }
    const auto runId = recordResult(actions::shardRunRecord(args.path, args.out, args.plan, summary,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
    if (global.json) {
        nlohmann::json j { { "source", args.path }, { "out", args.out },
            { "layout",
                { { "tp", layout->tp }, { "pp", layout->pp }, { "ep", layout->ep },
                    { "dp", layout->dp }, { "etp", layout->etp() }, { "edp", layout->edp() } } },
            { "ranks", summary.ranks },
            { "run_id", runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr) },
            { "tensors", summary.tensors }, { "bytes", summary.bytes },
            { "files", summary.files } };
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        fmt::print(
            "{} → {}: {} tensors over {} ranks (tp={} pp={} ep={} dp={} etp={}), {} written\n",
            args.path, args.out, summary.tensors, summary.ranks, layout->tp, layout->pp, layout->ep,
            layout->dp, layout->etp(), formatBytes(Bytes(std::int64_t(summary.bytes))));
    }
    return 0;
}

const bool registered = registerCommand({ "shard",
    "split a checkpoint into one file per rank for a plan", 60,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<ShardArgs>();
        app.add_option("checkpoint", args->path, "checkpoint folder (with config.json)")
            ->required();
        app.add_option("--plan", args->plan, "parallel layout, e.g. tp=4,pp=2,ep=4")->required();
        app.add_option("--out", args->out, "output folder (must not exist or be empty)")
            ->required();
        app.add_option("-j,--jobs", args->jobs, "hashing threads (default: one per core)");
        app.add_flag("--force", args->force, "replace a non-empty output folder");
        return [args, &global] { return runShard(*args, global); };
    } });

} // namespace

} // namespace day0::cli
