#pragma once

#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace day0::tokenizer {

/// Everything a tokenizer needs, read from an HF tokenizer.json or a GGUF's tokenizer.ggml.* keys.
struct TokenizerVocab {
    enum class Model {
        Bpe, ///< byte-level (GPT-2) or character BPE with merges
        Spm, ///< SentencePiece by scores (llama.cpp's SPM), byte fallback <0xXX>
        Wpm, ///< BERT WordPiece (lower-cased, accents stripped, greedy longest match)
    };
    Model model = Model::Bpe;
    std::vector<std::string> tokens; ///< id -> token text (byte-level BPE: in its unicode form)
    std::vector<float> scores; ///< SPM merge scores (empty for BPE)
    std::vector<std::int32_t> types; ///< GGUF token types (1 normal, 3 control, 4 user, 6 byte)
    std::vector<std::pair<std::string, std::string>> merges; ///< BPE merges, by rank
    std::vector<std::string> preRegexes; ///< pre-tokenizer splits, applied in order (isolated)
    bool byteLevel = true; ///< BPE over GPT-2's byte-to-unicode alphabet
    bool byteFallback = false; ///< character BPE: unknown characters become <0xXX> tokens
    bool ignoreMerges = false; ///< a whole pre-token found in the vocabulary is used as is
    bool addSpacePrefix = false; ///< SPM/metaspace: prefix a "▁" to the text
    bool escapeSpaces = false; ///< replace ' ' by "▁" before the model (SPM, metaspace)
    std::vector<std::int64_t> specialIds; ///< added tokens matched in text when asked
    std::int64_t bos = -1;
    std::int64_t eos = -1;
    std::int64_t unk = -1;
    bool addBos = false;
    bool addEos = false;
};

/// Turns text into token ids and back. Thread-safe after construction.
class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    /// Token ids of `text`. `addSpecial` adds BOS/EOS as the vocabulary asks; `parseSpecial`
    /// turns the text of special/added tokens ("<|im_start|>") into their ids.
    [[nodiscard]] virtual Result<std::vector<std::int64_t>> encode(
        std::string_view text, bool addSpecial, bool parseSpecial = true) const = 0;
    /// The text of token ids (byte-level and byte-fallback tokens decoded to bytes).
    [[nodiscard]] virtual std::string decode(std::span<const std::int64_t> ids) const = 0;
    /// "byte-level BPE (deepseek-llm)", "SentencePiece (llama)".
    [[nodiscard]] virtual std::string describe() const = 0;
    [[nodiscard]] virtual std::size_t vocabSize() const = 0;
};

/// A tokenizer for a vocabulary; errors name what is inconsistent (e.g. an unusable regex).
Result<std::unique_ptr<Tokenizer>> makeTokenizer(TokenizerVocab vocab, std::string origin);

/// Reads an HF tokenizer.json (BPE models: byte-level or with byte fallback; pre-tokenizers
/// ByteLevel, Split, Metaspace and Sequences of them; added tokens; BOS from the post-processor).
Result<TokenizerVocab> readHfTokenizer(const std::filesystem::path& tokenizerJson);

/// Reads the tokenizer of a GGUF file (tokenizer.ggml.model "gpt2", "llama" or "bert"; the
/// pre-tokenizer from tokenizer.ggml.pre: default/gpt2, deepseek-llm, deepseek-coder, llama3,
/// qwen2).
Result<TokenizerVocab> readGgufTokenizer(const std::filesystem::path& gguf);

/// The tokenizer of a model: `path` is a checkpoint folder (its tokenizer.json), a tokenizer.json
/// or a .gguf file.
Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::filesystem::path& path);

} // namespace day0::tokenizer
