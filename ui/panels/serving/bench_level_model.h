#pragma once

#include "actions/bench_record.h"

#include <QAbstractTableModel>

#include <vector>

namespace day0::ui {

/// The levels of a staged serving bench, one row each as they finish: the level, completed and
/// failed requests, request, output and total token throughput, goodput, the TTFT, TPOT, ITL and
/// E2EL percentiles (ms), tokens/s/user, errors by kind and the --check outcome (its first
/// divergence). Headers carry each metric's definition as a tooltip. GUI-thread object.
class BenchLevelModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Level,
        Completed,
        Failed,
        RequestRate,
        OutputRate,
        TotalRate,
        Goodput,
        PerUser,
        TtftP50,
        TtftP90,
        TtftP99,
        TpotP50,
        TpotP90,
        TpotP99,
        ItlP50,
        ItlP90,
        ItlP99,
        E2elP50,
        E2elP90,
        E2elP99,
        Errors,
        Check,
        ColumnCount
    };

    explicit BenchLevelModel(QObject* parent = nullptr);

    /// Removes every level.
    void clear();
    /// Appends a finished level.
    void append(const actions::BenchLevelOutcome& level);
    [[nodiscard]] const std::vector<actions::BenchLevelOutcome>& levels() const { return m_levels; }

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role) const override;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role) const override;

private:
    [[nodiscard]] QVariant display(const actions::BenchLevelOutcome& level, int column) const;
    std::vector<actions::BenchLevelOutcome> m_levels;
};

/// The percentile `p` of metric `name` ("ttft", "tpot", "itl", "e2el") in ms; NaN when absent.
double levelPercentile(const serve::BenchResult& result, const std::string& name, double p);

/// "http_429: 3, timeout: 1", or empty without errors.
QString errorsText(const serve::BenchResult& result);

/// "16 compared, none diverge", "3 of 16 diverge; first: request 3: token 5 is 17, …", or empty
/// when the level was not checked.
QString checkText(const actions::BenchLevelOutcome& level);

} // namespace day0::ui
