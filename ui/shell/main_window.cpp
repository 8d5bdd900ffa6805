#include "shell/main_window.h"

#include "jobs/job_runner.h"
#include "jobs/job_status_widget.h"
#include "model/config_reader.h"
#include "session/session.h"
#include "settings/ui_state_store.h"
#include "shell/panel_registry.h"
#include "shell/theme.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>

namespace day0::ui {

namespace {
// Bump when the set of docks or their default arrangement changes: old saved layouts are dropped.
constexpr int kLayoutVersion = 1;
struct OpenedModel {
    std::shared_ptr<const model::LayerGraph> graph;
    std::shared_ptr<const plan::ModelSummary> summary;
};
using OpenResult = Result<OpenedModel>;
} // namespace

MainWindow::MainWindow(const PanelRegistry& registry, Session& session, JobRunner& jobs,
    QSettings& settings, QWidget* parent)
    : QMainWindow(parent)
    , m_registry(registry)
    , m_session(session)
    , m_jobs(jobs)
    , m_settings(settings)
    , m_preferences(Preferences::load(settings))
    , m_openTicket(std::make_unique<JobTicket>())
{
    setObjectName(QStringLiteral("MainWindow"));
    setAcceptDrops(true);
    setDockNestingEnabled(true);
    setDocumentMode(true);
    setTabPosition(Qt::AllDockWidgetAreas, QTabWidget::North);
    statusBar()->addPermanentWidget(new JobStatusWidget(m_jobs, this));
    connect(&m_session, &Session::statusMessage, this,
        [this](const QString& message) { statusBar()->showMessage(message, 6000); });
    connect(&m_session, &Session::modelChanged, this, &MainWindow::updateTitle);
    // A trace that cannot be opened is reported as a model is: one dialog, wherever it came from.
    connect(&m_session, &Session::traceOpenFailed, this, [this](const QString& message) {
        if (auto* box = reportOpenError(tr("the trace"), message,
                tr("Open a PyTorch profiler or Chrome trace (.json, .json.gz) with events in it, "
                   "or an Nsight Systems SQLite export (nsys export --type sqlite)."))) {
            box->setAttribute(Qt::WA_DeleteOnClose);
            box->open();
        }
    });

    resize(1600, 1000);
    // The default size, or a saved one, never exceeds the screen the window opens on.
    UiStateStore::fitWindowToScreen(*this);
    createDocks();
    createMenus();
    UiStateStore(m_settings).restoreWindow(*this, kLayoutVersion);
    updateTitle();
}

MainWindow::~MainWindow() = default;

QMessageBox* MainWindow::reportOpenError(
    const QString& file, const QString& message, const QString& advice)
{
    const QString title = tr("Cannot open %1").arg(file);
    statusBar()->showMessage(message, 10000);
    emit openErrorReported(title, message, advice);
    if (!isVisible() || QGuiApplication::platformName() == QStringLiteral("offscreen")) {
        return nullptr; // no one to answer a dialog (screenshots, tests)
    }
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Close, this);
    box->setInformativeText(advice);
    return box;
}

void MainWindow::createDocks()
{
    PanelContext context { m_session, m_jobs, &m_preferences };
    for (const auto& descriptor : m_registry.panels()) {
        auto* dock = new QDockWidget(descriptor.title, this);
        dock->setObjectName(descriptor.id + QStringLiteral("Dock"));
        QWidget* widget = descriptor.create(context, dock);
        if (widget->objectName().isEmpty()) {
            widget->setObjectName(descriptor.id + QStringLiteral("Panel"));
        }
        dock->setWidget(widget);
        m_docks[descriptor.id] = dock;
        connect(dock, &QDockWidget::visibilityChanged, this, [this, dock](bool visible) {
            if (visible) {
                m_lastActiveDock = dock;
            }
        });
    }
    resetLayout();
}

void MainWindow::resetLayout()
{
    // Panels share a tab group per area; the first of each area anchors the group.
    std::map<PanelArea, QDockWidget*> anchors;
    for (const auto& descriptor : m_registry.panels()) {
        auto* dock = m_docks.at(descriptor.id);
        const auto area
            = descriptor.area == PanelArea::Left ? Qt::LeftDockWidgetArea : Qt::RightDockWidgetArea;
        dock->setFloating(false);
        addDockWidget(area, dock);
        dock->show();
        if (auto it = anchors.find(descriptor.area); it != anchors.end()) {
            tabifyDockWidget(it->second, dock);
        } else {
            anchors[descriptor.area] = dock;
        }
    }
    for (const auto& descriptor : m_registry.panels()) {
        if (descriptor.raised) {
            m_docks.at(descriptor.id)->raise();
        }
    }
    if (anchors.size() == 2) {
        // Pixel sizes; the main window keeps their ratio when it is resized.
        resizeDocks({ anchors[PanelArea::Left], anchors[PanelArea::Right] },
            { width() * 47 / 100, width() * 53 / 100 }, Qt::Horizontal);
    }
}

void MainWindow::createMenus()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("Open &Model Folder…"), QKeySequence(tr("Ctrl+Shift+O")), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, tr("Open a Hugging Face model folder"), m_preferences.lastOpenDir);
        if (!dir.isEmpty()) {
            m_preferences.lastOpenDir = QFileInfo(dir).absolutePath();
            openModel(dir);
        }
    });
    file->addAction(tr("&Open config.json…"), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open a model config"),
            m_preferences.lastOpenDir, tr("Model configs (*.json);;All files (*)"));
        if (!path.isEmpty()) {
            m_preferences.lastOpenDir = QFileInfo(path).absolutePath();
            openModel(path);
        }
    });
    file->addAction(tr("Open C&heckpoint…"), QKeySequence(tr("Ctrl+Shift+K")), this,
        [this] { m_session.requestCheckpointOpen({}); });
    file->addAction(tr("Open &Trace…"), QKeySequence(tr("Ctrl+Shift+T")), this,
        [this] { m_session.requestTraceOpen({}); });
    auto* bundled = file->addMenu(tr("&Bundled Models"));
    for (const auto& model : model::bundledModels()) {
        const QString name = toQString(model.name);
        auto* action = bundled->addAction(name, this, [this, name] { openModel(name); });
        action->setToolTip(toQString(model.description));
        action->setStatusTip(toQString(model.description));
    }
    m_recentMenu = file->addMenu(tr("&Recent Models"));
    rebuildRecentMenu();
    file->addSeparator();
    file->addAction(tr("&Export Current Plot…"), QKeySequence(tr("Ctrl+E")), this,
        &MainWindow::exportCurrentPlot);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    auto* view = menuBar()->addMenu(tr("&View"));
    for (const auto& descriptor : m_registry.panels()) {
        auto* action = view->addAction(descriptor.title);
        action->setShortcut(descriptor.shortcut);
        const QString id = descriptor.id;
        connect(action, &QAction::triggered, this, [this, id] { raisePanel(id); });
    }
    view->addSeparator();
    auto* theme = view->addMenu(tr("&Theme"));
    auto* group = new QActionGroup(theme);
    const std::pair<QString, ThemeChoice> themes[]
        = { { tr("Follow the &System"), ThemeChoice::System }, { tr("&Light"), ThemeChoice::Light },
              { tr("&Dark"), ThemeChoice::Dark } };
    for (const auto& [label, choice] : themes) {
        auto* action = theme->addAction(label, this, [this, c = choice] { setTheme(c); });
        action->setCheckable(true);
        action->setChecked(m_preferences.theme == choice);
        group->addAction(action);
    }
    view->addAction(tr("&Reset Layout"), this, &MainWindow::resetLayout);

    auto* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About Day0 Workbench"), this, [this] {
        QMessageBox::about(this, tr("About Day0 Workbench"),
            tr("<h3>Day0 Workbench %1</h3><p>Plan, verify, run and profile newly released open "
               "LLMs on day zero.</p><p>Everything shown here is computed by the same engine as "
               "the <tt>day0</tt> command line.</p>")
                .arg(QStringLiteral(DAY0_VERSION)));
    });
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    for (const auto& recent : m_preferences.recentModels) {
        m_recentMenu->addAction(recent, this, [this, recent] { openModel(recent); });
    }
    if (!m_preferences.recentModels.isEmpty()) {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear Recent Models"), this, [this] {
            m_preferences.recentModels.clear();
            rebuildRecentMenu();
        });
    }
    m_recentMenu->setEnabled(!m_preferences.recentModels.isEmpty());
}

void MainWindow::openModel(const QString& modelArg, bool partial)
{
    statusBar()->showMessage(tr("Opening %1…").arg(modelArg));
    m_jobs.start<OpenResult>(
        *m_openTicket, tr("Opening %1").arg(modelArg), this,
        [arg = fromQString(modelArg), partial](Progress& progress, std::stop_token) -> OpenResult {
            progress.setStage("reading config");
            model::ReadOptions options;
            options.partial = partial;
            auto spec = model::loadModel(arg, options);
            if (!spec) {
                return spec.error();
            }
            progress.setStage("building the layer graph");
            auto graph = std::make_shared<const model::LayerGraph>(model::buildLayerGraph(*spec));
            progress.setStage("summarising for the planner");
            auto summary = std::make_shared<const plan::ModelSummary>(plan::summarizeModel(*graph));
            return OpenedModel { std::move(graph), std::move(summary) };
        },
        [this, modelArg](OpenResult&& result) {
            if (!result) {
                const QString message = toQString(result.error().message);
                emit modelOpenFailed(message);
                // Structure Day0 does not model: offer the partial reading, which every panel
                // then marks.
                const bool partialPossible = message.contains(QStringLiteral("does not model"));
                if (auto* box = reportOpenError(modelArg, message,
                        partialPossible ? tr("Read the rest partially (every panel marks what "
                                             "it leaves out), or fix the file.")
                                        : tr("Open a model folder, its config.json or a bundled "
                                             "name such as kimi-k2 or deepseek-v3."))) {
                    QPushButton* rest = partialPossible
                        ? box->addButton(tr("Read the Rest (Partial)"), QMessageBox::AcceptRole)
                        : nullptr;
                    box->exec();
                    const bool readRest = rest != nullptr && box->clickedButton() == rest;
                    box->deleteLater();
                    if (readRest) {
                        openModel(modelArg, true);
                    }
                }
                return;
            }
            if (result->graph->spec.partial) {
                statusBar()->showMessage(
                    tr("Opened %1 partially: the panels leave out %2 key(s) Day0 does not model")
                        .arg(modelArg)
                        .arg(result->graph->spec.ignored.size()),
                    10000);
            }
            m_session.setModel(std::move(result->graph), std::move(result->summary), modelArg);
            if (!m_session.graph() || !m_session.graph()->spec.partial) {
                statusBar()->showMessage(tr("Opened %1").arg(modelArg), 4000);
            }
            m_preferences.addRecent(modelArg);
            m_preferences.save(m_settings);
            rebuildRecentMenu();
        });
}

QWidget* MainWindow::panel(const QString& id) const
{
    const auto it = m_docks.find(id);
    return it == m_docks.end() ? nullptr : it->second->widget();
}

void MainWindow::raisePanel(const QString& id)
{
    if (const auto it = m_docks.find(id); it != m_docks.end()) {
        it->second->show();
        it->second->raise();
        it->second->widget()->setFocus();
    }
}

PlotWidget* MainWindow::currentPlot() const
{
    for (QWidget* w = QApplication::focusWidget(); w; w = w->parentWidget()) {
        if (auto* plot = qobject_cast<PlotWidget*>(w)) {
            return plot;
        }
    }
    auto firstVisible = [](const QWidget* root) -> PlotWidget* {
        for (auto* plot : root->findChildren<PlotWidget*>()) {
            if (plot->isVisible()) {
                return plot;
            }
        }
        return nullptr;
    };
    if (m_lastActiveDock) {
        if (auto* plot = firstVisible(m_lastActiveDock)) {
            return plot;
        }
    }
    return firstVisible(this);
}

void MainWindow::exportCurrentPlot()
{
    PlotWidget* plot = currentPlot();
    if (!plot) {
        statusBar()->showMessage(tr("No plot is visible to export"), 5000);
        return;
    }
    QString filter;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export plot"),
        QDir(m_preferences.lastOpenDir).filePath(QStringLiteral("plot.png")),
        tr("PNG image (*.png);;PDF document (*.pdf);;SVG drawing (*.svg)"), &filter);
    if (path.isEmpty()) {
        return;
    }
    const QString error = plot->exportTo(path);
    if (!error.isEmpty()) {
        QMessageBox::warning(this, tr("Export failed"), error);
    } else {
        statusBar()->showMessage(tr("Exported %1").arg(path), 5000);
    }
}

void MainWindow::setTheme(ThemeChoice theme)
{
    m_preferences.theme = theme;
    applyTheme(theme);
    m_preferences.save(m_settings);
}

void MainWindow::updateTitle()
{
    const QString model = m_session.modelSource();
    setWindowTitle(model.isEmpty() ? tr("Day0 Workbench")
                                   : tr("%1 — Day0 Workbench").arg(QFileInfo(model).fileName()));
}

QString MainWindow::modelArgFromPath(const QString& path)
{
    const QFileInfo info(path);
    if (info.isDir() && QFileInfo::exists(QDir(path).filePath(QStringLiteral("config.json")))) {
        return info.absoluteFilePath();
    }
    if (info.isFile() && info.suffix().compare(QStringLiteral("json"), Qt::CaseInsensitive) == 0) {
        return info.absoluteFilePath();
    }
    return {};
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && !modelArgFromPath(urls.first().toLocalFile()).isEmpty()) {
        event->acceptProposedAction();
    }
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (urls.isEmpty()) {
        return;
    }
    const QString arg = modelArgFromPath(urls.first().toLocalFile());
    if (!arg.isEmpty()) {
        event->acceptProposedAction();
        openModel(arg);
    }
}

void MainWindow::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::ThemeChange && m_preferences.theme == ThemeChoice::System) {
        applyTheme(ThemeChoice::System);
    }
    QMainWindow::changeEvent(event);
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    UiStateStore(m_settings).saveWindow(*this, kLayoutVersion);
    m_preferences.save(m_settings);
    QMainWindow::closeEvent(event);
}

} // namespace day0::ui
