// The chat-template interpreter (jinja.h, chat_template.h) against jinja2: real templates
// (tests/data/chat_templates, sources in SOURCES.md) rendered with each conversation of
// conversations.json must give exactly what jinja2 gave (expected.json, make_expected.py); what the
// interpreter does not implement is refused by name.
#include "serve/chat_template.h"
#include "serve/jinja.h"

#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using day0::serve::ChatTemplate;
using day0::serve::jinja::Json;
using day0::serve::jinja::Template;

namespace {

const fs::path kDir = fs::path(DAY0_TEST_DATA_DIR) / "chat_templates";

std::string readAll(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// expected.json leaves strftime_now's result as "<strftime_now:FORMAT>"; today's date here.
std::string withToday(std::string text)
{
    const std::string marker = "<strftime_now:";
    std::size_t at = 0;
    while ((at = text.find(marker, at)) != std::string::npos) {
        const std::size_t end = text.find('>', at);
        const std::string format = text.substr(at + marker.size(), end - at - marker.size());
        const std::time_t now = std::time(nullptr);
        std::tm local {};
        localtime_r(&now, &local);
        char buf[64];
        const std::size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
        text.replace(at, end + 1 - at, std::string(buf, n));
    }
    return text;
}

std::string render(const std::string& source, const Json& context)
{
    auto t = Template::parse(source);
    if (!t) {
        return "PARSE ERROR: " + t.error().message;
    }
    auto out = t->render(context);
    return out ? *out : "RENDER ERROR: " + out.error().message;
}

} // namespace

TEST(ChatTemplate, RealTemplatesRenderAsJinja2Does)
{
    const auto conversations = Json::parse(readAll(kDir / "conversations.json"));
    const auto expected = Json::parse(readAll(kDir / "expected.json"));
    int compared = 0;
    for (const auto& [name, byConversation] : expected.items()) {
        const std::string source = readAll(kDir / (name + ".jinja"));
        auto parsed = Template::parse(source);
        ASSERT_TRUE(parsed) << name << ": " << parsed.error().message;
        for (const auto& [key, want] : byConversation.items()) {
            const auto& conv = conversations[key];
            Json context = { { "bos_token", "<s>" }, { "eos_token", "</s>" },
                { "messages", conv["messages"] },
                { "add_generation_prompt", conv["add_generation_prompt"] } };
            if (conv.contains("tools")) {
                context["tools"] = conv["tools"];
            }
            const auto got = parsed->render(context);
            if (want.contains("text")) {
                if (!got) {
                    ADD_FAILURE() << name << " / " << key << ": " << got.error().message;
                    continue;
                }
                EXPECT_EQ(*got, withToday(want["text"].get<std::string>())) << name << " / " << key;
            } else if (want.contains("raises")) {
                EXPECT_FALSE(got) << name << " / " << key << " should raise";
                EXPECT_TRUE(!got
                    && got.error().message.find(want["raises"].get<std::string>())
                        != std::string::npos);
            } else {
                // The template fails by itself on this conversation in jinja2 too.
                EXPECT_FALSE(got) << name << " / " << key << " rendered: " << *got;
            }
            ++compared;
        }
    }
    EXPECT_EQ(compared, 7 * 6);
}

TEST(ChatTemplate, WhitespaceControlFollowsTrimAndLstripBlocks)
{
    const Json ctx = { { "xs", { 1, 2 } } };
    // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before one.
    EXPECT_EQ(
        render("{% for x in xs %}\n  {% if x %}\n{{ x }}\n  {% endif %}\n{% endfor %}\n", ctx),
        "1\n2\n");
    // '+' keeps them; '-' strips all whitespace on its side; {{ }} is not a block.
    EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc", ctx), "a\n  b\nc");
    EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c", ctx), "abc");
    EXPECT_EQ(render("  {{ 'x' }}\n", ctx), "  x");
    EXPECT_EQ(render("a {# note #}\nb", ctx), "a b");
}

TEST(ChatTemplate, ConstructsOutsideTheSubsetAreRefusedByName)
{
    const Json ctx = { { "messages", Json::array() } };
    const auto refused = [&](const std::string& source, const std::string& name) {
        const std::string out = render(source, ctx);
        EXPECT_NE(out.find("ERROR"), std::string::npos) << source << " -> " << out;
        EXPECT_NE(out.find(name), std::string::npos) << source << " -> " << out;
    };
    refused("{% call m() %}x{% endcall %}", "{% call %}");
    refused("{% include 'other' %}", "{% include %}");
    refused("{% raw %}x{% endraw %}", "{% raw %}");
    refused("{% filter upper %}x{% endfilter %}", "{% filter %}");
    refused("{{ 'a b'|wordcount }}", "filter 'wordcount'");
    refused("{{ cycler('a') }}", "'cycler'");
    refused("{{ 'a'.zfill(3) }}", "zfill");
    refused("{{ '%s' % 1 }}", "printf-style");
    refused("{{ x is callable2 }}", "test 'callable2'");
    // Undefined is empty and false, but has no attributes.
    EXPECT_EQ(render("[{{ missing }}]{% if missing %}x{% endif %}", ctx), "[]");
    refused("{{ missing.role }}", "'missing' is undefined");
    refused("{{ raise_exception('no system role') }}", "no system role");
    refused("{% for x in messages %}", "endfor");
}

TEST(ChatTemplate, LoadsFromTokenizerConfigWithItsSpecialTokens)
{
    const fs::path dir = fs::temp_directory_path() / "day0_chat_template_test";
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
        std::ofstream(dir / "tokenizer_config.json")
            << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
                  "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})";
    }
    auto loaded = ChatTemplate::load(dir);
    ASSERT_TRUE(loaded) << loaded.error().message;
    ASSERT_TRUE(loaded->has_value());
    const Json messages = Json::parse(R"([{"role":"user","content":"hi"}])");
    EXPECT_EQ(*(*loaded)->render(messages, true), "<s>[user]hi</s>[assistant]");
    EXPECT_EQ(*(*loaded)->render(messages, false), "<s>[user]hi</s>");
    // chat_template.jinja wins over tokenizer_config.json, as in transformers.
    std::ofstream(dir / "chat_template.jinja") << "{{ messages[0].content|upper }}\n";
    loaded = ChatTemplate::load(dir);
    ASSERT_TRUE(loaded && loaded->has_value());
    EXPECT_EQ(*(*loaded)->render(messages, true), "HI");
    // A template outside the subset is an error naming the file and the construct.
    std::ofstream(dir / "chat_template.jinja") << "{% call m() %}{% endcall %}";
    loaded = ChatTemplate::load(dir);
    ASSERT_FALSE(loaded);
    EXPECT_NE(loaded.error().message.find("chat_template.jinja"), std::string::npos);
    EXPECT_NE(loaded.error().message.find("{% call %}"), std::string::npos);
    fs::remove_all(dir);
    EXPECT_FALSE(ChatTemplate::load(dir)->has_value()); // no template at all
}
