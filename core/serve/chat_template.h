#pragma once

#include "base/result.h"
#include "serve/jinja.h"

#include <filesystem>
#include <optional>
#include <string>

namespace day0::serve {

/// A checkpoint's chat template (chat_template.jinja, else tokenizer_config.json's
/// `chat_template`, as transformers reads them) with the special tokens it is rendered with
/// (tokenizer_config.json's bos_token, eos_token, unk_token, pad_token). Thread-safe.
class ChatTemplate {
public:
    /// The template of the checkpoint folder `folder`: none when it has none; an error naming
    /// the file when it is malformed, or naming the construct when the template uses Jinja that
    /// the interpreter (jinja.h) does not implement.
    static Result<std::optional<ChatTemplate>> load(const std::filesystem::path& folder);
    /// A template from its source and the special tokens' texts (a JSON object such as
    /// {"bos_token": "<s>"}).
    static Result<ChatTemplate> fromSource(std::string_view source, jinja::Json specialTokens);

    /// The prompt of a conversation: the template rendered with `messages` (a list of
    /// {"role", "content", ...}), `add_generation_prompt` and the special tokens, as HF's
    /// apply_chat_template(messages, tokenize=False, add_generation_prompt=...) gives it.
    [[nodiscard]] Result<std::string> render(
        const jinja::Json& messages, bool addGenerationPrompt) const;

private:
    jinja::Template m_template;
    jinja::Json m_specialTokens;
};

} // namespace day0::serve
