#pragma once

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sharding.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_report.h"
#include "exec/precision_run.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "numerics/dump_compare.h"
#include "parallel/run.h"
#include "profile/trace.h"

#include <string>
#include <string_view>
#include <vector>

namespace day0::actions {

/// Per-anchor layer metrics of a dump comparison, the rows the Runs panel plots against depth:
/// the precision grid's metrics (rel_l2, max_rel, cosine_distance, floor_ratio, own_rel_l2 in
/// inject mode, max_abs, snr_db when finite), cosine, and verdict (0 pass, 1 warn, 2 fail;
/// not-judged rows have none). Pure.
history::LayerMetrics comparisonLayerMetrics(const numerics::DumpComparison& comparison);

/// Adds a comparison to a record, the one way every comparison is recorded (`day0 run
/// --reference`, `day0 compare`, the precision panel, validate): the captures compared and the
/// verdict counts,
/// the logits' KL (nat), top-1 agreement and top-5 overlap, the worst rel_l2 and its anchor,
/// the first divergence (property, layer and event), the tolerance table and divergence basis,
/// and comparisonLayerMetrics. Sets the status to Failed when a capture failed its tolerance.
void addComparison(history::RunRecord& record, const numerics::DumpComparison& comparison);

/// The run of `day0 run` (kind run): model, precision, backend, prompt and generated tokens,
/// prefill/decode time, tokens/s, and with a reference its comparison (addComparison).
history::RunRecord precisionRunRecord(const model::ModelSpec& spec, const std::string& checkpoint,
    const exec::PrecisionRunOptions& options, const exec::PrecisionRunResult& result,
    double seconds);

/// The run of `day0 run --plan` (kind run, precision fp32): plan, how the ranks ran
/// (in-process or mpi) and over which communicator (in-process, mpi, nccl), prompts and
/// generated tokens, per-rank weight bytes and time, and per collective kind the measured time
/// and bytes next to the alpha-beta model's prediction.
history::RunRecord parallelRunRecord(const model::ModelSpec& spec, const std::string& checkpoint,
    const std::string& plan, const std::string& ranksMode, const std::string& communicator,
    const parallel::ParallelRunResult& result, const std::vector<parallel::CommKindRow>& table,
    double seconds);

/// The run of `day0 compare` (kind compare): both dumps' description and the comparison.
history::RunRecord compareRunRecord(const numerics::DumpComparison& comparison,
    const std::string& referencePath, const std::string& targetPath);

/// The run of `day0 trace import|stats` (kind trace): files (as absolute paths), counts by
/// category, ranks, span.
history::RunRecord traceRunRecord(const profile::Trace& trace,
    const std::vector<std::string>& files, std::string_view action, double seconds);

/// The run of `day0 verify` and of the model panel's Verify (kind verify): the checkpoint
/// (property path as given, format; model = its folder's name, fingerprint = SHA-256 of the
/// config.json beside it), metrics files, tensors and tensor_bytes; with a manifest (`integrity`
/// not null) the manifest's name, integrity_failures, bytes_hashed and hash_seconds and an error
/// event per file that is not ok; with a checked tensor report the count per status
/// (tensors_missing, tensors_ok, tensors_unexpected, tensors_wrong_dtype, tensors_wrong_shape);
/// the first 200 structural problems as events. Status Error when the structure is broken,
/// Failed when a file or tensor check failed (the message then names the first failing file, or
/// tensor), else Ok. Reads config.json.
history::RunRecord verifyRunRecord(const std::string& path,
    const checkpoint::Checkpoint& checkpoint, const checkpoint::IntegrityReport* integrity,
    const checkpoint::TensorReport* tensors, double seconds);

/// The run of `day0 convert` (kind verify, property tool=convert): tensors and bytes in and out.
history::RunRecord convertRunRecord(const std::string& source, const std::string& out,
    const checkpoint::ConvertOptions& options, const checkpoint::ConvertSummary& summary,
    double seconds);

/// The run of `day0 shard` (kind verify, tool=shard): layout as plan string, ranks, bytes.
history::RunRecord shardRunRecord(const std::string& source, const std::string& out,
    const std::string& plan, const checkpoint::ShardSummary& summary, double seconds);

/// The run of `day0 shrink` (kind verify, tool=shrink): architecture, tensors, parameters.
history::RunRecord shrinkRunRecord(const std::string& model, const std::string& out,
    const checkpoint::ShrinkOptions& options, const checkpoint::ShrinkSummary& summary,
    double seconds);

} // namespace day0::actions
