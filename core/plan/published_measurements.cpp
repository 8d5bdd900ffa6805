#include "plan/published_measurements.h"

#include "base/file_util.h"
#include "base/resources.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/layout.h"
#include "plan/parallel_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <fstream>
#include <mutex>

namespace day0::plan {

namespace fs = std::filesystem;
using nlohmann::json;

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
        const std::string id = row.is_object() ? row.value("id", std::string()) : std::string();
        auto bad = [&](const std::string& what) {
            return Error::badInput(
                fmt::format("{}: case '{}': {}", displayPath(file), id.empty() ? "?" : id, what));
        };
        if (id.empty()) {
            return bad("no id");
        }
        for (const char* key : { "source", "flops", "split", "kind", "cluster" }) {
            if (!row.contains(key) || !row.at(key).is_string()
                || row.at(key).get<std::string>().empty()) {
                return bad(fmt::format("no \"{}\"", key));
            }
        }
        for (const char* key : { "model", "layout", "workload", "kernels", "measured" }) {
            if (!row.contains(key) || !row.at(key).is_object()) {
                return bad(fmt::format("no \"{}\" object", key));
            }
        }
        PublishedCase c { id, row.at("source").get<std::string>(),
            row.at("split").get<std::string>(), row.value("note", std::string()), row };
        if (c.split != "fit" && c.split != "holdout") {
            return bad(fmt::format("split '{}': expected fit or holdout", c.split));
        }
        if (row.at("kind") != "train") {
            return bad(fmt::format(
                "kind {}: only training cases are modelled yet", row.at("kind").dump()));
        }
        const auto& m = row.at("measured");
        if (m.contains("step_time_s") == m.contains("tokens_per_s_per_gpu")) {
            return bad("\"measured\" needs exactly one of step_time_s and tokens_per_s_per_gpu");
        }
        if (c.split == "holdout" && !row.at("model").contains("bundled")) {
            return bad(
                "a held-out case names a bundled model, so that the planner can evaluate it");
        }
        out.push_back(std::move(c));
    }
    return out;
}

Result<CaseEstimate> estimatePublishedCase(const PublishedCase& c, const ModelSummary& model)
{
    try {
        const auto& row = c.row;
        auto cluster = hardware::parseCluster(row.at("cluster").get<std::string>());
        if (!cluster) {
            return cluster.error().withContext(c.id);
        }
        const auto& l = row.at("layout");
        ParallelPlan p;
        p.tp = l.value("tp", 1);
        p.pp = l.value("pp", 1);
        p.ep = l.value("ep", 1);
        p.cp = l.value("cp", 1);
        p.dp = l.value("dp", 0);
        p.vpp = l.value("vpp", 1);
        p.zero = l.value("zero", 0);
        p.microBatch = l.value("micro_batch", 1);
        if (l.contains("sp")) {
            p.sp = l.at("sp").get<bool>();
        }
        const auto recompute = parseRecompute(l.value("recompute", std::string("none")));
        if (!recompute) {
            return Error::badInput(
                fmt::format("{}: recompute '{}'", c.id, l.value("recompute", "")));
        }
        p.recompute = *recompute;
        Workload wl;
        wl.seqLength = row.at("workload").at("seq").get<int>();
        wl.globalBatch = row.at("workload").at("global_batch").get<int>();
        CostOptions co;
        co.flashAttention = row.at("kernels").at("flash_attention").get<bool>();
        co.dropout = row.at("kernels").at("dropout").get<bool>();
        auto layout = resolveLayout(p, model, wl, *cluster);
        if (!layout) {
            return layout.error().withContext(c.id);
        }
        CaseEstimate e;
        e.cost = estimateTrainingCost(model, *layout, wl, *cluster, co);
        const auto& m = row.at("measured");
        if (m.contains("step_time_s")) {
            e.estimate = e.cost.stepTime;
            e.measured = m.at("step_time_s").get<double>();
        } else {
            e.estimate = e.cost.tokensPerSecond / double(cluster->worldSize());
            e.measured = m.at("tokens_per_s_per_gpu").get<double>();
        }
        if (!(e.measured > 0) || !std::isfinite(e.estimate)) {
            return Error::badInput(fmt::format("{}: no usable figure to compare", c.id));
        }
        e.error = (e.estimate - e.measured) / e.measured;
        return e;
    } catch (const json::exception& ex) {
        return Error::badInput(fmt::format("{}: {}", c.id, ex.what()));
    }
}

namespace {

bool isMoe(const ModelSummary& m) { return m.activeParams < 0.9 * m.totalParams; }

/// A held-out case the planner evaluated: what it is comparable on and how far off it was.
struct HeldOut {
    std::string id;
    std::string device;
    bool moe = false;
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
        for (const auto& c : *cases) {
            if (c.split != "holdout") {
                continue;
            }
            auto spec = model::loadModel(c.row.at("model").at("bundled").get<std::string>());
            if (!spec) {
                evaluated.problem = spec.error().withContext(c.id).message;
                return;
            }
            const auto summary = summarizeModel(model::buildLayerGraph(*spec));
            auto e = estimatePublishedCase(c, summary);
            if (!e) {
                evaluated.problem = e.error().message;
                return;
            }
            auto cluster = hardware::parseCluster(c.row.at("cluster").get<std::string>());
            evaluated.cases.push_back({ c.id, cluster->device.id, isMoe(summary), e->error });
        }
    });
    return evaluated;
}

} // namespace

TimeErrorBar timeErrorBar(const ModelSummary& model, const hardware::Cluster& cluster, Mode mode)
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
    if (mode != Mode::Train) {
        return bar; // the table holds no inference case yet
    }
    double sum = 0;
    for (const auto& c : held.cases) {
        if (c.device == cluster.device.id && c.moe == moe) {
            bar.cases.push_back(c.id);
            sum += std::fabs(c.error);
        }
    }
    if (!bar.cases.empty()) {
        bar.meanAbsError = sum / double(bar.cases.size());
    }
    return bar;
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
