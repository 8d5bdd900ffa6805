#include "exec/layer_slice.h"

#include "exec/layout_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace day0::exec {

namespace {

/// The integer at the start of `text`; advances it past the digits.
std::optional<int> leadingInt(std::string_view& text)
{
    int value = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || value < 0) {
        return std::nullopt;
    }
    text.remove_prefix(std::size_t(end - text.data()));
    return value;
}

} // namespace

Result<std::pair<int, int>> parseLayerRange(std::string_view text, std::int64_t layers)
{
    const auto bad = [&](const std::string& why) {
        return Error::badInput(fmt::format("--layers '{}': {}", text, why));
    };
    std::string_view rest = text;
    const auto first = leadingInt(rest);
    if (!first) {
        return bad("expected A-B or A (decoder layer indices, from 0)");
    }
    int last = *first;
    if (!rest.empty()) {
        if (rest.front() != '-') {
            return bad("expected A-B or A (decoder layer indices, from 0)");
        }
        rest.remove_prefix(1);
        const auto parsed = leadingInt(rest);
        if (!parsed || !rest.empty()) {
            return bad("expected A-B or A (decoder layer indices, from 0)");
        }
        last = *parsed;
    }
    if (last < *first) {
        return bad("the last layer comes before the first");
    }
    if (last >= layers) {
        return bad(fmt::format("the model has {} decoder layers (0-{})", layers, layers - 1));
    }
    return std::pair { *first, last };
}

int layerOfWeight(std::string_view name)
{
    constexpr std::string_view prefix = "model.layers.";
    if (!name.starts_with(prefix)) {
        return -1;
    }
    name.remove_prefix(prefix.size());
    const auto layer = leadingInt(name);
    if (!layer || name.empty() || name.front() != '.') {
        return -1;
    }
    return *layer;
}

Result<void> refuseUnsliceable(const model::ModelSpec& spec, const RunOptions& options)
{
    using F = model::Family;
    const auto refuse
        = [](std::string what) { return Error::unsupported(fmt::format("--layers: {}", what)); };
    // The families whose layers read nothing but the residual stream and their own weights and
    // caches (no per-layer inputs from the embedding, no state shared between layers).
    static const F kSliceable[] = { F::Llama, F::Mistral, F::Mixtral, F::Qwen2, F::Qwen2Moe,
        F::Qwen3, F::Qwen3Moe, F::DeepseekV2, F::DeepseekV3, F::GenericDecoder };
    if (std::find(std::begin(kSliceable), std::end(kSliceable), spec.family)
        == std::end(kSliceable)) {
        return refuse(fmt::format("{} is not run in slices (its layers read more than the "
                                  "residual stream entering them); run it whole",
            spec.modelType));
    }
    if (spec.mla.indexerHeads > 0) {
        return refuse("the DSA indexer's selection is shared between layers");
    }
    const auto& plan = options.precision;
    if ((plan.base != PrecisionMode::F32 && plan.base != PrecisionMode::F64)
        || !plan.perOpKind.empty() || !plan.perLayer.empty()) {
        return refuse(fmt::format(
            "precision '{}': a slice runs the fp32 or fp64 reference", plan.describe()));
    }
    if (options.backend != nullptr) {
        return refuse(fmt::format(
            "backend '{}': a slice runs on the CPU reference", options.backend->name()));
    }
    if (options.image) {
        return refuse("--image: the vision tower is not run in a slice");
    }
    if (options.injectFrom != nullptr) {
        return refuse("inject mode (a slice takes one input, at its first layer)");
    }
    return success();
}

Result<void> prepareLayerSlice(const model::ModelSpec& spec, RunOptions& options, LayerSlice& slice)
{
    DAY0_TRY(refuseUnsliceable(spec, options));
    if (slice.input == nullptr) {
        return Error::badInput("--layers needs the dump its first layer reads (--slice-input)");
    }
    if (slice.first < 0 || slice.last < slice.first || slice.last >= spec.numLayers) {
        return Error::badInput(fmt::format("--layers {}-{}: the model has {} decoder layers",
            slice.first, slice.last, spec.numLayers));
    }
    const numerics::Dump& dump = *slice.input;
    const auto& info = dump.info;
    const std::string fingerprint = modelFingerprint(spec);
    if (info.fingerprint != fingerprint) {
        return Error::badInput(fmt::format("--slice-input: the dump is of model '{}', this "
                                           "checkpoint is '{}'",
            info.fingerprint, fingerprint));
    }
    if (info.mode != "propagate") {
        return Error::badInput(fmt::format("--slice-input: the dump is of a '{}' run; a slice "
                                           "continues a normal (propagate) run",
            info.mode));
    }
    const std::string plan = options.precision.describe();
    const std::string dumped = info.extra.value("precision_plan", info.precision);
    if (dumped != plan) {
        return Error::badInput(fmt::format(
            "--slice-input: the dump ran precision '{}', this slice runs '{}'", dumped, plan));
    }
    slice.entryAnchor = slice.first == 0 ? std::string("model.embed_tokens")
                                         : fmt::format("model.layers.{}", slice.first - 1);
    const std::string input = fmt::format("model.layers.{}#in0", slice.first);
    slice.inputCapture = dump.tensor(slice.entryAnchor) != nullptr ? slice.entryAnchor
        : dump.tensor(input) != nullptr                            ? input
                                                                   : std::string();
    if (slice.inputCapture.empty()) {
        return Error::badInput(fmt::format("--slice-input: the dump lacks the residual stream "
                                           "entering layer {}: neither '{}' nor '{}' is stored "
                                           "in it (dump the whole run without --stats-only or a "
                                           "--capture filter that drops it)",
            slice.first, slice.entryAnchor, input));
    }
    const numerics::Tensor& t = *dump.tensor(slice.inputCapture);
    const auto tokens = std::int64_t(info.inputIds.size());
    const DType compute = options.precision.isF64() ? DType::F64 : DType::F32;
    if (t.rank() != 2 || t.dim(0) != tokens || t.dim(1) != spec.hiddenSize) {
        return Error::badInput(fmt::format("--slice-input: capture '{}' has shape {}; the slice "
                                           "needs [{}, {}] (the dump's {} tokens × hidden size)",
            slice.inputCapture, numerics::shapeString(t.shape()), tokens, spec.hiddenSize, tokens));
    }
    if (t.dtype() != compute) {
        return Error::badInput(fmt::format("--slice-input: capture '{}' is {}; a {} slice reads {}",
            slice.inputCapture, dtypeName(t.dtype()), precisionName(options.precision.base),
            dtypeName(compute)));
    }
    if (info.promptLength < 1 || info.promptLength > tokens) {
        return Error::badInput(fmt::format("--slice-input: the dump's prompt length {} does not "
                                           "fit its {} input ids",
            info.promptLength, tokens));
    }
    const std::vector<std::int64_t> prompt(
        info.inputIds.begin(), info.inputIds.begin() + info.promptLength);
    if (!options.promptIds.empty() && options.promptIds != prompt) {
        return Error::badInput(fmt::format("--slice-input: the prompt ({} tokens) differs from the "
                                           "dump's ({} tokens: {}); a slice runs the dump's",
            options.promptIds.size(), prompt.size(), fmt::join(prompt, ",")));
    }
    const auto steps = 1 + tokens - info.promptLength;
    if (options.newTokens > 0 && options.newTokens != steps) {
        return Error::badInput(fmt::format("--slice-input: the dump ran {} steps (a prefill of {} "
                                           "tokens and {} decode steps), not --tokens {}; a "
                                           "slice runs the dump's",
            steps, info.promptLength, steps - 1, options.newTokens));
    }
    options.promptIds = prompt;
    options.forcedTokens.assign(info.inputIds.begin() + info.promptLength, info.inputIds.end());
    options.newTokens = 1 + std::int64_t(options.forcedTokens.size());
    return success();
}

} // namespace day0::exec
