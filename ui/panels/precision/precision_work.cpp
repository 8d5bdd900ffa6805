#include "panels/precision/precision_work.h"

#include "actions/compare.h"
#include "actions/demo.h"
#include "actions/run.h"
#include "history/recording.h"
#include "tokenizer/tokenizer.h"
#include "widgets/backend_choice.h"

#include <QTime>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace day0::ui {

namespace fs = std::filesystem;

namespace {

// The local wall-clock time now, "14:03:12".
std::string clockTime()
{
    return QTime::currentTime().toString(QStringLiteral("HH:mm:ss")).toStdString();
}

// Records the run when recording is enabled, built by the same function as the CLI's record of
// the same work (actions/records); failures are kept for the panel to show.
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

std::string demoPrompt() { return fmt::format("{}", fmt::join(actions::demoPromptIds(), ", ")); }

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
    auto tokenizer = tokenizer::loadTokenizer(checkpoint);
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
    auto checkpoint = actions::checkpointForSource(request.modelSource, progress, stop);
    if (!checkpoint) {
        return checkpoint.error();
    }
    auto ids = promptTokenIds(request.prompt, *checkpoint);
    if (!ids) {
        return ids.error();
    }
    auto opened = openBackend(request.backend, request.device);
    if (!opened) {
        return opened.error();
    }
    const std::shared_ptr<exec::Backend> backend = std::move(*opened);
    // `day0 run <checkpoint> --reference … --inject`'s action and record.
    actions::RunRequest run;
    run.checkpoint = checkpoint->string();
    run.options.target = request.target;
    run.options.reference = request.reference;
    run.options.inject = true;
    run.options.promptIds = std::move(*ids);
    run.options.newTokens = request.tokens;
    run.options.backend = backend.get();
    run.options.fp32Leg = request.fp32Leg;
    run.stream = request.stream;
    auto ran = actions::runCheckpoint(run, progress, stop);
    if (!ran) {
        return ran.error();
    }
    auto& result = ran->result;
    if (!result.comparison || !result.reference) {
        return Error::internal("a run against a reference gave no comparison");
    }
    auto out = std::make_shared<PrecisionRun>();
    out->comparison = std::move(*result.comparison);
    out->table = ran->table;
    out->reference = std::make_shared<const numerics::Dump>(std::move(result.reference->dump));
    out->target = std::make_shared<const numerics::Dump>(std::move(result.target.dump));
    if (result.injected) {
        out->local = std::make_shared<const numerics::Dump>(std::move(result.injected->dump));
    }
    out->dispatch = result.target.dispatch;
    out->fp32Leg = std::move(result.fp32LegComparison);
    out->referenceStreamed = result.referenceStreamed;
    out->targetStreamed = result.targetStreamed;
    out->stream = ran->stream;
    out->label = fmt::format("{}{} vs {}", request.target.describe(),
        backend ? fmt::format(" on {}", backend->name()) : std::string(),
        exec::precisionName(request.reference));
    out->source = checkpoint->string();
    out->finishedAt = clockTime();
    out->request = request;
    ran->record.info.label = out->label;
    record(*out, ran->record, request.recordOnce);
    return std::shared_ptr<const PrecisionRun>(std::move(out));
}

Result<std::shared_ptr<const PrecisionRun>> compareDumpFolders(const fs::path& reference,
    const fs::path& target, Progress& progress, std::stop_token stop,
    const std::function<void(std::shared_ptr<const PrecisionRun>&&)>& growing)
{
    // `day0 compare <reference> <target> [--local <target>-inject]`'s action and record.
    actions::CompareRequest request;
    request.reference = reference;
    request.target = target;
    request.local = actions::injectDumpBeside(target).value_or(fs::path());
    auto describe = [&](PrecisionRun& run) {
        run.label
            = fmt::format("{} vs {}", target.filename().string(), reference.filename().string());
        run.source = fmt::format("{} vs {}", target.string(), reference.string());
        run.finishedAt = clockTime();
    };
    actions::ComparisonGrowing stage;
    if (growing) {
        stage = [&growing, &describe](actions::ComparisonSoFar&& sofar) {
            auto run = std::make_shared<PrecisionRun>();
            run->comparison = std::move(sofar.comparison);
            run->table = sofar.table;
            run->reference = sofar.reference;
            run->target = sofar.target;
            run->local = sofar.local;
            run->partial = true;
            describe(*run);
            growing(std::move(run));
        };
    }
    auto compared = actions::compareDumpFolders(request, progress, stop, stage);
    if (!compared) {
        return compared.error();
    }
    auto run = std::make_shared<PrecisionRun>();
    run->comparison = std::move(compared->comparison);
    run->table = compared->table;
    run->reference = compared->reference;
    run->target = compared->target;
    run->local = compared->local;
    describe(*run);
    compared->record.info.label = run->label;
    record(*run, compared->record, false);
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

bool sameModel(const PrecisionRun* a, const PrecisionRun* b)
{
    // Dumps of one model share the fingerprint (its canonical architecture string).
    return a != nullptr && b != nullptr && a->target && b->target
        && !a->target->info.fingerprint.empty()
        && a->target->info.fingerprint == b->target->info.fingerprint;
}

exec::PrecisionMode upcastMode(exec::PrecisionMode reference)
{
    return reference == exec::PrecisionMode::F64 ? exec::PrecisionMode::F32 : reference;
}

} // namespace day0::ui
