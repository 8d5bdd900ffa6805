#include "numerics/error_distribution.h"

#include "numerics/gradient_anchor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace day0::numerics {

namespace {

Result<void> sameShape(const Tensor& a, const Tensor& b)
{
    if (a.shape() != b.shape()) {
        return Error::badInput(fmt::format("shapes differ: reference {} vs target {}",
            shapeString(a.shape()), shapeString(b.shape())));
    }
    return success();
}

/// "model.layers.3.self_attn" -> "self_attn"; "model.layers.3" -> "".
std::string subModuleOf(const std::string& name)
{
    for (const char* key : { "layers.", "blocks." }) {
        const auto at = name.find(key);
        if (at == std::string::npos) {
            continue;
        }
        std::size_t i = at + std::string(key).size();
        while (i < name.size() && name[i] >= '0' && name[i] <= '9') {
            ++i;
        }
        return i < name.size() ? name.substr(i + 1) : std::string();
    }
    return name;
}

} // namespace

Result<ErrorHistogram> relativeErrorHistogram(const Tensor& reference, const Tensor& target,
    int bins, double low, double high, const MetricOptions& options)
{
    DAY0_TRY(sameShape(reference, target));
    if (bins < 1 || !(low > 0.0) || !(high > low)) {
        return Error::badInput("histogram: need bins >= 1 and 0 < low < high");
    }
    ErrorHistogram h;
    h.counts.assign(std::size_t(bins), 0);
    const double logLow = std::log10(low);
    const double step = (std::log10(high) - logLow) / bins;
    for (int i = 0; i <= bins; ++i) {
        h.edges.push_back(std::pow(10.0, logLow + step * i));
    }
    const auto r = reference.toDoubles();
    const auto t = target.toDoubles();
    double sumSq = 0.0;
    std::int64_t finite = 0;
    for (const double v : r) {
        if (std::isfinite(v)) {
            sumSq += v * v;
            ++finite;
        }
    }
    const double small
        = finite > 0 ? options.smallValueFraction * std::sqrt(sumSq / double(finite)) : 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        if (!std::isfinite(r[i]) || !std::isfinite(t[i])) {
            ++h.nonFinite;
            continue;
        }
        const double d = std::fabs(t[i] - r[i]);
        if (d == 0.0) {
            ++h.exact;
            continue;
        }
        const double denominator = std::max(std::fabs(r[i]), small);
        const double rel
            = denominator > 0.0 ? d / denominator : std::numeric_limits<double>::infinity();
        if (rel < low) {
            ++h.below;
        } else if (rel >= high) {
            ++h.above;
        } else {
            const int bin = std::clamp(int((std::log10(rel) - logLow) / step), 0, bins - 1);
            ++h.counts[std::size_t(bin)];
        }
    }
    return h;
}

Result<std::vector<ScatterPoint>> valueErrorScatter(
    const Tensor& reference, const Tensor& target, std::int64_t maxPoints)
{
    DAY0_TRY(sameShape(reference, target));
    const auto r = reference.toDoubles();
    const auto t = target.toDoubles();
    std::vector<ScatterPoint> out;
    if (r.empty() || maxPoints < 1) {
        return out;
    }
    const std::size_t stride = std::max<std::size_t>(1, r.size() / std::size_t(maxPoints));
    std::size_t worst = 0;
    double worstError = -1.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        const double e = std::fabs(t[i] - r[i]);
        if (std::isfinite(e) && e > worstError) {
            worstError = e;
            worst = i;
        }
        if (i % stride == 0 && out.size() < std::size_t(maxPoints)) {
            out.push_back({ r[i], t[i] - r[i] });
        }
    }
    if (worst % stride != 0) {
        out.push_back({ r[worst], t[worst] - r[worst] });
    }
    return out;
}

Result<std::vector<double>> relL2PerPosition(const Tensor& reference, const Tensor& target)
{
    DAY0_TRY(sameShape(reference, target));
    if (reference.rank() < 1) {
        return Error::badInput("per-position error needs a tensor [positions, ...]");
    }
    const std::int64_t positions = reference.dim(0);
    std::vector<double> out;
    for (std::int64_t p = 0; p < positions; ++p) {
        auto m = compareTensors(reference.select(0, p), target.select(0, p));
        if (!m) {
            return m.error();
        }
        out.push_back(m->relL2);
    }
    return out;
}

LayerHeatmap layerHeatmap(const DumpComparison& comparison, HeatmapMetric metric)
{
    LayerHeatmap h;
    std::map<int, std::map<std::string, const CaptureComparison*>> cells;
    std::vector<std::string> columns;
    for (const auto& row : comparison.rows) {
        // Gradient dumps (exec/backward.h): a module's output gradient is the column
        // "<sub-module>#grad".
        const bool gradient = isActivationGradient(row.name);
        if (row.layer < 0 || (row.name.find('#') != std::string::npos && !gradient)) {
            continue;
        }
        const std::string column = gradient
            ? subModuleOf(gradientAnchor(row.name)) + std::string(kGradientSuffix)
            : subModuleOf(row.name);
        if (std::find(columns.begin(), columns.end(), column) == columns.end()) {
            columns.push_back(column);
        }
        cells[row.layer][column] = &row;
    }
    h.columns = columns;
    for (const auto& [layer, byColumn] : cells) {
        h.layers.push_back(layer);
        for (const auto& column : columns) {
            const auto it = byColumn.find(column);
            double value = std::numeric_limits<double>::quiet_NaN();
            std::string verdict;
            if (it != byColumn.end()) {
                const CaptureComparison& r = *it->second;
                verdict = r.verdict.reason;
                switch (metric) {
                case HeatmapMetric::RelL2:
                    value = r.metrics ? r.metrics->relL2 : value;
                    break;
                case HeatmapMetric::OwnRelL2:
                    value = r.own ? r.own->relL2 : value;
                    break;
                case HeatmapMetric::FloorRatio:
                    value = r.verdict.floor > 0.0 ? r.verdict.floorRatio : value;
                    break;
                case HeatmapMetric::SnrDb:
                    value = r.metrics ? r.metrics->snrDb : value;
                    break;
                }
            }
            h.values.push_back(value);
            h.verdicts.push_back(std::move(verdict));
        }
    }
    return h;
}

} // namespace day0::numerics
