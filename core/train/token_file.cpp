#include "train/token_file.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>

namespace day0::train {

Result<TokenFileData> TokenFileData::load(
    const std::filesystem::path& path, std::int64_t vocab, int globalBatch)
{
    std::ifstream in(path);
    if (!in) {
        return Error::badInput(fmt::format("{}: cannot open the token-id file", path.string()));
    }
    TokenFileData data;
    data.m_path = path.string();
    data.m_globalBatch = std::max(globalBatch, 1);
    std::string line;
    for (std::int64_t number = 1; std::getline(in, line); ++number) {
        if (line.empty() || line.find_first_not_of(" \t\r,") == std::string::npos
            || line[line.find_first_not_of(" \t")] == '#') {
            continue;
        }
        std::vector<std::int32_t> ids;
        std::size_t pos = 0;
        while (pos < line.size()) {
            if (line[pos] == ' ' || line[pos] == '\t' || line[pos] == ',' || line[pos] == '\r') {
                ++pos;
                continue;
            }
            std::int64_t id = 0;
            const char* begin = line.data() + pos;
            const auto [ptr, ec] = std::from_chars(begin, line.data() + line.size(), id);
            const bool delimited = ptr == line.data() + line.size() || *ptr == ' ' || *ptr == '\t'
                || *ptr == ',' || *ptr == '\r';
            if (ec != std::errc() || !delimited || id < 0) {
                const auto end = line.find_first_of(" \t,\r", pos);
                return Error::badInput(fmt::format("{}:{}: '{}' is not a token id (a non-negative "
                                                   "integer)",
                    path.string(), number, line.substr(pos, end - pos)));
            }
            if (id >= vocab) {
                return Error::badInput(
                    fmt::format("{}:{}: token id {} is outside the model's vocabulary [0, {})",
                        path.string(), number, id, vocab));
            }
            ids.push_back(std::int32_t(id));
            pos = std::size_t(ptr - line.data());
        }
        if (ids.size() < 2) {
            return Error::badInput(fmt::format("{}:{}: a sequence needs at least 2 token ids (one "
                                               "predicted position), this one has {}",
                path.string(), number, ids.size()));
        }
        data.m_sequences.push_back(std::move(ids));
    }
    if (data.m_sequences.empty()) {
        return Error::badInput(fmt::format("{}: no token-id sequence in the file", path.string()));
    }
    return data;
}

Batch TokenFileData::batch(std::int64_t step, std::int64_t first, int count, int length) const
{
    Batch b;
    const auto lines = std::int64_t(m_sequences.size());
    for (int i = 0; i < count; ++i) {
        const std::int64_t k = step * m_globalBatch + first + i;
        const auto& seq = m_sequences[std::size_t(k % lines)];
        const auto n = std::min<std::size_t>(seq.size(), std::size_t(std::max(length, 0)));
        b.sequences.emplace_back(seq.begin(), seq.begin() + std::ptrdiff_t(n));
    }
    return b;
}

std::string TokenFileData::describe() const
{
    return fmt::format("{} ({} sequences)", m_path, m_sequences.size());
}

} // namespace day0::train
