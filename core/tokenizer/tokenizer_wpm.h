#pragma once

// Internal to core/exec: BERT's WordPiece tokenizer (tokenizer.cpp dispatches to it).

#include "base/result.h"
#include "tokenizer/tokenizer.h"

#include <memory>
#include <string>

namespace day0::tokenizer::detail {

/// A WordPiece tokenizer over `vocab` (Model::Wpm). Word-initial pieces are either spelled with
/// a leading "▁" (llama.cpp's GGUF convention; continuation pieces are then bare) or bare with
/// "##"-prefixed continuation pieces (Hugging Face's vocab.txt convention).
Result<std::unique_ptr<Tokenizer>> makeWordPieceTokenizer(TokenizerVocab vocab, std::string origin);

} // namespace day0::tokenizer::detail
