// day0 shrink <config|model> --out DIR: a small random checkpoint of the same architecture.
#include "actions/records.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/shrink.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace day0::cli {

namespace {

namespace ck = day0::checkpoint;

struct ShrinkArgs {
    std::string model;
    std::string out;
    ck::ShrinkOptions options;
    double maxShardMb = 1.0;
    bool force = false;
};

int runShrink(ShrinkArgs args, const GlobalOptions& global)
{
    if (auto refused = refusePartial("shrink", args.model, global)) {
        return *refused;
    }
    if (args.maxShardMb <= 0) {
        return reportError(Error::badInput("--max-shard-size must be positive (MB)"));
    }
    args.options.sharding.maxShardBytes = std::uint64_t(args.maxShardMb * 1e6);
    args.options.replace = args.force;
    const auto started = std::chrono::steady_clock::now();
    Progress progress;
    ck::ShrinkSummary summary;
    {
        ProgressBar bar(progress, "shrinking", !global.quiet);
        auto r = ck::shrinkModel(args.model, args.out, args.options, progress, interruptToken());
        if (!r) {
            return reportError(r.error());
        }
        summary = std::move(*r);
    }
    const auto runId
        = recordResult(actions::shrinkRunRecord(args.model, args.out, args.options, summary,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
    if (global.json) {
        nlohmann::json j { { "model", args.model }, { "out", args.out },
            { "model_type", summary.modelType },
            { "run_id", runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr) },
            { "seed", args.options.seed }, { "tensors", summary.tensors },
            { "parameters", summary.parameters }, { "bytes", summary.bytes },
            { "files", summary.files }, { "notes", summary.notes } };
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        fmt::print("{} → {}: {} ({} tensors, {} parameters, {}), {} files\n", args.model, args.out,
            summary.modelType, summary.tensors, summary.parameters,
            formatBytes(Bytes(std::int64_t(summary.bytes))), summary.files.size());
        for (const auto& note : summary.notes) {
            fmt::print("  note: {}\n", note);
        }
    }
    return 0;
}

const bool registered = registerCommand({ "shrink",
    "write a small random checkpoint of the same architecture", 70,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<ShrinkArgs>();
        app.add_option(
               "model", args->model, "folder with config.json, a config.json, or a bundled name")
            ->required();
        app.add_option("--out", args->out, "output folder (must not exist or be empty)")
            ->required();
        app.add_option("--layers", args->options.layers, "decoder layers (default 4)");
        app.add_option("--hidden", args->options.hidden, "hidden size (default 128)");
        app.add_option(
            "--heads", args->options.heads, "attention heads (default: keep the GQA ratio)");
        app.add_option("--experts", args->options.experts, "routed experts (default min(E, 16))");
        app.add_option("--vocab", args->options.vocab, "vocabulary size (default min(V, 2048))");
        app.add_option(
            "--intermediate", args->options.intermediate, "dense MLP width (default: scaled)");
        app.add_option("--window", args->options.window,
            "sliding window of the layers that have one (default min(W, 4))");
        app.add_option("--chunk", args->options.chunk,
            "Mamba-2 chunk_size of the SSD scan (default min(C, 4))");
        app.add_option("--fp8-block", args->options.fp8Block,
            "block size of block-FP8 weights (default: the original's)");
        app.add_flag("--unquantized", args->options.unquantized,
            "write the shrunk model unquantised (bf16) for weight formats shrink does not "
            "generate (FP4, E8M0-scaled FP8, ModelOpt): its config drops quantization_config");
        app.add_option("--seed", args->options.seed, "random seed")->capture_default_str();
        app.add_option("--max-shard-size", args->maxShardMb, "shard size limit in MB")
            ->capture_default_str();
        app.add_flag("--force", args->force, "replace a non-empty output folder");
        return [args, &global] { return runShrink(*args, global); };
    } });

} // namespace

} // namespace day0::cli
