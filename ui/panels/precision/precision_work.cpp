#include "panels/precision/precision_work.h"

#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "exec/shrunk_cache.h"
#include "exec/tokenizer.h"
#include "history/recording.h"
#include "numerics/tensor_file.h"
#include "numerics/tolerance.h"
#include "pipeline/demo.h"
#include "pipeline/records.h"
#include "widgets/backend_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <sstream>

namespace day0::ui {

namespace fs = std::filesystem;

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Records the run when recording is enabled, built by the same function as the CLI's record of
// the same work (pipeline/records); failures are kept for the panel to show.
void record(PrecisionRun& run, const history::RunRecord& record, bool once)
{
    if (once) {
        auto recorded = history::recordRunOnce(record);
        if (!recorded) {
            run.recordError = recorded.error().message;
        } else if (*recorded && (*recorded)->added) {
            run.recordedRun = (*recorded)->id.value();
        }
        return;
    }
    auto recorded = history::recordRun(record);
    if (!recorded) {
        run.recordError = recorded.error().message;
    } else if (*recorded) {
        run.recordedRun = (*recorded)->value();
    }
}

} // namespace

std::string demoPrompt() { return fmt::format("{}", fmt::join(pipeline::demoPromptIds(), ", ")); }

Result<fs::path> resolveRunCheckpoint(
    const std::string& modelSource, Progress& progress, std::stop_token stop)
{
    if (exec::holdsWeights(modelSource)) {
        return fs::path(modelSource);
    }
    return exec::cachedShrunkCheckpoint(modelSource, exec::demoShrinkOptions(), progress, stop);
}

Result<std::vector<std::int64_t>> promptTokenIds(
    const std::string& prompt, const fs::path& checkpoint)
{
    std::string spaced = prompt;
    for (char& c : spaced) {
        if (c == ',') {
            c = ' ';
        }
    }
    std::istringstream in(spaced);
    std::vector<std::int64_t> ids;
    std::string word;
    bool allIds = true;
    while (in >> word) {
        std::size_t used = 0;
        try {
            ids.push_back(std::stoll(word, &used));
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size() || ids.back() < 0) {
            allIds = false;
            break;
        }
    }
    if (allIds && !ids.empty()) {
        return ids;
    }
    if (prompt.empty()) {
        return Error::badInput("prompt: give token ids (\"1, 2, 3\") or text");
    }
    auto tokenizer = exec::loadTokenizer(checkpoint);
    if (!tokenizer) {
        return tokenizer.error().withContext(
            "prompt text needs the checkpoint's tokenizer (or give token ids \"1, 2, 3\")");
    }
    auto encoded = (*tokenizer)->encode(prompt, true);
    if (!encoded) {
        return encoded.error();
    }
    if (encoded->empty()) {
        return Error::badInput("prompt: encodes to no tokens");
    }
    return encoded;
}

Result<std::shared_ptr<const PrecisionRun>> runPrecision(
    const PrecisionRunRequest& request, Progress& progress, std::stop_token stop)
{
    const auto start = std::chrono::steady_clock::now();
    auto checkpoint = resolveRunCheckpoint(request.modelSource, progress, stop);
    if (!checkpoint) {
        return checkpoint.error();
    }
    auto spec = exec::loadCheckpointModel(*checkpoint);
    if (!spec) {
        return spec.error();
    }
    auto ids = promptTokenIds(request.prompt, *checkpoint);
    if (!ids) {
        return ids.error();
    }
    auto table = numerics::resolveToleranceTable("");
    if (!table) {
        return table.error();
    }
    auto weights = exec::openCheckpointWeights(*checkpoint);
    if (!weights) {
        return weights.error().withContext(checkpoint->string());
    }
    auto shared = std::make_shared<const numerics::ToleranceTable>(std::move(*table));
    exec::PrecisionRunOptions options;
    options.target = request.target;
    options.reference = request.reference;
    options.inject = true;
    options.promptIds = std::move(*ids);
    options.newTokens = request.tokens;
    options.table = shared.get();
    auto opened = openBackend(request.backend, request.device);
    if (!opened) {
        return opened.error();
    }
    const std::shared_ptr<exec::Backend> backend = std::move(*opened);
    options.backend = backend.get();
    auto result = exec::runWithReference(*spec, **weights, options, progress, stop);
    if (!result) {
        return result.error();
    }
    // The record `day0 run <checkpoint> --reference …` makes of the same run.
    auto runRecord = pipeline::precisionRunRecord(
        *spec, checkpoint->string(), options, *result, secondsSince(start));
    auto run = std::make_shared<PrecisionRun>();
    run->comparison = std::move(*result->comparison);
    run->table = shared;
    run->reference = std::make_shared<const numerics::Dump>(std::move(result->reference->dump));
    run->target = std::make_shared<const numerics::Dump>(std::move(result->target.dump));
    if (result->injected) {
        run->local = std::make_shared<const numerics::Dump>(std::move(result->injected->dump));
    }
    run->dispatch = result->target.dispatch;
    run->label = fmt::format("{}{} vs {}", request.target.describe(),
        backend ? fmt::format(" on {}", backend->name()) : std::string(),
        exec::precisionName(request.reference));
    run->source = checkpoint->string();
    run->request = request;
    runRecord.info.label = run->label;
    record(*run, runRecord, request.recordOnce);
    return std::shared_ptr<const PrecisionRun>(std::move(run));
}

Result<std::shared_ptr<const PrecisionRun>> compareDumpFolders(
    const fs::path& reference, const fs::path& target, Progress& progress, std::stop_token stop)
{
    const auto start = std::chrono::steady_clock::now();
    auto table = numerics::resolveToleranceTable("");
    if (!table) {
        return table.error();
    }
    progress.setStage("reading dumps");
    auto ref = numerics::readDump(reference);
    if (!ref) {
        return ref.error().withContext("reference dump");
    }
    auto tgt = numerics::readDump(target);
    if (!tgt) {
        return tgt.error().withContext("target dump");
    }
    std::optional<numerics::Dump> local;
    const fs::path injectDir = target.parent_path() / (target.filename().string() + "-inject");
    std::error_code ec;
    if (fs::is_directory(injectDir, ec)) {
        auto l = numerics::readDump(injectDir);
        if (!l) {
            return l.error().withContext("inject-mode dump");
        }
        local = std::move(*l);
    }
    auto shared = std::make_shared<const numerics::ToleranceTable>(std::move(*table));
    numerics::CompareOptions options;
    options.table = shared.get();
    options.local = local ? &*local : nullptr;
    progress.setStage("comparing");
    auto cmp = numerics::compareDumps(*ref, *tgt, options, progress, stop);
    if (!cmp) {
        return cmp.error().withContext(
            fmt::format("{} vs {}", reference.string(), target.string()));
    }
    // The record `day0 compare <reference> <target>` makes.
    auto compareRecord = pipeline::compareRunRecord(*cmp, reference.string(), target.string());
    compareRecord.info.duration = Seconds(secondsSince(start));
    auto run = std::make_shared<PrecisionRun>();
    run->comparison = std::move(*cmp);
    run->table = shared;
    run->reference = std::make_shared<const numerics::Dump>(std::move(*ref));
    run->target = std::make_shared<const numerics::Dump>(std::move(*tgt));
    if (local) {
        run->local = std::make_shared<const numerics::Dump>(std::move(*local));
    }
    run->label = fmt::format("{} vs {}", target.filename().string(), reference.filename().string());
    run->source = fmt::format("{} vs {}", target.string(), reference.string());
    compareRecord.info.label = run->label;
    record(*run, compareRecord, false);
    return std::shared_ptr<const PrecisionRun>(std::move(run));
}

Result<CellDetail> cellDetail(
    const PrecisionRun& run, std::size_t row, std::int64_t position, std::int64_t maxPoints)
{
    if (row >= run.comparison.rows.size()) {
        return Error::internal("cellDetail: no such comparison row");
    }
    const auto& r = run.comparison.rows[row];
    CellDetail detail;
    detail.row = row;
    detail.anchor = r.name;
    detail.position = position;
    const numerics::Tensor* ref = run.reference ? run.reference->tensor(r.name) : nullptr;
    const numerics::Tensor* tgt = run.target ? run.target->tensor(r.name) : nullptr;
    const numerics::Tensor* loc = run.local ? run.local->tensor(r.name) : nullptr;
    if (ref == nullptr || tgt == nullptr || r.shapeMismatch) {
        detail.note = r.shapeMismatch ? "the shapes differ"
                                      : "statistics only: the dumps hold no full tensor";
        if (r.metrics) {
            detail.accumulated = r.metrics->relL2;
        }
        if (r.own) {
            detail.own = r.own->relL2;
        }
        return detail;
    }
    numerics::Tensor refView = *ref;
    numerics::Tensor tgtView = *tgt;
    std::optional<numerics::Tensor> locView;
    if (loc != nullptr && loc->shape() == ref->shape()) {
        locView = *loc;
    }
    if (position >= 0) {
        if (ref->rank() < 1 || position >= ref->dim(0)) {
            return Error::badInput(fmt::format("{}: no token position {}", r.name, position));
        }
        refView = ref->select(0, position);
        tgtView = tgt->select(0, position);
        if (locView) {
            locView = locView->select(0, position);
        }
    }
    auto histogram = numerics::relativeErrorHistogram(refView, tgtView);
    if (!histogram) {
        return histogram.error().withContext(r.name);
    }
    detail.histogram = std::move(*histogram);
    auto scatter = numerics::valueErrorScatter(refView, tgtView, maxPoints);
    if (!scatter) {
        return scatter.error().withContext(r.name);
    }
    detail.scatter = std::move(*scatter);
    auto accumulated = numerics::compareTensors(refView, tgtView);
    if (!accumulated) {
        return accumulated.error().withContext(r.name);
    }
    detail.accumulated = accumulated->relL2;
    if (locView) {
        auto own = numerics::compareTensors(refView, *locView);
        if (!own) {
            return own.error().withContext(r.name);
        }
        detail.own = own->relL2;
    } else {
        detail.note = "no inject-mode run: own error unknown";
    }
    return detail;
}

} // namespace day0::ui
