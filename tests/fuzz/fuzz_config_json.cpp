// Fuzzes the config.json reader (core/model) as `day0 inspect` drives it: the text as Python's
// json writes it, read strictly and with --partial, then, for whatever is accepted, the layer
// graph, the parameter counts, the summaries and the cache footprint. Whatever the reader
// accepts must describe a model with sane figures: every tensor dimension positive, counts
// non-negative, active parameters within the total. A spec the reader accepts and that breaks
// one of these is a silently wrong reading, and aborts.
#include "base/python_json.h"
#include "model/cache_footprint.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "model/model_summary.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void check(bool ok, const char* what)
{
    if (!ok) {
        std::fprintf(stderr, "fuzz_config_json: accepted a config with %s\n", what);
        std::abort();
    }
}

void exercise(const day0::model::ModelSpec& spec)
{
    const auto graph = day0::model::buildLayerGraph(spec);
    for (const auto& block : graph.blocks) {
        for (const auto& tensor : block.tensors) {
            for (const std::int64_t dim : tensor.shape) {
                check(dim > 0, "a tensor dimension that is not positive");
            }
        }
    }
    const auto counts = graph.countParameters();
    check(counts.total >= 0 && counts.active >= 0 && counts.bytes >= 0, "a negative count");
    check(counts.active <= counts.total + counts.lmHead + counts.embedding,
        "more active parameters than parameters");
    check(counts.tensors == std::int64_t(graph.tensorCount()), "a tensor count that disagrees");
    (void)day0::model::inspectJson(graph, counts).dump();
    (void)day0::model::describeArchitecture(spec);
    (void)day0::model::patternLine(spec);
    (void)day0::model::weightFormats(graph);
    for (const auto& kind : day0::model::cacheByKind(spec, 4096.0, 2.0)) {
        check(std::isfinite(kind.bytes) && kind.bytes >= 0, "a cache footprint that is not finite");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto parsed = day0::parsePythonJson(text, "config.json");
    if (!parsed) {
        return 0;
    }
    for (const bool partial : { false, true }) {
        day0::model::ReadOptions options;
        options.partial = partial;
        auto spec = day0::model::readConfig(parsed->value, "config.json", options);
        if (spec) {
            exercise(*spec);
        }
    }
    return 0;
}
