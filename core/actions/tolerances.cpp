#include "actions/tolerances.h"

#include "actions/gradients.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

/// config.json's bos_token_id of a checkpoint folder, when it names one.
std::optional<std::int64_t> bosTokenOf(const fs::path& checkpoint)
{
    const fs::path config = fs::is_directory(checkpoint) ? checkpoint / "config.json" : fs::path();
    if (config.empty() || !fs::exists(config)) {
        return std::nullopt;
    }
    auto j = readJsonFile(config);
    if (!j || !j->contains("bos_token_id") || !(*j)["bos_token_id"].is_number_integer()) {
        return std::nullopt;
    }
    return (*j)["bos_token_id"].get<std::int64_t>();
}

std::string promptLabel(const std::vector<std::int64_t>& start, int tokens)
{
    return fmt::format(
        "{} continued by the fp32 model to {} tokens", fmt::join(start, ", "), tokens);
}

std::vector<std::int64_t> startTokens(
    const fs::path& checkpoint, int r, std::uint64_t seed, std::int64_t vocab)
{
    std::vector<std::int64_t> start;
    if (const auto bos = bosTokenOf(checkpoint)) {
        start.push_back(*bos);
    }
    if (r > 0 || start.empty()) {
        // A fixed, well-spread pick (splitmix64 of seed and r), away from the special ids.
        std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL + std::uint64_t(r) + 1;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        const std::int64_t low = std::min<std::int64_t>(3, vocab - 1);
        start.push_back(
            low + std::int64_t(z % std::uint64_t(std::max<std::int64_t>(1, vocab - low))));
    }
    return start;
}

/// Removes a scratch folder when it goes out of scope.
struct ScratchFolder {
    fs::path path;
    ~ScratchFolder()
    {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

/// One gradient pass of `checkpoint` over `ids` into `dump` (inject mode when `inject` is set).
Result<void> gradientPass(const fs::path& checkpoint, const std::vector<std::int64_t>& ids,
    std::optional<exec::PrecisionMode> precision, const fs::path& dump, const fs::path& inject,
    const std::string& where, std::stop_token stop)
{
    GradientRequest r;
    r.checkpoint = checkpoint.string();
    r.ids = ids;
    r.dump = dump;
    r.inject = inject;
    if (precision) {
        r.fp64 = false;
        r.emulated = *precision;
    }
    Progress quiet;
    auto done = checkpointGradients(r, quiet, stop);
    if (!done) {
        return done.error().withContext(where);
    }
    return success();
}

/// The healthy gradient runs of one prompt: an fp64 reference pass, then per precision the
/// propagated and the inject-mode pass, each compared with the reference.
Result<void> gradientRuns(const DeriveTolerancesRequest& request, const fs::path& checkpoint,
    const std::string& model, const HealthyPrompt& prompt, int r,
    const numerics::ToleranceTable& base, const fs::path& scratch,
    std::vector<numerics::HealthyRun>& out, Progress& progress, std::stop_token stop)
{
    const fs::path reference = scratch / "fp64";
    DAY0_TRY(gradientPass(checkpoint, prompt.ids, std::nullopt, reference, {},
        fmt::format("{} fp64 gradient pass, prompt {}", model, r), stop));
    auto ref = checkpoint::readDump(reference);
    if (!ref) {
        return ref.error();
    }
    for (const auto precision : request.precisions) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        const std::string name(exec::precisionName(precision));
        progress.setStage(
            fmt::format("{} {} gradients, run {} of {}", model, name, r + 1, request.runs));
        const fs::path target = scratch / name;
        const fs::path inject = scratch / (name + "-inject");
        const std::string where = fmt::format("{} {} gradient pass, prompt {}", model, name, r);
        DAY0_TRY(gradientPass(checkpoint, prompt.ids, precision, target, {}, where, stop));
        DAY0_TRY(gradientPass(
            checkpoint, prompt.ids, precision, inject, reference, where + " (inject mode)", stop));
        auto t = checkpoint::readDump(target);
        auto l = t ? checkpoint::readDump(inject) : Result<numerics::Dump>(t.error());
        if (!l) {
            return l.error();
        }
        numerics::CompareOptions compare;
        compare.table = &base;
        compare.everyFlipReach = true;
        Progress inner;
        numerics::HealthyRun run;
        run.model = model;
        run.prompt = prompt.label;
        run.dtype = exec::precisionDType(precision);
        run.gradients = true;
        auto propagated = numerics::compareDumps(*ref, *t, compare, inner, stop);
        if (!propagated) {
            return propagated.error().withContext(where);
        }
        compare.local = &*l;
        auto local = numerics::compareDumps(*ref, *t, compare, inner, stop);
        if (!local) {
            return local.error().withContext(where);
        }
        run.propagated = std::move(*propagated);
        run.local = std::move(*local);
        out.push_back(std::move(run));
        progress.advance();
    }
    return success();
}

} // namespace

Result<HealthyPrompt> healthyPrompt(const fs::path& checkpoint, exec::Engine& fp32,
    std::int64_t vocab, int r, int tokens, std::uint64_t seed, Progress& progress,
    std::stop_token stop)
{
    HealthyPrompt out;
    const auto start = startTokens(checkpoint, r, seed, vocab);
    out.label = promptLabel(start, tokens);
    out.ids = start;
    if (int(out.ids.size()) >= tokens) {
        out.ids.resize(std::size_t(tokens));
        return out;
    }
    exec::RunOptions o;
    o.promptIds = start;
    o.newTokens = tokens - std::int64_t(start.size());
    auto text = fp32.run(o, progress, stop);
    if (!text) {
        return text.error();
    }
    out.ids.insert(out.ids.end(), text->generated.begin(), text->generated.end());
    return out;
}

Result<DeriveTolerancesOutcome> deriveTolerances(
    const DeriveTolerancesRequest& request, Progress& progress, std::stop_token stop)
{
    if (request.checkpoints.empty() || request.precisions.empty()) {
        return Error::badInput("name at least one checkpoint and one precision");
    }
    if (request.runs < 1 || request.tokens < 2) {
        return Error::badInput(
            fmt::format("--runs {} and --tokens {}: at least one run of two tokens", request.runs,
                request.tokens));
    }
    for (const auto p : request.precisions) {
        if (request.gradients) {
            // The gradient pass emulates these (exec::GradientOptions::emulated) against fp64.
            if (p != exec::PrecisionMode::BF16 && p != exec::PrecisionMode::F16
                && p != exec::PrecisionMode::F32) {
                return Error::badInput(fmt::format(
                    "--precision {} with --grad: the gradient pass runs bf16, fp16 or fp32 "
                    "against its fp64 reference",
                    exec::precisionName(p)));
            }
            continue;
        }
        if (p == exec::PrecisionMode::F32 || p == exec::PrecisionMode::F64) {
            return Error::badInput(fmt::format(
                "--precision {}: a reference precision; derive limits for the emulated ones "
                "(bf16, fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, int4, int4-g32)",
                exec::precisionName(p)));
        }
    }
    auto base = numerics::resolveToleranceTable(request.base);
    if (!base) {
        return base.error();
    }
    DeriveTolerancesOutcome out;
    ScratchFolder scratch;
    if (request.gradients) {
        std::error_code ec;
        const fs::path root
            = request.scratch.empty() ? fs::temp_directory_path(ec) : request.scratch;
        scratch.path = root
            / fmt::format("day0-derive-gradients-{}",
                std::chrono::steady_clock::now().time_since_epoch().count());
        fs::create_directories(scratch.path, ec);
        if (ec) {
            return Error::badInput(
                fmt::format("{}: cannot create the scratch folder for the gradient "
                            "dumps: {}",
                    scratch.path.string(), ec.message()));
        }
    }
    progress.setTotal(
        std::int64_t(request.checkpoints.size() * request.precisions.size()) * request.runs);
    for (const auto& checkpoint : request.checkpoints) {
        auto opened = exec::openCheckpoint(checkpoint);
        if (!opened) {
            return opened.error();
        }
        const auto* spec = &opened->spec;
        const auto& weights = opened->weights;
        const std::string model = checkpoint.filename().empty()
            ? checkpoint.parent_path().filename().string()
            : checkpoint.filename().string();
        Progress quiet;
        auto fp32 = exec::Engine::create(*spec, *weights, false, quiet, stop);
        if (!fp32) {
            return fp32.error().withContext(model);
        }
        for (int r = 0; r < request.runs; ++r) {
            auto prompt = healthyPrompt(
                checkpoint, *fp32, spec->vocabSize, r, request.tokens, request.seed, quiet, stop);
            if (!prompt) {
                return prompt.error().withContext(fmt::format("{}, prompt {}", model, r));
            }
            if (request.gradients) {
                DAY0_TRY(gradientRuns(request, checkpoint, model, *prompt, r, *base, scratch.path,
                    out.runs, progress, stop));
                continue;
            }
            for (const auto precision : request.precisions) {
                if (stop.stop_requested()) {
                    return Error::cancelled();
                }
                progress.setStage(fmt::format("{} {} run {} of {}", model,
                    exec::precisionName(precision), r + 1, request.runs));
                exec::PrecisionRunOptions o;
                o.target = exec::PrecisionPlan { precision, {}, {}, exec::Fp8Scaling::PerTensor };
                o.reference = request.reference;
                o.inject = true;
                o.promptIds = prompt->ids;
                o.newTokens = 1;
                o.table = &*base;
                Progress inner;
                auto result = exec::runWithReference(*spec, *weights, o, inner, stop);
                if (!result) {
                    return result.error().withContext(
                        fmt::format("{} {} prompt {}", model, exec::precisionName(precision), r));
                }
                numerics::HealthyRun run;
                run.model = model;
                run.prompt = prompt->label;
                run.dtype = exec::precisionDType(precision);
                run.local = std::move(*result->comparison);
                numerics::CompareOptions compare;
                compare.table = &*base;
                auto propagated = numerics::compareDumps(
                    result->reference->dump, result->target.dump, compare, inner, stop);
                if (!propagated) {
                    return propagated.error().withContext(model);
                }
                run.propagated = std::move(*propagated);
                out.runs.push_back(std::move(run));
                progress.advance();
            }
        }
    }
    auto table = numerics::deriveToleranceTable(out.runs, *base, request.derivation);
    if (!table) {
        return table.error();
    }
    out.table = std::move(*table);
    if (!request.out.empty()) {
        DAY0_TRY(writeFileAtomic(request.out, out.table.dump(2) + "\n"));
    }
    return out;
}

} // namespace day0::actions
