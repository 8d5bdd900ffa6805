#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/engine.h"
#include "serve/chat_template.h"
#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

namespace day0::serve {

/// A checkpoint made ready to serve: its engine (weights loaded), its tokenizer when it has one,
/// the tokens that end a sequence, its chat template or why chat requests are refused.
struct LoadedModel {
    model::ModelSpec spec;
    /// Null when loaded with ServedWeights::SpecOnly (the weights live elsewhere: a plan's ranks).
    std::unique_ptr<exec::Engine> engine;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer; ///< null: the checkpoint has none
    std::set<std::int64_t> eosIds; ///< config.json / generation_config.json eos_token_id
    std::optional<ChatTemplate> chat; ///< none: /v1/chat/completions answers chatRefusal
    std::string chatRefusal; ///< the 400 message of /v1/chat/completions without a template
    bool chatTemplateUnusable = false; ///< it has one, but malformed or outside the subset
    std::string name; ///< the default served model name: the checkpoint's folder name
};

/// Whether loadServedModel reads the weights into an engine.
enum class ServedWeights {
    Load, ///< an engine with every weight, in fp64 or fp32
    /// The spec, tokenizer and templates only: the sequences run where the weights already are
    /// (a plan's sharded ranks, each holding its slices), so the checkpoint is not read twice.
    SpecOnly,
};

/// Opens `checkpoint` (as `day0 run` does: exec::openCheckpoint) and, with ServedWeights::Load,
/// loads its weights in fp64 or fp32 for `fp64`. A missing tokenizer.json is not an error
/// (token-id prompts only); a broken one is. Cancellable.
Result<LoadedModel> loadServedModel(const std::filesystem::path& checkpoint, bool fp64,
    Progress& progress, std::stop_token stop, ServedWeights weights = ServedWeights::Load);

} // namespace day0::serve
