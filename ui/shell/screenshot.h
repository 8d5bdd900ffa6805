#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

namespace day0::ui {

class JobRunner;
class MainWindow;
class PanelRegistry;

/// Waits (running the event loop) until no job has run for a short quiet period, or `timeoutMs`
/// passes. Returns false on timeout.
bool waitForJobsIdle(JobRunner& jobs, int timeoutMs);

/// Renders panel `which` ("model", ..., or "all": every panel plus the whole window as
/// workbench.png) to PNG files `<id>.png` in `outDir`, each panel at `panelSize`. Returns the
/// files written, or an error message in `error`.
QStringList renderScreenshots(MainWindow& window, const PanelRegistry& registry, JobRunner& jobs,
    const QString& which, const QString& outDir, QString* error,
    QSize panelSize = QSize(1400, 860));

} // namespace day0::ui
