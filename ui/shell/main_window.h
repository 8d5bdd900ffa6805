#pragma once

#include "settings/preferences.h"

#include <QMainWindow>
#include <QPointer>

#include <map>
#include <memory>

class QDockWidget;
class QMenu;
class QSettings;

class QMessageBox;

namespace day0::ui {

class JobRunner;
class JobTicket;
class PanelRegistry;
class PlotWidget;
class Session;

/// The workbench window: docks every registered panel, owns the menus (open model, bundled and
/// recent models, export plot, panels, theme), accepts dropped folders and configs, and keeps
/// the layout between runs. It includes no panel header: panels come from the PanelRegistry.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    MainWindow(const PanelRegistry& registry, Session& session, JobRunner& jobs,
        QSettings& settings, QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens a model off the GUI thread: a bundled name, a folder or a config.json path.
    /// Opens a model in the background; `partial` reads a config with structure Day0 does not
    /// model (model::ReadOptions::partial), which the panels then mark.
    void openModel(const QString& modelArg, bool partial = false);
    /// The widget of panel `id`, nullptr if no such panel.
    [[nodiscard]] QWidget* panel(const QString& id) const;
    /// Shows and raises panel `id`.
    void raisePanel(const QString& id);
    [[nodiscard]] const Preferences& preferences() const { return m_preferences; }

signals:
    /// Opening a model failed; the message names the file and what is wrong.
    void modelOpenFailed(const QString& message);
    /// A file could not be opened (a model, a trace) and was reported the one way:
    /// the dialog's title ("Cannot open …"), the problem naming the file, and what to do.
    void openErrorReported(const QString& title, const QString& message, const QString& advice);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    void createDocks();
    void createMenus();
    void rebuildRecentMenu();
    void resetLayout();
    void exportCurrentPlot();
    void setTheme(ThemeChoice theme);
    void updateTitle();
    [[nodiscard]] PlotWidget* currentPlot() const;
    /// The one way a file that cannot be opened is reported: the status bar, openErrorReported,
    /// and (on a screen) a warning dialog with the problem and what to do, returned for the
    /// caller to add buttons and show; nullptr offscreen or while hidden.
    QMessageBox* reportOpenError(
        const QString& file, const QString& message, const QString& advice);
    [[nodiscard]] static QString modelArgFromPath(const QString& path);

    const PanelRegistry& m_registry;
    Session& m_session;
    JobRunner& m_jobs;
    QSettings& m_settings;
    Preferences m_preferences;
    std::unique_ptr<JobTicket> m_openTicket;
    std::map<QString, QDockWidget*> m_docks;
    QMenu* m_recentMenu = nullptr;
    QPointer<QDockWidget> m_lastActiveDock;
};

} // namespace day0::ui
