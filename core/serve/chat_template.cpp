#include "serve/chat_template.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace day0::serve {

namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

Result<ChatTemplate> ChatTemplate::fromSource(std::string_view source, jinja::Json specialTokens)
{
    auto parsed = jinja::Template::parse(source);
    if (!parsed) {
        return parsed.error();
    }
    ChatTemplate t;
    t.m_template = std::move(*parsed);
    t.m_specialTokens = std::move(specialTokens);
    return t;
}

Result<std::optional<ChatTemplate>> ChatTemplate::load(const fs::path& folder)
{
    std::error_code ec;
    const fs::path config = folder / "tokenizer_config.json";
    jinja::Json json = jinja::Json::object();
    if (fs::exists(config, ec)) {
        json = jinja::Json::parse(readAll(config), nullptr, false);
        if (json.is_discarded() || !json.is_object()) {
            return Error::badInput(fmt::format("{}: not a JSON object", config.string()));
        }
    }
    // Special tokens: a string, or an AddedToken object with its "content".
    jinja::Json specials = jinja::Json::object();
    for (const char* key : { "bos_token", "eos_token", "unk_token", "pad_token" }) {
        if (!json.contains(key) || json[key].is_null()) {
            continue;
        }
        const auto& v = json[key];
        if (v.is_string()) {
            specials[key] = v;
        } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
            specials[key] = v["content"];
        } else {
            return Error::badInput(
                fmt::format("{}: {} holds {}, not a token's text", config.string(), key, v.dump()));
        }
    }
    std::string source;
    std::string origin;
    if (fs::exists(folder / "chat_template.jinja", ec)) {
        origin = (folder / "chat_template.jinja").string();
        source = readAll(folder / "chat_template.jinja");
    } else if (json.contains("chat_template") && !json["chat_template"].is_null()) {
        origin = config.string() + ": chat_template";
        const auto& t = json["chat_template"];
        if (t.is_string()) {
            source = t.get<std::string>();
        } else if (t.is_array()) {
            // Named templates: transformers uses "default" when no tools are given.
            for (const auto& named : t) {
                if (named.is_object() && named.value("name", "") == "default"
                    && named.contains("template") && named["template"].is_string()) {
                    source = named["template"].get<std::string>();
                }
            }
            if (source.empty()) {
                return Error::badInput(fmt::format(
                    "{}: chat_template is a list of named templates without a \"default\" one",
                    config.string()));
            }
        } else {
            return Error::badInput(
                fmt::format("{}: chat_template must be a string or a list of named templates",
                    config.string()));
        }
    } else {
        return std::optional<ChatTemplate>();
    }
    auto t = fromSource(source, std::move(specials));
    if (!t) {
        return t.error().withContext(origin);
    }
    return std::optional<ChatTemplate>(std::move(*t));
}

Result<std::string> ChatTemplate::render(
    const jinja::Json& messages, bool addGenerationPrompt) const
{
    jinja::Json context = m_specialTokens;
    context["messages"] = messages;
    context["add_generation_prompt"] = addGenerationPrompt;
    return m_template.render(context);
}

} // namespace day0::serve
