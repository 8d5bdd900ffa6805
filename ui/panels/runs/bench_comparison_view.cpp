#include "panels/runs/bench_comparison_view.h"

#include "history/bench_comparison.h"
#include "history/metric_labels.h"
#include "history/timestamp.h"
#include "panels/runs/delta_table_model.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <limits>

namespace day0::ui {

namespace {

// The run as legends name it: number, label and when it ran.
QString runTitle(const history::RunInfo& run)
{
    QString name = QStringLiteral("#%1").arg(run.id.value());
    if (!run.label.empty()) {
        name += QLatin1Char(' ') + toQString(run.label);
    }
    return name + QStringLiteral(" · ") + toQString(history::formatLocal(run.created));
}

QString percentileName(double p)
{
    return p == 50.0 ? QStringLiteral("p50") : QStringLiteral("p%1").arg(p);
}

// The key of percentile `p` of `metric` as bench records it (the median as "median_").
std::string percentileKey(const std::string& metric, double p)
{
    if (p == 50.0) {
        return "median_" + metric + "_ms";
    }
    return fromQString(QStringLiteral("p%1_").arg(p)) + metric + "_ms";
}

} // namespace

// The level table is the run comparison's table with a Level column in front.
static_assert(int(BenchLevelTableModel::Quantity) == int(DeltaTableModel::Quantity) + 1
    && int(BenchLevelTableModel::Relative) == int(DeltaTableModel::Relative) + 1
    && int(BenchLevelTableModel::ValueRole) == int(DeltaTableModel::ValueRole));

BenchLevelTableModel::BenchLevelTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

BenchLevelTableModel::~BenchLevelTableModel() = default;

void BenchLevelTableModel::setComparison(std::shared_ptr<const history::BenchComparison> comparison)
{
    beginResetModel();
    m_comparison = std::move(comparison);
    m_rows.clear();
    if (m_comparison) {
        for (std::size_t l = 0; l < m_comparison->levels.size(); ++l) {
            for (std::size_t q = 0; q < m_comparison->levels[l].quantities.size(); ++q) {
                m_rows.emplace_back(l, q);
            }
        }
    }
    endResetModel();
}

int BenchLevelTableModel::rowOf(int level, const std::string& quantity) const
{
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        const auto& l = m_comparison->levels[m_rows[i].first];
        if (l.level == level && l.quantities[m_rows[i].second].name == quantity) {
            return int(i);
        }
    }
    return -1;
}

int BenchLevelTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int BenchLevelTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant BenchLevelTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_rows.size())) {
        return {};
    }
    const auto& level = m_comparison->levels[m_rows[std::size_t(index.row())].first];
    const auto& row = level.quantities[m_rows[std::size_t(index.row())].second];
    if (index.column() != Level) {
        // Quantity .. Relative are the run comparison's columns, one to the right.
        return DeltaTableModel::cellData(row, DeltaTableModel::Column(index.column() - 1), role);
    }
    switch (role) {
    case Qt::DisplayRole:
        return QString::number(level.level);
    case ValueRole:
        return std::numeric_limits<double>::quiet_NaN();
    case Qt::TextAlignmentRole:
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ToolTipRole: {
        QString tip
            = tr("A: %1").arg(level.labelA.empty() ? tr("no such level") : toQString(level.labelA));
        if (level.labelB != level.labelA) {
            tip += QLatin1Char('\n')
                + tr("B: %1").arg(
                    level.labelB.empty() ? tr("no such level") : toQString(level.labelB));
        }
        return tip;
    }
    default:
        return {};
    }
}

QVariant BenchLevelTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    if (section == Level) {
        return tr("Level");
    }
    return DeltaTableModel::columnTitle(DeltaTableModel::Column(section - 1));
}

BenchComparisonView::BenchComparisonView(QWidget* parent)
    : QWidget(parent)
    , m_note(new QLabel(this))
    , m_latency(new QComboBox(this))
    , m_curves(new PlotWidget(this))
    , m_view(new QTableView(this))
    , m_model(new BenchLevelTableModel(this))
{
    setObjectName(QStringLiteral("benchComparison"));
    m_note->setObjectName(QStringLiteral("benchComparisonNote"));
    m_note->setWordWrap(true);
    m_latency->setObjectName(QStringLiteral("benchLatency"));
    m_latency->setToolTip(tr("Which latency the curves follow against load"));
    m_latency->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_curves->setObjectName(QStringLiteral("benchCurves"));
    m_view->setObjectName(QStringLiteral("benchLevels"));
    m_view->setModel(m_model);
    m_view->setAlternatingRowColors(true);
    m_view->setShowGrid(false);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setWordWrap(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 6);
    setKeyColumns(*m_view,
        { BenchLevelTableModel::Level, BenchLevelTableModel::Quantity, BenchLevelTableModel::A,
            BenchLevelTableModel::B, BenchLevelTableModel::Change },
        BenchLevelTableModel::Quantity);

    auto* controls = new QHBoxLayout;
    auto* label = new QLabel(tr("Latency against load:"), this);
    label->setForegroundRole(QPalette::PlaceholderText);
    controls->addWidget(label);
    controls->addWidget(m_latency);
    controls->addStretch(1);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->setObjectName(QStringLiteral("benchSplitter"));
    split->setChildrenCollapsible(false);
    split->addWidget(m_curves);
    split->addWidget(m_view);
    split->setSizes({ 500, 500 });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_note);
    layout->addLayout(controls);
    layout->addWidget(split, 1);
    connect(m_latency, &QComboBox::currentIndexChanged, this, [this] { showCurves(); });
}

BenchComparisonView::~BenchComparisonView() = default;

QString BenchComparisonView::noteText() const { return m_note->text(); }

void BenchComparisonView::setComparison(std::shared_ptr<const history::BenchComparison> comparison,
    const history::RunInfo& a, const history::RunInfo& b, bool single)
{
    m_comparison = std::move(comparison);
    m_single = single;
    m_nameA = runTitle(a);
    m_nameB = runTitle(b);
    m_view->setColumnHidden(BenchLevelTableModel::B, single);
    m_view->setColumnHidden(BenchLevelTableModel::Change, single);
    m_view->setColumnHidden(BenchLevelTableModel::Relative, single);
    const bool usable = m_comparison && m_comparison->notComparable.empty();
    m_model->setComparison(usable ? m_comparison : nullptr);
    if (!m_comparison) {
        m_note->clear();
    } else if (!usable) {
        m_note->setText(
            QStringLiteral("<span style='color:%1'>%2</span>")
                .arg(errorColor().name(), toQString(m_comparison->notComparable).toHtmlEscaped()));
    } else {
        m_note->setText(single
                ? tr("%1 load levels of %2").arg(m_comparison->levels.size()).arg(m_nameA)
                : tr("%1 load levels; A = %2, B = %3; levels are matched by their number "
                     "(hover a level for what each run ran)")
                      .arg(m_comparison->levels.size())
                      .arg(m_nameA, m_nameB));
    }
    const QString previous = m_latency->currentData().toString();
    {
        const QSignalBlocker block(m_latency);
        m_latency->clear();
        if (usable) {
            for (const auto& metric : history::benchLatencyMetrics(*m_comparison)) {
                m_latency->addItem(QString::fromStdString(metric).toUpper(), toQString(metric));
            }
        }
        m_latency->setCurrentIndex(std::max(0, m_latency->findData(previous)));
        m_latency->setEnabled(m_latency->count() > 1);
    }
    showCurves();
}

void BenchComparisonView::showCurves()
{
    m_curves->clear();
    m_series.clear();
    m_curves->setTitle(tr("Latency against load"));
    m_curves->setAxisLabel(PlotWidget::Axis::X, tr("level"));
    m_curves->setAxisLabel(PlotWidget::Axis::Y, tr("ms"));
    const std::string metric = fromQString(m_latency->currentData().toString());
    if (!m_comparison || !m_comparison->notComparable.empty() || metric.empty()) {
        m_curves->setNote(m_comparison && !m_comparison->notComparable.empty()
                ? tr("not compared: %1").arg(toQString(m_comparison->notComparable))
                : tr("no latency percentiles in these runs"));
        m_curves->rescaleAndReplot();
        return;
    }
    // The lowest and highest percentile recorded: the typical request and the tail.
    const auto percentiles = history::benchPercentiles(*m_comparison, metric);
    std::vector<double> shown;
    if (!percentiles.empty()) {
        shown.push_back(percentiles.front());
        if (percentiles.back() != percentiles.front()) {
            shown.push_back(percentiles.back());
        }
    }
    QVector<PlotSeries> series;
    bool positive = true;
    for (const bool sideB : { false, true }) {
        if (sideB && m_single) {
            break;
        }
        for (const double p : shown) {
            PlotSeries s { QStringLiteral("%1 %2 · %3 %4")
                               .arg(sideB ? QStringLiteral("B") : QStringLiteral("A"),
                                   sideB ? m_nameB : m_nameA,
                                   QString::fromStdString(metric).toUpper(), percentileName(p)),
                categoricalColor(sideB ? 1 : 0), {}, {}, p != shown.front(), true, 6.0, true, {} };
            for (const auto& point :
                history::loadCurve(*m_comparison, percentileKey(metric, p), sideB)) {
                s.x << point.level;
                s.y << point.value;
                s.pointLabels << tr("level %1: %2 ms").arg(point.level).arg(point.value, 0, 'g', 4);
                positive = positive && point.value > 0;
            }
            series << s;
        }
    }
    m_curves->setLineSeries(series);
    m_series = series;
    m_curves->setLogScale(PlotWidget::Axis::Y, positive);
    m_curves->setLegendVisible(true);
    m_curves->rescaleAndReplot();
}

} // namespace day0::ui
