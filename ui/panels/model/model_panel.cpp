#include "panels/model/model_panel.h"

#include "model/model_summary.h"
#include "panels/model/checkpoint_view.h"
#include "panels/model/layer_pattern_view.h"
#include "panels/model/model_tree_model.h"
#include "panels/model/parameter_table_model.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QDockWidget>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTreeView>
#include <QVBoxLayout>

namespace day0::ui {

namespace {

// Order and names of the summary fields.
const char* const kFields[]
    = { "Model", "Family", "Layers", "Layer pattern", "Hidden size", "Attention", "Experts",
          "Vocabulary", "Context", "RoPE", "Weights", "Stored as", "Vision tower", "Parameters" };

QString n(std::int64_t v) { return QLocale().toString(qlonglong(v)); }

} // namespace

ModelPanel::ModelPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_paramModel(new ParameterTableModel(this))
    , m_paramView(new QTableView(this))
    , m_chart(new PlotWidget(this))
    , m_treeModel(new ModelTreeModel(this))
    , m_treeProxy(new QSortFilterProxyModel(this))
    , m_tree(new QTreeView(this))
    , m_filter(new QLineEdit(this))
    , m_tabs(new QTabWidget(this))
    , m_checkpoint(new CheckpointView(jobs, this))
{
    auto* summary = new QWidget(this);
    m_form = new QFormLayout(summary);
    m_form->setLabelAlignment(Qt::AlignRight);
    m_form->setFormAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_form->setVerticalSpacing(4);
    for (const char* field : kFields) {
        auto* label = new QLabel(summary);
        label->setTextInteractionFlags(Qt::TextSelectableByMouse);
        label->setWordWrap(true);
        auto* title = new QLabel(tr(field), summary);
        title->setStyleSheet(QStringLiteral("color: palette(placeholder-text);"));
        m_form->addRow(title, label);
        m_fields[QString::fromLatin1(field)] = label;
    }
    m_pattern = new LayerPatternView(summary);
    m_form->addRow(m_pattern);
    m_warnings = new QLabel(summary);
    m_warnings->setWordWrap(true);
    m_warnings->setStyleSheet(QStringLiteral("color: #c0392b;"));
    m_form->addRow(m_warnings);
    summary->setMinimumWidth(300);

    // A partial reading (File ▸ Open Model, "Read the rest") says on top what it leaves out.
    m_partialBanner = new QLabel(this);
    m_partialBanner->setObjectName(QStringLiteral("modelPartialBanner"));
    m_partialBanner->setWordWrap(true);
    m_partialBanner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_partialBanner->setStyleSheet(QStringLiteral("QLabel { background: #fff3cd; color: #664d03; "
                                                  "border: 1px solid #e0b000; padding: 6px; }"));
    m_partialBanner->hide();

    auto* paramProxy = new QSortFilterProxyModel(this);
    paramProxy->setSourceModel(m_paramModel);
    paramProxy->setSortRole(ParameterTableModel::SortRole);
    m_paramView->setModel(paramProxy);
    m_paramView->setObjectName(QStringLiteral("modelParameterTable"));
    m_paramView->horizontalHeader()->setObjectName(QStringLiteral("modelParameterHeader"));
    m_paramView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_paramView->horizontalHeader()->setStretchLastSection(false);
    m_paramView->horizontalHeader()->setSectionResizeMode(
        ParameterTableModel::Component, QHeaderView::Stretch);
    m_paramView->verticalHeader()->hide();
    m_paramView->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    m_paramView->setAlternatingRowColors(true);
    m_paramView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_paramView->setShowGrid(false);
    setKeyColumns(*m_paramView,
        { ParameterTableModel::Component, ParameterTableModel::Total, ParameterTableModel::Active,
            ParameterTableModel::Share });

    m_chart->setMinimumHeight(220);

    m_treeProxy->setSourceModel(m_treeModel);
    m_treeProxy->setSortRole(ModelTreeModel::SortRole);
    m_treeProxy->setRecursiveFilteringEnabled(true);
    m_treeProxy->setFilterKeyColumn(ModelTreeModel::Name);
    m_treeProxy->setFilterRole(ModelTreeModel::AnchorRole);
    m_treeProxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_tree->setModel(m_treeProxy);
    m_tree->setUniformRowHeights(true);
    m_tree->setAlternatingRowColors(true);
    m_tree->header()->setObjectName(QStringLiteral("modelTreeHeader"));
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(ModelTreeModel::Name, QHeaderView::Stretch);
    m_tree->setColumnWidth(ModelTreeModel::Shape, 150);
    setKeyColumns(*m_tree,
        { ModelTreeModel::Name, ModelTreeModel::Shape, ModelTreeModel::DType,
            ModelTreeModel::Parameters });
    m_filter->setPlaceholderText(
        tr("Filter tensors by name (e.g. layers.3.mlp, q_proj, experts.12.)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, m_treeProxy,
        &QSortFilterProxyModel::setFilterFixedString);
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
        [this](const QModelIndex& current) {
            m_session.selectAnchor(current.data(ModelTreeModel::AnchorRole).toString());
        });

    // Left: the summary above the parameter table; right: the chart.
    auto* left = new QSplitter(Qt::Vertical, this);
    left->setObjectName(QStringLiteral("modelLeftSplitter"));
    // The summary scrolls rather than set the window's minimum height.
    auto* summaryScroll = new QScrollArea(this);
    summaryScroll->setObjectName(QStringLiteral("modelSummaryScroll"));
    summaryScroll->setWidget(summary);
    summaryScroll->setWidgetResizable(true);
    summaryScroll->setFrameShape(QFrame::NoFrame);
    left->addWidget(summaryScroll);
    left->addWidget(m_paramView);
    auto* top = new QSplitter(Qt::Horizontal, this);
    top->setObjectName(QStringLiteral("modelTopSplitter"));
    top->addWidget(left);
    top->addWidget(m_chart);
    top->setSizes({ 520, 600 });

    auto* bottom = new QWidget(this);
    auto* bottomLayout = new QVBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    bottomLayout->addWidget(m_filter);
    bottomLayout->addWidget(m_tree);

    // Below: the architecture's tree, and the open checkpoint in a second tab.
    m_tabs->setObjectName(QStringLiteral("modelTabs"));
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(bottom, tr("Architecture"));
    m_tabs->addTab(m_checkpoint, tr("Checkpoint"));
    connect(&m_session, &Session::checkpointOpenRequested, this, [this](const QString& path) {
        if (auto* dock = qobject_cast<QDockWidget*>(parentWidget())) {
            dock->show();
            dock->raise();
        }
        m_tabs->setCurrentWidget(m_checkpoint);
        if (path.isEmpty()) {
            m_checkpoint->chooseAndOpen();
        } else {
            m_checkpoint->openCheckpoint(path);
        }
    });
    connect(m_checkpoint, &CheckpointView::opened, this,
        [this] { m_tabs->setCurrentWidget(m_checkpoint); });
    connect(m_checkpoint, &CheckpointView::runRecorded, &m_session, &Session::announceRecordedRun);
    connect(m_checkpoint, &CheckpointView::recordFailed, &m_session, &Session::statusMessage);

    auto* split = new QSplitter(Qt::Vertical, this);
    split->setObjectName(QStringLiteral("modelSplitter"));
    split->addWidget(top);
    split->addWidget(m_tabs);
    split->setSizes({ 560, 400 });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(m_partialBanner);
    layout->addWidget(split);

    connect(&m_session, &Session::modelChanged, this, &ModelPanel::onModelChanged);
    onModelChanged();
}

QString ModelPanel::summaryField(const QString& name) const
{
    const auto it = m_fields.find(name);
    return it == m_fields.end() ? QString() : it->second->text();
}

void ModelPanel::setField(const QString& name, const QString& value)
{
    m_fields.at(name)->setText(value);
}

void ModelPanel::onModelChanged()
{
    const auto graph = m_session.graph();
    m_treeModel->setGraph(graph);
    m_paramModel->setCounts(graph ? graph->countParameters() : model::ParameterCounts {});
    updateSummary();
    updateChart();
    if (graph) {
        m_tree->expand(m_treeProxy->index(0, 0));
    }
}

void ModelPanel::updateSummary()
{
    const auto graph = m_session.graph();
    if (!graph) {
        for (auto& [name, label] : m_fields) {
            label->setText(name == QStringLiteral("Model") ? tr("no model open") : QString());
        }
        m_warnings->clear();
        m_pattern->setPattern({});
        m_partialBanner->hide();
        return;
    }
    const auto& s = graph->spec;
    if (s.partial) {
        QStringList keys;
        for (const auto& k : s.ignored) {
            keys << QStringLiteral("<b>%1</b> (%2)")
                        .arg(
                            toQString(k.path).toHtmlEscaped(), toQString(k.reason).toHtmlEscaped());
        }
        m_partialBanner->setText(tr("<b>Partial reading.</b> Day0 does not model %1 key(s) of "
                                    "this config; every figure in every panel leaves them out: %2")
                                     .arg(s.ignored.size())
                                     .arg(keys.join(QStringLiteral(", "))));
        m_partialBanner->show();
    } else {
        m_partialBanner->hide();
    }
    m_pattern->setPattern(model::layerPattern(s));
    setField(QStringLiteral("Layer pattern"), toQString(model::patternLine(s)));
    {
        QStringList formats;
        for (const auto& f : model::weightFormats(*graph)) {
            formats << tr("%1: %2 (%3)")
                           .arg(toQString(model::componentName(f.component)), toQString(f.format),
                               countText(double(f.params)));
        }
        setField(QStringLiteral("Stored as"), formats.join(QStringLiteral("<br>")));
    }
    setField(QStringLiteral("Model"),
        QStringLiteral("<b>%1</b><br>%2").arg(toQString(s.name), toQString(s.architecture)));
    setField(QStringLiteral("Family"),
        toQString(model::familyName(s.family)) + QStringLiteral(" (model_type ")
            + toQString(s.modelType) + QLatin1Char(')'));
    QString layers = tr("%1 decoder layers").arg(s.numLayers);
    if (s.moe) {
        layers
            += tr(" (%1 dense, %2 MoE)").arg(s.numLayers - s.numMoeLayers()).arg(s.numMoeLayers());
    }
    if (s.numMtpLayers > 0) {
        layers += tr(" + %1 MTP").arg(s.numMtpLayers);
    }
    setField(QStringLiteral("Layers"), layers);
    setField(QStringLiteral("Hidden size"),
        tr("%1 (dense MLP %2, %3)")
            .arg(n(s.hiddenSize), n(s.intermediateSize), toQString(s.hiddenAct)));
    // The same words as `day0 inspect`: one description of the architecture.
    const auto architecture = model::describeArchitecture(s);
    const auto line = [&architecture](std::string_view label) {
        for (const auto& l : architecture) {
            if (l.label == label) {
                return toQString(l.value);
            }
        }
        return QString();
    };
    setField(QStringLiteral("Attention"), line("attention"));
    setField(QStringLiteral("Experts"), s.moe ? line("experts") : tr("dense (no experts)"));
    setField(QStringLiteral("Vocabulary"),
        n(s.vocabSize) + (s.tieEmbeddings ? tr(" (tied embeddings)") : QString()));
    setField(QStringLiteral("Context"), tr("%1 positions").arg(n(s.maxPositions)));
    setField(QStringLiteral("RoPE"), line("RoPE"));
    QString weights = toQString(std::string(dtypeName(s.dtype)));
    if (s.quantization) {
        weights += QStringLiteral(", ") + line("quantization");
    }
    setField(QStringLiteral("Weights"), weights);
    setField(QStringLiteral("Vision tower"), line("vision"));
    const auto& counts = m_paramModel->counts();
    setField(QStringLiteral("Parameters"),
        tr("<b>%1</b> total, <b>%2</b> active per token (%3 without the embedding)")
            .arg(countText(double(counts.total)), countText(double(counts.active)),
                countText(double(counts.activeWithoutEmbedding))));
    QStringList warnings;
    for (const auto& w : s.warnings) {
        warnings << toQString(w);
    }
    for (const auto& note : s.notes) {
        warnings << toQString(note);
    }
    m_warnings->setText(warnings.join(QLatin1Char('\n')));
}

void ModelPanel::updateChart()
{
    m_chart->clear();
    const auto& counts = m_paramModel->counts();
    if (counts.byComponent.empty()) {
        m_chart->setNote(tr("Open a model: File ▸ Bundled Models, or drop a config.json here"));
        m_chart->rescaleAndReplot();
        return;
    }
    QStringList categories;
    BarLayer active { tr("active per token"), categoricalColor(0), {} };
    BarLayer inactive { tr("inactive"), categoricalColor(0).lighter(160), {} };
    for (const auto& c : counts.byComponent) {
        categories << toQString(model::componentName(c.component));
        active.values << double(c.active);
        inactive.values << double(c.total - c.active);
    }
    m_chart->setTitle(tr("Parameters by component"));
    m_chart->setStackedBars(categories, { active, inactive }, Qt::Horizontal);
    m_chart->setAxisFormat(PlotWidget::Axis::X, AxisFormat::Count);
    m_chart->setAxisLabel(PlotWidget::Axis::X, tr("parameters"));
    m_chart->rescaleAndReplot();
}

} // namespace day0::ui
