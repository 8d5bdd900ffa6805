// Runs from a `day0 shard` output folder: each rank opens only its own rank file.
#include "checkpoint/sharding.h"
#include "exec/checkpoint_weights.h"
#include "parallel/run.h"

#include <fmt/format.h>

namespace day0::parallel {

namespace fs = std::filesystem;

bool isShardFolder(const fs::path& dir)
{
    std::error_code ec;
    if (!fs::is_regular_file(dir / "plan.json", ec)) {
        return false;
    }
    auto plan = checkpoint::readShardPlan(dir);
    return plan && plan->value("format", "") == "day0-shard-plan";
}

Result<ShardFolder> openShardFolder(
    const fs::path& dir, const checkpoint::ShardLayout& layout, int onlyRank)
{
    auto plan = checkpoint::readShardPlan(dir);
    if (!plan) {
        return plan.error();
    }
    ShardFolder folder;
    try {
        const auto& l = plan->at("layout");
        const std::string written = fmt::format("tp={},pp={},ep={},dp={},etp={}",
            l.at("tp").get<int>(), l.at("pp").get<int>(), l.at("ep").get<int>(),
            l.at("dp").get<int>(), l.at("etp").get<int>());
        const std::string wanted = fmt::format("tp={},pp={},ep={},dp={},etp={}", layout.tp,
            layout.pp, layout.ep, layout.dp, layout.etp());
        if (written != wanted) {
            return Error::badInput(
                fmt::format("{}: the shards were written for {} but the run asks for {}; "
                            "re-run day0 shard with this plan or run the full checkpoint",
                    (dir / "plan.json").string(), written, wanted));
        }
        const auto& ranks = plan->at("ranks");
        for (int r = 0; r < layout.worldSize(); ++r) {
            const auto file = dir / ranks.at(std::size_t(r)).at("file").get<std::string>();
            folder.files.push_back(file);
            if (onlyRank >= 0 && r != onlyRank) {
                folder.ranks.push_back(nullptr);
                continue;
            }
            auto source = exec::openCheckpointWeights(file);
            if (!source) {
                return source.error();
            }
            folder.ranks.push_back(std::move(*source));
        }
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("{}: {}", (dir / "plan.json").string(), e.what()));
    }
    return folder;
}

} // namespace day0::parallel
