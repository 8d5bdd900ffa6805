#pragma once

// The precision panel tests' shared fixture (precision_panel_test.cpp: comparisons and views;
// precision_panel_run_test.cpp: runs started from the panel).

#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "exec/shrunk_cache.h"
#include "jobs/job_runner.h"
#include "numerics/dump_compare.h"
#include "panels/precision/precision_panel.h"
#include "session/session.h"
#include "ui_test_support.h"

#include <QTemporaryDir>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace day0::ui::test {

namespace fs = std::filesystem;

// One bf16-against-fp32 run of a 4-layer shrunk Kimi-K2, written as dumps the way
// `day0 run --reference fp32 --inject --dump DIR` writes them: DIR/reference, DIR/target and
// DIR/target-inject.
class PrecisionPanelFixture : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_dir = new QTemporaryDir;
        Progress progress;
        checkpoint::ShrinkOptions shrink;
        shrink.layers = 4;
        auto checkpoint = exec::cachedShrunkCheckpoint("kimi-k2", shrink, progress, {});
        ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message;
        s_checkpoint = checkpoint->string();
        auto spec = exec::loadCheckpointModel(*checkpoint);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        auto weights = exec::openCheckpointWeights(*checkpoint);
        ASSERT_TRUE(weights.ok()) << weights.error().message;
        auto table = numerics::resolveToleranceTable("");
        ASSERT_TRUE(table.ok()) << table.error().message;
        exec::PrecisionRunOptions o;
        o.target.base = exec::PrecisionMode::BF16;
        o.reference = exec::PrecisionMode::F32;
        o.inject = true;
        o.promptIds = { 5, 17, 300, 42, 7 };
        o.newTokens = 3;
        o.table = &*table;
        auto result = exec::runWithReference(*spec, **weights, o, progress, {});
        ASSERT_TRUE(result.ok()) << result.error().message;
        auto written = exec::writeRunDumps(*result, root());
        ASSERT_TRUE(written.ok()) << written.error().message;

        // A dump of another model (two layers): comparing it is a mismatch.
        shrink.layers = 2;
        auto other = exec::cachedShrunkCheckpoint("kimi-k2", shrink, progress, {});
        ASSERT_TRUE(other.ok()) << other.error().message;
        auto otherSpec = exec::loadCheckpointModel(*other);
        auto otherWeights = exec::openCheckpointWeights(*other);
        ASSERT_TRUE(otherSpec.ok() && otherWeights.ok());
        o.reference.reset();
        o.inject = false;
        auto alone = exec::runWithReference(*otherSpec, **otherWeights, o, progress, {});
        ASSERT_TRUE(alone.ok()) << alone.error().message;
        ASSERT_TRUE(exec::writeRunDumps(*alone, root() / "other-model").ok());
    }
    static void TearDownTestSuite()
    {
        delete s_dir;
        s_dir = nullptr;
    }
    static fs::path root() { return fs::path(s_dir->path().toStdString()) / "dumps"; }
    static QString dump(const char* name)
    {
        return QString::fromStdString((root() / name).string());
    }

    // The comparison `day0 compare reference target --local target-inject` makes.
    static numerics::DumpComparison expected()
    {
        auto r = checkpoint::readDump(root() / "reference");
        auto t = checkpoint::readDump(root() / "target");
        auto l = checkpoint::readDump(root() / "target-inject");
        EXPECT_TRUE(r.ok() && t.ok() && l.ok());
        auto table = numerics::resolveToleranceTable("");
        numerics::CompareOptions options;
        options.table = &*table;
        options.local = &*l;
        Progress progress;
        auto c = numerics::compareDumps(*r, *t, options, progress, {});
        EXPECT_TRUE(c.ok()) << c.error().message;
        return std::move(*c);
    }

    static const numerics::CaptureComparison* find(
        const numerics::DumpComparison& c, const std::string& name)
    {
        for (const auto& row : c.rows) {
            if (row.name == name) {
                return &row;
            }
        }
        return nullptr;
    }

    // A panel on a session without a model: nothing runs unless the test asks.
    void compareFixture(PrecisionPanel& panel)
    {
        panel.resize(1400, 860);
        panel.show();
        panel.compareDumps(dump("reference"), dump("target"));
        test::settle(m_jobs);
        ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    }

    inline static QTemporaryDir* s_dir = nullptr;
    inline static std::string s_checkpoint;
    Session m_session;
    JobRunner m_jobs;
};

} // namespace day0::ui::test
