#include "numerics/comparison_record.h"

#include "numerics/comparison_grid.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::numerics {

namespace {

void addLayerMetrics(history::RunRecord& record, const DumpComparison& comparison)
{
    for (const auto& row : comparison.rows) {
        for (const GridMetric metric : gridMetrics()) {
            const auto value = gridMetricValue(row, metric);
            // An infinite SNR (no error at all) says nothing a rel_l2 of 0 does not.
            if (value && !(metric == GridMetric::SnrDb && std::isinf(*value))) {
                record.layers.add(row.name, gridMetricName(metric), *value);
            }
        }
    }
}

std::string outcome(const DumpComparison& comparison)
{
    std::string text = fmt::format("{}: {} pass, {} warn, {} fail", comparison.status(),
        comparison.passCount, comparison.warnCount, comparison.failCount);
    if (comparison.firstDivergence) {
        text += fmt::format(
            "; first divergence at {}", comparison.rows[*comparison.firstDivergence].name);
    }
    return text;
}

} // namespace

history::RunRecord comparisonRunRecord(
    const DumpComparison& comparison, const ComparisonRecordOptions& options)
{
    history::RunRecord record(options.kind);
    auto& info = record.info;
    info.label = options.label;
    info.status = comparison.failCount > 0 ? history::RunStatus::Failed : history::RunStatus::Ok;
    info.modelName
        = comparison.target.model.empty() ? comparison.reference.model : comparison.target.model;
    info.modelFingerprint = comparison.target.fingerprint;
    info.precision = comparison.target.precision;
    info.backend = comparison.target.backend;
    info.message = outcome(comparison);
    if (options.seconds) {
        info.duration = Seconds(*options.seconds);
    }
    record.setProperty("reference_precision", comparison.reference.precision);
    record.setProperty("reference_backend", comparison.reference.backend);
    record.setProperty("tolerance_table", comparison.table);
    record.setProperty("divergence_basis", comparison.divergenceBasis);
    if (!options.precisionPlan.empty()) {
        record.setProperty("precision_plan", options.precisionPlan);
    }
    record.addMetric("captures", double(comparison.rows.size()));
    record.addMetric("pass", comparison.passCount);
    record.addMetric("warn", comparison.warnCount);
    record.addMetric("fail", comparison.failCount);
    record.addMetric("not_judged", comparison.notJudgedCount);
    double worst = -1.0;
    std::string worstAnchor;
    for (const auto& row : comparison.rows) {
        if (row.metrics && row.metrics->relL2 > worst) {
            worst = row.metrics->relL2;
            worstAnchor = row.name;
        }
        if (row.logits && record.findMetric("kl_mean") == nullptr) {
            record.addMetric("kl_mean", row.logits->klMean);
            record.addMetric("top1_agreement", row.logits->top1Agreement);
            record.addMetric("top5_overlap", row.logits->top5Overlap);
        }
    }
    if (worst >= 0.0) {
        record.addMetric("max_rel_l2", worst);
        record.setProperty("max_rel_l2_anchor", worstAnchor);
    }
    if (comparison.firstDivergence) {
        const auto& row = comparison.rows[*comparison.firstDivergence];
        record.setProperty("first_divergence", row.name);
        record.addMetric("first_divergence_layer", row.layer);
        record.addEvent(LogLevel::Warning, row.verdict.reason);
    }
    for (const auto& warning : comparison.warnings) {
        record.addEvent(LogLevel::Warning, warning);
    }
    addLayerMetrics(record, comparison);
    for (const auto& [role, path] : options.dumps) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) {
            continue;
        }
        if (auto artifact = history::makeArtifact("dump", path)) {
            record.addArtifact(std::move(*artifact));
            record.setProperty(role + "_dump", path.string());
        }
    }
    return record;
}

} // namespace day0::numerics
