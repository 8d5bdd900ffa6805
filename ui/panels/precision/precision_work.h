#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/backend_dispatch.h"
#include "exec/layer_stream.h"
#include "exec/precision.h"
#include "numerics/dump.h"
#include "numerics/dump_compare.h"
#include "numerics/error_distribution.h"
#include "numerics/tolerance.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

// The precision panel's background work: runs, dump comparisons and cell details. Plain
// functions over core (no widgets), called on JobRunner's worker threads.

namespace day0::ui {

/// A run of the session's model in a target precision against a reference.
struct PrecisionRunRequest {
    /// The session's model: a checkpoint folder runs as it is; a bundled name, a config.json or
    /// a folder without weights runs its shrunk checkpoint (exec::cachedShrunkCheckpoint).
    std::string modelSource;
    exec::PrecisionPlan target { exec::PrecisionMode::BF16, {}, {}, exec::Fp8Scaling::PerTensor };
    exec::PrecisionMode reference = exec::PrecisionMode::F32;
    std::string prompt; ///< token ids ("1, 2, 3") or text (needs the checkpoint's tokenizer)
    std::int64_t tokens = 8;
    /// Record with recordRunOnce (the demo, rerun on every start) instead of recordRun.
    bool recordOnce = false;
    /// Where the target (and its inject-mode run) computes: "cpu", or a backend plugin such as
    /// "cuda" (operators it lacks fall back to the CPU). The reference always runs on the CPU.
    std::string backend = "cpu";
    int device = 0; ///< the backend's device index
    /// Also run the backend target in fp32, judged by the fp32 rules (`day0 run --fp32-leg`);
    /// a backend only: on the CPU the target's fp32 is the reference.
    bool fp32Leg = false;
    /// Stream the weights layer by layer (`day0 run --stream --reference`): the reference (and
    /// an fp32/fp64 target) reads one layer at a time from the checkpoint; an emulated target
    /// and its inject-mode run load theirs whole.
    bool stream = false;
};

/// The prompt of the embedded demo as the prompt field shows it: actions::demoPromptIds(),
/// the ids `day0 demo` runs (the shrunk checkpoints carry no tokenizer).
std::string demoPrompt();

/// A comparison the panel shows, with the dumps it was made of (for details and per-position
/// views) and how to repeat it. Immutable once built; shared between threads.
struct PrecisionRun {
    numerics::DumpComparison comparison;
    std::shared_ptr<const numerics::ToleranceTable> table;
    std::shared_ptr<const numerics::Dump> reference;
    std::shared_ptr<const numerics::Dump> target;
    std::shared_ptr<const numerics::Dump> local; ///< inject-mode target, when run
    std::string label; ///< "bf16 vs fp32", "<folder> vs <folder>"
    std::string finishedAt; ///< local time it finished, "14:03:12" (legends tell runs apart)
    std::string source; ///< the checkpoint or the dump folders
    std::optional<PrecisionRunRequest> request; ///< set for runs the panel started
    std::optional<std::int64_t> recordedRun; ///< id in the store, when recorded now
    std::string recordError; ///< why recording failed, when it did
    exec::DispatchReport dispatch; ///< where the target's operators ran (runs on a backend)
    /// The fp32 leg's comparison against the reference, when the run had one.
    std::optional<numerics::DumpComparison> fp32Leg;
    /// The runs that streamed their weights, and what they read (runs with `stream`).
    bool referenceStreamed = false;
    bool targetStreamed = false;
    std::optional<exec::StreamStats> stream;
    /// A comparison still growing (its rows so far, no first divergence), shown while the job
    /// runs; never recorded.
    bool partial = false;
};

/// Token ids from "1, 2, 3" (commas and/or spaces), else the text encoded with the checkpoint's
/// tokenizer. Errors say which is missing.
Result<std::vector<std::int64_t>> promptTokenIds(
    const std::string& prompt, const std::filesystem::path& checkpoint);

/// Runs reference, target and inject-mode target, compares them, and records the comparison
/// (history::recordRun) when recording is enabled.
Result<std::shared_ptr<const PrecisionRun>> runPrecision(
    const PrecisionRunRequest& request, Progress& progress, std::stop_token stop);

/// Reads two dump folders and compares them (with `<target>-inject` next to the target as its
/// inject-mode dump when present), and records the comparison. Errors name the folder and file.
/// `growing` (may be empty) gets the comparison so far, marked partial, about every tenth of
/// the captures.
Result<std::shared_ptr<const PrecisionRun>> compareDumpFolders(
    const std::filesystem::path& reference, const std::filesystem::path& target, Progress& progress,
    std::stop_token stop,
    const std::function<void(std::shared_ptr<const PrecisionRun>&&)>& growing = {});

/// What a clicked cell shows: the capture's error histogram, a value-against-error scatter, and
/// its accumulated and own error.
struct CellDetail {
    std::size_t row = 0; ///< index into the comparison's rows
    std::string anchor;
    std::int64_t position = -1; ///< token position, -1: the whole tensor
    std::optional<numerics::ErrorHistogram> histogram;
    std::vector<numerics::ScatterPoint> scatter;
    std::optional<double> accumulated; ///< relative L2 against the reference
    std::optional<double> own; ///< relative L2 of the inject-mode run
    std::string note; ///< why something is missing (statistics-only capture, no inject run)
};

/// True when two runs (or dump comparisons) are of the same model: their targets' dumps share
/// the model fingerprint. Only such a run is overlaid on another.
[[nodiscard]] bool sameModel(const PrecisionRun* a, const PrecisionRun* b);

/// What "upcast to the reference" means for one layer: fp64 cannot be mixed with the other
/// modes of a run (an fp32 engine runs it), so an fp64 reference upcasts to fp32.
[[nodiscard]] exec::PrecisionMode upcastMode(exec::PrecisionMode reference);

/// Computes a cell's detail from the run's dumps (at most `maxPoints` scatter points).
Result<CellDetail> cellDetail(
    const PrecisionRun& run, std::size_t row, std::int64_t position, std::int64_t maxPoints = 3000);

} // namespace day0::ui
