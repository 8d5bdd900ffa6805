#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace day0::history {

/// Where an anchor sits in the model: the decoder (or vision) layer index and the sub-module
/// path inside it. "model.layers.7.self_attn.q_proj" → {7, "self_attn.q_proj"};
/// "model.layers.7" → {7, ""}; "model.norm" → {-1, "model.norm"}.
struct AnchorPosition {
    int layer = -1; ///< -1 when the anchor is outside the numbered layers
    std::string subModule;
};

/// Splits an anchor name (DESIGN.md §3) at its first "layers.N" or "blocks.N" component.
AnchorPosition parseAnchor(std::string_view anchor);

/// Per-anchor metrics of one run (relative error, max abs error, cosine, ... per module), stored
/// column-wise with interned names so 100,000 rows stay compact in memory and in the store.
/// A value may be NaN (a NaN error is a finding, and it survives the store). Not thread-safe.
class LayerMetrics {
public:
    /// One value; names are indices into names().
    struct Row {
        std::uint32_t anchor = 0;
        std::uint32_t subModule = 0;
        std::uint32_t metric = 0;
        std::int32_t layer = -1;
        double value = 0.0;
    };

    /// Adds a value; layer and sub-module are parsed from the anchor name.
    void add(std::string_view anchor, std::string_view metric, double value);
    /// Adds a value with an explicit layer index (-1: none) and sub-module.
    void add(std::string_view anchor, int layer, std::string_view subModule,
        std::string_view metric, double value);
    /// Adds a row whose names were interned with intern() (the fast path for loaders).
    void addRow(const Row& row) { m_rows.push_back(row); }
    /// Returns the index of `name`, adding it when new.
    std::uint32_t intern(std::string_view name);
    void reserve(std::size_t rows) { m_rows.reserve(rows); }
    void clear();

    [[nodiscard]] std::size_t size() const { return m_rows.size(); }
    [[nodiscard]] bool empty() const { return m_rows.empty(); }
    [[nodiscard]] const std::vector<Row>& rows() const { return m_rows; }
    [[nodiscard]] const Row& row(std::size_t i) const { return m_rows[i]; }
    [[nodiscard]] const std::vector<std::string>& names() const { return m_names; }
    [[nodiscard]] const std::string& name(std::uint32_t index) const { return m_names[index]; }
    [[nodiscard]] const std::string& anchor(std::size_t i) const
    {
        return m_names[m_rows[i].anchor];
    }
    [[nodiscard]] const std::string& subModule(std::size_t i) const
    {
        return m_names[m_rows[i].subModule];
    }
    [[nodiscard]] const std::string& metric(std::size_t i) const
    {
        return m_names[m_rows[i].metric];
    }
    /// The distinct metric names, in order of first appearance.
    [[nodiscard]] std::vector<std::string> metricNames() const;
    /// The index of the first row with this anchor and metric, if any (linear scan).
    [[nodiscard]] std::optional<std::size_t> find(
        std::string_view anchor, std::string_view metric) const;
    /// The first (anchor, metric) pair given twice, as "anchor / metric"; empty when none.
    [[nodiscard]] std::string firstDuplicate() const;

private:
    struct NameHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const
        {
            return std::hash<std::string_view>()(s);
        }
    };
    std::vector<Row> m_rows;
    std::vector<std::string> m_names;
    std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> m_index;
};

/// The spread of one layer metric over the anchors of a run.
struct LayerMetricStats {
    std::string metric;
    std::size_t count = 0; ///< rows with this metric
    std::size_t nanCount = 0; ///< of which NaN
    double min = 0.0; ///< over the non-NaN values (NaN when all are NaN)
    double max = 0.0;
    std::string maxAnchor; ///< where the maximum is (first such anchor)
};

/// One LayerMetricStats per metric name, in order of first appearance.
std::vector<LayerMetricStats> summarize(const LayerMetrics& metrics);

/// One point of an error-versus-depth curve.
struct DepthPoint {
    int layer = -1;
    double value = 0.0;
};

/// The values of `metric` at the anchors whose sub-module is `subModule` ("" = the whole layer's
/// output), ordered by layer: the error-versus-depth curve of a run.
std::vector<DepthPoint> depthCurve(
    const LayerMetrics& metrics, std::string_view metric, std::string_view subModule = {});

} // namespace day0::history
