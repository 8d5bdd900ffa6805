#include "panels/serving/stage_table.h"

#include "widgets/key_columns.h"

#include <QHeaderView>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace day0::ui {

namespace {

QString rateText(double rate)
{
    return std::isinf(rate) ? QStringLiteral("inf") : QString::number(rate, 'g', 6);
}

} // namespace

StageTable::StageTable(QWidget* parent)
    : QTableWidget(0, ColumnCount, parent)
{
    setHorizontalHeaderLabels({ tr("Concurrency"), tr("Rate req/s"), tr("Prompt tok"),
        tr("Output tok"), tr("Requests") });
    const QString tips[ColumnCount] = {
        tr("Requests in flight at most; 0: no cap"),
        tr("Mean request rate (Poisson arrivals); inf: all at once"),
        tr("Prompt length of every request, in tokens (random ids)"),
        tr("max_tokens of every request (ignore_eos: each runs to it)"),
        tr("Measured requests of the level"),
    };
    for (int c = 0; c < ColumnCount; ++c) {
        horizontalHeaderItem(c)->setToolTip(tips[c]);
    }
    verticalHeader()->setVisible(true);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    horizontalHeader()->setStretchLastSection(true);
    setKeyColumns(*this, { Concurrency, Rate, InputTokens, OutputTokens, Requests });
    setStages(actions::defaultBenchStages());
}

void StageTable::setStages(const std::vector<actions::BenchStage>& stages)
{
    setRowCount(0);
    for (const auto& s : stages) {
        const int row = rowCount();
        insertRow(row);
        setItem(row, Concurrency, new QTableWidgetItem(QString::number(s.concurrency)));
        setItem(row, Rate, new QTableWidgetItem(rateText(s.rate)));
        setItem(row, InputTokens, new QTableWidgetItem(QString::number(s.inputTokens)));
        setItem(row, OutputTokens, new QTableWidgetItem(QString::number(s.outputTokens)));
        setItem(row, Requests, new QTableWidgetItem(QString::number(s.numPrompts)));
    }
}

void StageTable::addStage()
{
    QString ignored;
    auto current = stages(&ignored).value_or(std::vector<actions::BenchStage> {});
    actions::BenchStage next
        = current.empty() ? actions::defaultBenchStages().front() : current.back();
    if (!current.empty()) {
        next.concurrency = next.concurrency > 0 ? 2 * next.concurrency : 0;
        next.numPrompts = std::max(next.numPrompts, 2 * next.concurrency);
    }
    current.push_back(next);
    setStages(current);
}

void StageTable::removeSelected()
{
    QList<int> rows;
    for (const auto& index : selectionModel()->selectedRows()) {
        rows << index.row();
    }
    if (rows.isEmpty() && rowCount() > 0) {
        rows << rowCount() - 1;
    }
    std::sort(rows.begin(), rows.end(), std::greater<>());
    for (const int row : rows) {
        removeRow(row);
    }
}

std::optional<std::vector<actions::BenchStage>> StageTable::stages(QString* error) const
{
    std::vector<actions::BenchStage> out;
    const auto cell = [this](int row, int column) {
        const auto* it = item(row, column);
        return it != nullptr ? it->text().trimmed() : QString();
    };
    const auto fail = [&](int row, int column, const QString& what) {
        *error = tr("Stage %1, %2: '%3' %4")
                     .arg(row + 1)
                     .arg(horizontalHeaderItem(column)->text(), cell(row, column), what);
        return std::nullopt;
    };
    for (int row = 0; row < rowCount(); ++row) {
        actions::BenchStage s;
        bool ok = false;
        s.concurrency = cell(row, Concurrency).toInt(&ok);
        if (!ok || s.concurrency < 0) {
            return fail(row, Concurrency, tr("is not a whole number ≥ 0 (0: no cap)"));
        }
        const QString rate = cell(row, Rate);
        if (rate.compare(QStringLiteral("inf"), Qt::CaseInsensitive) == 0) {
            s.rate = std::numeric_limits<double>::infinity();
        } else {
            s.rate = rate.toDouble(&ok);
            if (!ok || !(s.rate > 0) || std::isinf(s.rate)) {
                return fail(row, Rate, tr("is not a rate > 0 req/s or inf"));
            }
        }
        s.inputTokens = cell(row, InputTokens).toLongLong(&ok);
        if (!ok || s.inputTokens < 1) {
            return fail(row, InputTokens, tr("is not a whole number ≥ 1"));
        }
        s.outputTokens = cell(row, OutputTokens).toLongLong(&ok);
        if (!ok || s.outputTokens < 1) {
            return fail(row, OutputTokens, tr("is not a whole number ≥ 1"));
        }
        s.numPrompts = cell(row, Requests).toInt(&ok);
        if (!ok || s.numPrompts < 1) {
            return fail(row, Requests, tr("is not a whole number ≥ 1"));
        }
        out.push_back(s);
    }
    if (out.empty()) {
        *error = tr("No stage: add a load level.");
        return std::nullopt;
    }
    return out;
}

} // namespace day0::ui
