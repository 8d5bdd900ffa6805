// The corpus of `day0 eval --ids-file` (actions/eval_corpus.h).
#include "actions/eval_corpus.h"

#include "base/file_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <string>

namespace day0::actions::detail {

namespace fs = std::filesystem;

Result<std::vector<std::vector<std::int64_t>>> readIdsFile(const fs::path& path, std::int64_t vocab)
{
    auto text = readFile(path);
    if (!text) {
        return text.error();
    }
    std::vector<std::vector<std::int64_t>> docs;
    std::istringstream lines(*text);
    std::string line;
    int lineNo = 0;
    while (std::getline(lines, line)) {
        ++lineNo;
        std::replace(line.begin(), line.end(), ',', ' ');
        std::istringstream items(line);
        std::string item;
        std::vector<std::int64_t> doc;
        while (items >> item) {
            std::int64_t id = -1;
            std::size_t used = 0;
            try {
                id = std::stoll(item, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != item.size() || id < 0 || id >= vocab) {
                return Error::badInput(fmt::format("{}:{}: '{}' is not a token id in [0, {})",
                    displayPath(path), lineNo, item, vocab));
            }
            doc.push_back(id);
        }
        if (!doc.empty()) {
            docs.push_back(std::move(doc));
        }
    }
    if (docs.empty()) {
        return Error::badInput(fmt::format("{}: no token ids", displayPath(path)));
    }
    return docs;
}

} // namespace day0::actions::detail
