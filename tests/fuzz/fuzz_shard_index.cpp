// Fuzzes the shard index parser: accepted input must serialise and parse back to the same map.
#include "checkpoint/shard_index.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto index = day0::checkpoint::parseShardIndex(text, "fuzz.index.json");
    if (!index) {
        return 0;
    }
    const auto again
        = day0::checkpoint::parseShardIndex(day0::checkpoint::serializeShardIndex(*index), "again");
    if (!again || again->weightMap != index->weightMap || again->totalSize != index->totalSize) {
        std::abort();
    }
    for (const auto& [tensor, file] : index->weightMap) {
        if (index->shardOf(tensor) == nullptr) {
            std::abort();
        }
    }
    return 0;
}
