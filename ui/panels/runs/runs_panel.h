#pragma once

#include "history/run_store.h"
#include "panels/runs/run_store_access.h"

#include <QWidget>

#include <cstdint>
#include <memory>
#include <vector>

class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTimer;

namespace day0::ui {

class JobRunner;
class JobTicket;
class RunComparisonView;
class RunTableModel;
class Session;
class StoreFollower;

/// The run history of the store in effect (history::storePath(): --store, $DAY0_STORE or the
/// default): every recorded plan, verification, run and trace, filtered by kind, status, model,
/// age and a search text (label, model, plan, precision, host, outcome). Selecting one run shows
/// its results; selecting two compares them (the older is A). Runs can be exported as JSON,
/// deleted, and a plan run applied to the session. The list follows the store: it re-reads it
/// when a panel records a run and when a cheap check every two seconds sees new or deleted runs
/// (from the CLI, say). All store access runs off the GUI thread.
class RunsPanel : public QWidget {
    Q_OBJECT
public:
    RunsPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~RunsPanel() override;

    /// Re-reads the list with the current filter now.
    void refresh();
    /// Selects these runs in the list (those shown) and compares them.
    void selectRuns(const std::vector<RunId>& ids);
    /// The runs selected, oldest first.
    [[nodiscard]] std::vector<RunId> selectedRuns() const;
    /// Deletes runs without asking (the Delete action asks first); emits deleted().
    void deleteRuns(const std::vector<RunId>& ids);
    /// Writes one run, with everything it holds, as JSON (`day0 runs export`); emits exported().
    void exportRun(RunId id, const QString& path);
    /// Makes the plan of the selected plan run the session's plan. Returns why it cannot, or an
    /// empty string when it was applied.
    QString applySelectedPlan();

    [[nodiscard]] RunTableModel* runModel() const { return m_runs; }
    [[nodiscard]] QTableView* runView() const { return m_view; }
    [[nodiscard]] RunComparisonView* comparisonView() const { return m_comparison; }
    [[nodiscard]] QLineEdit* searchEdit() const { return m_search; }
    [[nodiscard]] QComboBox* kindBox() const { return m_kind; }
    [[nodiscard]] QComboBox* statusBox() const { return m_status; }
    [[nodiscard]] QComboBox* modelBox() const { return m_model; }
    [[nodiscard]] QComboBox* periodBox() const { return m_period; }
    [[nodiscard]] QString statusText() const;
    /// The filter the controls describe.
    [[nodiscard]] history::RunFilter filter() const;

signals:
    /// A listing arrived and the table shows it.
    void listed();
    /// The selected runs are shown (compared, or one alone), or the views were cleared.
    void compared();
    void exported(const QString& path, const QString& error);
    void deleted(int count, const QString& error);

private:
    void showListing(RunListing&& listing);
    void restoreSelection(const std::vector<RunId>& ids);
    void selectionChanged();
    void showLoaded(LoadedRuns&& loaded);
    void updateActions();
    void confirmDelete();
    void chooseExport();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_listTicket;
    std::unique_ptr<JobTicket> m_loadTicket;
    std::unique_ptr<JobTicket> m_deleteTicket;
    RunTableModel* m_runs = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTableView* m_view = nullptr;
    RunComparisonView* m_comparison = nullptr;
    QLineEdit* m_search = nullptr;
    QComboBox* m_kind = nullptr;
    QComboBox* m_status = nullptr;
    QComboBox* m_model = nullptr;
    QComboBox* m_period = nullptr;
    QLabel* m_summary = nullptr;
    QAction* m_applyAction = nullptr;
    QAction* m_exportAction = nullptr;
    QAction* m_deleteAction = nullptr;
    QTimer* m_searchTimer = nullptr;
    StoreFollower* m_follower = nullptr;
    std::vector<RunId> m_shown; ///< runs the comparison view shows (A, B) or loads
    std::vector<history::Property> m_shownProperties; ///< of run A once loaded
    bool m_autoSelect = true; ///< select the newest run and its baseline on the first listing
    /// The first listing had no two runs of the same kind and model: nothing was compared.
    bool m_noComparablePair = false;
    bool m_restoring = false;
};

} // namespace day0::ui
