// The timeline's statistics show self time beside total, and shares are of self time, so nested
// names' shares add to 100 % without counting a child inside its parent.
#include "panels/timeline/kernel_stats_model.h"
#include "profile/importer.h"
#include "profile/kernel_stats.h"
#include "ui_test_support.h"

#include <QAbstractItemModelTester>
#include <QFile>
#include <QTemporaryDir>

using namespace day0;
using namespace day0::ui;

TEST(TimelineStatistics, SharesAreOfSelfTimeAndAddTo100Percent)
{
    // One thread: "step" [0, 100) µs holds "matmul" [10, 70) which holds "gemm" [20, 50); a
    // sibling "softmax" [80, 90). Self: step 100 − 60 − 10 = 30, matmul 60 − 30 = 30, gemm 30,
    // softmax 10: 100 µs in all, the step's wall time.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("nested.json"));
    QFile file(path);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write(R"({"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
 {"ph": "X", "cat": "cpu_op", "name": "matmul", "pid": 1, "tid": 1, "ts": 10, "dur": 60},
 {"ph": "X", "cat": "cpu_op", "name": "gemm", "pid": 1, "tid": 1, "ts": 20, "dur": 30},
 {"ph": "X", "cat": "cpu_op", "name": "softmax", "pid": 1, "tid": 1, "ts": 80, "dur": 10}
]})");
    file.close();
    Progress progress;
    auto trace = profile::importTraces({ path.toStdString() }, {}, progress, {});
    ASSERT_TRUE(trace.ok()) << trace.error().message;
    profile::KernelStatsOptions options;
    options.categories = { profile::Category::CpuOp };
    auto stats = profile::kernelStatistics(*trace, options);
    ASSERT_EQ(stats.size(), 4u);

    KernelStatsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setStats(std::move(stats));
    EXPECT_EQ(model.grandTotal(), 100000) << "the sum of self times is the step's wall time";
    const auto row = [&](const char* name) { return model.rowOfName(name); };
    const auto text = [&](const char* name, int column) {
        return model.index(row(name), column).data().toString();
    };
    ASSERT_GE(row("step"), 0);
    EXPECT_EQ(model.index(row("step"), KernelStatsModel::TotalColumn)
                  .data(KernelStatsModel::SortRole)
                  .toLongLong(),
        100000);
    EXPECT_EQ(model.index(row("step"), KernelStatsModel::SelfColumn)
                  .data(KernelStatsModel::SortRole)
                  .toLongLong(),
        30000);
    EXPECT_EQ(model.index(row("matmul"), KernelStatsModel::SelfColumn)
                  .data(KernelStatsModel::SortRole)
                  .toLongLong(),
        30000);
    EXPECT_EQ(text("step", KernelStatsModel::ShareColumn), QStringLiteral("30.0 %"));
    EXPECT_EQ(text("gemm", KernelStatsModel::ShareColumn), QStringLiteral("30.0 %"));
    EXPECT_EQ(text("softmax", KernelStatsModel::ShareColumn), QStringLiteral("10.0 %"));
    double sum = 0;
    for (int r = 0; r < model.rowCount(); ++r) {
        sum += model.index(r, KernelStatsModel::ShareColumn)
                   .data()
                   .toString()
                   .remove(QStringLiteral(" %"))
                   .toDouble();
    }
    EXPECT_NEAR(sum, 100.0, 0.05);
    EXPECT_EQ(model.headerData(KernelStatsModel::SelfColumn, Qt::Horizontal).toString(),
        QStringLiteral("Self"));
}
