#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace day0;

namespace {

const std::filesystem::path kVocab = std::filesystem::path(DAY0_TEST_DATA_DIR) / "exec" / "vocab";

std::string slurp(const std::filesystem::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// llama.cpp's test-tokenizer-0 fixtures: inputs separated by a marker line, one id line each.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> cases(const std::string& name)
{
    const std::string inp = slurp(kVocab / (name + ".inp"));
    const std::string marker = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (std::size_t pos = 0;;) {
        const auto at = inp.find(marker, pos);
        if (at == std::string::npos) {
            break;
        }
        texts.push_back(inp.substr(pos, at - pos));
        pos = at + marker.size();
    }
    std::ifstream out(kVocab / (name + ".out"));
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> result;
    std::string line;
    for (const auto& text : texts) {
        std::getline(out, line);
        std::istringstream ids(line);
        std::vector<std::int64_t> v;
        for (std::int64_t id; ids >> id;) {
            v.push_back(id);
        }
        result.emplace_back(text, v);
    }
    return result;
}

void expectMatchesFixtures(const std::string& name)
{
    auto tok = tokenizer::loadTokenizer(kVocab / name);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto all = cases(name);
    ASSERT_EQ(all.size(), 46u);
    int mismatches = 0;
    for (const auto& [text, expected] : all) {
        const auto ids = (*tok)->encode(text, false, false);
        ASSERT_TRUE(ids.ok()) << ids.error().message;
        if (*ids != expected) {
            ++mismatches;
            ADD_FAILURE() << name << ": '" << text << "'\n expected "
                          << ::testing::PrintToString(expected) << "\n got      "
                          << ::testing::PrintToString(*ids);
        }
    }
    EXPECT_EQ(mismatches, 0);
}

} // namespace

TEST(Tokenizer, LlamaSentencePieceMatchesLlamaCpp)
{
    expectMatchesFixtures("ggml-vocab-llama-spm.gguf");
}
TEST(Tokenizer, Phi3SentencePieceMatchesLlamaCpp)
{
    expectMatchesFixtures("ggml-vocab-phi-3.gguf");
}
TEST(Tokenizer, BertWordPieceMatchesLlamaCpp) { expectMatchesFixtures("ggml-vocab-bert-bge.gguf"); }
TEST(Tokenizer, BertWordPieceAddsClsAndSep)
{
    auto tok = tokenizer::loadTokenizer(kVocab / "ggml-vocab-bert-bge.gguf");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto ids = (*tok)->encode("Hello, world!", true);
    ASSERT_TRUE(ids.ok());
    // [CLS] hello , world ! [SEP] in bge-small-en's vocabulary
    EXPECT_EQ(*ids, (std::vector<std::int64_t> { 101, 7592, 1010, 2088, 999, 102 }));
    EXPECT_EQ((*tok)->decode(std::vector<std::int64_t> { 9706, 7959, 2140 }), "apfel");
}
TEST(Tokenizer, Gpt2BpeMatchesLlamaCpp) { expectMatchesFixtures("ggml-vocab-gpt-2.gguf"); }
TEST(Tokenizer, DeepseekCoderBpeMatchesLlamaCpp)
{
    expectMatchesFixtures("ggml-vocab-deepseek-coder.gguf");
}
TEST(Tokenizer, DeepseekLlmBpeMatchesLlamaCpp)
{
    expectMatchesFixtures("ggml-vocab-deepseek-llm.gguf");
}

namespace {

/// Writes a GGUF BPE vocabulary as an HF tokenizer.json, with the pre-tokenizer as a ByteLevel
/// (GPT-2) or a Sequence of isolated Splits followed by a regex-free ByteLevel.
std::filesystem::path asTokenizerJson(const std::string& gguf, bool sequence)
{
    auto vocab = tokenizer::readGgufTokenizer(kVocab / gguf);
    EXPECT_TRUE(vocab.ok());
    nlohmann::json j;
    nlohmann::json tokens = nlohmann::json::object();
    for (std::size_t i = 0; i < vocab->tokens.size(); ++i) {
        tokens[vocab->tokens[i]] = i;
    }
    nlohmann::json merges = nlohmann::json::array();
    for (const auto& [a, b] : vocab->merges) {
        merges.push_back(a + " " + b);
    }
    j["model"] = { { "type", "BPE" }, { "vocab", tokens }, { "merges", merges } };
    if (sequence) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& r : vocab->preRegexes) {
            steps.push_back({ { "type", "Split" }, { "pattern", { { "Regex", r } } },
                { "behavior", "Isolated" }, { "invert", false } });
        }
        steps.push_back(
            { { "type", "ByteLevel" }, { "add_prefix_space", false }, { "use_regex", false } });
        j["pre_tokenizer"] = { { "type", "Sequence" }, { "pretokenizers", steps } };
    } else {
        j["pre_tokenizer"]
            = { { "type", "ByteLevel" }, { "add_prefix_space", false }, { "use_regex", true } };
    }
    j["normalizer"] = nullptr;
    j["added_tokens"] = nlohmann::json::array();
    const auto dir = std::filesystem::temp_directory_path() / ("day0_tok_" + gguf);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << j.dump();
    return dir;
}

void expectJsonMatchesFixtures(const std::string& gguf, bool sequence)
{
    const auto dir = asTokenizerJson(gguf, sequence);
    auto tok = tokenizer::loadTokenizer(dir);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    for (const auto& [text, expected] : cases(gguf)) {
        const auto ids = (*tok)->encode(text, false, false);
        ASSERT_TRUE(ids.ok());
        EXPECT_EQ(*ids, expected) << gguf << " (tokenizer.json): '" << text << "'";
        EXPECT_EQ((*tok)->decode(*ids), text);
    }
    std::filesystem::remove_all(dir);
}

} // namespace

TEST(Tokenizer, HfByteLevelJsonMatchesTheSameFixtures)
{
    expectJsonMatchesFixtures("ggml-vocab-gpt-2.gguf", false);
    expectJsonMatchesFixtures("ggml-vocab-deepseek-coder.gguf", true);
}

TEST(Tokenizer, HfJsonSpecialTokensAndRoundTrip)
{
    auto tok = tokenizer::loadTokenizer(
        std::filesystem::path(DAY0_TEST_DATA_DIR) / "exec" / "tiny_bpe_tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_NE((*tok)->describe().find("byte-level BPE"), std::string::npos);
    // This 2000-token vocabulary lacks some byte tokens (\r, most non-ASCII bytes): ASCII only.
    for (const std::string text :
        { "Hello, world!", "  two  spaces\nand lines\n", "x = f(3) + 42;", "" }) {
        const auto ids = (*tok)->encode(text, true);
        ASSERT_TRUE(ids.ok());
        EXPECT_EQ((*tok)->decode(*ids), text);
    }
    const auto with = (*tok)->encode("<|im_start|>user", false, true);
    const auto without = (*tok)->encode("<|im_start|>user", false, false);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_LT(with->size(), without->size());
    EXPECT_EQ((*tok)->decode(*with), "<|im_start|>user");
    EXPECT_EQ((*tok)->decode(*without), "<|im_start|>user");
}

TEST(Tokenizer, BadFilesAreNamed)
{
    const auto dir = std::filesystem::temp_directory_path() / "day0_tok_bad";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "Unigram", "vocab": []}})";
    auto t = tokenizer::loadTokenizer(dir);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("Unigram"), std::string::npos);
    std::ofstream(dir / "x.gguf") << "not a gguf at all, really not";
    t = tokenizer::loadTokenizer(dir / "x.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("GGUF"), std::string::npos);
    t = tokenizer::loadTokenizer(dir / "missing");
    EXPECT_FALSE(t.ok());
    // Found by fuzz.tokenizer_json: an id that is a float too large for any integer.
    std::ofstream(dir / "tokenizer.json")
        << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1.4e67}, "merges": []}})";
    t = tokenizer::loadTokenizer(dir);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("token 'b' has id 1.4e+67, not an integer"), std::string::npos)
        << t.error().message;
    std::filesystem::remove_all(dir);
}
