#include "panels/timeline/slice_details.h"

#include "panels/timeline/kernel_stats_model.h"
#include "panels/timeline/timeline_colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"

#include <QHeaderView>
#include <QLabel>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

namespace day0::ui {

namespace {

QString ns(std::int64_t value) { return durationText(Seconds(double(value) * 1e-9)); }

QString argText(const profile::Arg& arg)
{
    switch (arg.type) {
    case profile::ArgType::Int:
        return QString::number(arg.intValue);
    case profile::ArgType::Double:
        return QString::number(arg.doubleValue, 'g', 8);
    case profile::ArgType::String:
    case profile::ArgType::Json:
        return toQString(std::string(arg.text));
    case profile::ArgType::True:
        return QStringLiteral("true");
    case profile::ArgType::False:
        return QStringLiteral("false");
    case profile::ArgType::Null:
        break;
    }
    return QStringLiteral("null");
}

QString swatch(profile::Category category)
{
    return QStringLiteral("<span style=\"color:%1\">■</span>").arg(categoryColor(category).name());
}

} // namespace

SliceDetails::SliceDetails(QWidget* parent)
    : QWidget(parent)
    , m_title(new QLabel(this))
    , m_flows(new QLabel(this))
    , m_table(new QTableView(this))
    , m_args(new SliceArgsModel(this))
{
    setObjectName(QStringLiteral("sliceDetails"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 4, 6, 4);
    layout->setSpacing(4);
    m_title->setWordWrap(true);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_title->setTextFormat(Qt::RichText);
    m_flows->setWordWrap(true);
    m_flows->setTextFormat(Qt::RichText);
    m_flows->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
    connect(m_flows, &QLabel::linkActivated, this, [this](const QString& link) {
        bool ok = false;
        const int i = link.section(QLatin1Char(':'), 1).toInt(&ok);
        if (ok && i >= 0 && i < int(m_targets.size())) {
            // A copy: following the link shows the target, which replaces m_targets.
            const SliceRef target = m_targets[std::size_t(i)];
            emit followRequested(target);
        }
    });
    m_table->setModel(m_args);
    m_table->setObjectName(QStringLiteral("sliceArgs"));
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->setShowGrid(false);
    setKeyColumns(*m_table, { 0, 1 }, 1);
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    // However narrow the dock (1280×720), the table keeps room for a whole 'Value' header beside
    // an elided 'Property' column, and for its scroll bar: key columns never go below 48 px.
    const QFontMetrics header(m_table->horizontalHeader()->font());
    const int margin = 2 * style()->pixelMetric(QStyle::PM_HeaderMargin) + 6;
    const int columns = std::max(2 * 48,
        header.horizontalAdvance(tr("Property")) + header.horizontalAdvance(tr("Value"))
            + 2 * margin);
    m_table->setMinimumWidth(
        columns + 2 * m_table->frameWidth() + style()->pixelMetric(QStyle::PM_ScrollBarExtent));
    layout->addWidget(m_title);
    layout->addWidget(m_flows);
    layout->addWidget(m_table, 1);
    showSlice({}, {});
}

QString SliceDetails::trackPath(const profile::Trace& trace, profile::TrackId track)
{
    const auto& t = trace.tracks()[track];
    QString where = tr("rank %1").arg(t.rank);
    if (t.device >= 0) {
        where += tr(" · GPU %1").arg(t.device);
    } else if (!t.processName.empty()) {
        where += QStringLiteral(" · ") + toQString(t.processName);
    }
    return where + QStringLiteral(" · ") + toQString(t.name);
}

void SliceDetails::showSlice(const TimelineTraces& traces, const SliceRef& slice)
{
    m_targets.clear();
    const auto& trace = slice.valid() ? traces.traces[std::size_t(slice.slot)] : nullptr;
    if (!trace || slice.slice >= trace->sliceCount()) {
        m_title->setText(tr("<b>No slice selected</b>"));
        m_flows->setText(tr("Click a slice to see its arguments and follow its flow between a "
                            "CPU launch and its GPU kernel. Shift+drag (or drag in the ruler) "
                            "selects a time range for the statistics."));
        m_args->setRows({});
        return;
    }
    const profile::SliceIndex s = slice.slice;
    const std::int64_t origin = traces.origins[std::size_t(slice.slot)];
    const auto category = trace->sliceCategory(s);
    const QString name = toQString(std::string(trace->sliceNameText(s)));
    m_title->setText(
        QStringLiteral("%1 <b>%2</b>")
            .arg(swatch(category),
                toQString(std::string(profile::shortSliceName(trace->sliceNameText(s))))
                    .toHtmlEscaped()));
    m_title->setToolTip(name);

    std::vector<SliceArgsModel::Row> rows;
    rows.push_back({ tr("Name"), name });
    rows.push_back({ tr("Category"), toQString(std::string(profile::categoryName(category))) });
    rows.push_back({ tr("Track"), trackPath(*trace, trace->sliceTrack(s)) });
    rows.push_back({ tr("Start"), ns(trace->sliceStart(s) - origin) });
    rows.push_back({ tr("Duration"), ns(trace->sliceDuration(s)) });
    rows.push_back({ tr("Depth"), QString::number(trace->sliceDepth(s)) });
    for (const auto& arg : trace->sliceArgs(s)) {
        rows.push_back({ toQString(std::string(arg.key)), argText(arg) });
    }
    m_args->setRows(std::move(rows));

    QStringList lines;
    auto link = [&](profile::SliceIndex other, const QString& verb) {
        const int i = int(m_targets.size());
        m_targets.push_back({ slice.slot, other });
        const std::int64_t delta = trace->sliceStart(other) - trace->sliceStart(s);
        lines << QStringLiteral("%1 %2 <a href=\"flow:%3\">%4</a> on %5 (%6%7)")
                     .arg(verb, swatch(trace->sliceCategory(other)), QString::number(i),
                         toQString(
                             std::string(profile::shortSliceName(trace->sliceNameText(other))))
                             .toHtmlEscaped(),
                         trackPath(*trace, trace->sliceTrack(other)).toHtmlEscaped(),
                         delta >= 0 ? QStringLiteral("+") : QStringLiteral("−"),
                         ns(std::llabs(delta)));
    };
    for (const std::size_t f : trace->flowsTo(s)) {
        link(trace->flowFrom(f),
            trace->flowKind(f) == profile::FlowKind::Launch ? tr("← launched by") : tr("← from"));
    }
    for (const std::size_t f : trace->flowsFrom(s)) {
        link(trace->flowTo(f),
            trace->flowKind(f) == profile::FlowKind::Launch ? tr("→ launches") : tr("→ to"));
    }
    m_flows->setText(lines.isEmpty() ? tr("No flows.") : lines.join(QStringLiteral("<br>")));
}

} // namespace day0::ui
