// Fuzzes the Hugging Face tokenizer.json reader and the tokenizer it builds: whatever the file
// holds, reading it is an error or a tokenizer, and encoding a fixed prompt with it is an error
// or ids within the vocabulary; never a crash, a hang past ICU's regex time limit, or an
// uncaught exception.
#include "tokenizer/tokenizer.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const std::filesystem::path file = std::filesystem::temp_directory_path()
        / ("day0_fuzz_tokenizer_" + std::to_string(::getpid())) / "tokenizer.json";
    static const bool made = std::filesystem::create_directories(file.parent_path()) || true;
    (void)made;
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    }
    auto vocab = day0::tokenizer::readHfTokenizer(file);
    if (!vocab) {
        return 0;
    }
    const std::size_t tokens = vocab->tokens.size();
    auto tokenizer = day0::tokenizer::makeTokenizer(std::move(*vocab), file.string());
    if (!tokenizer) {
        return 0;
    }
    auto ids
        = (*tokenizer)->encode("Hello, world! 123 <|im_start|>user\n  ünïcödé\taaaa", true, true);
    if (!ids) {
        return 0;
    }
    for (const auto id : *ids) {
        if (id < -1 || (id >= 0 && std::size_t(id) >= tokens)) {
            std::abort();
        }
    }
    return 0;
}
