#include "plan/published_measurements.h"

#include "base/file_util.h"
#include "base/resources.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/layout.h"
#include "plan/parallel_plan.h"
#include "plan/serving.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace day0::plan {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// The kernel settings a row may state, and the cost option each sets (flash_attention and
/// dropout are required, the others default to false).
struct KernelSetting {
    const char* key;
    bool CostOptions::*option;
};
constexpr KernelSetting kKernelSettings[] = {
    { "flash_attention", &CostOptions::flashAttention },
    { "dropout", &CostOptions::dropout },
    { "tp_comm_overlap", &CostOptions::tpCommOverlap },
    { "ep_comm_overlap", &CostOptions::epCommOverlap },
    { "ep_node_dedup", &CostOptions::epNodeDedup },
};

} // namespace

fs::path publishedMeasurementsFile()
{
    return resourceDir() / "plan" / "published_measurements.json";
}

Result<std::vector<PublishedCase>> readPublishedMeasurements(const fs::path& file)
{
    std::ifstream in(file);
    if (!in) {
        return Error::badInput(fmt::format("{}: cannot be read", displayPath(file)));
    }
    json doc;
    try {
        doc = json::parse(in);
    } catch (const json::exception& e) {
        return Error::badInput(fmt::format("{}: not JSON: {}", displayPath(file), e.what()));
    }
    if (!doc.is_object() || !doc.contains("cases") || !doc.at("cases").is_array()) {
        return Error::badInput(fmt::format("{}: no \"cases\" array", displayPath(file)));
    }
    std::vector<PublishedCase> out;
    for (const auto& row : doc.at("cases")) {
        const std::string id = row.is_object() && row.contains("id") && row.at("id").is_string()
            ? row.at("id").get<std::string>()
            : std::string();
        auto bad = [&](const std::string& what) {
            return Error::badInput(
                fmt::format("{}: case '{}': {}", displayPath(file), id.empty() ? "?" : id, what));
        };
        if (id.empty()) {
            return bad("no id");
        }
        for (const auto& other : out) {
            if (other.id == id) {
                return bad("a second case with this id");
            }
        }
        for (const char* key :
            { "source", "flops", "precision", "split", "kind", "cluster", "plan" }) {
            if (!row.contains(key) || !row.at(key).is_string()
                || row.at(key).get<std::string>().empty()) {
                return bad(fmt::format("no \"{}\"", key));
            }
        }
        for (const char* key : { "model", "workload", "kernels", "measured" }) {
            if (!row.contains(key) || !row.at(key).is_object()) {
                return bad(fmt::format("no \"{}\" object", key));
            }
        }
        PublishedCase c;
        c.id = id;
        c.source = row.at("source").get<std::string>();
        c.split = row.at("split").get<std::string>();
        c.row = row;
        if (row.contains("note")) {
            if (!row.at("note").is_string()) {
                return bad("\"note\" is not a string");
            }
            c.note = row.at("note").get<std::string>();
        }
        if (c.split != "fit" && c.split != "holdout") {
            return bad(fmt::format("split '{}': expected fit or holdout", c.split));
        }
        const auto mode = parseMode(row.at("kind").get<std::string>());
        if (!mode) {
            return bad(fmt::format("kind {}: expected train or infer", row.at("kind").dump()));
        }
        c.mode = *mode;
        auto plan = parsePlan(row.at("plan").get<std::string>());
        if (!plan) {
            return bad(fmt::format("plan: {}", plan.error().message));
        }
        c.plan = std::move(*plan);
        auto cluster = hardware::parseCluster(row.at("cluster").get<std::string>());
        if (!cluster) {
            return bad(fmt::format("cluster: {}", cluster.error().message));
        }
        c.cluster = std::move(*cluster);
        for (const char* key : { "flash_attention", "dropout" }) {
            if (!row.at("kernels").contains(key) || !row.at("kernels").at(key).is_boolean()) {
                return bad(fmt::format("kernels: no \"{}\" true or false", key));
            }
        }
        for (const auto& [key, value] : row.at("kernels").items()) {
            const auto* known = std::find_if(std::begin(kKernelSettings), std::end(kKernelSettings),
                [&](const KernelSetting& k) { return key == k.key; });
            if (known == std::end(kKernelSettings)) {
                std::vector<std::string> keys;
                for (const auto& k : kKernelSettings) {
                    keys.emplace_back(k.key);
                }
                return bad(fmt::format("kernels: \"{}\" is not a setting the planner models ({})",
                    key, fmt::join(keys, ", ")));
            }
            if (!value.is_boolean()) {
                return bad(fmt::format("kernels: \"{}\" is true or false", key));
            }
        }
        const auto& m = row.at("measured");
        const auto& w = row.at("workload");
        auto positive = [](const json& j, const char* key) {
            return j.contains(key) && j.at(key).is_number() && j.at(key).get<double>() > 0;
        };
        auto count = [](const json& j, const char* key) {
            return j.contains(key) && j.at(key).is_number_integer() && j.at(key).get<long>() > 0
                && j.at(key).get<long>() < (1L << 24);
        };
        if (c.mode == Mode::Train) {
            if (m.size() != 1
                || !(positive(m, "step_time_s") || positive(m, "tokens_per_s_per_gpu"))) {
                return bad("\"measured\" of a training case is one positive step_time_s or "
                           "tokens_per_s_per_gpu");
            }
            if (!count(w, "seq") || !count(w, "global_batch")) {
                return bad("\"workload\" of a training case needs seq and global_batch");
            }
            if (w.contains("mtp") && !w.at("mtp").is_boolean()) {
                return bad("workload: \"mtp\" is true or false");
            }
        } else {
            if (m.size() != 1 || !positive(m, "output_tokens_per_s")) {
                return bad("\"measured\" of a serving case is one positive output_tokens_per_s");
            }
            if (!count(w, "prompt") || !count(w, "output") || !count(w, "max_batch")) {
                return bad("\"workload\" of a serving case needs prompt, output and max_batch");
            }
            if (!w.contains("scheduler") || !w.at("scheduler").is_string()
                || !parseScheduler(w.at("scheduler").get<std::string>())) {
                return bad("workload: \"scheduler\" is \"guaranteed_no_evict\" or "
                           "\"max_utilization\"");
            }
            if (!w.contains("kv_cache_fraction") || !w.at("kv_cache_fraction").is_number()
                || !(w.at("kv_cache_fraction").get<double>() > 0)
                || w.at("kv_cache_fraction").get<double>() > 1) {
                return bad("workload: \"kv_cache_fraction\" is a share of free memory in (0, 1]");
            }
        }
        if (c.split == "holdout" && !row.at("model").contains("bundled")) {
            return bad(
                "a held-out case names a bundled model, so that the planner can evaluate it");
        }
        out.push_back(std::move(c));
    }
    return out;
}

Result<CaseEstimate> estimatePublishedCase(
    const PublishedCase& c, const ModelSummary& model, const CostOptions& options)
{
    try {
        const auto& row = c.row;
        CostOptions co = options;
        for (const auto& k : kKernelSettings) {
            co.*k.option = row.at("kernels").value(k.key, false);
        }
        const auto& w = row.at("workload");
        const auto& m = row.at("measured");
        CaseEstimate e;
        Workload wl;
        wl.mode = c.mode;
        if (c.mode == Mode::Train) {
            wl.seqLength = w.at("seq").get<int>();
            wl.globalBatch = w.at("global_batch").get<int>();
            wl.includeMtp = w.value("mtp", true);
            auto layout = resolveLayout(c.plan, model, wl, c.cluster);
            if (!layout) {
                return layout.error().withContext(c.id);
            }
            e.training = estimateTrainingCost(model, *layout, wl, c.cluster, co);
            if (m.contains("step_time_s")) {
                e.estimate = e.training.stepTime;
                e.measured = m.at("step_time_s").get<double>();
            } else {
                e.estimate = e.training.tokensPerSecond / double(layout->world);
                e.measured = m.at("tokens_per_s_per_gpu").get<double>();
            }
        } else {
            // Offline, at maximum load: the runtime holds as many sequences as its scheduler
            // admits into the KV cache, up to its batch cap.
            wl.promptLength = w.at("prompt").get<int>();
            wl.outputLength = w.at("output").get<int>();
            wl.prefillChunk = std::min(wl.prefillChunk, wl.promptLength);
            MemoryOptions mo;
            mo.flashAttention = co.flashAttention;
            const ServingRuntime runtime { w.at("max_batch").get<int>(),
                w.at("kv_cache_fraction").get<double>(),
                *parseScheduler(w.at("scheduler").get<std::string>()) };
            wl.batch = runtime.maxBatch;
            auto full = resolveLayout(c.plan, model, wl, c.cluster);
            if (!full) {
                return full.error().withContext(c.id);
            }
            const Admission admitted
                = admitSequences(model, *full, wl, mo, c.cluster.deviceMemory(), runtime);
            if (admitted.sequences < 1) {
                return Error::badInput(fmt::format("{}: the KV cache left after loading holds no "
                                                   "sequence of {} tokens",
                    c.id, reservedTokens(wl, runtime.reservation)));
            }
            // Continuous batching of uniform requests: on average a sequence attends over its
            // prompt and half its output.
            wl.batch = admitted.sequences;
            wl.context = averageContext(wl);
            auto layout = resolveLayout(c.plan, model, wl, c.cluster);
            if (!layout) {
                return layout.error().withContext(c.id);
            }
            e.inference = estimateInferenceCost(model, *layout, wl, c.cluster, co);
            e.estimate = e.inference.tokensPerSecond;
            e.batch = admitted.sequences;
            e.measured = m.at("output_tokens_per_s").get<double>();
        }
        if (!(e.measured > 0) || !std::isfinite(e.estimate) || e.estimate <= 0) {
            return Error::badInput(fmt::format("{}: no usable figure to compare", c.id));
        }
        e.error = (e.estimate - e.measured) / e.measured;
        return e;
    } catch (const json::exception& ex) {
        return Error::badInput(fmt::format("{}: {}", c.id, ex.what()));
    }
}

CaseModelResolver cachingResolver(CaseModelResolver resolve)
{
    auto models = std::make_shared<std::map<std::string, ModelSummary>>();
    return [models, resolve = std::move(resolve)](const json& model) -> Result<ModelSummary> {
        const auto key = model.dump();
        if (const auto it = models->find(key); it != models->end()) {
            return it->second;
        }
        auto summary = resolve(model);
        if (summary) {
            models->emplace(key, *summary);
        }
        return summary;
    };
}

Result<ModelSummary> bundledCaseModel(const json& model)
{
    if (!model.contains("bundled") || !model.at("bundled").is_string()) {
        return Error::badInput(
            fmt::format("model {}: only bundled models are evaluated here", model.dump()));
    }
    auto spec = model::loadModel(model.at("bundled").get<std::string>());
    if (!spec) {
        return spec.error();
    }
    return summarizeModel(model::buildLayerGraph(*spec));
}

namespace {

bool isMoe(const ModelSummary& m) { return m.activeParams < 0.9 * m.totalParams; }

bool selected(
    const PublishedEvaluation::Row& r, const std::string& split, Mode mode, std::optional<bool> moe)
{
    return r.c->split == split && r.c->mode == mode && (!moe || r.moe == *moe);
}

} // namespace

std::optional<double> PublishedEvaluation::mape(
    const std::string& split, Mode mode, std::optional<bool> moe) const
{
    double sum = 0;
    int n = 0;
    for (const auto& r : rows) {
        if (selected(r, split, mode, moe)) {
            sum += std::fabs(r.e.error);
            ++n;
        }
    }
    return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
}

int PublishedEvaluation::count(const std::string& split, Mode mode, std::optional<bool> moe) const
{
    return int(std::count_if(
        rows.begin(), rows.end(), [&](const Row& r) { return selected(r, split, mode, moe); }));
}

std::string PublishedEvaluation::format() const
{
    std::string out
        = fmt::format("{:<36} {:<5} {:<7} {:>11} {:>11} {:>8}  where the estimate goes\n", "case",
            "kind", "split", "estimate", "measured", "error");
    for (const auto& r : rows) {
        std::string parts;
        if (r.c->mode == Mode::Train) {
            const auto& b = r.e.training.breakdown;
            parts = fmt::format("step {:.4g} s: compute {:.3g}, tp {:.3g}, ep {:.3g}, cp {:.3g}, "
                                "pp {:.3g}, bubble {:.3g}, dp {:.3g}, optimizer {:.3g}",
                r.e.training.stepTime, b.compute, b.tp, b.ep, b.cp, b.pp, b.bubble, b.dp,
                b.optimizer);
        } else {
            const auto& b = r.e.inference.breakdown;
            parts = fmt::format("batch {}: TPOT {:.3g} ms (compute {:.3g}, memory {:.3g}, tp "
                                "{:.3g}, ep {:.3g}, runtime {:.3g}), prefill {:.3g} s",
                r.e.batch, 1e3 * r.e.inference.tpot, 1e3 * b.decodeCompute, 1e3 * b.decodeMemory,
                1e3 * b.tp, 1e3 * b.ep, 1e3 * b.runtime, b.prefill);
        }
        out += fmt::format("{:<36} {:<5} {:<7} {:>11.5g} {:>11.5g} {:>+7.1f}%  {}\n", r.c->id,
            modeName(r.c->mode), r.c->split, r.e.estimate, r.e.measured, 100.0 * r.e.error, parts);
    }
    for (const Mode mode : { Mode::Train, Mode::Infer }) {
        for (const char* split : { "fit", "holdout" }) {
            if (const auto v = mape(split, mode)) {
                std::string parts;
                for (const bool moe : { false, true }) {
                    if (const auto k = mape(split, mode, moe)) {
                        parts += fmt::format("{}{} {:.1f}% over {}", parts.empty() ? "" : ", ",
                            moe ? "MoE" : "dense", 100.0 * *k, count(split, mode, moe));
                    }
                }
                out += fmt::format("MAPE {} {}: {:.1f}% over {} cases ({})\n", modeName(mode),
                    split, 100.0 * *v, count(split, mode), parts);
            }
        }
    }
    return out;
}

Result<PublishedEvaluation> evaluatePublished(const std::vector<PublishedCase>& cases,
    const CaseModelResolver& resolve, const CostOptions& options)
{
    PublishedEvaluation ev;
    const auto summarise = cachingResolver(resolve); // several cases share a model
    for (const auto& c : cases) {
        auto summary = summarise(c.row.at("model"));
        if (!summary) {
            return summary.error().withContext(c.id);
        }
        auto e = estimatePublishedCase(c, *summary, options);
        if (!e) {
            return e.error();
        }
        ev.rows.push_back({ &c, std::move(*e), isMoe(*summary) });
    }
    return ev;
}

Result<Calibration> calibrateOnFitCases(const std::vector<PublishedCase>& cases,
    const CaseModelResolver& resolve, const CostOptions& start)
{
    const auto cached = cachingResolver(resolve); // each model once for the whole grid
    std::vector<PublishedCase> fp8;
    std::vector<PublishedCase> serving;
    std::vector<PublishedCase> moe;
    for (const auto& c : cases) {
        if (c.split != "fit") {
            continue;
        }
        auto summary = cached(c.row.at("model"));
        if (!summary) {
            return summary.error().withContext(c.id);
        }
        if (c.mode == Mode::Infer) {
            serving.push_back(c);
        } else if (isMoe(*summary)) {
            moe.push_back(c);
        } else if (c.plan.weights == DType::F8E4M3) {
            fp8.push_back(c);
        }
    }
    if (fp8.empty() || serving.empty() || moe.empty()) {
        return Error::badInput(
            "calibration needs dense FP8 training, MoE training and serving fit cases");
    }
    Calibration cal;
    cal.options = start;
    cal.fp8Cases = int(fp8.size());
    cal.servingCases = int(serving.size());
    cal.moeCases = int(moe.size());
    // Keeps `o` (the chosen options with one grid point's constants set) when its MAPE over the
    // fit cases of `set` beats `best`.
    auto consider = [&](const std::vector<PublishedCase>& set, const CostOptions& o, Mode mode,
                        double& best) -> Result<void> {
        auto ev = evaluatePublished(set, cached, o);
        if (!ev) {
            return ev.error();
        }
        const double m = *ev->mape("fit", mode);
        if (m < best - 1e-12) {
            best = m;
            cal.options = o;
        }
        return success();
    };
    // Integer grid steps, so that the chosen values print exactly.
    cal.fp8TrainMape = std::numeric_limits<double>::max();
    for (int e = 30; e <= 70; ++e) {
        CostOptions o = cal.options;
        o.fp8ComputeEfficiency = e / 100.0;
        DAY0_TRY(consider(fp8, o, Mode::Train, cal.fp8TrainMape));
    }
    // The MoE overheads after the FP8 efficiency, which the MoE FP8 rows run at.
    cal.moeTrainMape = std::numeric_limits<double>::max();
    for (int layer = 0; layer <= 40; ++layer) {
        for (int expert = 0; expert <= 40; ++expert) {
            CostOptions o = cal.options;
            o.moeLayerOverhead = layer * 0.1e-3;
            o.moeExpertOverhead = expert * 5e-6;
            DAY0_TRY(consider(moe, o, Mode::Train, cal.moeTrainMape));
        }
    }
    cal.servingMape = std::numeric_limits<double>::max();
    for (int loss = 0; loss <= 12; ++loss) {
        for (int step = 0; step <= 4; ++step) {
            for (int seq = 0; seq <= 12; ++seq) {
                CostOptions o = cal.options;
                o.rooflineOverlapLoss = loss * 0.05;
                o.decodeStepOverhead = step * 0.25e-3;
                o.decodeSequenceOverhead = seq * 1e-6;
                DAY0_TRY(consider(serving, o, Mode::Infer, cal.servingMape));
            }
        }
    }
    return cal;
}

std::string Calibration::describe() const
{
    return fmt::format("chosen on the fit cases: FP8 GEMMs at {:.2f} of the FP8 peak ({:.1f}% "
                       "over {} dense FP8 training cases); MoE layers {:.1f} ms + {:.0f} µs per "
                       "local expert per forward pass beyond their kernels ({:.1f}% over {} MoE "
                       "training cases); serving: roofline overlap loss {:.2f}, runtime {:.2f} ms "
                       "per decode step and {:.0f} µs per sequence ({:.1f}% over {} serving cases)",
        options.fp8ComputeEfficiency, 100.0 * fp8TrainMape, fp8Cases,
        1e3 * options.moeLayerOverhead, 1e6 * options.moeExpertOverhead, 100.0 * moeTrainMape,
        moeCases, options.rooflineOverlapLoss, 1e3 * options.decodeStepOverhead,
        1e6 * options.decodeSequenceOverhead, 100.0 * servingMape, servingCases);
}

namespace {

/// A held-out case the planner evaluated: what it is comparable on and how far off it was.
struct HeldOut {
    std::string id;
    std::string device;
    Mode mode = Mode::Train;
    bool moe = false;
    ParallelDims dims;
    double error = 0;
};

struct Evaluated {
    std::vector<HeldOut> cases;
    std::string problem;
};

/// The bundled table's held-out cases, evaluated once per process.
const Evaluated& heldOutCases()
{
    static Evaluated evaluated;
    static std::once_flag once;
    std::call_once(once, [] {
        auto cases = readPublishedMeasurements(publishedMeasurementsFile());
        if (!cases) {
            evaluated.problem = cases.error().message;
            return;
        }
        std::erase_if(*cases, [](const PublishedCase& c) { return c.split != "holdout"; });
        auto ev = evaluatePublished(*cases);
        if (!ev) {
            evaluated.problem = ev.error().message;
            return;
        }
        for (const auto& r : ev->rows) {
            const auto& p = r.c->plan;
            evaluated.cases.push_back({ r.c->id, r.c->cluster.device.id, r.c->mode, r.moe,
                parallelDimsOf(p.tp, p.pp, p.cp, p.ep), r.e.error });
        }
    });
    return evaluated;
}

} // namespace

TimeErrorBar timeErrorBar(const ModelSummary& model, const hardware::Cluster& cluster, Mode mode,
    std::optional<ParallelDims> dims)
{
    TimeErrorBar bar;
    const bool moe = isMoe(model);
    bar.basis = fmt::format("{}, {}, {}", cluster.device.id,
        mode == Mode::Train ? "training" : "inference", moe ? "MoE" : "dense");
    const auto& held = heldOutCases();
    if (!held.problem.empty()) {
        bar.problem = held.problem;
        return bar;
    }
    std::vector<const HeldOut*> comparable;
    for (const auto& c : held.cases) {
        if (c.device == cluster.device.id && c.mode == mode && c.moe == moe) {
            comparable.push_back(&c);
        }
    }
    if (dims) {
        std::vector<const HeldOut*> same;
        for (const auto* c : comparable) {
            if (c->dims == *dims) {
                same.push_back(c);
            }
        }
        if (same.size() >= 2) {
            comparable = std::move(same);
            bar.basis += ", " + dims->describe();
        } else if (!comparable.empty()) {
            bar.basis += fmt::format(" (fewer than two with {})", dims->describe());
        }
    }
    double sum = 0;
    for (const auto* c : comparable) {
        bar.cases.push_back(c->id);
        sum += std::fabs(c->error);
    }
    if (!bar.cases.empty()) {
        bar.meanAbsError = sum / double(bar.cases.size());
    }
    return bar;
}

ParallelDims parallelDimsOf(int tp, int pp, int cp, int ep)
{
    return { tp > 1, pp > 1, cp > 1, ep > 1 };
}

std::string ParallelDims::describe() const
{
    std::vector<std::string> used;
    for (const auto& [on, name] : { std::pair { tp, "tp" }, std::pair { pp, "pp" },
             std::pair { cp, "cp" }, std::pair { ep, "ep" } }) {
        if (on) {
            used.emplace_back(name);
        }
    }
    return used.empty() ? "no model parallelism" : fmt::format("{}", fmt::join(used, "+"));
}

std::string TimeErrorBar::describe() const
{
    if (!problem.empty()) {
        return fmt::format(
            "no error bar: the published measurements could not be used ({})", problem);
    }
    if (!meanAbsError) {
        return fmt::format("no comparable published measurement ({})", basis);
    }
    return fmt::format("±{:.0f}% ({} comparable published measurement{}: {}; {})",
        100.0 * *meanAbsError, cases.size(), cases.size() == 1 ? "" : "s", fmt::join(cases, ", "),
        basis);
}

json TimeErrorBar::toJson() const
{
    json j { { "basis", basis }, { "cases", cases }, { "text", describe() } };
    j["mean_abs_error"] = meanAbsError ? json(*meanAbsError) : json(nullptr);
    if (!problem.empty()) {
        j["problem"] = problem;
    }
    return j;
}

} // namespace day0::plan
