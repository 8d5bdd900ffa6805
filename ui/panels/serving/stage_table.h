#pragma once

#include "actions/staged_bench.h"

#include <QTableWidget>

#include <optional>
#include <vector>

namespace day0::ui {

/// The load levels of a staged serving bench, one editable row each: concurrency cap (0: none),
/// request rate (req/s, "inf": all at once), prompt and output tokens, requests. Starts with
/// actions::defaultBenchStages(). GUI-thread object.
class StageTable : public QTableWidget {
    Q_OBJECT
public:
    enum Column { Concurrency, Rate, InputTokens, OutputTokens, Requests, ColumnCount };

    explicit StageTable(QWidget* parent = nullptr);

    /// Replaces the rows with `stages`.
    void setStages(const std::vector<actions::BenchStage>& stages);
    /// Appends a row copying the last one with its concurrency doubled (or the defaults' first).
    void addStage();
    /// Removes the selected rows (the last row when none is selected).
    void removeSelected();
    /// The stages as typed; nullopt with `error` naming the row, the column and what is wrong.
    [[nodiscard]] std::optional<std::vector<actions::BenchStage>> stages(QString* error) const;
};

} // namespace day0::ui
