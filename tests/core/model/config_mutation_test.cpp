// Hostile config.json (issue #15): every bundled and frontier config, mutated the ways a broken
// or hostile file differs from a real one (a key removed; a value replaced by null, a string, a
// list, an object, zero, a negative, a huge or a fractional number; a per-layer list cut
// short), is read to a spec or refused with an error naming the file. Never an exception,
// a crash, a negative parameter count or active parameters above the total. Deterministic
// (a fixed seed) and bounded (a fixed number of mutants), so it runs in every CTest.

#include "base/python_json.h"
#include "base/resources.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

using namespace day0;
using namespace day0::model;

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> configs()
{
    std::vector<fs::path> out;
    const auto add = [&out](const fs::path& dir) {
        for (const auto& entry : fs::directory_iterator(dir)) {
            const auto name = entry.path().filename().string();
            if (entry.path().extension() == ".json" && !name.ends_with(".hf_quant_config.json")) {
                out.push_back(entry.path());
            }
        }
    };
    add(fs::path(DAY0_RESOURCE_DIR) / "configs");
    for (const char* dir : { "configs", "configs/frontier" }) {
        add(test::dataDir() / dir);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Every object in `j` (the document itself, text_config, quantization_config, ...).
void objectsIn(nlohmann::json& j, std::vector<nlohmann::json*>& out)
{
    if (j.is_object()) {
        out.push_back(&j);
        for (auto& [key, value] : j.items()) {
            objectsIn(value, out);
        }
    } else if (j.is_array()) {
        for (auto& value : j) {
            objectsIn(value, out);
        }
    }
}

nlohmann::json hostileValue(std::mt19937_64& rng, const nlohmann::json& old)
{
    switch (rng() % 12) {
    case 0:
        return nullptr;
    case 1:
        return 0;
    case 2:
        return -1;
    case 3:
        return std::int64_t(1) << 40;
    case 4:
        return 1e300;
    case 5:
        return 2.5;
    case 6:
        return "x";
    case 7:
        return nlohmann::json::array();
    case 8:
        return nlohmann::json::object();
    case 9:
        return true;
    case 10:
        // A per-layer list cut short, or a scalar made a list.
        if (old.is_array() && !old.empty()) {
            auto cut = old;
            cut.erase(cut.begin());
            return cut;
        }
        return nlohmann::json::array({ old, old });
    default:
        return std::numeric_limits<std::int64_t>::max();
    }
}

} // namespace

TEST(ConfigMutation, EveryMutantReadsOrIsRefusedNeverACrashOrANegativeCount)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto paths = configs();
    ASSERT_GE(paths.size(), 50u);
    std::mt19937_64 rng(0x15);
    int read = 0;
    int refused = 0;
    for (const auto& path : paths) {
        auto original = readPythonJsonFile(path);
        ASSERT_TRUE(original) << original.error().message;
        for (int m = 0; m < 12; ++m) {
            nlohmann::json mutant = original->value;
            const int edits = 1 + int(rng() % 3);
            for (int e = 0; e < edits; ++e) {
                std::vector<nlohmann::json*> objects;
                objectsIn(mutant, objects);
                auto& object = *objects[rng() % objects.size()];
                if (object.empty()) {
                    continue;
                }
                auto it = object.begin();
                std::advance(it, std::ptrdiff_t(rng() % object.size()));
                if (rng() % 5 == 0) {
                    object.erase(it);
                } else {
                    *it = hostileValue(rng, *it);
                }
            }
            const std::string origin = path.filename().string();
            for (const bool partial : { false, true }) {
                try {
                    ReadOptions options;
                    options.partial = partial;
                    auto spec = readConfig(mutant, origin, options);
                    if (!spec) {
                        EXPECT_NE(spec.error().message.find(origin), std::string::npos)
                            << spec.error().message;
                        EXPECT_NE(spec.error().code, ErrorCode::Internal) << spec.error().message;
                        ++refused;
                        continue;
                    }
                    const auto counts = buildLayerGraph(*spec).countParameters();
                    EXPECT_GE(counts.total, 0) << origin << " mutant " << m << "\n"
                                               << mutant.dump().substr(0, 2000);
                    EXPECT_LE(counts.active, counts.total) << origin << " mutant " << m;
                    ++read;
                } catch (const std::exception& e) {
                    ADD_FAILURE() << origin << " mutant " << m << ": exception " << e.what() << "\n"
                                  << mutant.dump().substr(0, 2000);
                }
            }
        }
    }
    // Most mutants of a strict reader are refused; some (an inert key changed) still read.
    EXPECT_GT(refused, 0);
    EXPECT_GT(read, 0);
}
