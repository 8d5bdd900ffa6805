// `day0 run`'s modes beside the generation (cmd_run_args.h): the refusals of --layers, --stream
// and --grad, and the --grad mode.
#include "actions/gradients.h"
#include "base/json_util.h"
#include "cmd_run_args.h"
#include "exec/engine.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace day0::cli::run_detail {

namespace {

/// The first option in `refused` that is set, as "`mode` does not run with <option>".
std::optional<Error> firstRefused(
    const char* mode, const std::vector<std::pair<bool, const char*>>& refused)
{
    for (const auto& [bad, what] : refused) {
        if (bad) {
            return Error::badInput(fmt::format("{} does not run with {}", mode, what));
        }
    }
    return std::nullopt;
}

} // namespace

Result<std::vector<std::int64_t>> parseIds(const std::string& text)
{
    std::vector<std::int64_t> ids;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        const std::string item
            = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) {
            try {
                std::size_t used = 0;
                ids.push_back(std::stoll(item, &used));
                if (used != item.size()) {
                    throw std::invalid_argument(item);
                }
            } catch (const std::exception&) {
                return Error::badInput(fmt::format("--ids: '{}' is not an integer token id", item));
            }
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    if (ids.empty()) {
        return Error::badInput("--ids: no token ids given");
    }
    return ids;
}

std::optional<Error> refuseWithSlice(const RunArgs& a)
{
    if (a.layers.empty()) {
        if (!a.sliceInput.empty()) {
            return Error::badInput("--slice-input feeds a slice of the layers; add --layers A-B");
        }
        return std::nullopt;
    }
    if (auto refused = firstRefused("--layers",
            {
                { !a.planned.plan.empty(), "--plan" },
                { !a.reference.empty(),
                    "--reference (compare the slice's dump with day0 compare)" },
                { a.inject, "--inject" },
                { a.fp32Leg, "--fp32-leg" },
                { a.backend != "cpu", "--backend (a slice runs on the CPU reference)" },
                { !a.image.empty(), "--image" },
                { !a.prompt.empty(), "--prompt (a slice runs the tokens of its input dump)" },
                { a.precision != "fp32" && a.precision != "fp64",
                    "--precision other than fp32/fp64 (a slice runs the reference)" },
                { !a.opPrecision.empty(), "--op-precision" },
                { !a.layerPrecision.empty(), "--layer-precision" },
                { !a.stateDtype.empty(), "--state-dtype" },
            })) {
        return refused;
    }
    if (a.sliceInput.empty()) {
        return Error::badInput("--layers needs --slice-input DIR: the dump of a prior run holding "
                               "the residual stream entering the first layer");
    }
    return std::nullopt;
}

std::optional<Error> refuseWithStream(const RunArgs& a)
{
    if (!a.memoryBudgetPerRank.empty()) {
        if (a.planned.plan.empty()) {
            return Error::badInput("--memory-budget-per-rank bounds each rank of a --plan run; a "
                                   "single-rank run takes --memory-budget");
        }
        if (!a.memoryBudget.empty()) {
            return Error::badInput("--memory-budget and --memory-budget-per-rank are two "
                                   "meanings of one bound: give one");
        }
    }
    if (!a.stream) {
        if (!a.memoryBudget.empty() || !a.memoryBudgetPerRank.empty()) {
            return Error::badInput(fmt::format("{} bounds a streamed run's weights; add --stream",
                a.memoryBudget.empty() ? "--memory-budget-per-rank" : "--memory-budget"));
        }
        return std::nullopt;
    }
    // With --reference the reference streams and a backend target loads whole (the output says
    // so); alone, the target itself must stream.
    const bool alone = a.reference.empty();
    return firstRefused("--stream",
        {
            { a.inject && alone, "--inject (needs the reference run)" },
            { a.fp32Leg && alone, "--fp32-leg (needs the reference run)" },
            { a.backend != "cpu" && alone,
                "--backend (streamed runs compute on the CPU reference; add --reference to stream "
                "the reference beside a backend target)" },
            { !a.image.empty(), "--image (the vision tower is not streamed)" },
        });
}

int runGradients(const RunArgs& a, const GlobalOptions& global)
{
    if (auto refused = firstRefused("--grad",
            {
                { !a.planned.plan.empty(), "--plan" },
                { !a.reference.empty(),
                    "--reference (compare two gradient dumps with day0 compare)" },
                { a.inject, "--inject" },
                { a.fp32Leg, "--fp32-leg" },
                { a.backend != "cpu", "--backend (gradients run on the CPU reference)" },
                { a.stream, "--stream" },
                { !a.layers.empty() || !a.sliceInput.empty(), "--layers / --slice-input" },
                { !a.image.empty(), "--image" },
                { !a.prompt.empty(), "--prompt (give the sequence as --ids)" },
                { a.precision != "fp32" && a.precision != "fp64" && a.precision != "bf16"
                        && a.precision != "fp16",
                    "--precision other than fp64/fp32/bf16/fp16 (the emulated backward "
                    "rounds to bf16 or fp16)" },
                { !a.opPrecision.empty(), "--op-precision" },
                { !a.layerPrecision.empty(), "--layer-precision" },
                { !a.stateDtype.empty() || a.state, "--state-dtype / --capture-state" },
            })) {
        return reportError(*refused);
    }
    if (!a.targets.empty() && a.ids.empty()) {
        return reportError(Error::badInput("--targets needs --ids"));
    }
    actions::GradientRequest request;
    request.checkpoint = a.checkpoint;
    request.fp64 = a.precision == "fp64";
    if (a.precision == "bf16" || a.precision == "fp16") {
        request.emulated
            = a.precision == "bf16" ? exec::PrecisionMode::BF16 : exec::PrecisionMode::F16;
    }
    auto ids = parseIds(a.ids);
    if (!ids) {
        return reportError(ids.error());
    }
    request.ids = std::move(*ids);
    if (!a.targets.empty()) {
        auto targets = parseIds(a.targets);
        if (!targets) {
            return reportError(targets.error().withContext("--targets"));
        }
        request.targets = std::move(*targets);
    }
    request.dump = a.dump;
    request.inject = a.injectFrom;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "gradients", !global.quiet);
    auto ran = actions::checkpointGradients(request, progress, interruptToken());
    bar.reset();
    if (!ran) {
        return reportError(ran.error());
    }
    const auto& r = ran->result;
    const auto runId = recordResult(ran->record);
    if (global.json) {
        nlohmann::json j = { { "model", ran->spec.name },
            { "fingerprint", exec::modelFingerprint(ran->spec) }, { "precision", a.precision },
            { "ids", request.ids }, { "targets", ran->targets }, { "loss", r.loss },
            { "counted", r.counted }, { "parameters", ran->checkpointParameters },
            { "activations", r.activations.size() }, { "grad_norm", ran->gradNorm },
            { "seconds", ran->seconds } };
        if (!a.dump.empty()) {
            j["dump"] = a.dump;
        }
        j["mode"] = a.injectFrom.empty() ? "propagate" : "inject";
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        fmt::print("{}\n", dumpJson(j, 2));
        return 0;
    }
    fmt::print("{} ({}): loss {:.10g} over {} positions\n", ran->spec.name, a.precision, r.loss,
        r.counted);
    fmt::print("  {} parameter gradients (global norm {:.6g}), {} anchor gradients, {:.3f} s\n",
        ran->checkpointParameters, ran->gradNorm, r.activations.size(), ran->seconds);
    if (!a.dump.empty()) {
        fmt::print("dump: {}{}\n", a.dump,
            a.injectFrom.empty()
                ? ""
                : fmt::format(" (inject mode: {}'s gradient injected at every "
                              "module boundary; day0 compare {} TARGET --local {})",
                    a.injectFrom, a.injectFrom, a.dump));
    }
    return 0;
}

} // namespace day0::cli::run_detail
