#include "exec/engine.h"

#include "exec/deepseek_v4.h"
#include "exec/engine_taps.h"
#include "exec/forward.h"
#include "exec/layer_slice.h"
#include "exec/layer_stream.h"
#include "exec/layout_weights.h"
#include "exec/recurrent_state.h"
#include "exec/router.h"
#include "exec/router_precision.h"
#include "exec/vision_input.h"
#include "numerics/float_formats.h"
#include "numerics/metrics.h"
#include "numerics/state_anchor.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <variant>

namespace day0::exec {

namespace {

using numerics::Shape;
using numerics::Tensor;

/// Reads one weight into the compute dtype, dequantising block-scaled FP8.
Result<Tensor> loadWeight(const WeightSource& source, const detail::WeightRequirement& req,
    const model::ModelSpec& spec, DType compute, bool& exactFp8)
{
    auto stored = source.read(req.name);
    if (!stored) {
        return stored.error();
    }
    if (stored->shape() != req.shape) {
        return Error::badInput(fmt::format("{}: tensor '{}' has shape {} but the config needs {}",
            source.describe(), req.name, numerics::shapeString(stored->shape()),
            numerics::shapeString(req.shape)));
    }
    exactFp8 = false;
    const bool fp8 = stored->dtype() == DType::F8E4M3 || stored->dtype() == DType::F8E5M2;
    // The block scale beside the weight: `<name>_scale_inv`, or with DeepSeek-V4's ue8m0 format
    // `<module>.scale` (quantization_config's scale suffix).
    const std::string suffix = spec.quantization ? spec.quantization->scaleSuffix : "";
    const std::string scaleName = !suffix.empty() && req.name.ends_with(".weight")
        ? req.name.substr(0, req.name.size() - 6) + suffix
        : req.name + "_scale_inv";
    if (!fp8 || !source.has(scaleName)) {
        if (req.integer && !isFloat(stored->dtype())) {
            // DeepSeek-V4's tid2eid: small integers, exact in either compute type.
            return Tensor::fromDoubles(req.shape, stored->toDoubles()).to(compute);
        }
        if (!isFloat(stored->dtype())) {
            return Error::badInput(fmt::format("{}: tensor '{}' is {}, expected a floating type",
                source.describe(), req.name, dtypeName(stored->dtype())));
        }
        exactFp8 = fp8;
        return stored->to(compute);
    }
    auto scale = source.read(scaleName);
    if (!scale) {
        return scale.error();
    }
    const std::int64_t rows = req.shape[0];
    const std::int64_t cols = req.shape.size() > 1 ? req.shape[1] : 1;
    const std::int64_t br = spec.quantization ? spec.quantization->blockRows : 128;
    const std::int64_t bc = spec.quantization ? spec.quantization->blockCols : 128;
    const Shape expected { (rows + br - 1) / br, (cols + bc - 1) / bc };
    if (scale->shape() != expected) {
        return Error::badInput(
            fmt::format("{}: tensor '{}' has shape {}; a {}x{}-block scale of {} needs {}",
                source.describe(), scaleName, numerics::shapeString(scale->shape()), br, bc,
                numerics::shapeString(req.shape), numerics::shapeString(expected)));
    }
    const auto values = stored->toDoubles();
    const auto scales = scale->toDoubles();
    std::vector<double> out(values.size());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
            out[std::size_t(r * cols + c)] = values[std::size_t(r * cols + c)]
                * scales[std::size_t((r / br) * expected[1] + c / bc)];
        }
    }
    exactFp8 = true;
    return Tensor::fromDoubles(req.shape, out).to(compute);
}

/// Reads `req` into `table` as Engine::create does (an optional weight the source lacks is
/// skipped; zero-centred norms are kept as 1 + w).
Result<void> loadRequired(const WeightSource& weights, const detail::WeightRequirement& req,
    const model::ModelSpec& spec, DType compute, detail::WeightTable& table)
{
    if (!weights.has(req.name)) {
        if (req.optional) {
            return success();
        }
        return Error::badInput(fmt::format("{}: missing tensor '{}' needed by the {} forward",
            weights.describe(), req.name, spec.modelType));
    }
    bool exact = false;
    auto t = loadWeight(weights, req, spec, compute, exact);
    if (!t) {
        return t.error();
    }
    if (exact) {
        table.exactFp8.insert(req.name);
    }
    if (detail::zeroCentredNorm(spec, req.name)) {
        // Qwen3NextRMSNorm and MiniMax-M3's norms scale by 1 + w: kept as such.
        auto values = t->toDoubles();
        for (auto& v : values) {
            v += 1.0;
        }
        *t = Tensor::fromDoubles(t->shape(), values).to(compute);
    }
    table.tensors[req.name] = std::move(*t);
    return success();
}

std::int64_t argmaxRow(const double* row, std::int64_t n)
{
    return numerics::topKIndices({ row, std::size_t(n) }, 1).front();
}

} // namespace

struct Engine::Impl {
    model::ModelSpec spec;
    detail::WeightTable weights;
    bool fp64 = false;

    /// `stream`: the weights come layer by layer from it (layer_stream.h), not from `weights`.
    /// `slice`: decoder layers A..B only, fed from a dump (layer_slice.h).
    template <typename T>
    Result<RunResult> run(const RunOptions& options, Progress& progress, std::stop_token stop,
        detail::LayerStream* stream = nullptr, const LayerSlice* slice = nullptr);
    Result<std::vector<std::int64_t>> tokensToFeed(const RunOptions& options) const;
    Result<void> checkInject(const numerics::Dump& dump, std::int64_t rows) const;
};

std::string modelFingerprint(const model::ModelSpec& spec)
{
    std::string s = fmt::format("{}/h{}/l{}/a{}/kv{}/v{}", spec.modelType, spec.hiddenSize,
        spec.numLayers, spec.numHeads, spec.numKvHeads, spec.vocabSize);
    if (spec.moe) {
        s += fmt::format("/e{}k{}", spec.moe->numExperts, spec.moe->topK);
    }
    return s;
}

void recordRouterInfo(const model::ModelSpec& spec, numerics::DumpInfo& info)
{
    if (!spec.moe) {
        return;
    }
    const RouterConfig router = routerConfig(*spec.moe);
    info.extra["router"]
        = { { "scoring", router.scoring == model::RouterScoring::Sigmoid ? "sigmoid" : "softmax" },
              { "top_k", router.topK }, { "n_group", router.numGroups },
              { "topk_group", router.topkGroup } };
}

Result<Engine> Engine::create(const model::ModelSpec& spec, const WeightSource& checkpoint,
    bool fp64, Progress& progress, std::stop_token stop)
{
    const detail::LayoutWeights mapped(checkpoint, spec);
    const WeightSource& weights
        = detail::needsLayoutMapping(spec) ? static_cast<const WeightSource&>(mapped) : checkpoint;
    const auto missing = unsupportedFeatures(spec);
    if (!missing.empty()) {
        return Error::unsupported(
            fmt::format("the CPU reference engine lacks: {}", fmt::join(missing, "; ")));
    }
    auto impl = std::make_unique<Impl>();
    impl->spec = spec;
    impl->fp64 = fp64;
    auto required = detail::requiredWeights(spec);
    if (spec.family == model::Family::Gemma4 && spec.vision) {
        // Gemma-4's vision tower runs on an image, on this single-rank engine only (sharded,
        // sliced and streamed runs take token prompts): its weights are loaded here.
        const auto vision = detail::gemma4VisionWeights(spec);
        required.insert(required.end(), vision.begin(), vision.end());
    }
    progress.setTotal(std::int64_t(required.size()));
    progress.setStage("loading weights");
    const DType compute = fp64 ? DType::F64 : DType::F32;
    for (const auto& req : required) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        progress.advance();
        DAY0_TRY(loadRequired(weights, req, spec, compute, impl->weights));
    }
    return Engine(std::move(impl));
}

Engine::Engine(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

const model::ModelSpec& Engine::spec() const { return m_impl->spec; }
bool Engine::isF64() const { return m_impl->fp64; }

const detail::WeightTable& Engine::weightTable() const { return m_impl->weights; }

Result<RunResult> Engine::run(const RunOptions& options, Progress& progress, std::stop_token stop)
{
    if (options.precision.isF64() != m_impl->fp64) {
        return Error::internal(fmt::format("a {} run needs an engine loaded in {}",
            precisionName(options.precision.base), options.precision.isF64() ? "fp64" : "fp32"));
    }
    if (options.image && detail::isQwenNext(m_impl->spec)) {
        return Error::unsupported(fmt::format("the vision tower of {} is not computed by the CPU "
                                              "reference engine (a text prompt runs)",
            m_impl->spec.modelType));
    }
    if (const auto tower = visionTowerNotRun(m_impl->spec); options.image && tower) {
        return Error::unsupported(fmt::format("the {}, is not run by the CPU reference engine "
                                              "(a text prompt runs)",
            *tower));
    }
    if (options.image && m_impl->spec.family == model::Family::Gemma4
        && m_impl->spec.perLayerInputSize > 0) {
        // HF embeds the image rows' per-layer inputs from the pad token and projects the
        // features: not modelled.
        return Error::unsupported(fmt::format("an image with the per-layer input embeddings of "
                                              "{} (hidden_size_per_layer_input {})",
            m_impl->spec.modelType, m_impl->spec.perLayerInputSize));
    }
    if (options.image && m_impl->spec.vision) {
        // One image-pad token in the prompt stands for the whole image: expand it first, so
        // that teacher forcing, inject mode and the dump all see the real sequence.
        auto patches = detail::imagePatches(options.image->image, *m_impl->spec.vision);
        if (!patches) {
            return patches.error();
        }
        const std::int64_t merge = detail::imageTokenSide(*m_impl->spec.vision);
        auto layout = detail::mropeLayout(options.promptIds, options.image->imageTokenId,
            patches->gridH / merge, patches->gridW / merge);
        if (!layout) {
            return layout.error();
        }
        if (layout->ids.size() != options.promptIds.size()) {
            RunOptions expanded = options;
            expanded.promptIds = layout->ids;
            return run(expanded, progress, stop);
        }
    }
    return m_impl->fp64 ? m_impl->run<double>(options, progress, stop)
                        : m_impl->run<float>(options, progress, stop);
}

Result<std::vector<std::int64_t>> Engine::Impl::tokensToFeed(const RunOptions& options) const
{
    if (options.promptIds.empty()) {
        return Error::badInput("the prompt is empty");
    }
    if (options.newTokens < 1) {
        return Error::badInput("--tokens must be at least 1");
    }
    std::vector<std::int64_t> forced = options.forcedTokens;
    if (options.injectFrom != nullptr && forced.empty()) {
        const auto& ref = options.injectFrom->info.inputIds;
        if (ref.size() > options.promptIds.size()) {
            forced.assign(ref.begin() + std::ptrdiff_t(options.promptIds.size()), ref.end());
        }
    }
    const auto needed = std::size_t(options.newTokens - 1);
    if (!forced.empty() && forced.size() < needed) {
        return Error::badInput(
            fmt::format("teacher forcing needs {} tokens for {} decode steps, got {}", needed,
                needed, forced.size()));
    }
    forced.resize(std::min(forced.size(), needed));
    return forced;
}

Result<void> Engine::Impl::checkInject(const numerics::Dump& dump, std::int64_t rows) const
{
    if (spec.family == model::Family::NemotronH) {
        // Its layers' outputs are captured under backbone.* and no step injects them.
        return Error::unsupported("inject mode of nemotron_h (the engine injects no reference "
                                  "state into its backbone.* layers)");
    }
    if (spec.family == model::Family::DeepseekV4) {
        // Its layers' outputs are the hc_mult residual streams [n, streams, hidden].
        return Error::unsupported("inject mode of deepseek_v4 (the engine injects no reference "
                                  "hyper-connection streams into its layers)");
    }
    std::vector<std::string> anchors { "model.embed_tokens", "model.norm" };
    for (int l = 0; l < int(spec.numLayers); ++l) {
        anchors.push_back(fmt::format("model.layers.{}", l));
    }
    for (const auto& a : anchors) {
        const Tensor* t = dump.tensor(a);
        if (t == nullptr) {
            return Error::badInput(fmt::format("inject mode needs the reference's full '{}' "
                                               "capture, which the reference dump lacks",
                a));
        }
        if (t->rank() != 2 || t->dim(0) < rows || t->dim(1) != spec.hiddenSize) {
            return Error::badInput(
                fmt::format("reference capture '{}' has shape {}, inject mode needs [{}+, {}]", a,
                    numerics::shapeString(t->shape()), rows, spec.hiddenSize));
        }
    }
    return success();
}

template <typename T>
Result<RunResult> Engine::Impl::run(const RunOptions& options, Progress& progress,
    std::stop_token stop, detail::LayerStream* stream, const LayerSlice* slice)
{
    if (slice != nullptr && (options.injectFrom != nullptr || slice->input == nullptr)) {
        return Error::internal("a layer slice reads its own input dump, not inject mode's");
    }
    auto forcedOr = tokensToFeed(options);
    if (!forcedOr) {
        return forcedOr.error();
    }
    const std::vector<std::int64_t>& forced = *forcedOr;
    const auto prompt = std::int64_t(options.promptIds.size());
    const std::int64_t capacity = prompt + options.newTokens - 1;
    if (options.injectFrom != nullptr) {
        DAY0_TRY(checkInject(*options.injectFrom, capacity));
        const auto& ref = options.injectFrom->info.inputIds;
        if (!ref.empty()
            && !std::equal(options.promptIds.begin(), options.promptIds.end(), ref.begin(),
                ref.begin() + std::min<std::ptrdiff_t>(std::ptrdiff_t(ref.size()), prompt))) {
            return Error::badInput(
                "inject mode: the prompt differs from the reference dump's input ids");
        }
    }
    DAY0_TRY(checkRecurrentStateOptions(spec, options.precision, options.capture));
    detail::CaptureTaps<T> capture(
        options.capture, slice != nullptr ? slice->input : options.injectFrom, options.precision);
    if (slice != nullptr) {
        capture.injectOnlyAt(slice->entryAnchor, slice->inputCapture);
    }
    std::optional<detail::StreamingTaps<T>> streaming;
    if (stream != nullptr) {
        streaming.emplace(capture, *stream);
    }
    detail::Taps<T>& taps = streaming ? static_cast<detail::Taps<T>&>(*streaming) : capture;
    // One forward step over the stream's weights, loaded as its layers come.
    const auto streamed = [&](auto&& runStep) -> decltype(runStep()) {
        if (stream == nullptr) {
            return runStep();
        }
        DAY0_TRY(stream->beginStep());
        auto out = runStep();
        auto ended = stream->endStep();
        if (!ended) {
            return ended.error(); // the load that failed (the forward only saw the stop)
        }
        return out;
    };
    RunResult result;
    std::vector<std::int64_t> fed = options.promptIds;
    auto forward = std::make_unique<detail::Forward<T>>(
        spec, stream != nullptr ? stream->table() : weights, options.precision, capacity);
    DAY0_TRY(forward->init());
    if (options.linearAttentionChunk < 1) {
        return Error::badInput(fmt::format("the linear-attention chunk must be at least one token, "
                                           "got {}",
            options.linearAttentionChunk));
    }
    forward->setDeltaRuleChunk(options.linearAttentionChunk);
    if (slice != nullptr) {
        forward->setLayerSlice(slice->first, slice->last);
    }
    if (options.backend != nullptr) {
        if constexpr (!std::is_same_v<T, float>) {
            return Error::badInput(fmt::format("the fp64 reference runs on day0-cpu only, not on "
                                               "backend '{}'; run fp32 or a lower precision there",
                options.backend->name()));
        } else {
            if (spec.family == model::Family::DeepseekV4 && options.backend->name() != "day0-cpu") {
                // deepseek_v4_forward.cpp computes on the CPU reference, not through a
                // backend's operators.
                return Error::unsupported(fmt::format(
                    "backend '{}' on deepseek_v4: its hyper-connections, compressed attention "
                    "with the Lightning indexer and hash-routed MoE run on the CPU reference "
                    "only (run without a backend)",
                    options.backend->name()));
            }
            forward->setBackend(options.backend);
        }
    }
    if (stream == nullptr) {
        progress.setTotal(options.newTokens); // a stream counts the bytes it reads instead
    }
    progress.setStage("prefill");
    const auto t0 = std::chrono::steady_clock::now();
    capture.beginStep(0);
    detail::VisionFeatures<T> vision;
    detail::MultimodalStep<T> mm;
    std::int64_t positionDelta = 0;
    if (options.image) {
        if (!spec.vision) {
            return Error::badInput(
                fmt::format("{} has no vision tower; --image needs a vision-language model",
                    spec.name.empty() ? spec.modelType : spec.name));
        }
        auto patches = detail::imagePatches(options.image->image, *spec.vision);
        if (!patches) {
            return patches.error();
        }
        const std::int64_t merge = detail::imageTokenSide(*spec.vision);
        auto layout = detail::mropeLayout(options.promptIds, options.image->imageTokenId,
            patches->gridH / merge, patches->gridW / merge);
        if (!layout) {
            return layout.error();
        }
        if (std::int64_t(layout->ids.size()) != prompt) {
            return Error::internal("the image-pad token was not expanded before the run");
        }
        const bool gemma4 = spec.vision->kind == "gemma4";
        if (gemma4) {
            // Gemma-4 has 1-D positions (no M-RoPE): the image rows count up like text.
            auto rules = detail::gemma4ImageRules(spec);
            if (!rules) {
                return rules.error();
            }
            mm.imageBidirectional = rules->imageBidirectional;
            mm.imagePadId = rules->padTokenId;
        }
        progress.setStage("vision tower");
        auto features
            = forward->visionTower(patches->values, patches->gridH, patches->gridW, taps, stop);
        if (!features) {
            return features.error();
        }
        vision = std::move(*features);
        mm.vision = &vision;
        mm.imageRows = layout->imageRows;
        if (!gemma4) {
            mm.positions3 = layout->positions3;
            positionDelta = layout->delta;
        }
        progress.setStage("prefill");
    }
    const std::vector<std::int64_t> promptIds = fed;
    auto logits = [&] {
        const profile::TraceScope traced("prefill", profile::Category::Annotation);
        return streamed(
            [&] { return forward->step(promptIds, 0, taps, stop, options.image ? &mm : nullptr); });
    }();
    if (!logits) {
        return logits.error();
    }
    const auto t1 = std::chrono::steady_clock::now();
    const std::int64_t vocab = spec.vocabSize;
    const auto pick = [&](const std::vector<T>& l) {
        if (slice != nullptr) {
            return; // no head: the dump's tokens are fed
        }
        const std::vector<double> last(l.end() - vocab, l.end());
        result.generated.push_back(argmaxRow(last.data(), vocab));
    };
    pick(*logits);
    if (stream == nullptr) {
        progress.advance();
    }
    forward->setPositionDelta(positionDelta);
    for (std::int64_t s = 1; s < options.newTokens; ++s) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        progress.setStage(fmt::format("decode step {}", s));
        const std::int64_t token
            = forced.empty() ? result.generated.back() : forced[std::size_t(s - 1)];
        fed.push_back(token);
        capture.beginStep(std::int64_t(fed.size()) - 1);
        const std::int64_t one[] = { token };
        const auto stepStart = std::chrono::steady_clock::now();
        auto next = [&] {
            const profile::TraceScope traced("decode step", profile::Category::Annotation);
            return streamed(
                [&] { return forward->step(one, std::int64_t(fed.size()) - 1, taps, stop); });
        }();
        if (!next) {
            return next.error();
        }
        pick(*next);
        result.decodeStepSeconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - stepStart).count());
        if (stream == nullptr) {
            progress.advance();
        }
    }
    const auto t2 = std::chrono::steady_clock::now();
    result.prefillSeconds = std::chrono::duration<double>(t1 - t0).count();
    result.decodeSeconds = std::chrono::duration<double>(t2 - t1).count();

    result.dump = capture.finish(options.capture.statsOnly);
    numerics::DumpInfo& info = result.dump.info;
    info.model = spec.name;
    info.fingerprint = modelFingerprint(spec);
    info.precision = std::string(precisionName(options.precision.base));
    result.dispatch = forward->dispatchReport();
    info.backend = result.dispatch.backend;
    if (options.backend != nullptr) {
        info.extra["backend_device"] = result.dispatch.device;
        info.extra["backend_ops"] = dispatchJson(result.dispatch)["ops"];
    }
    info.mode = options.injectFrom != nullptr ? "inject" : "propagate";
    info.inputIds = fed;
    info.promptLength = std::int64_t(promptIds.size());
    info.generatedIds = result.generated;
    info.numLayers = spec.numLayers;
    info.extra["precision_plan"] = options.precision.describe();
    std::string recipe = precisionRecipe(options.precision);
    if (const std::string router = routerRecipe(spec, options.precision); !router.empty()) {
        recipe += "; " + router;
    }
    info.extra["precision_recipe"] = recipe;
    info.extra["prefill_seconds"] = result.prefillSeconds;
    info.extra["decode_seconds"] = result.decodeSeconds;
    info.extra["teacher_forced"] = !forced.empty();
    if (slice != nullptr) {
        info.extra["layers"] = { { "first", slice->first }, { "last", slice->last },
            { "input", slice->inputCapture } };
    }
    recordRouterInfo(spec, info);
    return result;
}

} // namespace day0::exec

namespace day0::exec::detail {

Result<RunResult> runOverStream(const model::ModelSpec& spec, bool fp64, const RunOptions& options,
    LayerStream& stream, Progress& progress, const LayerSlice* slice)
{
    if (options.precision.isF64() != fp64) {
        return Error::internal("a streamed run's plan and arithmetic differ");
    }
    Engine::Impl impl;
    impl.spec = spec;
    impl.fp64 = fp64;
    // The stream's token is the caller's, and is also requested by a failed load.
    return fp64 ? impl.run<double>(options, progress, stream.stopToken(), &stream, slice)
                : impl.run<float>(options, progress, stream.stopToken(), &stream, slice);
}

Result<numerics::Tensor> loadForwardWeight(const WeightSource& source, const WeightRequirement& req,
    const model::ModelSpec& spec, DType compute, bool& exactFp8)
{
    return loadWeight(source, req, spec, compute, exactFp8);
}

} // namespace day0::exec::detail

namespace day0::exec {

Result<RunResult> runLayerSlice(const model::ModelSpec& spec, const WeightSource& checkpoint,
    const RunOptions& options, const LayerSlice& slice, Progress& progress, std::stop_token stop)
{
    DAY0_TRY(refuseUnsliceable(spec, options));
    const detail::LayoutWeights mapped(checkpoint, spec);
    const WeightSource& weights
        = detail::needsLayoutMapping(spec) ? static_cast<const WeightSource&>(mapped) : checkpoint;
    Engine::Impl impl;
    impl.spec = spec;
    impl.fp64 = options.precision.isF64();
    const DType compute = impl.fp64 ? DType::F64 : DType::F32;
    std::vector<detail::WeightRequirement> required;
    for (auto& req : detail::requiredWeights(spec)) {
        const int layer = layerOfWeight(req.name);
        if (layer >= slice.first && layer <= slice.last) {
            required.push_back(std::move(req));
        }
    }
    progress.setTotal(std::int64_t(required.size()));
    progress.setStage(fmt::format("loading the weights of layers {}-{}", slice.first, slice.last));
    for (const auto& req : required) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        progress.advance();
        DAY0_TRY(loadRequired(weights, req, spec, compute, impl.weights));
    }
    return impl.fp64 ? impl.run<double>(options, progress, stop, nullptr, &slice)
                     : impl.run<float>(options, progress, stop, nullptr, &slice);
}

} // namespace day0::exec
