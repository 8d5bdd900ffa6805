#include "serve/served_model.h"

#include "exec/checkpoint_weights.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace day0::serve {

namespace fs = std::filesystem;

namespace {

/// The folder a checkpoint's side files (tokenizer.json, generation_config.json) live in.
fs::path folderOf(const fs::path& checkpoint)
{
    std::error_code ec;
    return fs::is_directory(checkpoint, ec) ? checkpoint : checkpoint.parent_path();
}

/// `eos_token_id` of a JSON file (an id or a list of ids); errors name the file.
Result<void> addEosIds(const fs::path& file, std::set<std::int64_t>& ids)
{
    std::error_code ec;
    if (!fs::exists(file, ec)) {
        return success();
    }
    std::ifstream in(file);
    const auto json = nlohmann::json::parse(in, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
        return Error::badInput(fmt::format("{}: not a JSON object", file.string()));
    }
    if (!json.contains("eos_token_id") || json["eos_token_id"].is_null()) {
        return success();
    }
    const auto& v = json["eos_token_id"];
    const auto add = [&](const nlohmann::json& id) -> Result<void> {
        if (!id.is_number_integer()) {
            return Error::badInput(fmt::format(
                "{}: eos_token_id holds {}, not an integer token id", file.string(), id.dump()));
        }
        ids.insert(id.get<std::int64_t>());
        return success();
    };
    if (v.is_array()) {
        for (const auto& id : v) {
            DAY0_TRY(add(id));
        }
        return success();
    }
    return add(v);
}

} // namespace

Result<LoadedModel> loadServedModel(const fs::path& checkpoint, bool fp64, Progress& progress,
    std::stop_token stop, ServedWeights weights)
{
    LoadedModel out;
    if (weights == ServedWeights::SpecOnly) {
        auto spec = exec::loadCheckpointModel(checkpoint);
        if (!spec) {
            return spec.error();
        }
        out.spec = std::move(*spec);
    } else {
        auto opened = exec::openCheckpoint(checkpoint);
        if (!opened) {
            return opened.error();
        }
        auto engine = exec::Engine::create(opened->spec, *opened->weights, fp64, progress, stop);
        if (!engine) {
            return engine.error();
        }
        out.engine = std::make_unique<exec::Engine>(std::move(*engine));
        out.spec = out.engine->spec();
    }
    const fs::path folder = folderOf(checkpoint);
    std::error_code ec;
    if (fs::exists(folder / "tokenizer.json", ec) || checkpoint.extension() == ".gguf") {
        auto tokenizer = tokenizer::loadTokenizer(checkpoint);
        if (!tokenizer) {
            return tokenizer.error();
        }
        out.tokenizer = std::move(*tokenizer);
    }
    DAY0_TRY(addEosIds(folder / "config.json", out.eosIds));
    DAY0_TRY(addEosIds(folder / "generation_config.json", out.eosIds));
    out.name = fs::weakly_canonical(checkpoint, ec).filename().string();
    if (out.name.empty()) {
        out.name = checkpoint.filename().string();
    }
    // A template the interpreter cannot take (a construct outside its subset, a malformed
    // tokenizer_config.json) leaves completions served and chat refused with the reason.
    auto chat = ChatTemplate::load(folder);
    if (!chat) {
        out.chatRefusal = fmt::format("model '{}' has a chat template day0 serve cannot use: {}",
            out.name, chat.error().message);
        out.chatTemplateUnusable = true;
    } else if (!chat->has_value()) {
        out.chatRefusal = fmt::format("model '{}' has no chat template (no chat_template in "
                                      "tokenizer_config.json, no chat_template.jinja); send the "
                                      "prompt to /v1/completions",
            out.name);
    } else if (!out.tokenizer) {
        out.chatRefusal = fmt::format("model '{}' has a chat template but no tokenizer "
                                      "(tokenizer.json) to turn the rendered chat into tokens",
            out.name);
    } else {
        out.chat = std::move(**chat);
    }
    return out;
}

} // namespace day0::serve
