#include "panels/runs/run_comparison_view.h"

#include "history/bench_comparison.h"
#include "history/comparison_views.h"
#include "history/metric_labels.h"
#include "history/run_compare.h"
#include "panels/runs/bench_comparison_view.h"
#include "panels/runs/delta_table_model.h"
#include "widgets/colors.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <cmath>
#include <limits>

namespace day0::ui {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QColor runColor(int side) { return categoricalColor(side); }

QString number(double v)
{
    return std::isnan(v) ? QStringLiteral("NaN") : QLocale().toString(v, 'g', 4);
}

QString runName(const history::RunInfo& run)
{
    QString name = QStringLiteral("#%1").arg(run.id.value());
    if (!run.label.empty()) {
        name += QLatin1Char(' ') + toQString(run.label);
    }
    return name;
}

QString slotText(const std::optional<history::MemorySlot>& slot)
{
    if (!slot) {
        return RunComparisonView::tr("no memory");
    }
    QString text = slot->rank < 0 ? RunComparisonView::tr("any rank")
                                  : RunComparisonView::tr("rank %1").arg(slot->rank);
    if (slot->stage >= 0) {
        text += RunComparisonView::tr(", stage %1").arg(slot->stage);
    }
    return text;
}

QColor componentColor(const std::string& component, int index)
{
    static const std::pair<const char*, MemoryColor> known[] = {
        { "weights", MemoryColor::Weights },
        { "gradients", MemoryColor::Gradients },
        { "optimizer", MemoryColor::Optimizer },
        { "activations", MemoryColor::Activations },
        { "kv_cache", MemoryColor::KvCache },
        { "buffers", MemoryColor::Buffers },
    };
    for (const auto& [name, color] : known) {
        if (component == name) {
            return memoryColor(color);
        }
    }
    return categoricalColor(6 + index);
}

QComboBox* makeBox(QWidget* parent, const QString& name, const QString& tip)
{
    auto* box = new QComboBox(parent);
    box->setObjectName(name);
    box->setToolTip(tip);
    box->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    return box;
}

} // namespace

RunComparisonView::RunComparisonView(QWidget* parent)
    : QWidget(parent)
    , m_header(new QLabel(this))
    , m_metricBox(makeBox(this, QStringLiteral("runsMetric"), tr("Per-layer metric to plot")))
    , m_subModuleBox(makeBox(this, QStringLiteral("runsSubModule"),
          tr("Which module of each layer the depth curve follows")))
    , m_changeBox(makeBox(this, QStringLiteral("runsChange"),
          tr("How the heatmap measures the change from A to B")))
    , m_slotBox(makeBox(this, QStringLiteral("runsMemorySlot"), tr("Which rank's memory to show")))
    , m_depth(new PlotWidget(this))
    , m_heatmap(new PlotWidget(this))
    , m_memory(new PlotWidget(this))
    , m_bench(new BenchComparisonView(this))
    , m_deltaView(new QTableView(this))
    , m_deltas(new DeltaTableModel(this))
{
    m_header->setObjectName(QStringLiteral("runsComparisonHeader"));
    m_header->setWordWrap(true);
    m_header->setTextFormat(Qt::RichText);
    m_header->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_changeBox->addItem(tr("log₁₀(B / A)"), int(history::LayerChange::Log10Ratio));
    m_changeBox->addItem(tr("B − A"), int(history::LayerChange::Difference));

    const auto label = [this](const QString& text) {
        auto* l = new QLabel(text, this);
        l->setForegroundRole(QPalette::PlaceholderText);
        return l;
    };
    m_layerControls = new QWidget(this);
    // Controls wrap in a narrow dock rather than widen the window.
    auto* layerControls = new FlowLayout(m_layerControls);
    layerControls->addWidget(label(tr("Layer metric")));
    layerControls->addWidget(m_metricBox);
    layerControls->addWidget(label(tr("of")));
    layerControls->addWidget(m_subModuleBox);
    layerControls->addWidget(label(tr("Heatmap")));
    layerControls->addWidget(m_changeBox);
    auto* controls = new FlowLayout;
    controls->addWidget(m_layerControls);
    controls->addWidget(label(tr("Memory of")));
    controls->addWidget(m_slotBox);

    m_depth->setObjectName(QStringLiteral("runsDepthPlot"));
    m_heatmap->setObjectName(QStringLiteral("runsHeatmapPlot"));
    m_memory->setObjectName(QStringLiteral("runsMemoryPlot"));
    m_deltaView->setObjectName(QStringLiteral("runsDeltas"));
    m_deltaView->setModel(m_deltas);
    m_deltaView->setAlternatingRowColors(true);
    m_deltaView->setShowGrid(false);
    m_deltaView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_deltaView->verticalHeader()->hide();
    m_deltaView->verticalHeader()->setDefaultSectionSize(m_deltaView->fontMetrics().height() + 6);
    m_deltaView->horizontalHeader()->setStretchLastSection(true);
    m_deltaView->setWordWrap(false);
    setKeyColumns(*m_deltaView,
        { DeltaTableModel::Quantity, DeltaTableModel::A, DeltaTableModel::B,
            DeltaTableModel::Change });

    auto* top = new QSplitter(Qt::Horizontal, this);
    m_layerViews = top;
    top->setObjectName(QStringLiteral("runsLayerSplitter"));
    top->addWidget(m_depth);
    top->addWidget(m_heatmap);
    top->setSizes({ 520, 480 });
    auto* bottom = new QSplitter(Qt::Horizontal, this);
    bottom->setObjectName(QStringLiteral("runsMemorySplitter"));
    bottom->addWidget(m_memory);
    bottom->addWidget(m_deltaView);
    bottom->setSizes({ 500, 500 });
    auto* split = new QSplitter(Qt::Vertical, this);
    split->setObjectName(QStringLiteral("runsComparisonSplitter"));
    split->addWidget(m_bench);
    split->addWidget(top);
    split->addWidget(bottom);
    split->setSizes({ 520, 520, 480 });
    m_bench->hide();

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_header);
    layout->addLayout(controls);
    layout->addWidget(split, 1);

    connect(m_metricBox, &QComboBox::currentIndexChanged, this, [this] {
        fillSubModules();
        showDepth();
        showHeatmap();
    });
    connect(m_subModuleBox, &QComboBox::currentIndexChanged, this, [this] { showDepth(); });
    connect(m_changeBox, &QComboBox::currentIndexChanged, this, [this] { showHeatmap(); });
    connect(m_slotBox, &QComboBox::currentIndexChanged, this, [this] { showMemory(); });
    clear(tr("Select a run to see its results, or two runs to compare them."));
}

RunComparisonView::~RunComparisonView() = default;

QString RunComparisonView::headerText() const { return m_header->text(); }

std::string RunComparisonView::metric() const
{
    return fromQString(m_metricBox->currentData().toString());
}

std::string RunComparisonView::subModule() const
{
    return fromQString(m_subModuleBox->currentData().toString());
}

history::LayerChange RunComparisonView::change() const
{
    return history::LayerChange(m_changeBox->currentData().toInt());
}

std::optional<history::MemorySlot> RunComparisonView::memorySlot() const
{
    const QVariant data = m_slotBox->currentData();
    if (!data.isValid()) {
        return std::nullopt;
    }
    const QPoint p = data.toPoint();
    return history::MemorySlot { p.x(), p.y() };
}

void RunComparisonView::clear(const QString& message)
{
    m_comparison.reset();
    m_bench->hide();
    m_memory->show();
    m_layerViews->setVisible(true);
    m_layerControls->setVisible(true);
    m_header->setText(message);
    for (QComboBox* box : { m_metricBox, m_subModuleBox, m_slotBox }) {
        const QSignalBlocker block(box);
        box->clear();
        box->setEnabled(false);
    }
    m_changeBox->setEnabled(false);
    for (PlotWidget* plot : { m_depth, m_heatmap, m_memory }) {
        plot->clear();
        plot->rescaleAndReplot();
    }
    m_deltas->clear();
}

void RunComparisonView::setComparison(std::shared_ptr<const history::RunComparison> comparison,
    bool single, std::shared_ptr<const history::BenchComparison> bench)
{
    m_comparison = std::move(comparison);
    m_single = single;
    if (!m_comparison) {
        clear(QString());
        return;
    }
    // Benches record no memory: their levels take that room (a bench beside a run of another
    // kind keeps the memory view for that run, and the bench view says why levels are not
    // compared).
    m_bench->setVisible(bench != nullptr);
    m_memory->setVisible(bench == nullptr || !bench->notComparable.empty());
    if (bench) {
        m_bench->setComparison(std::move(bench), m_comparison->a, m_comparison->b, single);
    }
    m_deltaView->setColumnHidden(DeltaTableModel::B, single);
    m_deltaView->setColumnHidden(DeltaTableModel::Change, single);
    m_deltaView->setColumnHidden(DeltaTableModel::Relative, single);
    m_deltaView->horizontalHeader()->setStretchLastSection(!single);
    m_changeBox->setEnabled(!single);
    // Runs without per-layer values (plans, say) give the space to memory and deltas.
    const bool layers = !m_comparison->layerSummary.empty();
    m_layerViews->setVisible(layers);
    m_layerControls->setVisible(layers);
    showHeader();
    fillChoosers();
    showDepth();
    showHeatmap();
    showMemory();
}

void RunComparisonView::fillChoosers()
{
    const auto& c = *m_comparison;
    {
        const QString previous = m_metricBox->currentData().toString();
        const QSignalBlocker block(m_metricBox);
        m_metricBox->clear();
        for (const auto& s : c.layerSummary) {
            m_metricBox->addItem(toQString(history::metricLabel(s.metric)), toQString(s.metric));
        }
        int index = m_metricBox->findData(previous);
        if (index < 0) {
            index = std::max(0, m_metricBox->findData(QStringLiteral("rel_l2")));
        }
        m_metricBox->setCurrentIndex(index);
        m_metricBox->setEnabled(m_metricBox->count() > 1);
    }
    fillSubModules();
    const QVariant previousSlot = m_slotBox->currentData();
    const QSignalBlocker block(m_slotBox);
    m_slotBox->clear();
    m_slotBox->addItem(m_single ? tr("most loaded rank") : tr("each run's most loaded rank"));
    for (const auto& slot : history::memorySlots(c)) {
        m_slotBox->addItem(slotText(slot), QPoint(slot.rank, slot.stage));
    }
    m_slotBox->setCurrentIndex(std::max(0, m_slotBox->findData(previousSlot)));
    m_slotBox->setEnabled(m_slotBox->count() > 2);
}

void RunComparisonView::fillSubModules()
{
    const QString previous = m_subModuleBox->currentData().toString();
    const QSignalBlocker block(m_subModuleBox);
    m_subModuleBox->clear();
    if (!m_comparison) {
        return;
    }
    for (const auto& sub : history::layerSubModules(*m_comparison, metric())) {
        m_subModuleBox->addItem(sub.empty() ? tr("layer output") : toQString(sub), toQString(sub));
    }
    m_subModuleBox->setCurrentIndex(std::max(0, m_subModuleBox->findData(previous)));
    m_subModuleBox->setEnabled(m_subModuleBox->count() > 1);
}

void RunComparisonView::showHeader()
{
    const auto& c = *m_comparison;
    const auto describe = [](const history::RunInfo& run, int side, const QString& letter) {
        QString details = toQString(history::kindLabel(run));
        for (const std::string* part : { &run.modelName, &run.plan, &run.precision }) {
            if (!part->empty()) {
                details += QStringLiteral(" · ") + toQString(*part);
            }
        }
        details += QStringLiteral(" · ") + toQString(history::formatLocal(run.created));
        if (run.status != history::RunStatus::Ok) {
            details += QStringLiteral(" · <b>%1</b>")
                           .arg(toQString(std::string(history::toString(run.status))));
        }
        return QStringLiteral("<span style='color:%1'>■</span> <b>%2</b> %3 "
                              "<span style='color:gray'>(%4)</span>")
            .arg(runColor(side).name(), letter, runName(run).toHtmlEscaped(), details);
    };
    QString text = describe(c.a, 0, QStringLiteral("A"));
    if (m_single) {
        if (!c.a.message.empty()) {
            text += QStringLiteral("<br>") + toQString(c.a.message).toHtmlEscaped();
        }
        m_header->setText(text);
        return;
    }
    text += QStringLiteral(" &nbsp;→&nbsp; ") + describe(c.b, 1, QStringLiteral("B"));
    QStringList changes;
    for (const auto& f : c.fields) {
        if (f.field == "label" || f.field == "status") {
            continue; // shown above
        }
        changes << QStringLiteral("%1: %2 → %3")
                       .arg(toQString(f.field), toQString(f.a.empty() ? "—" : f.a).toHtmlEscaped(),
                           toQString(f.b.empty() ? "—" : f.b).toHtmlEscaped());
    }
    if (!changes.isEmpty()) {
        text += QStringLiteral("<br><span style='color:gray'>%1</span> %2")
                    .arg(tr("Changed:"), changes.join(QStringLiteral(" · ")));
    }
    m_header->setText(text);
}

void RunComparisonView::showDepth()
{
    m_depth->clear();
    m_depth->setTitle(tr("Error against depth"));
    if (!m_comparison) {
        m_depth->rescaleAndReplot();
        return;
    }
    const std::string name = metric();
    const std::string sub = subModule();
    const auto curve = history::depthCurves(*m_comparison, name, sub);
    if (curve.empty()) {
        m_depth->setNote(m_comparison->layerSummary.empty()
                ? tr("no per-layer metrics in %1").arg(m_single ? tr("this run") : tr("these runs"))
                : tr("no per-layer values of %1").arg(toQString(history::metricLabel(name))));
        m_depth->rescaleAndReplot();
        return;
    }
    PlotSeries a { tr("A · %1").arg(runName(m_comparison->a)), runColor(0), {}, {}, false,
        curve.size() <= 96, 6, true, {} };
    PlotSeries b { tr("B · %1").arg(runName(m_comparison->b)), runColor(1), {}, {}, false,
        curve.size() <= 96, 6, true, {} };
    bool positive = true;
    for (const auto& p : curve) {
        QString tip = tr("layer %1").arg(p.layer);
        if (p.a) {
            tip += tr("\nA: %1").arg(number(*p.a));
        }
        if (p.b && !m_single) {
            tip += tr("\nB: %1").arg(number(*p.b));
        }
        if (p.a) {
            a.x << p.layer;
            a.y << *p.a;
            a.pointLabels << tip;
            positive = positive && !(*p.a <= 0);
        }
        if (p.b && !m_single) {
            b.x << p.layer;
            b.y << *p.b;
            b.pointLabels << tip;
            positive = positive && !(*p.b <= 0);
        }
    }
    QVector<PlotSeries> series { a };
    if (!m_single) {
        series << b;
    }
    m_depth->setLineSeries(series);
    m_depth->setLogScale(PlotWidget::Axis::Y, positive);
    m_depth->setAxisLabel(PlotWidget::Axis::X, tr("layer"));
    m_depth->setAxisLabel(PlotWidget::Axis::Y,
        sub.empty() ? tr("%1 of the layer output").arg(toQString(history::metricLabel(name)))
                    : tr("%1 of %2").arg(toQString(history::metricLabel(name)), toQString(sub)));
    m_depth->rescaleAndReplot();
}

void RunComparisonView::showHeatmap()
{
    m_heatmap->clear();
    if (!m_comparison) {
        m_heatmap->rescaleAndReplot();
        return;
    }
    const std::string name = metric();
    const history::LayerGrid grid = history::layerGrid(*m_comparison, name);
    m_heatmap->setTitle(m_single
            ? tr("%1 by layer and sub-module").arg(toQString(history::metricLabel(name)))
            : tr("Change of %1 from A to B").arg(toQString(history::metricLabel(name))));
    if (grid.rows() == 0) {
        m_heatmap->setNote(m_comparison->layerSummary.empty()
                ? tr("no per-layer metrics in %1").arg(m_single ? tr("this run") : tr("these runs"))
                : tr("no per-layer values of %1").arg(toQString(history::metricLabel(name))));
        m_heatmap->rescaleAndReplot();
        return;
    }
    HeatmapData h;
    h.rows = int(grid.rows());
    h.columns = int(grid.columns());
    for (const int layer : grid.layers) {
        h.rowLabels << tr("layer %1").arg(layer);
    }
    for (const auto& sub : grid.subModules) {
        h.columnLabels << (sub.empty() ? tr("output") : toQString(sub));
    }
    if (m_single) {
        bool positive = true;
        for (const auto& v : grid.a) {
            h.values << (v ? *v : kNaN);
            positive = positive && !(v && *v <= 0);
        }
        h.logScale = positive;
        h.valueLabel = toQString(history::metricLabel(name));
    } else {
        const auto kind = change();
        for (const double v : history::layerChanges(grid, kind)) {
            h.values << v;
        }
        h.diverging = true;
        h.valueLabel = kind == history::LayerChange::Log10Ratio ? tr("log₁₀(B / A)") : tr("B − A");
    }
    m_heatmap->setHeatmap(h);
    m_heatmap->rescaleAndReplot();
}

void RunComparisonView::showMemory()
{
    m_memory->clear();
    if (!m_comparison) {
        m_deltas->clear();
        m_memory->rescaleAndReplot();
        return;
    }
    const auto slot = memorySlot();
    const history::MemoryBars bars = history::memoryBars(*m_comparison, slot);
    m_deltas->setComparison(*m_comparison, bars);
    m_deltaView->resizeColumnsToContents();
    m_memory->setTitle(slot ? tr("Memory of %1").arg(slotText(slot))
                            : (m_single ? tr("Memory of the most loaded rank")
                                        : tr("Memory of each run's most loaded rank")));
    if (bars.components.empty()) {
        m_memory->setNote(
            tr("no memory breakdown in %1").arg(m_single ? tr("this run") : tr("these runs")));
        m_memory->rescaleAndReplot();
        return;
    }
    QStringList categories { tr("A · %1").arg(slotText(bars.slotA)) };
    if (!m_single) {
        categories << tr("B · %1").arg(slotText(bars.slotB));
    }
    QVector<BarLayer> layers;
    for (std::size_t i = 0; i < bars.components.size(); ++i) {
        BarLayer layer { toQString(bars.components[i]), componentColor(bars.components[i], int(i)),
            { double(bars.a[i].value) } };
        if (!m_single) {
            layer.values << double(bars.b[i].value);
        }
        layers << layer;
    }
    m_memory->setStackedBars(categories, layers, Qt::Horizontal);
    m_memory->setByteAxis(PlotWidget::Axis::X);
    // Plan runs record the device memory: the limit the bars are measured against.
    for (const auto& m : m_comparison->metrics) {
        if (m.name == "device_bytes" && m.unit == "B") {
            const double device = std::max(m.a.value_or(0.0), m_single ? 0.0 : m.b.value_or(0.0));
            if (device > 0) {
                m_memory->addVerticalLine({ device, tr("device memory"), errorColor() });
            }
        }
    }
    m_memory->rescaleAndReplot();
}

} // namespace day0::ui
