#include "panels/model/model_panel.h"
#include "panels/model/model_tree_model.h"
#include "panels/model/parameter_table_model.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QAbstractItemModelTester>

using namespace day0;
using namespace day0::ui;

TEST(ModelTreeModel, PassesModelTesterOnDenseAndMoeModels)
{
    for (const char* name : { "qwen3-0.6b", "mixtral-8x7b" }) {
        Session session;
        test::openModel(session, name);
        ModelTreeModel model;
        QAbstractItemModelTester tester(
            &model, QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setGraph(session.graph());
        EXPECT_EQ(model.rowCount(), int(session.graph()->blocks.size())) << name;
        model.setGraph(nullptr);
        EXPECT_EQ(model.rowCount(), 0);
    }
}

TEST(ModelTreeModel, GroupsExpertsAndSumsParameters)
{
    Session session;
    test::openModel(session, "mixtral-8x7b");
    ModelTreeModel model;
    model.setGraph(session.graph());
    // Find the first decoder layer and its routed-expert group.
    QModelIndex layer;
    for (int r = 0; r < model.rowCount(); ++r) {
        if (model.index(r, 0).data(ModelTreeModel::AnchorRole).toString()
            == QStringLiteral("model.layers.0")) {
            layer = model.index(r, 0);
        }
    }
    ASSERT_TRUE(layer.isValid());
    QModelIndex experts;
    for (int r = 0; r < model.rowCount(layer); ++r) {
        if (model.index(r, 0, layer)
                .data()
                .toString()
                .startsWith(QStringLiteral("routed experts"))) {
            experts = model.index(r, 0, layer);
        }
    }
    ASSERT_TRUE(experts.isValid());
    EXPECT_EQ(model.rowCount(experts), 8); // Mixtral: 8 experts per layer
    // The layer's parameter count is the sum of its tensors.
    std::int64_t sum = 0;
    const auto& graph = *session.graph();
    for (const auto& block : graph.blocks) {
        if (block.anchor == "model.layers.0") {
            for (const auto& t : block.tensors) {
                sum += t.params();
            }
        }
    }
    EXPECT_EQ(model.index(layer.row(), ModelTreeModel::Parameters)
                  .data(ModelTreeModel::SortRole)
                  .toLongLong(),
        sum);
}

TEST(ParameterTableModel, PassesModelTesterAndTotalsMatchCore)
{
    Session session;
    test::openModel(session, "kimi-k2");
    ParameterTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    const auto counts = session.graph()->countParameters();
    model.setCounts(counts);
    const int last = model.rowCount() - 1;
    EXPECT_EQ(model.index(last, ParameterTableModel::Total)
                  .data(ParameterTableModel::SortRole)
                  .toLongLong(),
        counts.total);
    EXPECT_EQ(model.index(last, ParameterTableModel::Active)
                  .data(ParameterTableModel::SortRole)
                  .toLongLong(),
        counts.active);
}

TEST(ModelPanel, ShowsArchitectureOfTheOpenModel)
{
    Session session;
    JobRunner jobs;
    ModelPanel panel(session, jobs);
    EXPECT_EQ(panel.summaryField(QStringLiteral("Model")), QStringLiteral("no model open"));
    test::openModel(session, "kimi-k2");
    EXPECT_TRUE(panel.summaryField(QStringLiteral("Attention")).startsWith(QStringLiteral("MLA")));
    EXPECT_TRUE(panel.summaryField(QStringLiteral("Experts"))
                    .startsWith(QStringLiteral("384 routed (top-8, width 2048)")));
    EXPECT_EQ(panel.parameterChart()->barLayerCount(), 2);
    test::openModel(session, "deepseek-v4-pro");
    // The router as the config states it, in the words of `day0 inspect`.
    EXPECT_TRUE(panel.summaryField(QStringLiteral("Experts"))
                    .contains(QStringLiteral("sqrt-softplus router with score-correction bias")));
    test::openModel(session, "llama-3.1-8b");
    EXPECT_TRUE(panel.summaryField(QStringLiteral("Attention")).startsWith(QStringLiteral("GQA")));
    EXPECT_EQ(panel.summaryField(QStringLiteral("Experts")), QStringLiteral("dense (no experts)"));
}
