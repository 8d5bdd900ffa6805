#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/backend_dispatch.h"
#include "exec/precision.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"
#include "numerics/dump.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec {

namespace detail {
struct WeightTable;
}

/// Which tensors a run captures into its dump.
struct CaptureOptions {
    /// Capture name prefixes to keep ("model.layers.3", "lm_head"); empty keeps every anchor.
    std::vector<std::string> filters;
    bool inputs = false; ///< also each decoder layer's input as "<anchor>#in0"
    bool projections = false; ///< also q/k/v/o and MLA projections, q/k norms
    /// Also each recurrent layer's state after the prefill and after every decode step, one row
    /// per step: "<mixer>#state" and its conv window "<mixer>#conv_state" (recurrent_state.h).
    bool state = false;
    bool statsOnly = false; ///< keep statistics only (the logits are always stored)
};

/// An 8-bit RGB image, row-major (height × width × 3), for vision-language models.
struct Image {
    std::int64_t height = 0;
    std::int64_t width = 0;
    std::vector<std::uint8_t> rgb;
};

/// An image and the id of the image-pad token whose positions in the prompt receive its
/// embeddings (config.json `image_token_id`).
struct ImageInput {
    Image image;
    std::int64_t imageTokenId = -1;
};

/// Reads a binary PPM (P6, maxval 255); errors name the file and what is wrong.
Result<Image> readPpm(const std::filesystem::path& path);

/// A deterministic test pattern (gradients and a checkerboard) of the given size.
Image syntheticImage(std::int64_t height, std::int64_t width);

/// `spec` is "synthetic:HxW" or a PPM file; the image-pad id comes from the checkpoint's
/// config.json (`image_token_id`). Errors name the file or the spec.
Result<ImageInput> loadImageInput(const std::filesystem::path& checkpoint, const std::string& spec);

/// What to run: a prompt, greedy decode steps, a precision plan and captures.
struct RunOptions {
    PrecisionPlan precision;
    std::vector<std::int64_t> promptIds;
    std::int64_t newTokens = 1; ///< greedy tokens to produce (prefill gives the first)
    /// Teacher forcing: feed these tokens on the decode steps instead of the run's own picks
    /// (the reference's generated ids), so two runs see the same context.
    std::vector<std::int64_t> forcedTokens;
    CaptureOptions capture;
    /// Inject mode: every decoder layer, the final norm and lm_head take their input from this
    /// reference dump (which must hold full "model.embed_tokens", "model.layers.N" and
    /// "model.norm" captures for the same tokens), so each one's own error is measured.
    const numerics::Dump* injectFrom = nullptr;
    /// Vision-language models: the image whose merged patch embeddings replace the prompt's
    /// image-pad tokens (one pad token is expanded to the image's token count) and whose grid
    /// drives the M-RoPE positions. Its sides must be multiples of patch × merge size (no
    /// resizing is done).
    std::optional<ImageInput> image;
    /// Gated DeltaNet (Qwen3-Next, Qwen3.5): a step of more than one token runs the chunked delta
    /// rule over chunks of this many tokens, counted from the step's first (decode steps run the
    /// recurrent form); 64 as FLA and transformers. Any size gives the same result up to rounding.
    std::int64_t linearAttentionChunk = 64;
    /// Where the float operators run (a backend plugin such as cuda, per operator falling back to
    /// the CPU reference); null: the CPU reference. fp64 runs always run on the CPU.
    Backend* backend = nullptr;
};

/// What a run produced.
struct RunResult {
    numerics::Dump dump;
    std::vector<std::int64_t> generated; ///< the run's own greedy picks (newTokens of them)
    double prefillSeconds = 0.0;
    double decodeSeconds = 0.0; ///< all decode steps together
    std::vector<double> decodeStepSeconds; ///< each decode step's seconds, in order
    DispatchReport dispatch; ///< the backend the run used and where each operator ran
};

/// "llama/h64/l2/a4/kv2/v256[/e8k2]": the architecture fingerprint written to dumps, computable
/// from config.json alone (plugins/torch/day0_dump.py writes the same string).
std::string modelFingerprint(const model::ModelSpec& spec);

/// Records in `dump`'s extra info what a MoE model's routers rank by ("router": scoring, top_k,
/// n_group, topk_group), for the margins of flipped expert choices (numerics/routing_flips.h);
/// nothing for a dense model.
void recordRouterInfo(const model::ModelSpec& spec, numerics::DumpInfo& info);

/// The CPU reference engine for one model: weights loaded once (fp64 or fp32 as the plan's base
/// needs; block-FP8 weights dequantised), then any number of runs. Thread-compatible: one run at
/// a time per Engine.
class Engine {
public:
    /// Checks the spec is supported (errors name the family and the missing operator), reads
    /// every weight the forward needs from `weights` (errors name the tensor) in double when
    /// `fp64`, else in float.
    static Result<Engine> create(const model::ModelSpec& spec, const WeightSource& weights,
        bool fp64, Progress& progress, std::stop_token stop);

    Engine(Engine&&) noexcept;
    Engine& operator=(Engine&&) noexcept;
    ~Engine();

    /// Prefill + greedy decode with captures. The plan must match the engine's arithmetic (an
    /// fp64 plan needs an fp64 engine and vice versa). Progress counts forward steps.
    Result<RunResult> run(const RunOptions& options, Progress& progress, std::stop_token stop);

    [[nodiscard]] const model::ModelSpec& spec() const;
    [[nodiscard]] bool isF64() const;
    /// The loaded weights, shared read-only by every sequence decoded on this engine
    /// (exec/sequence_decoder.h).
    [[nodiscard]] const detail::WeightTable& weightTable() const;

    struct Impl;

private:
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

/// Operators the engine lacks for a spec, one line each naming the operator and the family
/// ("vision tower of qwen2_vl (patch embedding, ViT blocks, merger)"); empty when supported.
std::vector<std::string> unsupportedFeatures(const model::ModelSpec& spec);

/// A vision tower the engine does not run while the text model runs without it (Kimi-K3's
/// MoonViT-3): what it would need, or nullopt. A run with an image is refused for it.
std::optional<std::string> visionTowerNotRun(const model::ModelSpec& spec);

} // namespace day0::exec
