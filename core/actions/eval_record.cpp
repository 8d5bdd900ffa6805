// The JSON and the run record of `day0 eval` (actions/eval.h).
#include "actions/eval.h"
#include "exec/engine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace day0::actions {

namespace {

/// The same-top strip kept in a record: one character per scored position, up to this many.
constexpr std::size_t kStripLimit = 8192;

std::string strip(const std::vector<std::uint8_t>& same)
{
    std::string s;
    s.reserve(std::min(same.size(), kStripLimit));
    for (std::size_t i = 0; i < same.size() && i < kStripLimit; ++i) {
        s.push_back(same[i] != 0 ? '1' : '0');
    }
    return s;
}

nlohmann::json generationJson(const GenerationDiff& g)
{
    nlohmann::json j { { "prompt", g.prompt }, { "reference", g.reference }, { "target", g.target },
        { "common_prefix", g.commonPrefix } };
    if (g.firstDivergence) {
        j["first_divergence"] = *g.firstDivergence;
        j["margin"] = g.margin;
        j["resolution"] = g.resolution;
        j["judgement"] = g.nearTie ? "near-tie" : "real divergence";
    } else {
        j["first_divergence"] = nullptr;
    }
    return j;
}

} // namespace

nlohmann::json evalToJson(const EvalOutcome& o)
{
    nlohmann::json j = numerics::toJson(o.summary);
    j["model"] = o.spec.name;
    j["reference"] = o.referenceName;
    j["target"] = o.targetName;
    j["windows"] = o.windows;
    if (o.referenceStreamed || o.targetStreamed) {
        j["streamed"] = { { "reference", o.referenceStreamed }, { "target", o.targetStreamed } };
    }
    j["same_top_strip"] = strip(o.sameTopStrip);
    j["generations"] = nlohmann::json::array();
    for (const auto& g : o.generations) {
        j["generations"].push_back(generationJson(g));
    }
    nlohmann::json v { { "status", numerics::verdictStatusName(o.verdict.status) },
        { "table", o.verdict.table }, { "rule", o.verdict.rule }, { "reason", o.verdict.reason } };
    if (o.verdict.firstBadPosition) {
        v["first_bad_window"] = o.verdict.firstBadPosition->first;
        v["first_bad_position"] = o.verdict.firstBadPosition->second;
        v["first_bad_capture"] = o.verdict.firstBadCapture;
        v["first_bad_layer"] = o.verdict.firstBadLayer;
    }
    j["verdict"] = v;
    j["seconds"] = o.seconds;
    return j;
}

history::RunRecord evalRunRecord(const EvalRequest& request, const EvalOutcome& o)
{
    // Kind compare (a reference against a target) with tool=eval, as convert/shard/shrink are
    // kind verify with their tool: a kind of its own would need a store schema migration.
    history::RunRecord r(history::RunKind::Compare);
    if (!request.referenceDump.empty()) {
        r.info.modelName = o.spec.name;
        r.setProperty("reference_dump", request.referenceDump.string());
        r.setProperty("target_dump", request.targetDump.string());
    } else {
        r.info.modelName = std::filesystem::path(request.checkpoint).filename().string();
        r.info.modelFingerprint = exec::modelFingerprint(o.spec);
    }
    r.info.precision = o.targetName;
    r.info.backend = request.backend != nullptr ? request.backend->name() : "day0-cpu";
    r.info.duration = Seconds(o.seconds);
    r.info.message = o.verdict.reason;
    r.info.status = o.verdict.status == numerics::VerdictStatus::Fail ? history::RunStatus::Failed
                                                                      : history::RunStatus::Ok;
    r.setProperty("tool", "eval");
    if (!request.checkpoint.empty()) {
        r.setProperty("checkpoint", request.checkpoint);
    }
    if (!request.targetCheckpoint.empty()) {
        r.setProperty("target_checkpoint", request.targetCheckpoint);
    }
    r.setProperty("reference", o.referenceName);
    r.setProperty("target", o.targetName);
    const auto& c = request.corpus;
    r.setProperty("corpus",
        !request.referenceDump.empty() ? std::string("dumps")
            : !c.idsFile.empty()       ? "ids:" + c.idsFile.string()
            : !c.textFile.empty()      ? "text:" + c.textFile.string()
                                  : fmt::format("sampled:{} seed {}", c.sampleSequences, c.seed));
    r.setProperty("verdict", std::string(numerics::verdictStatusName(o.verdict.status)));
    r.setProperty("table", o.verdict.table);
    r.setProperty("rule", o.verdict.rule);
    r.setProperty("same_top_strip", strip(o.sameTopStrip));
    r.setProperty("kl_histogram_bins",
        fmt::format("log10_low={} bin_width={}", o.summary.histogram.log10Low,
            o.summary.histogram.binWidth));
    nlohmann::json gens = nlohmann::json::array();
    for (const auto& g : o.generations) {
        gens.push_back(generationJson(g));
    }
    r.setProperty("generations", gens.dump());
    const auto& s = o.summary;
    r.addMetric("eval_windows", double(o.windows));
    r.addMetric("eval_positions", double(s.positions));
    r.addMetric("eval_kl_mean", s.klMean.value, "nat");
    r.addMetric("eval_kl_mean_uncertainty", s.klMean.uncertainty, "nat");
    r.addMetric("eval_kl_median", s.klMedian, "nat");
    r.addMetric("eval_kl_p99", s.klP99, "nat");
    r.addMetric("eval_kl_p999", s.klP999, "nat");
    r.addMetric("eval_kl_max", s.klMax, "nat");
    r.addMetric("eval_same_top", s.sameTop.value);
    r.addMetric("eval_topk_overlap", s.topkOverlap);
    r.addMetric("eval_rms_delta_p", s.rmsDeltaP.value);
    r.addMetric("eval_reference_ppl", s.referencePpl.value);
    r.addMetric("eval_target_ppl", s.targetPpl.value);
    r.addMetric("eval_ppl_ratio", s.pplRatio.value);
    r.addMetric("eval_ppl_ratio_uncertainty", s.pplRatio.uncertainty);
    if (o.verdict.firstBadPosition) {
        r.addMetric("eval_first_bad_window", double(o.verdict.firstBadPosition->first));
        r.addMetric("eval_first_bad_position", double(o.verdict.firstBadPosition->second));
        r.addMetric("eval_first_bad_layer", double(o.verdict.firstBadLayer));
        r.setProperty("first_bad_capture", o.verdict.firstBadCapture);
    }
    std::int64_t diverged = 0;
    std::int64_t real = 0;
    for (const auto& g : o.generations) {
        diverged += g.firstDivergence.has_value();
        real += g.firstDivergence && !g.nearTie;
    }
    if (!o.generations.empty()) {
        r.addMetric("eval_generations", double(o.generations.size()));
        r.addMetric("eval_generations_diverged", double(diverged));
        r.addMetric("eval_generations_real_divergence", double(real));
    }
    // The curves, as layer metrics keyed by position (and by histogram bin).
    for (std::size_t p = 0; p < s.klByPosition.size(); ++p) {
        const std::string anchor = fmt::format("eval.position.{}", p);
        r.layers.add(anchor, int(p), "eval.position", "kl_mean", s.klByPosition[p]);
        r.layers.add(anchor, int(p), "eval.position", "same_top", s.sameTopByPosition[p]);
        r.layers.add(anchor, int(p), "eval.position", "count", double(s.countByPosition[p]));
    }
    for (std::size_t b = 0; b < s.histogram.counts.size(); ++b) {
        r.layers.add(fmt::format("eval.kl_histogram.{}", b), int(b), "eval.kl_histogram", "count",
            double(s.histogram.counts[b]));
    }
    return r;
}

} // namespace day0::actions
