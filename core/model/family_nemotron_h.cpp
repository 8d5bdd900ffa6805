// Nemotron-H (`nemotron_h`: Nemotron-H-56B, Nemotron 3 Nano / Super / Ultra): the reader of its
// config.json and its checkpoint graph.
//
// Where the facts come from (research note nemotron_modelopt.md (not in the repository), Part A):
// - Layer kinds and config keys: transformers `configuration_nemotron_h.py` @ 13923c63
//   (`_pattern_to_list`: M mamba, * attention, - mlp, E moe; `layers_block_type` list form with
//   the legacy names and the newer linear_attention / full_attention; num_hidden_layers derived
//   from the pattern, absent in the Ultra configs).
// - Modules, one norm and one mixer per layer: transformers `modeling_nemotron_h.py` @ 008d9e95
//   (NemotronHBlock: norm + mixer; NemotronHMamba2Mixer: in_proj [2·d_inner + 2·G·N + nh, H],
//   depthwise conv1d [conv_dim, 1, K], dt_bias, A_log, D, gated norm [d_inner], out_proj, with
//   d_inner = mamba_num_heads · mamba_head_dim; NemotronHAttention: q/k/v/o without bias, RoPE,
//   q/k norm or gate; NemotronHMLP: relu2, up/down only; NemotronHMoE: router `gate` [E, H] with
//   an fp32 `e_score_correction_bias`, optional fc1/fc2_latent_proj, one shared expert).
// - Checkpoint names (`backbone.` prefix, experts one module each, `mtp.layers.{k}` with
//   enorm / hnorm / eh_proj / final_layernorm, embedding and lm_head shared with the MTP block):
//   NVIDIA Model-Optimizer @ a2fbac7b `modelopt/torch/export/plugins/mcore_nemotron.py`, vLLM
//   `nemotron_h_mtp.py` @ 01ca2773, and the module lists of the real ModelOpt quant configs
//   (Nano-NVFP4, Lightning-NVFP4 under ai-dynamo/aiconfigurator @ 095f58a5).
// - Stored dtypes: A_log and D F32, dt_bias / norms / router BF16 in Nano-BF16 (its F32 tensors
//   total 23,552 bytes, measured by a third-party study, index id 55678723753); routers written
//   by the remote code may be F32 (index ids 59833047489, 57540337036): altDtype marks those.
// - ModelOpt: lm_head and the mtp.* block stay BF16 in every Nemotron ModelOpt checkpoint we
//   have evidence of (Nano-NVFP4 excludes lm_head; Lightning excludes `mtp*`; a third-party
//   census of a real NVFP4 Nemotron MTP block, index id 58402304116, finds only BF16 and the F32
//   bias; HF does not even load mtp.*, `_keys_to_ignore_on_load_unexpected`). KV-cache scales
//   `<mixer>.k_proj.k_scale` / `v_proj.v_scale` (ModelOpt `_KV_CACHE_REPLACEMENTS`) are listed
//   as optional: which repositories carry them is not known.

#include "base/json_util.h"
#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

std::string str(std::int64_t v) { return std::to_string(v); }

// A layer of the kind one pattern character or block-type name stands for.
std::optional<LayerSpec> layerOfKind(const std::string& kind)
{
    LayerSpec layer;
    layer.rope = false; // NemotronHAttention applies no rotary embedding
    if (kind == "M" || kind == "mamba" || kind == "linear_attention") {
        layer.mixer = MixerKind::Mamba2;
        layer.ffn = FfnKind::None;
    } else if (kind == "*" || kind == "attention" || kind == "full_attention") {
        layer.mixer = MixerKind::Attention;
        layer.ffn = FfnKind::None;
    } else if (kind == "-" || kind == "mlp") {
        layer.mixer = MixerKind::None;
        layer.ffn = FfnKind::Dense;
    } else if (kind == "E" || kind == "moe") {
        layer.mixer = MixerKind::None;
        layer.ffn = FfnKind::Moe;
    } else {
        return std::nullopt;
    }
    return layer;
}

// The layers of a pattern given as a string (`hybrid_override_pattern`, one character per layer)
// or as a list (`layers_block_type`); empty when the key is absent.
std::vector<LayerSpec> readKinds(JsonReader& r, const std::string& key)
{
    std::vector<LayerSpec> out;
    if (!r.has(key)) {
        return out;
    }
    const auto& value = r.value(key);
    std::vector<std::string> kinds;
    if (value.is_string()) {
        for (const char c : value.get<std::string>()) {
            kinds.emplace_back(1, c);
        }
    } else if (value.is_array()) {
        kinds = stringArrayOr(r, key);
    } else {
        r.fail(
            key, fmt::format("must be a string or a list of strings, found {}", dumpJson(value)));
        return out;
    }
    for (std::size_t i = 0; i < kinds.size() && r.ok(); ++i) {
        auto layer = layerOfKind(kinds[i]);
        if (!layer) {
            r.fail(key,
                fmt::format("entry {} is \"{}\", which Day0 does not model (it models M / mamba, "
                            "* / attention, - / mlp and E / moe)",
                    i, kinds[i]));
            return {};
        }
        out.push_back(*layer);
    }
    if (r.ok() && out.empty()) {
        r.fail(key, "is empty");
    }
    return out;
}

bool sameKinds(const std::vector<LayerSpec>& a, const std::vector<LayerSpec>& b)
{
    return std::equal(
        a.begin(), a.end(), b.begin(), b.end(), [](const LayerSpec& x, const LayerSpec& y) {
            return x.mixer == y.mixer && x.ffn == y.ffn;
        });
}

// The one pattern of two spellings (string, list); both present must describe the same layers.
std::vector<LayerSpec> readPattern(JsonReader& r, const char* stringKey, const char* listKey)
{
    auto fromString = readKinds(r, stringKey);
    auto fromList = readKinds(r, listKey);
    if (r.ok() && !fromString.empty() && !fromList.empty() && !sameKinds(fromString, fromList)) {
        r.fail(listKey, fmt::format("describes other layers than '{}'", stringKey));
    }
    return fromString.empty() ? fromList : fromString;
}

// A positive integer that the configs spell two ways (HF name, remote-code alias).
std::int64_t aliased(JsonReader& r, const char* key, const char* alias, bool required)
{
    const bool hasKey = r.has(key);
    const bool hasAlias = r.has(alias);
    if (!hasKey && !hasAlias) {
        if (required) {
            return r.requirePositive(key);
        }
        return 0;
    }
    const std::int64_t value = r.requirePositive(hasKey ? key : alias);
    if (hasKey && hasAlias && r.ok() && r.requirePositive(alias) != value) {
        r.fail(alias, fmt::format("differs from '{}' ({})", key, value));
    }
    return value;
}

bool aliasedBool(JsonReader& r, const char* key, const char* alias, bool fallback)
{
    const bool value = r.boolOr(key, r.boolOr(alias, fallback));
    if (r.has(key) && r.has(alias) && r.ok() && r.boolOr(alias, value) != value) {
        r.fail(alias, fmt::format("differs from '{}' ({})", key, value));
    }
    return value;
}

bool any(const std::vector<LayerSpec>& layers, bool (*pred)(const LayerSpec&))
{
    return std::any_of(layers.begin(), layers.end(), pred);
}

void readMamba(JsonReader& r, bool needed, ModelSpec& spec)
{
    MambaSpec m;
    m.numHeads = needed ? r.requirePositive("mamba_num_heads") : r.intOr("mamba_num_heads", 0);
    m.headDim = needed ? r.requirePositive("mamba_head_dim") : r.intOr("mamba_head_dim", 0);
    m.stateSize = needed ? r.requirePositive("ssm_state_size") : r.intOr("ssm_state_size", 0);
    m.numGroups = aliased(r, "n_groups", "mamba_n_groups", needed);
    m.convKernel = aliased(r, "conv_kernel", "mamba_d_conv", needed);
    m.chunkSize = r.intOr("chunk_size", 0);
    m.convBias = aliasedBool(r, "use_conv_bias", "mamba_conv_bias", true);
    // `use_bias` is the projection bias of HF's mixer; remote code and MLX call it
    // mamba_proj_bias, which HF ignores: the two must not disagree.
    m.projBias = r.boolOr("use_bias", false);
    if (r.has("mamba_proj_bias") && r.ok()
        && r.boolOr("mamba_proj_bias", m.projBias) != m.projBias) {
        r.fail("mamba_proj_bias", fmt::format("differs from 'use_bias' ({})", m.projBias));
    }
    (void)stringOneOf(r, "mamba_hidden_act", { "silu" }, "silu");
    const std::string cacheDtype = r.stringOr("mamba_ssm_cache_dtype", "float32");
    if (!r.ok()) {
        return;
    }
    const auto stateDtype = parseDTypeLoose(cacheDtype);
    if (!stateDtype
        || (*stateDtype != DType::F32 && *stateDtype != DType::BF16 && *stateDtype != DType::F16)) {
        r.fail("mamba_ssm_cache_dtype",
            fmt::format("is \"{}\"; expected float32, bfloat16 or float16", cacheDtype));
        return;
    }
    m.stateDtype = *stateDtype;
    if (needed && m.inner() % m.numGroups != 0) {
        // The gated norm normalises d_inner / n_groups channels at a time.
        r.fail("n_groups",
            fmt::format(
                "({}) must divide mamba_num_heads · mamba_head_dim ({})", m.numGroups, m.inner()));
        return;
    }
    if (needed) {
        spec.mamba = m;
    }
}

void readAttention(JsonReader& r, bool needed, ModelSpec& spec)
{
    spec.numHeads
        = needed ? r.requirePositive("num_attention_heads") : r.intOr("num_attention_heads", 0);
    spec.numKvHeads
        = needed ? r.requirePositive("num_key_value_heads") : r.intOr("num_key_value_heads", 0);
    // transformers names it head_dim; the Nemotron-H remote code attention_head_dim (56B).
    spec.headDim = aliased(r, "head_dim", "attention_head_dim", needed);
    // HF's NemotronHAttention hard-codes bias=False; older remote code honoured the key.
    boolMustBe(r, "attention_bias", false);
    if (!r.ok() || !needed) {
        return;
    }
    if (spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
        return;
    }
    spec.attention = spec.numKvHeads == spec.numHeads ? AttentionKind::MHA
        : spec.numKvHeads == 1                        ? AttentionKind::MQA
                                                      : AttentionKind::GQA;
}

void readExperts(JsonReader& r, bool needed, ModelSpec& spec)
{
    const auto positive
        = [&](const char* key) { return needed ? r.requirePositive(key) : r.intOr(key, 0); };
    MoeSpec moe;
    moe.numExperts = positive("n_routed_experts");
    moe.topK = positive("num_experts_per_tok");
    moe.expertIntermediate = positive("moe_intermediate_size");
    moe.sharedIntermediate = positive("moe_shared_expert_intermediate_size");
    // NemotronHMoE builds exactly one shared MLP of that width, whatever n_shared_experts says.
    const std::int64_t shared = r.intOr("n_shared_experts", 1);
    if (r.ok() && needed && shared != 1) {
        r.fail("n_shared_experts",
            fmt::format("is {}; HF's NemotronH builds one shared expert (Day0 models 1)", shared));
    }
    moe.numSharedExperts = 1;
    // Latent MoE (Super, Ultra): the routed experts work at this width; null or absent: at H.
    moe.latentSize = r.has("moe_latent_size") ? r.requirePositive("moe_latent_size") : 0;
    moe.gatedExperts = false; // relu2 experts: up_proj and down_proj only
    moe.scoring = RouterScoring::Sigmoid;
    moe.expertScoreBias = true;
    moe.normTopkProb = r.boolOr("norm_topk_prob", true);
    moe.routedScalingFactor = r.numberOr("routed_scaling_factor", 1.0);
    moe.numGroups = r.intOr("n_group", 1);
    moe.topkGroup = r.intOr("topk_group", 1);
    if (!r.ok() || !needed) {
        return;
    }
    if (moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'n_routed_experts' ({})", moe.topK, moe.numExperts));
    } else if (moe.numGroups <= 0 || moe.numExperts % moe.numGroups != 0) {
        r.fail("n_group",
            fmt::format("({}) must divide 'n_routed_experts' ({})", moe.numGroups, moe.numExperts));
    } else if (moe.topkGroup <= 0 || moe.topkGroup > moe.numGroups) {
        r.fail("topk_group",
            fmt::format("({}) must be between 1 and 'n_group' ({})", moe.topkGroup, moe.numGroups));
    }
    spec.moe = moe;
}

// The MTP block: num_nextn_predict_layers steps of the MTP pattern. Without steps the pattern
// keys describe nothing (HF fills in a default pattern even then).
void readMtp(const Section& s, JsonReader& r, ModelSpec& spec)
{
    const std::int64_t steps = r.intOr("num_nextn_predict_layers", 0);
    const auto pattern = readPattern(r, "mtp_hybrid_override_pattern", "mtp_layers_block_type");
    if (!r.ok() || steps == 0) {
        return;
    }
    if (steps < 0) {
        r.fail("num_nextn_predict_layers", "must not be negative");
        return;
    }
    if (steps > 1) {
        // vLLM asserts one step; where further steps' enorm / hnorm / final_layernorm go is
        // not established by any checkpoint.
        s.notModelled("num_nextn_predict_layers",
            fmt::format("{} MTP steps (Day0 models one, as vLLM's NemotronH MTP does)", steps));
        return;
    }
    if (pattern.empty()) {
        r.fail("num_nextn_predict_layers",
            "is 1 but neither 'mtp_hybrid_override_pattern' nor 'mtp_layers_block_type' says "
            "what the MTP layers are");
        return;
    }
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const LayerSpec& layer = pattern[i];
        if (layer.mixer != MixerKind::Attention && !layer.moe()) {
            const char* key = r.has("mtp_hybrid_override_pattern") ? "mtp_hybrid_override_pattern"
                                                                   : "mtp_layers_block_type";
            r.fail(key,
                fmt::format("entry {} is a {} layer; Day0 models attention and moe MTP layers "
                            "(as vLLM's NemotronH MTP)",
                    i, layer.mixer == MixerKind::Mamba2 ? "mamba" : "mlp"));
            return;
        }
    }
    spec.mtpLayers = pattern;
    spec.numMtpLayers = std::int64_t(pattern.size());
}

} // namespace

Result<void> readNemotronH(const ConfigInput& input, ModelSpec& spec)
{
    const Section& s = input.text;
    JsonReader r = s.reader();
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("layer_norm_epsilon", 1e-5);
    spec.layers = readPattern(r, "hybrid_override_pattern", "layers_block_type");
    if (r.ok() && spec.layers.empty()) {
        r.fail("hybrid_override_pattern",
            "is missing, and so is 'layers_block_type': the layer kinds are unknown");
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.numLayers = std::int64_t(spec.layers.size());
    // HF derives the layer count from the pattern (Ultra has no num_hidden_layers); a config
    // that gives both must agree.
    if (r.has("num_hidden_layers")) {
        const std::int64_t declared = r.requirePositive("num_hidden_layers");
        if (r.ok() && declared != spec.numLayers) {
            r.fail("num_hidden_layers",
                fmt::format("is {} but the layer pattern has {} layers", declared, spec.numLayers));
        }
    }
    readMtp(s, r, spec);
    if (!r.ok()) {
        return r.error();
    }
    const auto mamba = [](const LayerSpec& l) { return l.mixer == MixerKind::Mamba2; };
    const auto attention = [](const LayerSpec& l) { return l.mixer == MixerKind::Attention; };
    const auto dense = [](const LayerSpec& l) { return l.ffn == FfnKind::Dense; };
    const auto moe = [](const LayerSpec& l) { return l.ffn == FfnKind::Moe; };
    readMamba(r, any(spec.layers, mamba), spec);
    readAttention(r, any(spec.layers, attention) || any(spec.mtpLayers, attention), spec);
    readExperts(r, any(spec.layers, moe) || any(spec.mtpLayers, moe), spec);
    // The dense MLP width of the `-` layers only (no Nemotron 3 model has one).
    spec.intermediateSize = any(spec.layers, dense) ? r.requirePositive("intermediate_size")
                                                    : r.intOr("intermediate_size", 0);
    // Squared ReLU, not gated: every MLP and expert is up_proj and down_proj.
    spec.hiddenAct = stringOneOf(r, "mlp_hidden_act", { "relu2" }, "relu2");
    spec.gatedMlp = false;
    spec.mlpBias = r.boolOr("mlp_bias", false);
    if (!r.ok()) {
        return r.error();
    }
    if (s.has("sliding_window")) {
        s.notModelled("sliding_window", "HF's NemotronH attention implements no sliding window");
    }
    // dt = softplus(dt + dt_bias) clamped to time_step_limit: the mamba_ssm kernels of HF's
    // CUDA path and vLLM (which passes (0, inf)) clamp there; the default (0, inf), or an upper
    // end no float dt reaches (Nemotron 3 Ultra writes 1e308), is the identity after the
    // softplus, what the engine computes. Another limit is not modelled.
    if (s.has("time_step_limit")) {
        const auto& v = s.at("time_step_limit");
        const bool identity = v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()
            && v[0].get<double>() <= 0.0
            && v[1].get<double>() >= double(std::numeric_limits<float>::max());
        if (!identity) {
            s.notModelled("time_step_limit",
                fmt::format(
                    "{} clamps dt (the engine computes the default (0, inf))", dumpJson(v)));
        }
    }
    return readQuantizationOf(input, spec);
}

namespace {

// The quantisation the checkpoint applies to the Linears of the main model; the MTP block is
// never quantised (see the top of the file).
LinearOptions options(ParallelRole role, Component component, bool bias, bool mtp)
{
    LinearOptions o { role, component, bias };
    o.quantizable = !mtp;
    return o;
}

void addMamba(GraphBuilder& b, const std::string& p, bool mtp)
{
    const ModelSpec& s = b.spec();
    const MambaSpec& m = *s.mamba;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t inner = m.inner();
    const std::int64_t conv = m.convChannels();
    const Component c = Component::Attention;
    // Rows z (gate) ‖ x ‖ B ‖ C ‖ dt.
    b.linear(p + ".in_proj", inner + conv + m.numHeads, h,
        options(R::ColumnParallel, c, m.projBias, mtp));
    // Depthwise, one filter per channel of x, B and C: never a quantised Linear.
    b.tensor(p + ".conv1d.weight", { conv, 1, m.convKernel }, s.dtype, R::ColumnParallel, c);
    if (m.convBias) {
        b.tensor(p + ".conv1d.bias", { conv }, s.dtype, R::ColumnParallel, c, TensorKind::Bias);
    }
    const auto perHead = [&](const char* name, DType dtype, DType other, TensorKind kind) {
        b.tensor(p + "." + name, { m.numHeads }, dtype, R::ColumnParallel, c, kind);
        if (other != dtype) {
            b.last().altDtype = other;
        }
    };
    perHead("dt_bias", s.dtype, DType::F32, TensorKind::Bias);
    perHead("A_log", DType::F32, s.dtype, TensorKind::Weight);
    perHead("D", DType::F32, s.dtype, TensorKind::Weight);
    // Gated RMSNorm over d_inner (in n_groups groups), split with the heads.
    b.tensor(p + ".norm.weight", { inner }, s.dtype, R::ColumnParallel, Component::Norm);
    b.linear(p + ".out_proj", h, inner, options(R::RowParallel, c, m.projBias, mtp));
}

void addAttention(GraphBuilder& b, const std::string& p, bool mtp)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t q = s.numHeads * s.headDim;
    const std::int64_t kv = s.numKvHeads * s.headDim;
    const Component c = Component::Attention;
    b.linear(p + ".q_proj", q, h, options(R::ColumnParallel, c, false, mtp));
    b.linear(p + ".k_proj", kv, h, options(R::ColumnParallel, c, false, mtp));
    b.linear(p + ".v_proj", kv, h, options(R::ColumnParallel, c, false, mtp));
    b.linear(p + ".o_proj", h, q, options(R::RowParallel, c, false, mtp));
    if (!mtp && s.quantization && s.quantization->kvCacheDtype) {
        // ModelOpt's calibrated KV-cache scales, F32 scalars (FP8: clamped to >= 1).
        for (const char* name : { "k_proj.k_scale", "v_proj.v_scale" }) {
            b.tensor(p + "." + name, {}, DType::F32, R::Replicated, c, TensorKind::Scale);
            b.last().optional = true;
        }
    }
}

void addMlp(
    GraphBuilder& b, const std::string& p, std::int64_t width, Component component, bool mtp)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    b.linear(p + ".up_proj", width, h, options(R::ColumnParallel, component, s.mlpBias, mtp));
    b.linear(p + ".down_proj", h, width, options(R::RowParallel, component, s.mlpBias, mtp));
}

void addMoe(GraphBuilder& b, const std::string& p, bool mtp)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    // The router reads the full hidden state (not the latent); a bare parameter, never a
    // quantised Linear.
    b.tensor(p + ".gate.weight", { moe.numExperts, h }, s.dtype, R::Replicated, Component::Router);
    if (s.dtype != DType::F32) {
        b.last().altDtype = DType::F32;
    }
    b.tensor(p + ".gate.e_score_correction_bias", { moe.numExperts }, DType::F32, R::Replicated,
        Component::Router, TensorKind::Bias);
    const std::int64_t x = moe.latentSize > 0 ? moe.latentSize : h;
    if (moe.latentSize > 0) {
        b.linear(p + ".fc1_latent_proj", x, h,
            options(R::Replicated, Component::RoutedExperts, s.mlpBias, mtp));
        b.linear(p + ".fc2_latent_proj", h, x,
            options(R::Replicated, Component::RoutedExperts, s.mlpBias, mtp));
    }
    // Experts never have a bias. Quantisation is decided once per projection: exclusion rules
    // name layers, never single experts.
    const std::string first = p + ".experts.0.";
    const int qUp = !mtp && b.quantizes(first + "up_proj") ? 1 : 0;
    const int qDown = !mtp && b.quantizes(first + "down_proj") ? 1 : 0;
    b.reserve(std::size_t(moe.numExperts) * 2 * (s.quantization ? 4 : 1));
    std::string module;
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        module.assign(p).append(".experts.").append(str(e)).append(".");
        const std::size_t stem = module.size();
        LinearOptions up = options(R::ColumnParallel, Component::RoutedExperts, false, mtp);
        up.expert = static_cast<std::int32_t>(e);
        up.quantized = qUp;
        b.linear(module.append("up_proj"), moe.expertIntermediate, x, up);
        module.resize(stem);
        LinearOptions down = options(R::RowParallel, Component::RoutedExperts, false, mtp);
        down.expert = up.expert;
        down.quantized = qDown;
        b.linear(module.append("down_proj"), x, moe.expertIntermediate, down);
    }
    // The shared expert works on the un-projected hidden state.
    addMlp(b, p + ".shared_experts", moe.sharedIntermediate, Component::SharedExperts, mtp);
}

// One layer: its norm and its mixer.
void addLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer, bool mtp)
{
    const ModelSpec& s = b.spec();
    b.norm(p + ".norm", s.hiddenSize);
    const std::string mixer = p + ".mixer";
    if (layer.mixer == MixerKind::Mamba2) {
        addMamba(b, mixer, mtp);
    } else if (layer.mixer == MixerKind::Attention) {
        addAttention(b, mixer, mtp);
    } else if (layer.moe()) {
        addMoe(b, mixer, mtp);
    } else {
        addMlp(b, mixer, s.ffnWidthOf(layer), Component::DenseMlp, mtp);
    }
}

} // namespace

void addNemotronHTextTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    const std::string& prefix = s.layout.textPrefix;
    const std::int64_t h = s.hiddenSize;

    b.begin(prefix + ".embeddings", BlockKind::Embedding);
    b.tensor(prefix + ".embeddings.weight", { s.vocabSize, h }, s.dtype, R::VocabParallel,
        Component::Embedding);

    for (std::int64_t i = 0; i < s.numLayers; ++i) {
        const LayerSpec& layer = s.layers[std::size_t(i)];
        const std::string p = prefix + ".layers." + str(i);
        b.begin(p, BlockKind::Decoder, static_cast<std::int32_t>(i), layer.moe());
        addLayer(b, p, layer, false);
    }

    b.begin(prefix + ".norm_f", BlockKind::FinalNorm);
    b.norm(prefix + ".norm_f", h);

    if (!s.tieEmbeddings) {
        // Never quantised in a Nemotron ModelOpt checkpoint we know of (see the top).
        b.begin(s.layout.lmHead, BlockKind::LmHead);
        b.tensor(s.layout.lmHead + ".weight", { s.vocabSize, h }, s.dtype, R::VocabParallel,
            Component::LmHead);
    }

    // One MTP step (the reader models one): its first layer also takes the embedding of the
    // next token and the last hidden state (enorm, hnorm, eh_proj over [embedding ‖ hidden]),
    // its last one ends with final_layernorm. The embedding and lm_head are the main model's.
    for (std::int64_t k = 0; k < s.numMtpLayers; ++k) {
        const LayerSpec& layer = s.mtpLayers[std::size_t(k)];
        const std::string p = "mtp.layers." + str(k);
        b.begin(p, BlockKind::Mtp, static_cast<std::int32_t>(s.numLayers + k), layer.moe());
        if (k == 0) {
            b.norm(p + ".enorm", h);
            b.norm(p + ".hnorm", h);
            b.linear(p + ".eh_proj", h, 2 * h, options(R::Replicated, Component::Mtp, false, true));
        }
        addLayer(b, p, layer, true);
        if (k == s.numMtpLayers - 1) {
            b.norm(p + ".final_layernorm", h);
        }
    }
}

} // namespace day0::model::detail
