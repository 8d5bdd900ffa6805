// A shrunk checkpoint that a parallel plan divides, for plan runs on models without weights.
#include "checkpoint/shrink.h"
#include "parallel/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace day0::parallel {

namespace fs = std::filesystem;

Result<fs::path> prepareParallelCheckpoint(const std::string& modelArg,
    const checkpoint::ShardLayout& layout, const fs::path& cacheDir, Progress& progress,
    std::stop_token stop)
{
    // Powers of two keep the GQA ratio's KV heads a divisor or a multiple of tp.
    const auto pow2 = [](std::int64_t n) {
        std::int64_t p = 1;
        while (p < n) {
            p *= 2;
        }
        return p;
    };
    checkpoint::ShrinkOptions o;
    const std::int64_t heads = std::max<std::int64_t>(4, pow2(layout.tp));
    const std::int64_t slices = std::lcm<std::int64_t>(layout.tp, layout.etp());
    o.heads = heads;
    o.hidden = heads * 16;
    o.layers = std::max<std::int64_t>(2, layout.pp);
    o.experts = std::max<std::int64_t>(8, pow2(layout.ep));
    o.vocab = 512;
    o.intermediate = std::max<std::int64_t>(96, 16 * slices);
    o.seed = 1;
    o.replace = true;
    std::string name = modelArg;
    std::replace_if(
        name.begin(), name.end(), [](char ch) { return ch == '/' || ch == '\\' || ch == '.'; },
        '_');
    const fs::path dir = cacheDir / "parallel"
        / fmt::format(
            "{}-h{}-l{}-e{}-i{}", name, *o.hidden, *o.layers, *o.experts, *o.intermediate);
    std::error_code ec;
    if (fs::exists(dir / "config.json", ec)
        && fs::exists(dir / "model.safetensors.index.json", ec)) {
        return dir;
    }
    fs::create_directories(dir.parent_path(), ec);
    auto summary = checkpoint::shrinkModel(modelArg, dir, o, progress, stop);
    if (!summary) {
        return summary.error().withContext(fmt::format("shrinking {} for the plan run", modelArg));
    }
    return dir;
}

} // namespace day0::parallel
