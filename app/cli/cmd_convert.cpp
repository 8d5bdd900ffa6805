// day0 convert <checkpoint> --dtype bf16 --out DIR: a new sharded checkpoint in another dtype.
#include "actions/records.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/convert.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace day0::cli {

namespace {

namespace ck = day0::checkpoint;

struct ConvertArgs {
    std::string path;
    std::string out;
    std::string dtype = "bf16";
    bool onlyFp8 = false;
    double maxShardGb = 5.0;
    int jobs = 0;
    bool force = false;
};

int runConvert(const ConvertArgs& args, const GlobalOptions& global)
{
    if (auto refused = refusePartial("convert", args.path, global)) {
        return *refused;
    }
    const auto dtype = parseDTypeLoose(args.dtype);
    if (!dtype) {
        return reportError(Error::badInput(
            fmt::format("--dtype '{}': expected f32, bf16, f16 or f8_e4m3", args.dtype)));
    }
    if (args.maxShardGb <= 0) {
        return reportError(Error::badInput("--max-shard-size must be positive (GB)"));
    }
    ck::ConvertOptions options;
    options.dtype = *dtype;
    options.onlyFp8 = args.onlyFp8;
    options.sharding.maxShardBytes = std::uint64_t(args.maxShardGb * 1e9);
    options.threads = args.jobs;
    options.hash.threads = args.jobs;
    options.replace = args.force;
    const auto started = std::chrono::steady_clock::now();
    Progress progress;
    ck::ConvertSummary summary;
    {
        ProgressBar bar(progress, "converting", !global.quiet);
        auto r = ck::convertCheckpoint(args.path, args.out, options, progress, interruptToken());
        if (!r) {
            return reportError(r.error());
        }
        summary = std::move(*r);
    }
    const auto runId = recordResult(actions::convertRunRecord(args.path, args.out, options, summary,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
    if (global.json) {
        nlohmann::json j { { "source", args.path }, { "out", args.out },
            { "dtype", std::string(dtypeName(*dtype)) }, { "tensors_in", summary.tensorsIn },
            { "tensors_out", summary.tensorsOut }, { "dequantized", summary.dequantized },
            { "quantized", summary.quantized }, { "converted", summary.converted },
            { "copied", summary.copied }, { "dropped", summary.dropped },
            { "bytes_in", summary.bytesIn },
            { "run_id", runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr) },
            { "bytes_out", summary.bytesOut }, { "files", summary.files } };
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        fmt::print("{} → {} ({}): {} tensors ({} dequantized, {} quantized, {} converted, {} "
                   "copied; {} scales dropped), {} → {}, {} files\n",
            args.path, args.out, dtypeName(*dtype), summary.tensorsOut, summary.dequantized,
            summary.quantized, summary.converted, summary.copied, summary.dropped,
            formatBytes(Bytes(std::int64_t(summary.bytesIn))),
            formatBytes(Bytes(std::int64_t(summary.bytesOut))), summary.files.size());
    }
    return 0;
}

const bool registered = registerCommand({ "convert",
    "write a checkpoint in another dtype (incl. block FP8)", 50,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<ConvertArgs>();
        app.add_option("checkpoint", args->path, "checkpoint folder or .safetensors file")
            ->required();
        app.add_option("--dtype", args->dtype, "f32, bf16, f16, or f8_e4m3 (block-scaled 128x128)")
            ->capture_default_str();
        app.add_option("--out", args->out, "output folder (must not exist or be empty)")
            ->required();
        app.add_flag("--only-fp8", args->onlyFp8,
            "only dequantize the quantized weights (block FP8, ModelOpt FP8/NVFP4, MXFP4, "
            "packed INT4, ...); keep every other tensor as it is");
        app.add_option("--max-shard-size", args->maxShardGb, "shard size limit in GB")
            ->capture_default_str();
        app.add_option("-j,--jobs", args->jobs, "threads (default: one per core)");
        app.add_flag("--force", args->force, "replace a non-empty output folder");
        return [args, &global] { return runConvert(*args, global); };
    } });

} // namespace

} // namespace day0::cli
