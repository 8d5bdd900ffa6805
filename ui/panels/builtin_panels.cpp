#include "panels/builtin_panels.h"

#include "panels/memory/memory_panel.h"
#include "panels/model/model_panel.h"
#include "panels/pipeline/pipeline_panel.h"
#include "panels/planner/planner_panel.h"
#include "panels/precision/precision_panel.h"
#include "panels/runs/runs_panel.h"
#include "panels/serving/serving_panel.h"
#include "panels/timeline/timeline_panel.h"
#include "panels/topology/topology_panel.h"
#include "panels/training/training_panel.h"
#include "settings/preferences.h"
#include "shell/panel_registry.h"

namespace day0::ui {

void registerBuiltinPanels(PanelRegistry& registry)
{
    registry.add(
        { QStringLiteral("model"), QObject::tr("Model"), QKeySequence(QObject::tr("Ctrl+1")),
            PanelArea::Left, 10, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new ModelPanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("memory"), QObject::tr("Memory"), QKeySequence(QObject::tr("Ctrl+2")),
            PanelArea::Right, 20, true, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new MemoryPanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("topology"), QObject::tr("Topology"), QKeySequence(QObject::tr("Ctrl+3")),
            PanelArea::Right, 30, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new TopologyPanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("planner"), QObject::tr("Planner"), QKeySequence(QObject::tr("Ctrl+4")),
            PanelArea::Left, 40, true, [](PanelContext& context, QWidget* parent) -> QWidget* {
                auto* planner = new PlannerPanel(context.session, context.jobs, parent);
                if (context.preferences) {
                    planner->setHeadroomPercent(context.preferences->planHeadroomPercent);
                }
                return planner;
            } });
    registry.add({ QStringLiteral("precision"), QObject::tr("Precision"),
        QKeySequence(QObject::tr("Ctrl+5")), PanelArea::Right, 50, false,
        [](PanelContext& context, QWidget* parent) -> QWidget* {
            return new PrecisionPanel(context.session, context.jobs, parent);
        } });
    registry.add({ QStringLiteral("runs"), QObject::tr("Runs"), QKeySequence(QObject::tr("Ctrl+6")),
        PanelArea::Right, 60, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
            return new RunsPanel(context.session, context.jobs, parent);
        } });
    registry.add(
        { QStringLiteral("pipeline"), QObject::tr("Pipeline"), QKeySequence(QObject::tr("Ctrl+7")),
            PanelArea::Right, 70, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new PipelinePanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("timeline"), QObject::tr("Timeline"), QKeySequence(QObject::tr("Ctrl+8")),
            PanelArea::Right, 80, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new TimelinePanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("serving"), QObject::tr("Serving"), QKeySequence(QObject::tr("Ctrl+9")),
            PanelArea::Right, 90, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new ServingPanel(context.session, context.jobs, parent);
            } });
    registry.add(
        { QStringLiteral("training"), QObject::tr("Training"), QKeySequence(QObject::tr("Ctrl+0")),
            PanelArea::Right, 100, false, [](PanelContext& context, QWidget* parent) -> QWidget* {
                return new TrainingPanel(context.session, context.jobs, parent);
            } });
}

} // namespace day0::ui
