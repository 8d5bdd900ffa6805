#include "panels/timeline/trace_diff_pane.h"

#include "panels/timeline/trace_diff_model.h"
#include "widgets/key_columns.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTreeView>
#include <QVBoxLayout>

namespace day0::ui {

namespace {

constexpr double kThresholdPercent = 5.0; // as `day0 trace diff` by default

} // namespace

TraceDiffPane::TraceDiffPane(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_model(new TraceDiffModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_view(new QTreeView(this))
    , m_summary(new QLabel(this))
    , m_filter(new QLineEdit(this))
{
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(TraceDiffModel::SortRole);
    m_proxy->setFilterRole(TraceDiffModel::NameRole);
    m_proxy->setFilterKeyColumn(TraceDiffModel::NameColumn);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_view->setObjectName(QStringLiteral("traceDiff"));
    m_view->setModel(m_proxy);
    m_view->setRootIsDecorated(false);
    m_view->setUniformRowHeights(true);
    m_view->setTextElideMode(Qt::ElideMiddle);
    m_view->setAlternatingRowColors(true);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(TraceDiffModel::StatusColumn, Qt::AscendingOrder);
    m_view->header()->setStretchLastSection(false);
    m_view->header()->setSectionResizeMode(TraceDiffModel::NameColumn, QHeaderView::Stretch);
    for (int c = TraceDiffModel::StatusColumn; c < TraceDiffModel::ColumnCount; ++c) {
        m_view->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    }
    setKeyColumns(*m_view,
        { TraceDiffModel::NameColumn, TraceDiffModel::StatusColumn, TraceDiffModel::ChangeColumn,
            TraceDiffModel::TotalDeltaColumn });
    m_summary->setTextFormat(Qt::RichText);
    m_filter->setPlaceholderText(tr("Filter names…"));
    m_filter->setClearButtonEnabled(true);
    m_filter->setMaximumWidth(220);
    connect(
        m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);

    auto* header = new QHBoxLayout();
    header->addWidget(m_summary, 1);
    header->addWidget(m_filter);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 4, 0, 0);
    layout->setSpacing(4);
    layout->addLayout(header);
    layout->addWidget(m_view, 1);

    connect(&m_session, &Session::traceChanged, this, &TraceDiffPane::recompute);
    recompute();
}

QString TraceDiffPane::summaryText() const { return m_summary->text(); }

void TraceDiffPane::recompute()
{
    const auto a = m_session.trace(Session::TraceSlot::Primary);
    const auto b = m_session.trace(Session::TraceSlot::Comparison);
    if (!a || !b) {
        m_ticket.cancel();
        m_model->setRows({});
        m_summary->setText(tr("Open a second trace with <b>Compare With…</b> to list the kernels "
                              "added, removed, slower and faster in it."));
        emit diffChanged(false);
        return;
    }
    m_summary->setText(tr("Comparing…"));
    profile::DiffOptions options;
    options.thresholdPercent = kThresholdPercent;
    m_jobs.start<std::vector<profile::DiffRow>>(
        m_ticket, tr("Comparing traces"), this,
        [a, b, options](
            Progress&, std::stop_token) { return profile::diffTraces(*a, *b, options); },
        [this](std::vector<profile::DiffRow>&& rows) {
            m_model->setRows(std::move(rows));
            using S = profile::DiffStatus;
            m_summary->setText(tr("<b>A → B</b>: <span style=\"color:#2980b9\">%1 added</span>, "
                                  "<span style=\"color:#8e44ad\">%2 removed</span>, "
                                  "<span style=\"color:#c0392b\">%3 slower</span>, "
                                  "<span style=\"color:#27ae60\">%4 faster</span>, %5 unchanged "
                                  "(mean change under %6 % is unchanged)")
                                   .arg(m_model->count(S::Added))
                                   .arg(m_model->count(S::Removed))
                                   .arg(m_model->count(S::Slower))
                                   .arg(m_model->count(S::Faster))
                                   .arg(m_model->count(S::Unchanged))
                                   .arg(kThresholdPercent));
            emit diffChanged(true);
        });
}

} // namespace day0::ui
