#include "history/layer_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace day0::history {

namespace {

// The text stacks of HF models live under "model.layers", "language_model.model.layers" or
// "model.language_model.layers"; anything else with numbered blocks (a vision tower, an MTP
// head) keeps its prefix in the sub-module so its rows do not mix with the text layers.
bool isMainStack(std::string_view prefix)
{
    if (prefix.empty()) {
        return true;
    }
    const auto dot = prefix.rfind('.');
    const std::string_view last = dot == std::string_view::npos ? prefix : prefix.substr(dot + 1);
    return last == "model" || last == "language_model";
}

} // namespace

AnchorPosition parseAnchor(std::string_view anchor)
{
    std::size_t start = 0;
    while (start < anchor.size()) {
        const auto end = std::min(anchor.find('.', start), anchor.size());
        const std::string_view component = anchor.substr(start, end - start);
        if ((component == "layers" || component == "blocks") && end < anchor.size()) {
            const std::size_t digits = end + 1;
            int layer = -1;
            const char* first = anchor.data() + digits;
            const char* last = anchor.data() + anchor.size();
            const auto [ptr, ec] = std::from_chars(first, last, layer);
            const bool boundary = ptr == last || *ptr == '.' || *ptr == '#';
            if (ec == std::errc() && ptr != first && boundary && layer >= 0) {
                std::string_view rest(ptr, std::size_t(last - ptr));
                if (!rest.empty() && rest.front() == '.') {
                    rest.remove_prefix(1);
                }
                const std::string_view prefix
                    = start == 0 ? std::string_view() : anchor.substr(0, start - 1);
                AnchorPosition position { layer, std::string(rest) };
                if (!isMainStack(prefix)) {
                    position.subModule = std::string(prefix) + ":" + position.subModule;
                }
                return position;
            }
        }
        start = end + 1;
    }
    return { -1, std::string(anchor) };
}

std::uint32_t LayerMetrics::intern(std::string_view name)
{
    const auto it = m_index.find(name);
    if (it != m_index.end()) {
        return it->second;
    }
    const auto index = std::uint32_t(m_names.size());
    m_names.emplace_back(name);
    m_index.emplace(m_names.back(), index);
    return index;
}

void LayerMetrics::add(std::string_view anchor, std::string_view metric, double value)
{
    const AnchorPosition position = parseAnchor(anchor);
    add(anchor, position.layer, position.subModule, metric, value);
}

void LayerMetrics::add(std::string_view anchor, int layer, std::string_view subModule,
    std::string_view metric, double value)
{
    Row row;
    row.anchor = intern(anchor);
    row.subModule = intern(subModule);
    row.metric = intern(metric);
    row.layer = layer;
    row.value = value;
    m_rows.push_back(row);
}

void LayerMetrics::clear()
{
    m_rows.clear();
    m_names.clear();
    m_index.clear();
}

std::vector<std::string> LayerMetrics::metricNames() const
{
    std::vector<std::string> out;
    std::vector<bool> seen(m_names.size(), false);
    for (const Row& row : m_rows) {
        if (!seen[row.metric]) {
            seen[row.metric] = true;
            out.push_back(m_names[row.metric]);
        }
    }
    return out;
}

std::optional<std::size_t> LayerMetrics::find(
    std::string_view anchor, std::string_view metric) const
{
    const auto a = m_index.find(anchor);
    const auto m = m_index.find(metric);
    if (a == m_index.end() || m == m_index.end()) {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        if (m_rows[i].anchor == a->second && m_rows[i].metric == m->second) {
            return i;
        }
    }
    return std::nullopt;
}

std::string LayerMetrics::firstDuplicate() const
{
    // Bucket the metric ids by anchor (a counting sort, linear in the rows), then look for a
    // repeated metric inside each bucket; buckets are small (a few metrics per anchor), so this
    // is several times faster than hashing 100k (anchor, metric) pairs.
    std::vector<std::uint32_t> start(m_names.size() + 1, 0);
    for (const Row& row : m_rows) {
        ++start[row.anchor + 1];
    }
    for (std::size_t i = 1; i < start.size(); ++i) {
        start[i] += start[i - 1];
    }
    std::vector<std::uint32_t> fill(start.begin(), start.end() - 1);
    std::vector<std::uint32_t> metrics(m_rows.size());
    for (const Row& row : m_rows) {
        metrics[fill[row.anchor]++] = row.metric;
    }
    for (std::size_t anchor = 0; anchor + 1 < start.size(); ++anchor) {
        const auto first = metrics.begin() + std::ptrdiff_t(start[anchor]);
        const auto last = metrics.begin() + std::ptrdiff_t(start[anchor + 1]);
        std::sort(first, last);
        const auto repeated = std::adjacent_find(first, last);
        if (repeated != last) {
            return m_names[anchor] + " / " + m_names[*repeated];
        }
    }
    return {};
}

std::vector<LayerMetricStats> summarize(const LayerMetrics& metrics)
{
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    std::vector<LayerMetricStats> out;
    std::vector<std::size_t> slot(metrics.names().size(), std::size_t(-1));
    std::vector<std::uint32_t> maxAnchor;
    for (const auto& row : metrics.rows()) {
        if (slot[row.metric] == std::size_t(-1)) {
            slot[row.metric] = out.size();
            out.push_back({ metrics.name(row.metric), 0, 0, kNaN, kNaN, {} });
            maxAnchor.push_back(row.anchor);
        }
        const std::size_t k = slot[row.metric];
        LayerMetricStats& s = out[k];
        ++s.count;
        if (std::isnan(row.value)) {
            ++s.nanCount;
            continue;
        }
        if (std::isnan(s.min) || row.value < s.min) {
            s.min = row.value;
        }
        if (std::isnan(s.max) || row.value > s.max) {
            s.max = row.value;
            maxAnchor[k] = row.anchor;
        }
    }
    for (std::size_t k = 0; k < out.size(); ++k) {
        if (!std::isnan(out[k].max)) {
            out[k].maxAnchor = metrics.name(maxAnchor[k]);
        }
    }
    return out;
}

std::vector<DepthPoint> depthCurve(
    const LayerMetrics& metrics, std::string_view metric, std::string_view subModule)
{
    std::vector<DepthPoint> curve;
    for (const auto& row : metrics.rows()) {
        if (row.layer >= 0 && metrics.name(row.metric) == metric
            && metrics.name(row.subModule) == subModule) {
            curve.push_back({ row.layer, row.value });
        }
    }
    std::stable_sort(curve.begin(), curve.end(),
        [](const DepthPoint& a, const DepthPoint& b) { return a.layer < b.layer; });
    return curve;
}

} // namespace day0::history
