#include "model/config_audit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace day0::model::detail {

namespace {

// Keys that change no tensor, shape or parameter count in any family. Each group says why.
constexpr std::string_view kInertKeys[] = {
    // Identity and provenance of the file.
    "architectures", "model_type", "transformers_version", "_name_or_path", "name_or_path",
    "auto_map", "_commit_hash", "tokenizer_class", "prefix", "task_specific_params", "problem_type",
    "finetuning_task", "id2label", "label2id", "keys_to_ignore_at_inference", "producer",
    // Run-time switches of the HF modeling code (outputs, kernels, attention implementation).
    "use_cache", "return_dict", "output_attentions", "output_hidden_states", "torchscript",
    "use_bfloat16", "tf_legacy_loss", "pruned_heads", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "add_cross_attention", "cross_attention_hidden_size",
    "tie_encoder_decoder", "_attn_implementation", "_attn_implementation_autoset",
    "use_mamba_kernels", "num_logits_to_keep", "use_flash_attn",
    // Megatron/HF training-time slicing and expert-parallel degree of the original code: the
    // same weights and the same math.
    "pretraining_tp", "ep_size",
    // Special tokens (more are recognised by their suffix, see isInertKey).
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "pad_id", "eod_token_id", "mask_init_id",
    // Generation defaults.
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens",
    // Training only: initialisation, dropout, auxiliary losses, router noise.
    "initializer_range", "initializer_factor", "attention_dropout", "hidden_dropout", "dropout",
    "embd_pdrop", "resid_pdrop", "attn_pdrop", "router_aux_loss_coef", "aux_loss_alpha", "seq_aux",
    "output_router_logits", "router_jitter_noise", "router_z_loss_coef", "z_loss_coef",
    "moe_aux_loss_coeff", "ignore_index", "rescale_prenorm_residual", "moe_drop_tokens",
    "moe_random_routing_dropped_token", "moe_shared_expert_overlap",
    "index_share_for_mtp_iteration",
    // Multimodal placeholders: strings the processor inserts.
    "image_placeholder", "video_placeholder",
    // Fields Hugging Face writes as null-like defaults of every PretrainedConfig.
    "dtype_policy", "quantization_status"
};

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size()
        && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joinedWithReasons(const std::vector<IgnoredKey>& keys)
{
    std::string out;
    for (const auto& k : keys) {
        out += out.empty() ? "" : ", ";
        out += k.path;
        if (!k.reason.empty()) {
            out += " (" + k.reason + ")";
        }
    }
    return out;
}

} // namespace

bool isInertKey(const std::string& key)
{
    // Token ids of special tokens in every spelling the configs use ("image_token_id",
    // "image_token_index", "media_placeholder_token_id", "vision_start_token_id").
    if (endsWith(key, "_token_id") || endsWith(key, "_token_index")
        || endsWith(key, "_token_ids")) {
        return true;
    }
    return std::find(std::begin(kInertKeys), std::end(kInertKeys), key) != std::end(kInertKeys);
}

Result<void> auditKeys(const Accounting& accounting, const std::vector<std::string>& familyInert,
    const std::string& what, bool partial, ModelSpec& spec)
{
    std::vector<IgnoredKey> unknown = accounting.unmodelled;
    for (const auto& section : accounting.ledger.sections()) {
        if (!section.object->is_object()) {
            continue;
        }
        for (const auto& [key, value] : section.object->items()) {
            const std::string path = section.path.empty() ? key : section.path + "." + key;
            if (value.is_null()) {
                spec.keys.push_back({ path, KeyStatus::Inert });
                continue;
            }
            const bool notModelled = std::any_of(accounting.unmodelled.begin(),
                accounting.unmodelled.end(), [&](const IgnoredKey& u) { return u.path == path; });
            if (notModelled) {
                spec.keys.push_back({ path, KeyStatus::Unknown });
            } else if (accounting.ledger.touched(*section.object, key)) {
                spec.keys.push_back({ path, KeyStatus::Understood });
            } else if (isInertKey(key)
                || std::find(familyInert.begin(), familyInert.end(), key) != familyInert.end()) {
                spec.keys.push_back({ path, KeyStatus::Inert });
            } else {
                spec.keys.push_back({ path, KeyStatus::Unknown });
                unknown.push_back({ path, "" });
            }
        }
    }
    if (unknown.empty()) {
        return success();
    }
    if (!partial) {
        const std::string type = spec.modelType.empty()
            ? std::string("a config without model_type")
            : fmt::format("model_type '{}'", spec.modelType);
        return Error::badInput(fmt::format("{}: {} has structure {} does not model: {}; nothing "
                                           "is computed from a guess (day0 inspect, memory and "
                                           "plan read the rest with --partial, and every output "
                                           "then lists what was ignored)",
            spec.origin, type, what, joinedWithReasons(unknown)));
    }
    spec.partial = true;
    for (auto& key : unknown) {
        if (key.reason.empty()) {
            key.reason = fmt::format("not read by {}", what);
        }
    }
    spec.ignored = std::move(unknown);
    spec.warnings.push_back(fmt::format(
        "PARTIAL reading: every figure leaves out {}", joinedWithReasons(spec.ignored)));
    return success();
}

Result<void> checkConsistency(const ModelSpec& spec)
{
    auto bug = [&](const std::string& what) {
        return Error::internal(fmt::format("{}: the {} reader left an inconsistent reading: {}",
            spec.origin, familyName(spec.family), what));
    };
    if (std::int64_t(spec.layers.size()) != spec.numLayers) {
        return bug(
            fmt::format("{} layer entries for {} layers", spec.layers.size(), spec.numLayers));
    }
    if (std::int64_t(spec.mtpLayers.size()) != spec.numMtpLayers) {
        return bug(fmt::format(
            "{} MTP layer entries for {} MTP layers", spec.mtpLayers.size(), spec.numMtpLayers));
    }
    const auto checkLayer = [&](const LayerSpec& l, const std::string& name) -> Result<void> {
        const auto need = [&](bool ok, const char* what) -> Result<void> {
            if (!ok) {
                return bug(fmt::format(
                    "{} is a {} layer but the spec has no {}", name, mixerKindName(l.mixer), what));
            }
            return success();
        };
        switch (l.mixer) {
        case MixerKind::Sliding:
            DAY0_TRY(need(l.slidingWindow > 0, "window"));
            break;
        case MixerKind::Chunked:
            DAY0_TRY(need(l.attentionChunk > 0, "chunk size"));
            break;
        case MixerKind::SparseMla:
            DAY0_TRY(need(
                spec.attention == AttentionKind::MLA && spec.mla.indexerHeads > 0, "MLA indexer"));
            break;
        case MixerKind::Compressed:
            DAY0_TRY(need(spec.compressedAttention.has_value(), "compressed-attention dimensions"));
            break;
        case MixerKind::BlockSparse:
            DAY0_TRY(need(spec.blockSparse.has_value(), "block-sparse indexer dimensions"));
            break;
        case MixerKind::GatedDeltaNet:
        case MixerKind::KimiDelta:
            DAY0_TRY(need(spec.linearAttention.has_value(), "linear-attention dimensions"));
            break;
        case MixerKind::Mamba2:
            DAY0_TRY(need(spec.mamba.has_value(), "Mamba dimensions"));
            break;
        default:
            break;
        }
        if (l.moe() && !spec.moe) {
            return bug(fmt::format("{} is a MoE layer but the spec has no experts", name));
        }
        return success();
    };
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        DAY0_TRY(checkLayer(spec.layers[i], fmt::format("layer {}", i)));
    }
    for (std::size_t i = 0; i < spec.mtpLayers.size(); ++i) {
        DAY0_TRY(checkLayer(spec.mtpLayers[i], fmt::format("MTP layer {}", i)));
    }
    return success();
}

} // namespace day0::model::detail
