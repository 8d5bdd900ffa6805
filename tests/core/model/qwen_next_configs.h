#pragma once

// The Qwen3-Next / Qwen3.5 configs the family tests read (tests/data/model), and a reader of
// one of them with one change.

#include "base/file_util.h"
#include "model_test_util.h"

#include <functional>

namespace day0::model::test {

inline const char* kNextConfig = "configs/frontier/Qwen--Qwen3-Next-80B-A3B-Thinking.json";
inline const char* k397BConfig = "configs/frontier/Qwen--Qwen3.5-397B-A17B.json";
inline const char* k27BConfig = "configs/frontier-sizes/Qwen--Qwen3.5-27B.json";
inline const char* k35BConfig = "configs/frontier-sizes/Qwen--Qwen3.5-35B-A3B.json";
inline const char* k122BConfig = "configs/frontier-sizes/Qwen--Qwen3.5-122B-A10B.json";

// A real config with one change, read as "<file>".
inline Result<ModelSpec> readEdited(
    const char* relative, const std::function<void(nlohmann::json&)>& edit)
{
    auto text = readFile(dataDir() / relative);
    if (!text) {
        return text.error();
    }
    auto json = parseJson(*text, relative);
    if (!json) {
        return json.error();
    }
    edit(*json);
    return readConfig(*json, relative);
}

} // namespace day0::model::test
