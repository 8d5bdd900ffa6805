#pragma once

// `day0 eval`: end-to-end accuracy of a target against a reference over a corpus of token
// sequences (numerics/end_to_end.h), and greedy generation agreement from the same prompts.

#include "base/progress.h"
#include "base/result.h"
#include "exec/backend.h"
#include "exec/layer_stream.h"
#include "exec/precision.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "numerics/end_to_end.h"
#include "numerics/tolerance.h"

#include <filesystem>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// Where the token sequences come from: exactly one of the three.
struct EvalCorpus {
    /// Whitespace- or comma-separated token ids; a line is a document (windows never cross one).
    std::filesystem::path idsFile;
    /// UTF-8 text encoded with the checkpoint's tokenizer (with its BOS), one document per file.
    std::filesystem::path textFile;
    /// > 0: this many sequences of `sequenceLength` tokens sampled from the reference itself
    /// (in-distribution text), each from `sampleStart` (default: config.json bos_token_id).
    std::int64_t sampleSequences = 0;
    std::uint64_t seed = 0;
    std::vector<std::int64_t> sampleStart;
    std::int64_t sequenceLength = 64; ///< tokens per window
    /// Tokens a window advances by; 0: sequenceLength (no overlap). With overlap each window
    /// scores only its last `stride` positions, those with the most context (the strided
    /// evaluation of the transformers documentation's "Perplexity of fixed-length models").
    std::int64_t stride = 0;
    std::int64_t maxSequences = 0; ///< 0: every window
};

/// Greedy generation under both from the same prompts.
struct EvalGeneration {
    std::int64_t tokens = 0; ///< 0: no generation check
    std::int64_t prompts = 4; ///< the first tokens of this many corpus windows
    std::int64_t promptLength = 8;
};

struct EvalRequest {
    /// Two dumps instead of a checkpoint and precisions (`day0 run --dump`, the PyTorch bridge
    /// plugins/torch/day0_dump.py, or another framework writing the same format, DESIGN.md):
    /// their "lm_head" logits [tokens, vocab] over the same input ids are compared, one window.
    /// Both or neither; no corpus and no generation then.
    std::filesystem::path referenceDump;
    std::filesystem::path targetDump;
    std::string checkpoint;
    /// The target's checkpoint when it differs (a re-quantised or modified copy of the same
    /// architecture); empty: `checkpoint`.
    std::string targetCheckpoint;
    std::string reference = "fp64"; ///< a precision plan base (fp64 or fp32 usually)
    std::string target = "bf16";
    std::string targetOps; ///< --op-precision of the target
    std::string targetLayers; ///< --layer-precision of the target
    /// A parsed target plan (validate's); when set it replaces target, targetOps, targetLayers.
    std::optional<exec::PrecisionPlan> targetPlan;
    exec::Backend* backend = nullptr; ///< the target's; the reference always runs on the CPU
    EvalCorpus corpus;
    EvalGeneration generation;
    std::int64_t topK = 5;
    /// Tolerance table (name or file; empty: day0-default); its end_to_end rule of the target's
    /// dtype judges the summary.
    std::string tolerances;
    /// Streams the weights layer by layer (exec::runStreamed) for every window, and for every
    /// token of a sampled corpus (exec::StreamedSequence): the reference, and the target when it
    /// runs on the CPU; a backend's target is loaded whole (EvalOutcome says which streamed).
    bool stream = false;
    exec::StreamOptions streamOptions; ///< with `stream`: the memory budget
};

/// One prompt's greedy continuations and where they part.
struct GenerationDiff {
    std::vector<std::int64_t> prompt;
    std::vector<std::int64_t> reference;
    std::vector<std::int64_t> target;
    std::int64_t commonPrefix = 0; ///< generated tokens in common before the first difference
    /// The first generated index that differs; nullopt when they agree throughout.
    std::optional<std::int64_t> firstDivergence;
    double margin = 0.0; ///< the reference's top-1 minus top-2 logit there
    double resolution = 0.0; ///< what the target's precision cannot resolve of it
    bool nearTie = false;
};

/// The end-to-end verdict against the table's rule.
struct EvalVerdict {
    numerics::VerdictStatus status = numerics::VerdictStatus::NotJudged;
    std::string rule; ///< "bf16.end_to_end"
    std::string table;
    std::string reason; ///< one line
    /// The first position (window, position in it) whose own KL exceeds the rule's per-position
    /// limit, when one does. It fails nothing on its own (the largest KL of many positions grows
    /// with the corpus); when the mean, p99 or same-top limits fail it says where, and that
    /// window is compared layer by layer.
    std::optional<std::pair<std::int64_t, std::int64_t>> firstBadPosition;
    /// Where that position's error starts: the first diverging capture of a layer-by-layer
    /// comparison of both runs of the window up to that position (numerics::compareDumps,
    /// judged by the table's per-op rules), and its decoder layer (-1 outside the layers).
    std::string firstBadCapture;
    int firstBadLayer = -1;
};

struct EvalOutcome {
    model::ModelSpec spec;
    std::string referenceName; ///< "fp64"
    std::string targetName; ///< "bf16 (attention=fp32)"
    std::int64_t windows = 0;
    numerics::EndToEndSummary summary;
    std::vector<std::uint8_t> sameTopStrip; ///< per scored position, in corpus order
    std::vector<GenerationDiff> generations;
    EvalVerdict verdict;
    double seconds = 0.0;
    bool referenceStreamed = false; ///< its weights were streamed layer by layer
    bool targetStreamed = false;
    history::RunRecord record; ///< evalRunRecord
};

/// Runs the evaluation: builds the corpus, then window by window runs the reference and the
/// target (logits only, one window's logits in memory at a time), compares each scored
/// position, then the generation check, judges and builds the record. Progress counts windows;
/// cancellable between and inside forwards. Errors name the file, option or config key.
Result<EvalOutcome> evaluate(const EvalRequest& request, Progress& progress, std::stop_token stop);

/// The summary as JSON (`day0 eval --json`, the record's properties).
nlohmann::json evalToJson(const EvalOutcome& outcome);

/// The record of an evaluation: kind compare, property tool=eval, the summary's scalars as
/// metrics, the KL-by-position curve and the KL histogram as layer metrics (anchors
/// "eval.position.N" and "eval.kl_histogram.N"), the same-top strip and the generation diffs
/// as properties. Status Failed when the verdict failed.
history::RunRecord evalRunRecord(const EvalRequest& request, const EvalOutcome& outcome);

} // namespace day0::actions
