#pragma once

#include "actions/eval.h"
#include "base/progress.h"
#include "base/result.h"
#include "exec/precision.h"
#include "numerics/tolerance.h"

#include <QWidget>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace day0::ui {

class JobRunner;
class JobTicket;
class PlotWidget;
class Session;

/// An end-to-end evaluation of the session's model (`day0 eval`) as the precision panel runs it.
struct EndToEndRequest {
    /// As PrecisionRunRequest::modelSource: a bundled name or config runs its shrunk checkpoint.
    std::string modelSource;
    exec::PrecisionPlan target { exec::PrecisionMode::BF16, {}, {}, exec::Fp8Scaling::PerTensor };
    std::string reference = "fp64";
    std::int64_t sequences = 4; ///< sampled from the reference (in-distribution text)
    std::int64_t sequenceLength = 32;
    std::uint64_t seed = 1;
    std::int64_t generate = 16; ///< greedy tokens compared under both (0: none)
    /// Record with recordRunOnce (the demo, rerun on every start) instead of recordRun.
    bool recordOnce = false;
};

/// What the view shows: the evaluation, the rule that judged it and where it was recorded.
struct EndToEndResult {
    actions::EvalOutcome outcome;
    std::optional<numerics::EndToEndRule> rule; ///< the table's end_to_end rule of the target
    std::optional<std::int64_t> recordedRun;
    std::string recordError;
};

/// Runs actions::evaluate on the request's model (its shrunk checkpoint when it has no weights)
/// and records the outcome as `day0 eval` does. Worker-thread function.
Result<std::shared_ptr<const EndToEndResult>> runEndToEnd(
    const EndToEndRequest& request, Progress& progress, std::stop_token stop);

/// The histogram bins the view draws: the occupied ones and one empty bin either side
/// (first..last, inclusive).
std::size_t histogramFirstBin(const numerics::KlHistogram& histogram);
std::size_t histogramLastBin(const numerics::KlHistogram& histogram);

/// The precision panel's "End to end" view (issue #21): `day0 eval` of the session's model in a
/// target precision against fp64 over a small sampled corpus, with the KL histogram, KL against
/// position, the same-top strip, the greedy generation diff and the verdict of the tolerance
/// table's end_to_end rule.
class EndToEndView : public QWidget {
    Q_OBJECT
public:
    /// `runsShrunk(source)`: whether the model runs as a shrunk checkpoint (then the view runs
    /// itself on first show, as the panel's demo does).
    EndToEndView(Session& session, JobRunner& jobs, std::function<bool(const QString&)> runsShrunk,
        QWidget* parent = nullptr);
    ~EndToEndView() override;

    /// Runs `request` (modelSource filled from the session when empty).
    void run(EndToEndRequest request);
    void cancel();

    // Tests and screenshots.
    [[nodiscard]] std::shared_ptr<const EndToEndResult> current() const { return m_result; }
    [[nodiscard]] PlotWidget* histogramPlot() const { return m_histogram; }
    [[nodiscard]] PlotWidget* positionPlot() const { return m_position; }
    [[nodiscard]] PlotWidget* stripPlot() const { return m_strip; }
    [[nodiscard]] QString summaryText() const;
    [[nodiscard]] QString generationText() const;
    [[nodiscard]] QString errorText() const;

signals:
    void resultDelivered();

protected:
    void showEvent(QShowEvent* event) override;

private:
    using Outcome = Result<std::shared_ptr<const EndToEndResult>>;
    QWidget* createControls();
    void startDemoIfWanted();
    void startFromControls();
    void startJob(EndToEndRequest request);
    void deliver(Outcome&& outcome);
    void pollProgress();
    void showResult();

    Session& m_session;
    JobRunner& m_jobs;
    std::function<bool(const QString&)> m_runsShrunk;
    std::unique_ptr<JobTicket> m_ticket;
    std::shared_ptr<const EndToEndResult> m_result;
    bool m_demoDone = false; ///< the demo ran for this model (or the user ran something)
    bool m_userAction = false; ///< the user ran something: no more demos
    QString m_title;

    QComboBox* m_target = nullptr;
    QSpinBox* m_sequences = nullptr;
    QSpinBox* m_length = nullptr;
    QSpinBox* m_generate = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_generations = nullptr;
    QTimer* m_poll = nullptr;
    PlotWidget* m_histogram = nullptr;
    PlotWidget* m_position = nullptr;
    PlotWidget* m_strip = nullptr;
};

} // namespace day0::ui
