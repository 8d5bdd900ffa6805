#pragma once

// Internal: readers for the sections of a Hugging Face config.json that several families share
// (RoPE scaling, quantisation, MoE, MLA, vision towers, per-layer patterns). Each takes a
// Section: the JSON object, an `origin` naming the file (and the nested object) for messages,
// and the ledger that records every key read, so that the reader can account for every key of
// the config (config_audit.h).

#include "base/json_util.h"
#include "base/result.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <vector>

namespace day0::model::detail {

/// What a reading of a config accounted for: the keys it read (the ledger) and the structure it
/// found but does not model, with the reason.
struct Accounting {
    KeyLedger ledger;
    std::vector<IgnoredKey> unmodelled;
};

/// One JSON object of a config being read.
struct Section {
    const nlohmann::json& object;
    std::string origin; ///< "config.json", "config.json (text_config)"
    Accounting* accounting = nullptr;
    std::string path; ///< dotted path in the document ("", "text_config", "vision_config")
    std::string file; ///< the file's name for messages ("config.json")

    /// The document of `file`, declared a section (the root of the accounting).
    static Section root(
        const nlohmann::json& document, const std::string& file, Accounting* accounting);

    /// A reader of the object that records the keys it reads.
    [[nodiscard]] JsonReader reader() const
    {
        return JsonReader(object, origin, accounting ? &accounting->ledger : nullptr);
    }
    /// Records that `key` (present) describes structure Day0 does not model, and why; the key
    /// and everything under it count as accounted for, as unknown.
    void notModelled(const std::string& key, const std::string& reason) const;
    /// Records every key of the object as read: a section accounted for as a whole (by one
    /// notModelled entry naming why).
    void touchAll() const;
    /// The dotted path of `key` in the document.
    [[nodiscard]] std::string pathOf(const std::string& key) const;
    /// True if `key` is present and not null; records it as read.
    [[nodiscard]] bool has(const std::string& key) const;
    /// The value of a present key; records it as read.
    [[nodiscard]] const nlohmann::json& at(const std::string& key) const;
    /// The nested object under `key` (present, an object), declared a section of its own whose
    /// keys are then accounted for too.
    [[nodiscard]] Section child(const std::string& key) const;
    /// The same for an object that is not under a key of this one (an array element).
    [[nodiscard]] Section element(const nlohmann::json& object, const std::string& name) const;
};

/// Reads `rope_scaling` (or transformers-5 `rope_parameters`) into spec.ropeScaling and the RoPE
/// base into spec.ropeTheta.
Result<void> readRope(const Section& text, ModelSpec& spec);

/// Reads a `quantization_config` object (block FP8, MXFP4, compressed-tensors packed INT4 or
/// MXFP4, ModelOpt); `section` names the object. An unknown method is an error naming it.
Result<void> readQuantization(const Section& quantization, ModelSpec& spec);

/// Reads a ModelOpt `hf_quant_config.json` (its "quantization" object) into spec.quantization.
Result<void> readHfQuantConfig(const Section& document, ModelSpec& spec);

/// Reads the MoE fields of the family (expert counts and widths, routing, which layers are MoE)
/// and fills spec.moe and spec.layers[i].ffn. Dense families leave spec.moe empty.
Result<void> readMoe(const Section& text, ModelSpec& spec);

/// Reads the DeepSeek MLA dimensions (and the V3.2 / GLM-5 sparse-attention indexer).
Result<void> readMla(const Section& text, ModelSpec& spec);

/// Reads a `vision_config` object of kind `kind` ("qwen2_vl", "qwen2_5_vl", "qwen3_vl",
/// "moonvit", "moonvit3") into spec.vision. Needs spec.hiddenSize (the width the merger projects
/// to).
Result<void> readVision(const Section& vision, const std::string& kind, ModelSpec& spec);

/// Fills the per-layer attention pattern: sliding windows, Llama-4 NoPE and chunked layers.
Result<void> readLayerPattern(const Section& text, ModelSpec& spec);

/// Sets a layer's sliding window and with it its mixer kind (Sliding, or Attention for 0).
void setWindow(LayerSpec& layer, std::int64_t window);

/// Reads an optional array of non-negative integers; records an error on `reader` otherwise.
std::vector<std::int64_t> intArrayOr(JsonReader& reader, const std::string& key);

/// Reads an optional string key whose value must be one of `modelled` (absent: `fallback`);
/// records an error on `reader` naming the value and what Day0 models otherwise.
std::string stringOneOf(JsonReader& reader, const std::string& key,
    std::initializer_list<const char*> modelled, const std::string& fallback);

/// Reads an optional boolean that must be `modelled` when present; an error otherwise.
void boolMustBe(JsonReader& reader, const std::string& key, bool modelled);

/// Reads an optional array of strings; records an error on `reader` otherwise.
std::vector<std::string> stringArrayOr(JsonReader& reader, const std::string& key);

/// Reads a per-layer list: an array of exactly `count` integers, or a single integer meaning
/// every layer (as Hunyuan's and DeciLM's configs allow); records an error on `reader` naming
/// the key, its length and the layer count otherwise. Absent: empty.
std::vector<std::int64_t> perLayerInts(
    JsonReader& reader, const std::string& key, std::int64_t count);

} // namespace day0::model::detail
