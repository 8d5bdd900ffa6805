#pragma once

#include "base/result.h"
#include "history/run_compare.h"
#include "history/run_record.h"
#include "history/run_store.h"

#include <nlohmann/json.hpp>

#include <cstddef>

namespace day0::history {

/// A run header as JSON: {"id", "uuid", "kind", "created" (ISO 8601 UTC), "label", "status",
/// "model", "model_fingerprint", "plan", "precision", "backend", "host", "software_version",
/// "command", "message", "duration_s" (null when unknown)}.
nlohmann::json toJson(const RunInfo& info);

/// A whole run: the header keys plus "properties" (object), "metrics" [{name, value, unit}],
/// "memory" [{rank, stage, component, bytes}], "artifacts" [{kind, path, size, sha256}],
/// "events" [{time, level, message}] and, when `withLayers`, "layer_metrics"
/// [{anchor, layer, submodule, metric, value}]. NaN and infinite values are written as null.
nlohmann::json toJson(const RunRecord& run, bool withLayers = true);

/// Layer metric spreads: [{metric, rows, nan, min, max, max_anchor}] (null for NaN bounds).
nlohmann::json toJson(const std::vector<LayerMetricStats>& stats);

/// A comparison: {"a", "b" (headers), "fields" [{field, a, b}], "duration_s" {a, b, delta},
/// "metrics" [{name, unit, a, b, delta, relative}], "memory" and "memory_totals"
/// [{rank, stage, component, a, b, delta}], "layer_summary" [{metric, aligned, only_a, only_b,
/// increased, decreased, geomean_ratio}], "largest_layer_changes" [{anchor, layer, submodule,
/// metric, a, b}] (up to `topLayers` per metric), "depth_curves" {"<metric>": [{layer, a, b}]}
/// (the layer outputs, as depthCurves), "memory_busiest" {"a", "b": {rank, stage, total} or null,
/// "components": [{component, a, b}]} (as memoryBars) and, when `allLayers`, "layers" (every
/// aligned row in the same form).
nlohmann::json toJson(const RunComparison& comparison, std::size_t topLayers, bool allLayers);

/// Reads a run written by toJson(const RunRecord&) back (`day0 runs import`): the id is dropped
/// (the store assigns one), the uuid and creation time are kept. Missing optional keys take
/// their defaults; a layer row without "layer"/"submodule" has them parsed from its anchor.
/// NaN values written as null read back as NaN. Errors name `origin` and the offending key
/// ("run.json: metrics[2]: 'value' must be a number").
Result<RunRecord> runFromJson(const nlohmann::json& json, const std::string& origin);

} // namespace day0::history
