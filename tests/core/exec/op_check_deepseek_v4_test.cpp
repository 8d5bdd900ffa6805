// `day0 opcheck` on DeepSeek-V4 (exec/op_check_deepseek_v4.cpp): every operator of its own has
// a row with a real verdict, computed by running the engine's code in the target plan against
// fp64 — the errors follow the plan (fp32 rows at fp32's noise, bf16 and nvfp4 rows at theirs),
// which no row that is not computed could show.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/op_check.h"
#include "model/config_reader.h"
#include "numerics/tolerance.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace day0::exec {
namespace {

const numerics::ToleranceTable& table()
{
    static const numerics::ToleranceTable t = [] {
        auto r = numerics::resolveToleranceTable(
            std::string(DAY0_RESOURCE_DIR) + "/tolerances/day0-default-v4.json");
        EXPECT_TRUE(r.ok()) << r.error().message;
        return *r;
    }();
    return t;
}

/// A shrunk deepseek-v4-flash's spec (hidden 128; sliding, ratio-4 and ratio-8 layers; two
/// hash-routed layers): every operator of the model at a size a unit test runs in a moment
/// (`day0 opcheck deepseek-v4-flash` checks them at the released widths).
const model::ModelSpec& shrunkV4()
{
    static const model::ModelSpec spec = [] {
        setResourceDir(DAY0_RESOURCE_DIR);
        const auto dir = std::filesystem::temp_directory_path() / "day0_opcheck_v4_test";
        std::filesystem::remove_all(dir);
        Progress progress;
        const auto shrunk = checkpoint::shrinkModel("deepseek-v4-flash", dir, {}, progress, {});
        EXPECT_TRUE(shrunk.ok()) << shrunk.error().message;
        auto read = model::readConfigFile(dir / "config.json");
        EXPECT_TRUE(read.ok()) << read.error().message;
        std::filesystem::remove_all(dir);
        return *read;
    }();
    return spec;
}

/// The DeepSeek-V4 rows of an opcheck of the shrunk deepseek-v4-flash in `precision`, by name
/// prefix.
std::map<std::string, OpCheckRow> v4Rows(const std::string& precision)
{
    const auto* spec = &shrunkV4();
    OpCheckOptions o;
    o.target = *parsePrecisionPlan(precision);
    o.tokens = 16;
    o.maxOutputs = 256;
    o.table = &table();
    Progress progress;
    const auto report = runOpCheck(*spec, o, progress, {});
    EXPECT_TRUE(report.ok()) << report.error().message;
    std::map<std::string, OpCheckRow> rows;
    const char* prefixes[] = { "hyper-connection maps", "hyper-connection collapse and expand",
        "hyper-connection head", "kv compressor (ratio 4", "kv compressor (ratio 8",
        "lightning indexer", "attention (compressed ratio 4", "attention (heavily compressed",
        "grouped output projection", "router (sqrtsoftplus", "router (hash-routed",
        "expert MLP (clamped SwiGLU" };
    for (const auto& row : report->rows) {
        EXPECT_NE(row.verdict.status, numerics::VerdictStatus::NotJudged) << row.op;
        for (const char* p : prefixes) {
            if (row.op.starts_with(p)) {
                EXPECT_FALSE(rows.contains(p)) << "two rows for " << p;
                rows[p] = row;
            }
        }
    }
    for (const char* p : prefixes) {
        EXPECT_TRUE(rows.contains(p)) << "no row for " << p;
    }
    return rows;
}

TEST(DeepseekV4OpCheck, EveryOperatorIsCheckedAgainstFp64AndPasses)
{
    for (const char* precision : { "fp32", "bf16", "nvfp4", "int8" }) {
        for (const auto& [name, row] : v4Rows(precision)) {
            EXPECT_EQ(row.verdict.status, numerics::VerdictStatus::Pass)
                << precision << ": " << row.op << ": " << row.verdict.reason;
            EXPECT_GT(row.metrics.relL2, 0.0) << precision << ": " << row.op;
            EXPECT_EQ(row.implementation, "day0-cpu (deepseek_v4_*.cpp; not on backends)");
        }
    }
}

TEST(DeepseekV4OpCheck, TheErrorsFollowThePlan)
{
    const auto fp32 = v4Rows("fp32");
    const auto bf16 = v4Rows("bf16");
    const auto nvfp4 = v4Rows("nvfp4");
    for (const auto& [name, row] : fp32) {
        EXPECT_LT(row.metrics.relL2, 1e-5) << row.op;
    }
    // Kept in fp32 under every plan: the maps, compressors, indexer and routers.
    for (const char* kept :
        { "hyper-connection maps", "kv compressor (ratio 4", "kv compressor (ratio 8",
            "lightning indexer", "router (sqrtsoftplus", "router (hash-routed" }) {
        EXPECT_EQ(bf16.at(kept).mode, PrecisionMode::F32) << kept;
        EXPECT_LT(bf16.at(kept).metrics.relL2, 1e-5) << kept;
    }
    // Rounded by the plan: bf16's error, and NVFP4's projections far more.
    for (const char* rounded : { "hyper-connection collapse and expand", "hyper-connection head",
             "attention (compressed ratio 4", "attention (heavily compressed",
             "grouped output projection", "expert MLP (clamped SwiGLU" }) {
        EXPECT_GT(bf16.at(rounded).metrics.relL2, 5e-4) << rounded;
        EXPECT_LT(bf16.at(rounded).metrics.relL2, 3e-2) << rounded;
    }
    for (const char* projected : { "attention (compressed ratio 4", "attention (heavily compressed",
             "grouped output projection", "expert MLP (clamped SwiGLU" }) {
        EXPECT_EQ(nvfp4.at(projected).mode, PrecisionMode::Nvfp4) << projected;
        EXPECT_GT(nvfp4.at(projected).metrics.relL2, 10.0 * bf16.at(projected).metrics.relL2)
            << projected;
    }
    EXPECT_NE(
        bf16.at("lightning indexer").shape.find("queries select other entries"), std::string::npos);
    for (const char* router : { "router (sqrtsoftplus", "router (hash-routed" }) {
        ASSERT_TRUE(bf16.at(router).expertAgreement.has_value()) << router;
        EXPECT_EQ(*bf16.at(router).expertAgreement, 1.0) << router;
    }
}

} // namespace
} // namespace day0::exec
